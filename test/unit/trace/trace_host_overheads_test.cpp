#include "workloads/trace/trace_host_overheads.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test/unit/trace/synthetic_trace.h"

namespace upsim {
namespace {

using namespace upsim::test;
namespace fs = std::filesystem;

/// The lines of `text` from the first one that starts with `from`.
std::string lines_from(const std::string& text, const std::string& from) {
  const size_t at = text.find("\n" + from);
  return at == std::string::npos ? "" : text.substr(at + 1);
}

TEST(HostOverheads, the_dlrm_traces_give_the_shipped_v100_host_file) {
  // configs/host/v100_pytorch_kineto.yaml was made by scripts/extract_host_overheads.py from the
  // same eight traces: the C++ extraction must print the same values and sample counts.
  std::vector<KinetoTrace> traces;
  for (const auto& e : fs::directory_iterator(fs::path(UPSIM_TRACE_TEST_DATA) / "dlrm")) {
    if (e.path().filename().string().starts_with("worker")) {
      traces.push_back(read_kineto_trace(e.path()));
    }
  }
  ASSERT_EQ(traces.size(), 8u);
  std::sort(traces.begin(), traces.end(),
            [](const KinetoTrace& a, const KinetoTrace& b) { return a.file < b.file; });
  std::vector<const KinetoTrace*> ptrs;
  for (const KinetoTrace& t : traces)
    ptrs.push_back(&t);
  const ExtractedHostOverheads o = extract_host_overheads(ptrs);
  const std::string yaml = format_host_overheads_yaml(o);
  std::ifstream in(fs::path(UPSIM_CONFIGS_DIR) / "host" / "v100_pytorch_kineto.yaml");
  std::stringstream shipped;
  shipped << in.rdbuf();
  const std::string expected = lines_from(shipped.str(), "t1:");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(lines_from(yaml, "t1:"), expected);
  EXPECT_EQ(o.sources.size(), 8u);
}

TEST(HostOverheads, t2_t3_t5_follow_the_seed_definitions) {
  // aten::mm 0..40 with a sub-event (aten::empty 2..3) before its two launches (10..15, 25..30).
  const std::string json = kineto_json({
      annotation("## forward ##", kMainTid, "0", "100"),
      cpu_op("aten::mm", kMainTid, "0", "40"),
      cpu_op("aten::empty", kMainTid, "2", "1"),
      runtime("cudaLaunchKernel", kMainTid, "10", "5", 1),
      runtime("cudaLaunchKernel", kMainTid, "25", "5", 2),
      cpu_op("aten::view", kMainTid, "50", "4"),
  });
  const KinetoTrace t = parse_kineto_trace(json, "t.json");
  const ExtractedHostOverheads o = extract_host_overheads({&t});
  const OpOverheadSamples& mm = o.ops.at("aten::mm");
  EXPECT_EQ(mm.t2, std::vector<double>{10.0 - 2.0});  // one traced sub-event before
  EXPECT_EQ(mm.t5, std::vector<double>{25.0 - 15.0});
  EXPECT_EQ(mm.t3, std::vector<double>{40.0 - 30.0});
  EXPECT_TRUE(mm.launches);
  EXPECT_EQ(o.ops.at("aten::view").t5, std::vector<double>{4.0});
  EXPECT_EQ(o.t1, std::vector<double>{50.0 - 40.0 - 2.0});
  EXPECT_EQ(o.launch_kernel_us, (std::vector<double>{5.0, 5.0}));
  // Without the seed's profiler-overhead correction (the traced run itself).
  const ExtractedHostOverheads traced = extract_host_overheads({&t}, 0.0);
  EXPECT_EQ(traced.ops.at("aten::mm").t2, std::vector<double>{10.0});
  EXPECT_EQ(traced.t1, std::vector<double>{50.0 - 40.0});
  const HostOverheads m = host_overheads_of(traced);
  EXPECT_EQ(m.t4, Duration::from_us(5));
  EXPECT_EQ(*m.ops.at("aten::mm").t5, Duration::from_us(10));
  EXPECT_FALSE(m.ops.at("aten::view").t2.has_value());
}

TEST(HostOverheads, a_long_data_loader_event_is_a_body_of_its_own) {
  // A DataLoader fetch 0..500 us with three host events inside: its body is 500 - 3 x 2 us;
  // what follows it up to "## forward ##" is data loading and dropped; it is no default body.
  const std::string name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
  const std::string json = kineto_json({
      annotation(name, kMainTid, "0", "500"),
      cpu_op("aten::slice", kMainTid, "10", "2"),
      cpu_op("aten::lift_fresh", kMainTid, "20", "1"),
      cpu_op("aten::item", kMainTid, "30", "1"),
      cpu_op("aten::to", kMainTid, "510", "5"),
      annotation("## forward ##", kMainTid, "600", "100"),
      cpu_op("aten::view", kMainTid, "610", "4"),
  });
  const KinetoTrace t = parse_kineto_trace(json, "t.json");
  const ExtractedHostOverheads o = extract_host_overheads({&t});
  ASSERT_TRUE(o.ops.contains(name));
  EXPECT_EQ(o.ops.at(name).t5, std::vector<double>{500.0 - 3 * 2.0});
  EXPECT_FALSE(o.ops.at(name).launches);
  EXPECT_FALSE(o.ops.contains("aten::to"));             // data loading
  EXPECT_EQ(o.default_body, std::vector<double>{4.0});  // aten::view alone
  EXPECT_EQ(*host_overheads_of(o).ops.at(name).t5, Duration::from_us(494));
}

}  // namespace
}  // namespace upsim
