// Physical what-ifs on the kernel models, over grids of shapes: fewer SMs, a lower SM clock or
// less HBM bandwidth never makes a kernel faster. The device goes through the hardware profile
// as a scenario's --set does (calibration/hardware_profile.h scales the pinned peaks), and every
// kernel class through both kernel models: the calibrated one (GEMM, memory-bound, embedding-bag
// and attention models, a100_llmcompass.yaml) and the roofline.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "calibration/model_registry.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

/// The A100-SXM4-40GB profile with `set` applied as `--set platform.gpu.<set>` would.
HardwareProfile a100_with(const std::string& set) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / "a100_sxm4_40gb.yaml");
  if (!set.empty()) doc.apply_override(set);
  return load_hardware_profile(doc.root());
}

/// The two kernel models as a scenario's `platform.kernels` section builds them for `hw`.
std::vector<std::unique_ptr<KernelCostModel>> models(const HardwareProfile& hw) {
  const std::string calibration = (kConfigs / "calibration" / "a100_llmcompass.yaml").string();
  std::vector<std::unique_ptr<KernelCostModel>> out;
  for (const std::string& section : {"{model: calibrated, calibration: \"" + calibration + "\"}",
                                     std::string("{model: roofline}")}) {
    ConfigDocument doc = ConfigDocument::parse_string(section, "scenario.yaml");
    out.push_back(make_kernel_cost_model(doc.root(), hw));
  }
  return out;
}

std::vector<KernelDesc> gemms() {
  std::vector<KernelDesc> out;
  for (DType dtype : {DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16}) {
    for (int64_t batch : {1, 12}) {
      for (int64_t m : {1, 7, 64, 200, 1024, 8192}) {
        for (int64_t n : {1, 48, 128, 1000, 12288}) {
          for (int64_t k : {16, 100, 768, 4096, 50257})
            out.push_back(gemm_kernel(dtype, batch, m, n, k));
        }
      }
    }
  }
  return out;
}

