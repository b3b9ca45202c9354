// Reader of raw nccl-tests output (topology/fitting/nccl_tests_output.h): the re-rendered logs of
// test/data/nccl-tests/ against the transcribed CSV rows they come from, the layouts of other
// nccl-tests releases and collectives, and malformed input named by file and line.
#include "topology/fitting/nccl_tests_output.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace upsim {
namespace {

const std::filesystem::path kNcclTests = std::filesystem::path(UPSIM_TEST_DATA_DIR) / "nccl-tests";

/// The message of the std::runtime_error that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text, const NcclTestsReadOptions& options = {}) {
  try {
    parse_nccl_tests_output(text, "bad.log", options);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

constexpr const char* kHeader =
    "# Collective test starting: all_reduce_perf\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid   1000 on     node-0 device  0 [0000:00:00] NVIDIA A100\n"
    "#  Rank  1 Group  0 Pid   1001 on     node-0 device  1 [0000:01:00] NVIDIA A100\n"
    "#\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
    "time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
    "(us)  (GB/s)  (GB/s)       \n";

TEST(NcclTestsOutput, GcpLogReadsAsTheTranscribedRows) {
  NcclTestsReadOptions options;
  options.kind = CollectiveKind::kAllReduce;  // the log predates "# Collective test starting:"
  const NcclTestsLog log =
      read_nccl_tests_output(kNcclTests / "gcp_a3mega_2x8_h100_tcpxo.log", options);
  EXPECT_EQ(log.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(log.program, "");
  EXPECT_EQ(log.ranks, 16u);
  const auto csv = read_nccl_tests_allreduce(kNcclTests / "nccl_tests_allreduce_published.csv",
                                             "gcp_a3mega_2x8_h100_tcpxo");
  const auto points = measured_points(log);
  ASSERT_EQ(points.size(), csv.size());
  for (size_t i = 0; i < csv.size(); ++i) {
    EXPECT_EQ(points[i].bytes, csv[i].bytes) << i;
    EXPECT_DOUBLE_EQ(points[i].time_us, csv[i].time_us) << i;
  }
  const NcclTestsRow& first = log.rows.front();
  EXPECT_EQ(first.count, 2);
  EXPECT_EQ(first.type, "float");
  EXPECT_EQ(first.redop, "sum");
  ASSERT_TRUE(first.in_place_time_us.has_value());
  EXPECT_DOUBLE_EQ(*first.in_place_time_us, 123.5);
  EXPECT_DOUBLE_EQ(log.rows.back().busbw_gbps, 338.82);
  EXPECT_DOUBLE_EQ(log.rows.back().algbw_gbps, 180.71);
}

// NVIDIA's DGX H100 sample (a newer nccl-tests header with side_work / work_sms, no collective
// line): every row reads back as its CSV row, in-place times included.
TEST(NcclTestsOutput, DgxH100LogReadsAsTheTranscribedRows) {
  NcclTestsReadOptions options;
  options.kind = CollectiveKind::kAllReduce;
  const NcclTestsLog log = read_nccl_tests_output(kNcclTests / "nvidia_dgx_h100_1x8.log", options);
  EXPECT_EQ(log.ranks, 8u);
  const auto csv = read_nccl_tests_allreduce(kNcclTests / "nccl_tests_allreduce_published.csv",
                                             "nvidia_dgx_h100_1x8");
  const auto points = measured_points(log);
  ASSERT_EQ(points.size(), 32u);
  ASSERT_EQ(csv.size(), 32u);
  for (size_t i = 0; i < csv.size(); ++i) {
    EXPECT_EQ(points[i].bytes, csv[i].bytes) << i;
    EXPECT_DOUBLE_EQ(points[i].time_us, csv[i].time_us) << i;
  }
  EXPECT_EQ(log.rows.back().bytes, 17179869184);
  ASSERT_TRUE(log.rows.back().in_place_time_us.has_value());
  EXPECT_DOUBLE_EQ(*log.rows.back().in_place_time_us, 62636.0);
  EXPECT_DOUBLE_EQ(log.rows.back().busbw_gbps, 479.90);
}

TEST(NcclTestsOutput, OciLogsNameTheirCollectiveAndRanks) {
  struct Case {
    const char* run;
    uint32_t ranks;
    size_t rows;
  };
  for (const Case& c :
       {Case{"oci_bm.gpu.h100.8_2x8_rocev2", 16, 5}, Case{"oci_bm.gpu4.8_1x8_a100_40gb", 8, 1},
        Case{"oci_bm.gpu4.8_2x8_a100_40gb_rocev2", 16, 1}}) {
    const NcclTestsLog log = read_nccl_tests_output(kNcclTests / (std::string(c.run) + ".log"));
    EXPECT_EQ(log.program, "all_reduce_perf") << c.run;
    EXPECT_EQ(log.kind, CollectiveKind::kAllReduce) << c.run;
    EXPECT_EQ(log.ranks, c.ranks) << c.run;
    const auto csv =
        read_nccl_tests_allreduce(kNcclTests / "nccl_tests_allreduce_published.csv", c.run);
    ASSERT_EQ(log.rows.size(), c.rows) << c.run;
    ASSERT_EQ(csv.size(), c.rows) << c.run;
    for (size_t i = 0; i < c.rows; ++i) {
      EXPECT_EQ(log.rows[i].bytes, csv[i].bytes) << c.run;
      EXPECT_DOUBLE_EQ(log.rows[i].time_us, csv[i].time_us) << c.run;
    }
  }
}

TEST(NcclTestsOutput, ReadsOtherCollectivesAndLayouts) {
  // nccl-tests 2.19 all_gather_perf without data check (#wrong N/A), under mpirun
  // --tag-output, with NCCL INFO lines in between.
  const std::string all_gather =
      "[1,0]<stdout>:# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703\n"
      "[1,0]<stdout>:# Collective test starting: all_gather_perf\n"
      "[1,0]<stdout>:#  Rank  0 Group  0 Pid   1000 on     node-0 device  0 [0000:00:00] H100\n"
      "[1,0]<stdout>:#  Rank  1 Group  0 Pid   1001 on     node-0 device  1 [0000:01:00] H100\n"
      "node-0:1000:1000 [0] NCCL INFO Bootstrap : Using eth0\n"
      "[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   "
      "busbw #wrong     time   algbw   busbw #wrong\n"
      "[1,0]<stdout>:        1024           128     float    none      -1    10.50    0.10    "
      "0.05    N/A    10.40    0.10    0.05    N/A\n"
      "[1,0]<stdout>:     1048576        131072     float    none      -1    20.25   51.78   "
      "25.89    N/A    20.00   52.43   26.21    N/A\n";
  const NcclTestsLog ag = parse_nccl_tests_output(all_gather, "ag.log");
  EXPECT_EQ(ag.kind, CollectiveKind::kAllGather);
  EXPECT_EQ(ag.ranks, 2u);
  ASSERT_EQ(ag.rows.size(), 2u);
  EXPECT_EQ(ag.rows[1].bytes, 1048576);
  EXPECT_EQ(ag.rows[1].count, 131072);
  EXPECT_EQ(ag.rows[1].redop, "none");
  EXPECT_DOUBLE_EQ(ag.rows[1].time_us, 20.25);
  EXPECT_DOUBLE_EQ(*ag.rows[1].in_place_time_us, 20.0);

  // An early (2017) broadcast layout: "bytes N type root time algbw busbw res", no redop, no
  // in-place columns, no rank lines.
  const std::string broadcast =
      "#      bytes             N    type   root     time   algbw   busbw    res\n"
      "     1048576        262144   float      0    40.00   26.21   26.21  0e+00\n";
  NcclTestsReadOptions options;
  options.kind = nccl_tests_collective("broadcast_perf");
  options.ranks = 8;
  const NcclTestsLog bc = parse_nccl_tests_output(broadcast, "bc.log", options);
  EXPECT_EQ(bc.kind, CollectiveKind::kBroadcast);
  EXPECT_EQ(bc.ranks, 8u);
  ASSERT_EQ(bc.rows.size(), 1u);
  EXPECT_EQ(bc.rows[0].redop, "");
  EXPECT_DOUBLE_EQ(bc.rows[0].time_us, 40.0);
  EXPECT_FALSE(bc.rows[0].in_place_time_us.has_value());

  EXPECT_EQ(nccl_tests_collective("/opt/nccl-tests/build/alltoall_perf"),
            CollectiveKind::kAllToAll);
  EXPECT_EQ(nccl_tests_collective("reduce_scatter"), CollectiveKind::kReduceScatter);
  EXPECT_FALSE(nccl_tests_collective("sendrecv_perf").has_value());
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveKind::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveKind::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(nccl_tests_bus_factor(CollectiveKind::kBroadcast, 16), 1.0);
}

TEST(NcclTestsOutput, MalformedInputIsNamedByFileAndLine) {
  const std::string header = kHeader;  // 7 lines; the first row is line 8
  const std::string good =
      "        1024           256     float     sum      -1    12.00    0.09    0.09      0    "
      "11.90    0.09    0.09      0\n";
  ASSERT_EQ(parse_error(header + good), "");

  const std::string truncated = parse_error(header + good +
                                            "        2048           512     "
                                            "float     sum      -1    12.50\n");
  EXPECT_NE(truncated.find("bad.log:9:"), std::string::npos) << truncated;
  EXPECT_NE(truncated.find("expected at least 8 columns"), std::string::npos) << truncated;

  const std::string not_a_number = parse_error(
      header +
      "        1024           256     float     sum      -1     fast    0.09    0.09      "
      "0    11.90    0.09    0.09      0\n");
  EXPECT_NE(not_a_number.find("bad.log:8: column `time`: expected a number, got `fast`"),
            std::string::npos)
      << not_a_number;

  const std::string zero = parse_error(
      header +
      "        1024           256     float     sum      -1     0.00    0.09    0.09      "
      "0    11.90    0.09    0.09      0\n");
  EXPECT_NE(zero.find("bad.log:8: column `time`: expected a positive time"), std::string::npos)
      << zero;

  const std::string no_table = parse_error("# Collective test starting: all_reduce_perf\n");
  EXPECT_NE(no_table.find("bad.log: no nccl-tests result table"), std::string::npos) << no_table;

  const std::string second = parse_error(header + good + header + good);
  EXPECT_NE(second.find("bad.log:9:"), std::string::npos) << second;
  EXPECT_NE(second.find("second nccl-tests run"), std::string::npos) << second;

  const std::string program =
      parse_error("# Collective test starting: sendrecv_perf\n" + header.substr(44) + good);
  EXPECT_NE(program.find("bad.log:1: unsupported nccl-tests program `sendrecv_perf`"),
            std::string::npos)
      << program;

  const std::string no_kind = parse_error(header.substr(44) + good);
  EXPECT_NE(no_kind.find("Collective test starting"), std::string::npos) << no_kind;

  NcclTestsReadOptions other_kind;
  other_kind.kind = CollectiveKind::kAllGather;
  const std::string contradiction = parse_error(header + good, other_kind);
  EXPECT_NE(
      contradiction.find("bad.log:1: the log is of all_reduce_perf, but all_gather was asked for"),
      std::string::npos)
      << contradiction;

  NcclTestsReadOptions eight;
  eight.ranks = 8;
  const std::string ranks = parse_error(header + good, eight);
  EXPECT_NE(ranks.find("bad.log:3: the log lists 2 ranks, but 8 were expected"), std::string::npos)
      << ranks;

  const std::string no_time =
      parse_error("# Collective test starting: all_reduce_perf\n#  size  count  type  redop\n");
  EXPECT_NE(no_time.find("bad.log:2: column header without a `time` column"), std::string::npos)
      << no_time;

  EXPECT_THROW(read_nccl_tests_output(kNcclTests / "no-such.log"), std::runtime_error);
}

}  // namespace
}  // namespace upsim
