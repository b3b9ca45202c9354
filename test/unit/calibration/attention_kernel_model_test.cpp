#include "calibration/attention_kernel_model.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"
#include "test/unit/calibration/test_device.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;
const AchievableFractions kFull{1.0, 1.0};

KernelDesc attention(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim,
                     bool causal = false, bool backward = false) {
  KernelDesc k;
  k.cls = KernelClass::kAttention;
  k.dtype = DType::kFp16;
  k.attention = AttentionShape{batch, heads, heads, seq, seq, head_dim, causal, backward, true};
  return k;
}

HardwareProfile profile(const std::string& file) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / file);
  return load_hardware_profile(doc.root());
}

TEST(AttentionKernelModel, ForwardByHand) {
  // 1 x 10 heads x 4096 x 4096, head_dim 128: flops 4 x 10 x 4096^2 x 128 = 8.590e10;
  // blocks 10 x 4096 / 128 = 320 = 32 full waves of 10 SMs; efficiency 0.73 x 4096 / (4096 +
  // 256) = 0.68706; compute 8.590e10 / (100e12 x 0.68706) = 1.2503 ms. Bytes: q, k, v, o
  // = 4 x 10 x 4096 x 128 x 2 B = 41.9 MB -> 41.9 us at 1000 GB/s: compute-bound.
  const AttentionEstimate est =
      estimate_attention(attention(1, 10, 4096, 128), test::test_device(), kFull, {});
  EXPECT_DOUBLE_EQ(est.flops, 4.0 * 10 * 4096.0 * 4096.0 * 128);
  EXPECT_DOUBLE_EQ(est.bytes, 4.0 * 10 * 4096 * 128 * 2);
  EXPECT_EQ(est.blocks, 320);
  EXPECT_EQ(est.waves, 32);
  EXPECT_DOUBLE_EQ(est.wave_efficiency, 1.0);
  EXPECT_NEAR(est.efficiency, 0.73 * 4096.0 / 4352.0, 1e-12);
  EXPECT_NEAR(est.seconds, 1.2503e-3, 1e-6);
  EXPECT_EQ(est.launches, 1);
}

TEST(AttentionKernelModel, CausalHalvesTheWorkOverAHalfSpan) {
  const DeviceProfile d = test::test_device();
  const double full = estimate_attention(attention(1, 10, 4096, 128), d, kFull, {}).seconds;
  const double causal = estimate_attention(attention(1, 10, 4096, 128, true), d, kFull, {}).seconds;
  // 0.5 x eff(4096) / eff(2048) = 0.5 x (4096 / 4352) / (2048 / 2304) = 0.529412.
  EXPECT_NEAR(causal / full, 0.529412, 1e-6);
}

TEST(AttentionKernelModel, BackwardIsTwoAndAHalfForwardsAtTheBackwardEfficiency) {
  const DeviceProfile d = test::test_device();
  const AttentionEstimate fwd = estimate_attention(attention(1, 10, 4096, 128), d, kFull, {});
  const AttentionEstimate bwd =
      estimate_attention(attention(1, 10, 4096, 128, false, true), d, kFull, {});
  EXPECT_DOUBLE_EQ(bwd.flops, 2.5 * fwd.flops);
  EXPECT_NEAR(bwd.seconds / fwd.seconds, 2.5 * 0.73 / 0.63, 1e-9);
  EXPECT_EQ(bwd.launches, 3);
  // Two more launches than the forward, one kernel_overhead each.
  const Duration overhead = Duration::from_us(5);
  EXPECT_NEAR(attention_seconds(attention(1, 10, 4096, 128, false, true), d, kFull, {}, overhead),
              bwd.seconds + 10e-6, 1e-12);
}

TEST(AttentionKernelModel, PartialLastWaveCostsAFullWave) {
  const DeviceProfile d = test::test_device();
  // 11 blocks of 128 query rows on 10 SMs: 2 waves, 55% busy.
  KernelDesc k = attention(1, 11, 128, 128);
  const AttentionEstimate est = estimate_attention(k, d, kFull, {});
  EXPECT_EQ(est.blocks, 11);
  EXPECT_EQ(est.waves, 2);
  EXPECT_DOUBLE_EQ(est.wave_efficiency, 0.55);
  // The backward splits over key blocks: 300 query rows, 128 key rows -> 11 x 1 blocks still,
  // but 11 x 3 forward.
  k.attention.seq_q = 300;
  EXPECT_EQ(estimate_attention(k, d, kFull, {}).blocks, 33);
  k.attention.backward = true;
  EXPECT_EQ(estimate_attention(k, d, kFull, {}).blocks, 11);
}

