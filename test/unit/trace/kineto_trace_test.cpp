#include "workloads/trace/kineto_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/formats/parse_error.h"
#include "test/unit/trace/synthetic_trace.h"
#include "workloads/trace/trace_file.h"

namespace upsim {
namespace {

using namespace upsim::test;

const std::filesystem::path kData = UPSIM_TRACE_TEST_DATA;
const std::filesystem::path kDlrmRank0 =
    kData / "dlrm" / "worker0_step_12.1694128201545.pt.trace.json.gz";

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(KinetoTrace, reads_categories_times_and_args) {
  const std::string text = kineto_json(
      {cpu_op("aten::mm", kMainTid, "1000.25", "10.5",
              R"({"External id": 7, "Record function id": 3, "Input Dims": [[2, 3], [3, 4]],)"
              R"( "Input type": ["float", "float"]})"),
       runtime("cudaLaunchKernel", kMainTid, "1002", "3.000001", 11),
       gpu("kernel", "volta_sgemm", 7, "1006", "4", 11),
       gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 22, "1010", "1", 12, 4096),
       R"j({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",)j"
       R"j( "tid": "PyTorch Profiler", "ts": 900, "dur": 500})j",
       R"({"ph": "s", "id": 11, "pid": 100, "tid": 100, "ts": 1002, "cat": "ac2g", "name": "ac2g"})",
       R"({"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}})"},
      R"(  "deviceProperties": [{"id": 0, "name": "Tesla V100-SXM2-32GB", "numSms": 80,)"
      R"( "totalGlobalMem": 34079899648, "computeMajor": 7, "computeMinor": 0}],)"
      "\n"
      R"(  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},)"
      "\n");
  const KinetoTrace t = parse_kineto_trace(text, "synthetic.json");
  ASSERT_EQ(t.events.size(), 4u);  // the profiler span (string pid) and metadata are dropped
  EXPECT_EQ(t.base_us, 1000);
  const KinetoEvent& op = t.events[0];
  EXPECT_EQ(op.category, KinetoCategory::kCpuOp);
  EXPECT_EQ(t.name_of(op), "aten::mm");
  EXPECT_EQ(op.ts_ps, 250'000);
  EXPECT_EQ(op.dur_ps, 10'500'000);
  EXPECT_EQ(op.external_id, 7);
  EXPECT_EQ(op.record_function_id, 3);
  const KinetoOpInputs in = kineto_op_inputs(t, op);
  ASSERT_EQ(in.dims.size(), 2u);
  EXPECT_EQ(in.dims[1], (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(in.types[0], "float");
  EXPECT_EQ(t.events[1].category, KinetoCategory::kCudaRuntime);
  EXPECT_EQ(t.events[1].dur_ps, 3'000'001);  // sub-microsecond precision is kept
  EXPECT_EQ(t.events[1].correlation, 11);
  const KinetoEvent& k = t.events[2];
  EXPECT_EQ(k.category, KinetoCategory::kKernel);
  EXPECT_EQ(k.stream, 7);
  EXPECT_EQ(k.device, 0);
  EXPECT_EQ(t.events[3].bytes, 4096);
  ASSERT_EQ(t.flows.size(), 1u);
  EXPECT_TRUE(t.flows[0].start);
  EXPECT_EQ(t.flows[0].id, 11);
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].name, "Tesla V100-SXM2-32GB");
  EXPECT_EQ(t.devices[0].sm_count, 80);
  EXPECT_EQ(t.devices[0].total_memory_bytes, 34079899648);
  EXPECT_TRUE(t.distributed.present);
  EXPECT_EQ(t.distributed.rank, 3);
  EXPECT_EQ(t.distributed.world_size, 8);
}

TEST(KinetoTrace, reads_the_dlrm_rank_trace_from_gzip) {
  const KinetoTrace t = read_kineto_trace(kDlrmRank0);
  // Counted with Python's json module: 1633 cpu_op + 525 cuda_runtime + 245 kernel + 40
  // user_annotation + 16 gpu_memcpy complete events, 786 ac2g flow ends.
  EXPECT_EQ(t.events.size(), 2459u);
  EXPECT_EQ(t.flows.size(), 786u);
  EXPECT_EQ(t.devices.size(), 8u);
  EXPECT_EQ(t.distributed.rank, 0);
  EXPECT_EQ(t.distributed.world_size, 8);
  size_t steps = 0;
  for (const KinetoEvent& e : t.events) {
    if (t.name_of(e) == "ProfilerStep#10") {
      ++steps;
      EXPECT_EQ(e.dur_ps, 14455 * int64_t{1'000'000});
    }
  }
  EXPECT_EQ(steps, 1u);
}

TEST(KinetoTrace, malformed_json_names_the_file_and_position) {
  const std::string text = "{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": 1,, \"dur\": 2}\n]}";
  try {
    parse_kineto_trace(text, "broken.json");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()), "broken.json:2:23: expected a member name (a string)");
  }
}

// Found by fuzz_traces: an id or integer arg written as a digit string beyond int64 overflowed
// a signed multiply (undefined behaviour). It now reads as no id (-1), as any other non-number.
TEST(KinetoTrace, digit_strings_beyond_int64_are_not_ids) {
  const std::string huge(120, '9');
  const auto parse = [&](const std::string& pid, const std::string& external) {
    return parse_kineto_trace(
        "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", "
        "\"pid\": \"" +
            pid +
            "\", \"tid\": \"7\", \"ts\": 1, \"dur\": 2, \"args\": "
            "{\"External id\": \"" +
            external + "\"}}]}",
        "huge_ids.json");
  };
  const KinetoTrace t = parse("1", huge);
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].tid, 7);
  EXPECT_EQ(t.events[0].external_id, -1);
  // A pid beyond int64 is no pid: the event is dropped as a profiler span's is.
  EXPECT_TRUE(parse(huge, "5").events.empty());
}

