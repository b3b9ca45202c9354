// Accuracy of the trace workload as a user measures it, through the upsim executable: each test
// runs the command, prints its per-rank table and bounds the geometric mean of |error| it reports
// (ARCHITECTURE.md: e = predicted / measured - 1 per rank).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kSource = UPSIM_SOURCE_ROOT;

/// Output (stdout and stderr) of `upsim <args>`; the exit code must be 0.
std::string upsim(const std::string& args) {
  std::string cmd = "'";
  cmd += UPSIM_BINARY;
  cmd += "' ";
  cmd += args;
  cmd += " 2>&1";
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe), 0) << cmd << "\n" << out;
  std::cout << "$ upsim " << args << "\n" << out;
  return out;
}

/// The percentage after "geomean |error| " in `out`, or a failure.
double geomean_percent(const std::string& out) {
  const std::string key = "geomean |error| ";
  const size_t at = out.rfind(key);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no geomean in\n" << out;
    return 1e9;
  }
  return std::stod(out.substr(at + key.size()));
}

std::string out_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("upsim-trace-accuracy-" + name);
  fs::remove_all(p);
  std::string quoted = "'";
  quoted += p.string();
  quoted += "'";
  return quoted;
}

TEST(TraceAccuracy, dlrm_model_mode_with_modelled_host_is_within_ten_percent) {
  // Bound for model mode: kernels re-costed by the platform's models and
  // host time from the traces' own T1-T5, 8 ranks of the measured V100 DLRM step.
  const std::string out =
      upsim("run '" + kSource +
            "/configs/trace_dlrm_v100.yaml' --no-trace --force --set workload.mode=model "
            "--set workload.host=modelled --out " +
            out_dir("dlrm-model"));
  EXPECT_NE(out.find("host time T1-T5 of the traces"), std::string::npos) << out;
  EXPECT_LE(geomean_percent(out), 10.0);
}

TEST(TraceAccuracy, the_host_model_alone_on_dlrm_linear_and_resnet) {
  // GPU work measured, host time modelled: the error of T1-T5 (and of the gaps they leave
  // measured) by itself. Bounds: what the model achieves, with a margin.
  const std::string data = kSource + "/test/data/param-et-replay/";
  EXPECT_LE(geomean_percent(upsim("validate traces '" + data + "dlrm' --host modelled")), 10.0);
  const std::string loop = " --iteration-marker 'Optimizer.zero_grad#SGD.zero_grad' --lenient-et";
  EXPECT_LE(geomean_percent(upsim("validate traces '" + data + "linear' --host modelled" + loop)),
            10.0);
  EXPECT_LE(geomean_percent(upsim("validate traces '" + data + "resnet' --host modelled" + loop)),
            3.0);
}

}  // namespace