TEST(AttentionKernelModel, HeadDimInterpolatesBetween64And128) {
  const DeviceProfile d = test::test_device();
  auto eff = [&](int64_t hd) {
    return estimate_attention(attention(1, 10, 4096, hd), d, kFull, {}).efficiency /
           (4096.0 / 4352.0);
  };
  EXPECT_NEAR(eff(32), 0.60, 1e-12);
  EXPECT_NEAR(eff(64), 0.60, 1e-12);
  EXPECT_NEAR(eff(96), 0.60 + std::log2(1.5) * 0.13, 1e-12);
  EXPECT_NEAR(eff(128), 0.73, 1e-12);
  EXPECT_NEAR(eff(256), 0.73, 1e-12);
}

// A head dim between a kernel's instantiations runs on the next larger one, zero padded
// (kernel_head_dim): 112 on FlashAttention-2's 128 kernel computes as much as head dim 128 does,
// at its efficiency, while reading only its own q, k, v and o.
TEST(AttentionKernelModel, HeadDimsBetweenInstantiationsRunPadded) {
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash2, 112), 128);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash2, 80), 96);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash2, 64), 64);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash2, 200), 256);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash3, 80), 96);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash3, 112), 128);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash3, 160), 192);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kCudnn, 112), 112);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash2, 320), 320);
  // FlashAttention v1: the hdim 32, 64 and 128 kernels; Triton: a power of two, at least 16.
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash1, 16), 32);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash1, 48), 64);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kFlash1, 80), 128);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kTriton, 8), 16);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kTriton, 48), 64);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kTriton, 96), 128);
  EXPECT_EQ(kernel_head_dim(AttentionKernel::kTriton, 128), 128);
  const DeviceProfile d = test::test_device();
  const AttentionEstimate padded = estimate_attention(attention(1, 10, 4096, 112), d, kFull, {});
  const AttentionEstimate full = estimate_attention(attention(1, 10, 4096, 128), d, kFull, {});
  EXPECT_DOUBLE_EQ(padded.compute_seconds, full.compute_seconds);
  EXPECT_DOUBLE_EQ(padded.efficiency, full.efficiency);
  EXPECT_DOUBLE_EQ(padded.flops, full.flops * 112.0 / 128.0);  // the useful work
  EXPECT_DOUBLE_EQ(padded.bytes, full.bytes * 112.0 / 128.0);
  KernelDesc cudnn = attention(1, 10, 4096, 112);
  cudnn.attention.implementation = AttentionKernel::kCudnn;
  EXPECT_LT(estimate_attention(cudnn, d, kFull, {}).compute_seconds, full.compute_seconds);
}

TEST(AttentionKernelModel, GroupedQueryAttentionReadsFewerKeysAndValues) {
  const DeviceProfile d = test::test_device();
  KernelDesc mha = attention(1, 32, 1024, 128);
  KernelDesc gqa = mha;
  gqa.attention.kv_heads = 8;
  const AttentionEstimate a = estimate_attention(mha, d, kFull, {});
  const AttentionEstimate b = estimate_attention(gqa, d, kFull, {});
  EXPECT_DOUBLE_EQ(a.flops, b.flops);
  // q, o: 2 x 32 heads; k, v: 2 x 8 heads instead of 2 x 32.
  EXPECT_DOUBLE_EQ(b.bytes / a.bytes, (64.0 + 16.0) / 128.0);
  gqa.attention.kv_heads = 5;
  EXPECT_THROW(estimate_attention(gqa, d, kFull, {}), std::invalid_argument);
}

