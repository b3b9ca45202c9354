// The table `upsim sweep` prints: axis values (YAML files by their stem), status and the main
// numbers in aligned columns, long studies cut with a pointer to results.csv.
#include "tools/sweep_table.h"

#include <gtest/gtest.h>

#include <string>

namespace upsim::cli {
namespace {

const char* kResults =
    "point,platform.gpu,workload.global_batch,status,iteration_ms,compute_ms,exposed_comm_ms,"
    "memory_bytes_per_gpu,throughput_unit,throughput_per_s,mfu,message\n"
    "0,configs/hardware/a100_sxm4_40gb.yaml,2048,ok,2.8923569,2.1,0.01,7191101440,samples,"
    "708073,,\n"
    "1,configs/hardware/h100_sxm5_80gb.yaml,4096,ok,4.0859082,3.3,0.02,7191101440,samples,"
    "1002470,0.4123,\n"
    "2,configs/hardware/v100.yaml,4096,failed,,,,,,,,\"out of memory\"\n";

TEST(SweepTable, ShowsAxisStemsStatusAndTheMainNumbersAligned) {
  const std::string t = format_sweep_table(read_csv(kResults, "results.csv"), 2);
  EXPECT_EQ(t,
            "point  platform.gpu    workload.global_batch  status  iteration ms  samples/s    MFU"
            "  exposed comm ms  GiB/GPU\n"
            "    0  a100_sxm4_40gb  2048                   ok            2.8924    708.1 k"
            "                  0.0100     6.70\n"
            "    1  h100_sxm5_80gb  4096                   ok            4.0859    1.002 M  41.2%"
            "           0.0200     6.70\n"
            "    2  v100            4096                   failed\n")
      << t;
}

TEST(SweepTable, CutsLongStudiesAndSaysWhereTheRestIs) {
  const std::string t = format_sweep_table(read_csv(kResults, "results.csv"), 2, 1);
  EXPECT_NE(t.find("... 2 more points in results.csv\n"), std::string::npos) << t;
  EXPECT_EQ(format_sweep_table(read_csv("point,status\n", "results.csv"), 0), "");
  // Only point 0 shown: it has no MFU, so the column is left out.
  EXPECT_EQ(t.find("MFU"), std::string::npos) << t;
}

}  // namespace
}  // namespace upsim::cli