std::vector<KernelDesc> attentions() {
  std::vector<KernelDesc> out;
  for (int64_t batch : {1, 8}) {
    for (int64_t heads : {1, 12, 64}) {
      for (int64_t seq : {64, 512, 2048, 16384}) {
        for (int64_t head_dim : {32, 64, 96, 128, 256}) {
          for (bool causal : {false, true}) {
            for (bool backward : {false, true}) {
              KernelDesc k;
              k.cls = KernelClass::kAttention;
              k.dtype = DType::kBf16;
              k.attention = AttentionShape{
                  batch, heads, heads == 64 ? 8 : heads, seq, seq, head_dim, causal, backward};
              out.push_back(k);
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<KernelDesc> embeddings() {
  std::vector<KernelDesc> out;
  for (KernelClass cls : {KernelClass::kEmbeddingForward, KernelClass::kEmbeddingBackward}) {
    for (int64_t batch : {1, 64, 512, 4096, 65536}) {
      for (int64_t tables : {1, 8, 100}) {
        for (int64_t rows : {100, 100'000, 40'000'000}) {
          for (int64_t dim : {16, 64, 256}) {
            for (double pooling : {1.0, 20.0, 150.0}) {
              KernelDesc k;
              k.cls = cls;
              k.dtype = DType::kFp32;
              k.embedding = EmbeddingShape{
                  .batch = batch, .tables = tables, .rows = rows, .dim = dim, .pooling = pooling};
              out.push_back(k);
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<KernelDesc> memory_bound() {
  std::vector<KernelDesc> out;
  for (MemoryOp op : {MemoryOp::kUnspecified, MemoryOp::kGelu, MemoryOp::kSoftmax,
                      MemoryOp::kLayerNorm, MemoryOp::kCopy}) {
    for (double bytes : {4e3, 1e6, 3e8, 8e9}) {
      for (int64_t row : {0, 768, 50304}) {
        KernelDesc k;
        k.cls = KernelClass::kMemoryBound;
        k.dtype = DType::kFp16;
        k.memory_op = op;
        k.bytes_read = bytes;
        k.bytes_written = bytes / 2;
        k.flops = bytes;
        k.row_elements = row;
        out.push_back(k);
      }
    }
  }
  return out;
}

/// Each `sets` entry is a slower what-if than the one after it: every kernel of `kernels` takes
/// at least as long on it, under both kernel models.
void expect_never_faster(const std::vector<std::string>& slowest_first,
                         const std::vector<KernelDesc>& kernels) {
  std::vector<HardwareProfile> devices;
  std::vector<std::vector<std::unique_ptr<KernelCostModel>>> priced_by;
  for (const std::string& set : slowest_first) {
    devices.push_back(a100_with(set));
    priced_by.push_back(models(devices.back()));
  }
  for (size_t model = 0; model < 2; ++model) {
    size_t failures = 0;
    for (const KernelDesc& kernel : kernels) {
      Duration slower = Duration::zero();
      for (size_t i = 0; i < devices.size(); ++i) {
        const Duration t = priced_by[i][model]->kernel_duration(kernel, devices[i].device);
        if (i > 0 && t > slower && ++failures <= 5) {
          ADD_FAILURE() << (model == 0 ? "calibrated" : "roofline") << ": "
                        << kernel_class_name(kernel.cls) << " kernel #" << (&kernel - &kernels[0])
                        << " takes " << t.us() << " us with `" << slowest_first[i] << "`, "
                        << slower.us() << " us with `" << slowest_first[i - 1] << "`";
        }
        slower = t;
      }
    }
    EXPECT_EQ(failures, 0u) << (model == 0 ? "calibrated" : "roofline");
  }
}

const std::vector<std::string> kFewerSms{"sm_count=1",   "sm_count=7",   "sm_count=27",
                                         "sm_count=54",  "sm_count=107", "",
                                         "sm_count=132", "sm_count=216"};
const std::vector<std::string> kLowerClocks{"sm_boost_clock_mhz=300", "sm_boost_clock_mhz=700",
                                            "sm_boost_clock_mhz=1095", "",
                                            "sm_boost_clock_mhz=2800"};
const std::vector<std::string> kLessHbm{"hbm.bandwidth=100GB/s", "hbm.bandwidth=800GB/s", "",
                                        "hbm.bandwidth=3TB/s", "hbm.bandwidth=8TB/s"};

TEST(KernelMonotonicity, GemmsAreNeverFasterWithFewerSmsALowerClockOrLessHbm) {
  const std::vector<KernelDesc> kernels = gemms();
  expect_never_faster(kFewerSms, kernels);
  expect_never_faster(kLowerClocks, kernels);
  expect_never_faster(kLessHbm, kernels);
}

TEST(KernelMonotonicity, AttentionIsNeverFasterWithFewerSmsALowerClockOrLessHbm) {
  const std::vector<KernelDesc> kernels = attentions();
  expect_never_faster(kFewerSms, kernels);
  expect_never_faster(kLowerClocks, kernels);
  expect_never_faster(kLessHbm, kernels);
}

TEST(KernelMonotonicity, EmbeddingBagsAreNeverFasterWithFewerSmsALowerClockOrLessHbm) {
  const std::vector<KernelDesc> kernels = embeddings();
  expect_never_faster(kFewerSms, kernels);
  expect_never_faster(kLowerClocks, kernels);
  expect_never_faster(kLessHbm, kernels);
}

TEST(KernelMonotonicity, MemoryBoundKernelsAreNeverFasterWithFewerSmsALowerClockOrLessHbm) {
  const std::vector<KernelDesc> kernels = memory_bound();
  expect_never_faster(kFewerSms, kernels);
  expect_never_faster(kLowerClocks, kernels);
  expect_never_faster(kLessHbm, kernels);
}

// The what-ifs act: never faster is not "never changes". A large GEMM and a long attention are
// compute-bound, so half the SMs or half the clock doubles them; a large copy is HBM-bound.
TEST(KernelMonotonicity, WhatIfsOnSmsClockAndHbmMoveTheKernelsTheyBound) {
  const KernelDesc gemm = gemm_kernel(DType::kBf16, 1, 8192, 8192, 8192);
  KernelDesc attention;
  attention.cls = KernelClass::kAttention;
  attention.dtype = DType::kBf16;
  attention.attention = AttentionShape{8, 32, 32, 4096, 4096, 128, true, false};
  KernelDesc copy;
  copy.cls = KernelClass::kMemoryBound;
  copy.memory_op = MemoryOp::kCopy;
  copy.bytes_read = 4e9;
  copy.bytes_written = 4e9;
  const auto seconds = [](const std::string& set, const KernelDesc& kernel) {
    const HardwareProfile hw = a100_with(set);
    return models(hw)[0]->kernel_duration(kernel, hw.device).seconds();
  };
  for (const KernelDesc& k : {gemm, attention}) {
    EXPECT_NEAR(seconds("sm_count=54", k) / seconds("", k), 2.0, 0.02);
    EXPECT_NEAR(seconds("sm_boost_clock_mhz=705", k) / seconds("", k), 2.0, 0.02);
    EXPECT_NEAR(seconds("hbm.bandwidth=777.5GB/s", k) / seconds("", k), 1.0, 1e-9);
  }
  EXPECT_NEAR(seconds("hbm.bandwidth=777.5GB/s", copy) / seconds("", copy), 2.0, 0.01);
  EXPECT_NEAR(seconds("sm_count=54", copy) / seconds("", copy), 1.0, 1e-9);
  // fp8 without an fp8 fit runs at the measured fp8 rate, a fraction of the fp8 peak: it follows
  // (the A100 file's 64 x 64 tile: 16384 tiles are 125 waves on 132 SMs, 249 on 66: 1.99x).
  ConfigDocument h100 = ConfigDocument::load_file(kConfigs / "hardware" / "h100_sxm5_80gb.yaml");
  ConfigDocument h100_half =
      ConfigDocument::load_file(kConfigs / "hardware" / "h100_sxm5_80gb.yaml");
  h100_half.apply_override("sm_count=66");
  const HardwareProfile full = load_hardware_profile(h100.root());
  const HardwareProfile half = load_hardware_profile(h100_half.root());
  const KernelDesc fp8 = gemm_kernel(DType::kFp8, 1, 8192, 8192, 8192);
  EXPECT_NEAR(models(half)[0]->kernel_duration(fp8, half.device).seconds() /
                  models(full)[0]->kernel_duration(fp8, full.device).seconds(),
              249.0 / 125.0, 0.01);
}

}  // namespace
}  // namespace upsim