TEST(AttentionKernelModel, ErrorsNameTheReason) {
  const DeviceProfile d = test::test_device();
  KernelDesc k = attention(1, 8, 1024, 64);
  k.dtype = DType::kFp8;
  try {
    (void)estimate_attention(k, d, kFull, {});
    FAIL() << "fp8 on a device without an fp8 peak";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("test-gpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
  }
  k = attention(1, 8, 1024, 64);
  k.attention.fused = false;
  EXPECT_THROW(estimate_attention(k, d, kFull, {}), std::invalid_argument);
  k = attention(1, 8, 0, 64);
  EXPECT_THROW(estimate_attention(k, d, kFull, {}), std::invalid_argument);
  AttentionParams bad;
  bad.forward_efficiency_128 = 1.5;
  EXPECT_THROW(check_attention_params(bad), std::invalid_argument);
}

// The defaults reproduce the FlashAttention-2 paper's A100 numbers they were taken from (Dao
// 2023, Fig. 5: 16k tokens per batch, hidden 2048 -> 16 heads of 128, forward without mask,
// "up to 73%"), and the sequence-length curve: 2k at 0.89 of the 16k rate.
TEST(AttentionKernelModel, A100DefaultsMatchTheFlashAttention2Paper) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  auto tflops = [&](int64_t batch, int64_t seq) {
    const AttentionEstimate est =
        estimate_attention(attention(batch, 16, seq, 128), a100.device, a100.achievable, {});
    return est.flops / est.seconds / 1e12;
  };
  EXPECT_NEAR(tflops(1, 16384), 0.73 * 312 * 16384 / (16384 + 256.0), 0.5);
  EXPECT_GT(tflops(1, 16384), 0.70 * 312);
  EXPECT_NEAR(tflops(8, 2048) / tflops(1, 16384), 0.897, 0.01);
}

/// The shipped A100 calibration as YAML, without its `attention:` sections (a base the tests
/// append their own to).
std::string a100_file_without_attention() {
  KernelCalibration c = load_kernel_calibration(
      ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml").root());
  for (auto& section : c.attention)
    section.reset();
  return kernel_calibration_yaml(c, "");
}

TEST(AttentionKernelModel, CalibratedModelPricesAttentionWithTheFileSection) {
  const HardwareProfile a100 = profile("a100_sxm4_80gb.yaml");
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  KernelCalibration c = load_kernel_calibration(doc.root());
  ASSERT_TRUE(c.attention[static_cast<size_t>(AttentionKernel::kFlash2)]);
  for (auto& section : c.attention)
    section.reset();  // the AttentionParams defaults, as a file without sections has them
  const KernelDesc k = attention(4, 32, 2048, 128, true, true);
  const CalibratedKernelCost defaults(c, a100.achievable);
  EXPECT_NEAR(defaults.kernel_duration(k, a100.device).seconds(),
              attention_seconds(k, a100.device, a100.achievable, {}, c.kernel_overhead) +
                  c.kernel_overhead.seconds(),
              1e-9);
  // A section in the file replaces the defaults, and round-trips through the writer.
  AttentionParams p;
  p.backward_efficiency_128 = 0.40;
  c.attention[static_cast<size_t>(AttentionKernel::kFlash2)] =
      AttentionCalibration{p, "published", "a paper"};
  const std::string text = kernel_calibration_yaml(c, "");
  EXPECT_NE(text.find("attention:\n  flash2:\n    provenance: published\n    source: \"a paper\"\n"
                      "    block_m: 128\n"),
            std::string::npos)
      << text;
  ConfigDocument again = ConfigDocument::parse_string(text, "calibration.yaml");
  const KernelCalibration reread = load_kernel_calibration(again.root());
  const auto& flash2 = reread.attention[static_cast<size_t>(AttentionKernel::kFlash2)];
  ASSERT_TRUE(flash2);
  EXPECT_EQ(flash2->params.backward_efficiency_128, 0.40);
  EXPECT_EQ(flash2->provenance, "published");
  EXPECT_EQ(kernel_calibration_yaml(reread, ""), text);
  const CalibratedKernelCost own(reread, a100.achievable);
  EXPECT_NEAR(own.core_seconds(k, a100.device) / defaults.core_seconds(k, a100.device), 0.63 / 0.40,
              0.01);
  EXPECT_FALSE(own.borrowed_calibration(k, a100.device));
  EXPECT_TRUE(defaults.borrowed_calibration(k, a100.device));
}

TEST(AttentionKernelModel, FileSectionKeysAreOptionalAndChecked) {
  const std::string base = a100_file_without_attention();
  ConfigDocument partial =
      ConfigDocument::parse_string(base + "attention:\n  forward_efficiency_64: 0.5\n", "c.yaml");
  const KernelCalibration c = load_kernel_calibration(partial.root());
  // The flat form is the flash2 section.
  const auto& flash2 = c.attention[static_cast<size_t>(AttentionKernel::kFlash2)];
  ASSERT_TRUE(flash2);
  EXPECT_FALSE(c.attention[static_cast<size_t>(AttentionKernel::kFlash3)]);
  EXPECT_EQ(flash2->params.forward_efficiency_64, 0.5);
  EXPECT_EQ(flash2->params.forward_efficiency_128, AttentionParams{}.forward_efficiency_128);
  ConfigDocument bad =
      ConfigDocument::parse_string(base + "attention:\n  backward_launches: 0\n", "c.yaml");
  EXPECT_THROW(load_kernel_calibration(bad.root()), ConfigError);
  // An unknown implementation, or parameters beside implementation sections, name the key.
  for (const char* section : {"attention:\n  flash4: {block_m: 64}\n",
                              "attention:\n  flash3: {block_m: 64}\n  block_m: 64\n",
                              "attention:\n  cudnn: {provenance: guessed}\n"}) {
    ConfigDocument wrong = ConfigDocument::parse_string(base + section, "c.yaml");
    try {
      load_kernel_calibration(wrong.root());
      ADD_FAILURE() << "accepted " << section;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("c.yaml"), std::string::npos) << e.what();
    }
  }
  // The unknown one is told every implementation there is.
  ConfigDocument unknown =
      ConfigDocument::parse_string(base + "attention:\n  flash4: {block_m: 64}\n", "c.yaml");
  try {
    load_kernel_calibration(unknown.root());
    ADD_FAILURE() << "accepted flash4";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("implementation (flash2, flash3, cudnn, flash1, triton)"),
              std::string::npos)
        << e.what();
  }
}

