// Chakra execution-trace ingestion throughput: parse_chakra_trace (libprotobuf through
// sim/formats/chakra_et.h, then the trace's structures) on a stream of about 100 MB, made of the
// shipped PyTorch-converted trace (test/data/chakra/chakra.0.et.gz, test/data/chakra/SOURCES.md)
// with its nodes repeated under fresh ids (dependencies shifted with them). Throughput counts
// the stream's bytes.
#include <benchmark/benchmark.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/formats/chakra/et_def.pb.h"
#include "sim/formats/chakra_et.h"
#include "workloads/trace/chakra_trace.h"
#include "workloads/trace/trace_file.h"

namespace upsim {
namespace {

constexpr size_t kTargetBytes = size_t{100} << 20;

void write_delimited(const google::protobuf::MessageLite& message, std::string& out) {
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteVarint32(static_cast<uint32_t>(message.ByteSizeLong()));
  message.SerializeToCodedStream(&coded);
}

std::string repeated_stream() {
  const std::string fixture = read_trace_file(UPSIM_CHAKRA_FIXTURE);
  ChakraEtReader reader(fixture, UPSIM_CHAKRA_FIXTURE);
  chakra_et::GlobalMetadata metadata;
  reader.read_metadata(metadata);
  std::vector<chakra_et::Node> nodes;
  uint64_t max_id = 0;
  for (chakra_et::Node node; reader.next_node(node);) {
    max_id = std::max<uint64_t>(max_id, node.id());
    nodes.push_back(node);
  }
  std::string out;
  write_delimited(metadata, out);
  for (uint64_t copy = 0; out.size() < kTargetBytes; ++copy) {
    const uint64_t shift = copy * (max_id + 1);
    for (chakra_et::Node node : nodes) {
      node.set_id(node.id() + shift);
      for (auto& dep : *node.mutable_ctrl_deps())
        dep += shift;
      for (auto& dep : *node.mutable_data_deps())
        dep += shift;
      write_delimited(node, out);
    }
  }
  return out;
}

void BM_ParseChakraEt(benchmark::State& state) {
  const std::string stream = repeated_stream();
  size_t nodes = 0;
  for (auto _ : state) {
    const ChakraTrace t = parse_chakra_trace(stream, "repeated.et");
    nodes = t.nodes.size();
    benchmark::DoNotOptimize(nodes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["MB"] = static_cast<double>(stream.size()) / 1e6;
}
BENCHMARK(BM_ParseChakraEt)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace upsim

BENCHMARK_MAIN();