TEST(KinetoTrace, timestamps_beyond_the_picosecond_range_are_errors) {
  // Found by fuzzing: ts of -10^15 us (x 10^6 ps/us) overflowed int64 (undefined behaviour).
  const auto error = [](const std::string& events) {
    try {
      parse_kineto_trace("{\"traceEvents\": [" + events + "]}", "t.json");
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string first = R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, )";
  EXPECT_NE(
      error(first + R"("ts": 1, "dur": 1}, )" + first + R"("ts": -1000000000004474, "dur": 1})")
          .find("`ts` is out of range"),
      std::string::npos);
  EXPECT_NE(error(first + R"("ts": 1, "dur": 99999999999999999})").find("`dur` is out of range"),
            std::string::npos);
  // Within range: ten days after the first event.
  EXPECT_EQ(error(first + R"("ts": 1, "dur": 1}, )" + first + R"("ts": 864000000001, "dur": 1})"),
            "no error");
}

TEST(KinetoTrace, a_negative_duration_is_an_error_naming_the_file_line_and_event) {
  // Was clamped to 0: the event then replayed as taking no time, without a word.
  const auto error = [](const std::string& event) {
    try {
      parse_kineto_trace("{\"traceEvents\": [\n" + event + "]}", "t.json");
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(R"({"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, )"
                  R"("ts": 5, "dur": -3})"),
            "t.json:2:1: negative `dur` (-3000000 ps) of kernel `sgemm`: a duration cannot be "
            "negative");
  for (const char* cat : {"cpu_op", "gpu_memcpy", "user_annotation", "cuda_runtime"}) {
    const std::string e = error(std::string(R"({"ph": "X", "cat": ")") + cat +
                                R"(", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": -0.001})");
    EXPECT_NE(e.find("negative `dur` (-1000 ps) of " + std::string(cat) + " `x`"),
              std::string::npos)
        << e;
  }
  // ts + dur beyond the picosecond range: an error, not an overflowed end.
  const std::string first = R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, )";
  EXPECT_NE(error(first + R"("ts": 1, "dur": 1}, )" + first +
                  R"("ts": 9000000000000, "dur": 9000000000000})")
                .find("`ts` + `dur` is out of range"),
            std::string::npos);
}

TEST(KinetoTrace, zero_durations_are_read_and_counted_per_category) {
  const KinetoTrace t = parse_kineto_trace(
      R"({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 0},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 0},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1},
        {"ph": "X", "cat": "gpu_memset", "name": "m", "pid": 0, "tid": 7, "ts": 4, "dur": 0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::view", "pid": 1, "tid": 1, "ts": 4}]})",
      "t.json");
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].dur_ps, 0);
  EXPECT_EQ(t.zero_duration[static_cast<size_t>(KinetoCategory::kKernel)], 2u);
  EXPECT_EQ(t.zero_duration[static_cast<size_t>(KinetoCategory::kGpuMemset)], 1u);
  EXPECT_EQ(t.zero_duration[static_cast<size_t>(KinetoCategory::kCpuOp)], 1u);  // no `dur`: 0
  EXPECT_EQ(t.zero_duration[static_cast<size_t>(KinetoCategory::kGpuMemcpy)], 0u);
}

TEST(KinetoTrace, a_document_without_trace_events_is_rejected) {
  EXPECT_THROW(
      {
        try {
          parse_kineto_trace(R"({"nodes": []})", "et.json");
        } catch (const ParseError& e) {
          EXPECT_EQ(std::string(e.what()), "et.json: not a Kineto trace: no `traceEvents` array");
          throw;
        }
      },
      ParseError);
  EXPECT_THROW(parse_kineto_trace("[1, 2]", "list.json"), ParseError);
  EXPECT_THROW(parse_kineto_trace("", "empty.json"), ParseError);
}

TEST(TraceFile, truncated_gzip_names_the_file) {
  TempDir dir;
  const std::string bytes = read_bytes(kDlrmRank0);
  const auto cut = dir.write("worker0.json.gz", bytes.substr(0, bytes.size() / 2));
  try {
    read_kineto_trace(cut);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), cut.string());
    EXPECT_NE(std::string(e.what()).find("gzip stream ends early (truncated file?)"),
              std::string::npos);
  }
  std::string corrupt = bytes;
  for (size_t i = 100; i < 200; ++i)
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
  const auto bad = dir.write("corrupt.json.gz", corrupt);
  try {
    read_kineto_trace(bad);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), bad.string());
    EXPECT_NE(std::string(e.what()).find("corrupt gzip stream"), std::string::npos);
  }
  EXPECT_THROW(read_kineto_trace(dir.path() / "absent.json"), ParseError);
}

TEST(TraceFile, truncated_plain_json_names_the_file) {
  TempDir dir;
  const std::string text = read_trace_file(kDlrmRank0);
  const auto cut = dir.write("worker0.json", text.substr(0, text.size() - 5000));
  try {
    read_kineto_trace(cut);
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), cut.string());
    EXPECT_NE(std::string(e.what()).find("truncated file?"), std::string::npos);
  }
}

}  // namespace
}  // namespace upsim