// The head_dim-256 efficiency: a section that states only head_dim 128 prices 256 with it; one
// that states 256 interpolates in log2(head_dim) between 128 and 256.
TEST(AttentionKernelModel, HeadDim256DefaultsToTheSectionsHeadDim128) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  const std::string base = a100_file_without_attention();
  ConfigDocument only_128 = ConfigDocument::parse_string(
      base + "attention:\n  flash3: {forward_efficiency_128: 0.5}\n", "c.yaml");
  const KernelCalibration c = load_kernel_calibration(only_128.root());
  const AttentionParams p = c.attention_for(AttentionKernel::kFlash3);
  EXPECT_EQ(p.forward_efficiency_256, 0.5);
  AttentionParams q = p;
  q.forward_efficiency_256 = 0.8;
  auto efficiency = [&](const AttentionParams& params, int64_t head_dim) {
    return estimate_attention(attention(1, 8, 16384, head_dim), h100.device, h100.achievable,
                              params)
        .efficiency;
  };
  EXPECT_DOUBLE_EQ(efficiency(p, 256), efficiency(p, 128));
  const double span_factor = 16384.0 / (16384.0 + p.half_efficiency_span);
  EXPECT_NEAR(efficiency(q, 256), 0.8 * span_factor, 1e-12);
  // 192: a head dim FlashAttention-2 has a kernel for (kernel_head_dim).
  EXPECT_NEAR(efficiency(q, 192), (0.5 + 0.3 * std::log2(192.0 / 128.0)) * span_factor, 1e-12);
  EXPECT_NEAR(efficiency(q, 512), 0.8 * span_factor, 1e-12);  // clamped above 256
}

// Each implementation is priced with its own section; one without a section borrows flash2's
// and says so, and a run without any section says it uses FlashAttention-2 on A100.
TEST(AttentionKernelModel, ImplementationsArePricedWithTheirOwnSection) {
  const HardwareProfile h100 = profile("h100_sxm5_80gb.yaml");
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "calibration" / "h100_xla.yaml");
  KernelCalibration c = load_kernel_calibration(doc.root());
  KernelDesc k = attention(2, 16, 8192, 128, true, false);
  std::array<double, kAttentionKernelCount> seconds{};
  // Every implementation but triton has H100 measurements (none of the Triton kernel's is
  // published).
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    if (static_cast<AttentionKernel>(i) == AttentionKernel::kTriton) continue;
    ASSERT_TRUE(c.attention[i]) << attention_kernel_name(static_cast<AttentionKernel>(i));
    EXPECT_EQ(c.attention[i]->provenance, "published");
    k.attention.implementation = static_cast<AttentionKernel>(i);
    const CalibratedKernelCost model(c, h100.achievable);
    seconds[i] = model.core_seconds(k, h100.device);
    EXPECT_FALSE(model.borrowed_calibration(k, h100.device));
  }
  // FlashAttention-3 is the fastest on H100, then cuDNN, FlashAttention-2 (the FlashAttention-3
  // paper's Fig. 5) and FlashAttention v1 (the flash-attention repository's H100 figure).
  EXPECT_LT(seconds[1], seconds[2]);
  EXPECT_LT(seconds[2], seconds[0]);
  EXPECT_LT(seconds[0], seconds[3]);
  k.attention.implementation = AttentionKernel::kTriton;
  const auto triton = CalibratedKernelCost(c, h100.achievable).borrowed_calibration(k, h100.device);
  ASSERT_TRUE(triton);
  EXPECT_NE(triton->find("attention triton: no triton section"), std::string::npos) << *triton;
  k.attention.implementation = AttentionKernel::kFlash3;
  c.attention[static_cast<size_t>(AttentionKernel::kFlash3)].reset();
  const CalibratedKernelCost without_flash3(c, h100.achievable);
  const auto note = without_flash3.borrowed_calibration(k, h100.device);
  ASSERT_TRUE(note);
  EXPECT_NE(note->find("attention flash3: no flash3 section"), std::string::npos) << *note;
  EXPECT_NE(note->find("flash2"), std::string::npos) << *note;
  EXPECT_DOUBLE_EQ(without_flash3.core_seconds(k, h100.device), seconds[0]);
}

// A sliding window of w keys: each causal query sees min(position, w) keys, (s w - w (w-1)/2)
// in all; the FLOPs and the kernel's time follow it, and a window as long as the sequence is
// plain causal attention.
TEST(AttentionWindow, KeysPerQueryFollowTheWindow) {
  AttentionShape a{1, 1, 1, 8, 8, 64, true, false, true};
  EXPECT_DOUBLE_EQ(a.mean_keys_per_query(), 4.0);
  a.window = 3;
  EXPECT_DOUBLE_EQ(a.mean_keys_per_query(), (1 + 2 + 3 * 6) / 8.0);
  a.window = 8;
  EXPECT_DOUBLE_EQ(a.mean_keys_per_query(), 4.0);
  a.causal = false;
  a.window = 3;
  EXPECT_DOUBLE_EQ(a.mean_keys_per_query(), 3.0);
}

TEST(AttentionWindow, AWindowedKernelIsCheaperInProportion) {
  KernelDesc full;
  full.cls = KernelClass::kAttention;
  full.dtype = DType::kBf16;
  full.attention = AttentionShape{4, 32, 8, 8192, 8192, 128, true, false, true};
  KernelDesc windowed = full;
  windowed.attention.window = 1024;
  const double ratio = attention_work(windowed).flops / attention_work(full).flops;
  EXPECT_NEAR(ratio, (1024.0 - 1024.0 * 1023.0 / (2.0 * 8192.0)) / 4096.0, 1e-12);
  DeviceProfile h100;
  h100.name = "H100";
  h100.sm_count = 132;
  h100.peak_flops[static_cast<size_t>(DType::kBf16)] = FlopRate::teraflops(989.0);
  h100.hbm_bandwidth = Bandwidth::gigabytes_per_second(3350.0);
  const AchievableFractions achievable{};
  const double t_full = estimate_attention(full, h100, achievable, AttentionParams{}).seconds;
  const double t_window = estimate_attention(windowed, h100, achievable, AttentionParams{}).seconds;
  EXPECT_LT(t_window, 0.3 * t_full);
  EXPECT_GT(t_window, 0.5 * ratio * t_full) << "shorter rows run at lower efficiency, not higher";
}

}  // namespace
}  // namespace upsim
