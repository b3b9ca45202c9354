// Fused attention (FlashAttention-2 style) forward and backward: a compute + memory model with
// tile quantisation over the SMs.
//
// Model (b = batch, h = query heads, s_q, s_kv = sequence lengths, d = head_dim; flops and
// bytes from attention_work(), roofline_kernel_cost.h, which counts 4 s_q s_kv d flops per head
// forward, half under a causal mask, and 2.5x that backward):
//   blocks     = b x h x ceil(s / block_m)     thread blocks: FlashAttention-2 parallelises the
//                forward over batch, heads and blocks of block_m query rows (s = s_q), the
//                backward over blocks of block_m key rows (s = s_kv) (Dao 2023, section 3.2)
//   waves      = ceil(blocks / sm_count)
//   wave_eff   = blocks / (waves x sm_count)
//   span       = s_kv, or s_kv / 2 under a causal mask: the mean keys a query block iterates
//                over (a causal block skips the masked blocks, so its loop is half as long)
//   efficiency = peak_efficiency(d, direction) x span / (span + half_efficiency_span)
//                peak_efficiency interpolates in log2(d) between the head_dim-64, -128 and
//                -256 values and is clamped outside [64, 256]; the span term is the
//                per-block prologue and epilogue (loading q, writing o, the softmax rescale)
//                amortised over the key loop, so short sequences run below the peak
//   d_kernel   = the head dim the implementation's kernel is instantiated for (kernel_head_dim):
//                a head dim between instantiations runs on the next larger one, zero padded,
//                so its compute is that of d_kernel (flops x d_kernel / d) and its efficiency
//                is read at d_kernel; its HBM traffic stays at d (the padding is on chip)
//   compute    = flops x d_kernel / d / (peak(dtype) x efficiency x wave_eff)
//   memory     = bytes / (hbm_bandwidth x achievable.memory)
//   core time  = max(compute, memory) + (launches - 1) x kernel_overhead
//                launches = 1 forward; backward_launches backward (flash-attn's backward runs
//                a dot(do, o) pre-pass, the main kernel and a dq conversion)
// The calibrated model adds kernel_overhead once more (calibrated_kernel_cost.h).
//
// Default efficiencies are of the datasheet peak (not of the achievable GEMM fraction),
// measured with FlashAttention-2 on A100 80GB SXM4, fp16/bf16 (Dao, "FlashAttention-2: Faster
// Attention with Better Parallelism and Work Partitioning", arXiv 2307.08691, section 4.1 and
// Fig. 4-6): "up to 73% of the theoretical max throughput in the forward pass, and up to 63% in
// the backward pass" at head_dim 128 and long sequences; head_dim 64 runs lower (forward about
// 60%, backward about 50% of 312 TFLOP/s in the same figures). The same FlashAttention-2 kernel
// reaches only about 35% of H100's 989 TFLOP/s (Shah et al., "FlashAttention-3", arXiv
// 2407.08608, section 1), while FlashAttention-3 reaches 75% (740 TFLOP/s fp16): a calibration
// for Hopper gives its own `attention:` section per implementation (AttentionKernel,
// kernel_calibration.h); without one, the A100 defaults are used and
// CalibratedKernelCost::borrowed_calibration says so. The head_dim-256 defaults are the
// head_dim-128 ones (no A100 figure is used for them).
//
// Contract: pure; a dtype without a peak on the device, a non-positive dimension, heads not a
// multiple of kv_heads or an unfused descriptor throw std::invalid_argument naming the reason.
#pragma once

#include <cstdint>

#include "calibration/hardware_profile.h"
#include "sim/cost_models.h"
#include "sim/time.h"

namespace upsim {

/// Parameters of the attention model (name, unit, default, source: see the header comment).
struct AttentionParams {
  /// block_m (rows, default 128): query rows (forward) or key rows (backward) of one thread
  /// block; flash-attn's sm80 kernels use 128 for head_dim <= 128 (Dao 2023, section 3.2).
  int64_t block_m = 128;
  /// Fraction of peak(dtype) at long sequences, forward, head_dim 64 and 128 (FA2 on A100).
  double forward_efficiency_64 = 0.60;
  double forward_efficiency_128 = 0.73;
  /// ... and head_dim 256 (default: the head_dim-128 value).
  double forward_efficiency_256 = 0.73;
  /// The same, backward (FA2 on A100: up to 63% at head_dim 128).
  double backward_efficiency_64 = 0.50;
  double backward_efficiency_128 = 0.63;
  double backward_efficiency_256 = 0.63;
  /// half_efficiency_span (keys, default 256): the key span at which a block reaches half its
  /// peak efficiency. 256 puts s = 2k at 0.89 of the s = 16k rate, as FA2's Fig. 5 (head_dim
  /// 128, no mask: about 200 vs 225 TFLOP/s).
  double half_efficiency_span = 256.0;
  /// backward_launches (kernels, default 3): flash-attn's backward is dot(do, o), the main
  /// kernel and the dq conversion (Dao-AILab/flash-attention,
  /// csrc/flash_attn/src/flash_bwd_launch_template.h, run_flash_bwd_seqk_parallel).
  int64_t backward_launches = 3;
};

/// The terms of one estimate, for explanations and tests.
struct AttentionEstimate {
  double flops = 0.0;
  double bytes = 0.0;
  int64_t blocks = 0;
  int64_t waves = 0;
  double wave_efficiency = 0.0;
  /// Fraction of peak(dtype) the blocks reach (before wave quantisation).
  double efficiency = 0.0;
  double compute_seconds = 0.0;
  double memory_seconds = 0.0;
  /// Launches of the op (1 forward, backward_launches backward).
  int64_t launches = 1;
  /// max(compute, memory), without any fixed per-kernel time.
  double seconds = 0.0;
};

/// The head dimension `implementation`'s kernel computes a `head_dim` attention with (> 0):
///  - flash2: head_dim rounded up to a multiple of 32, or 256 above 192 (flash-attn
///    csrc/flash_attn/flash_api.cpp, `head_size_rounded`, which selects the kernel
///    instantiation: Phi-2's head dim 80 runs on the 96 kernel);
///  - flash3: the next of 64, 96, 128, 192, 256 (flash-attn hopper/flash_api.cpp,
///    `round_up_headdim`);
///  - cudnn: head_dim itself (ASSUMPTION: cuDNN's fused attention takes head dims in multiples
///    of 8 as they are; no padding is documented).
///  - flash1: the next of 32, 64, 128 (flash-attn v1.0.9 csrc/flash_attn/fmha_api.cpp,
///    run_fmha_fwd: the hdim32, hdim64 and hdim128 kernels);
///  - triton: the next power of two, at least 16 (flash-attn v1.0.9 flash_attn_triton.py,
///    `BLOCK_HEADDIM = max(triton.next_power_of_2(d), 16)`).
/// flash1 and triton take head dims up to 128 (the workload refuses more).
/// Above 256 every implementation is priced at head_dim (no kernel takes it; the model
/// extrapolates).
int64_t kernel_head_dim(AttentionKernel implementation, int64_t head_dim);

/// Throws std::invalid_argument for a non-positive block, efficiencies outside (0, 1], a
/// negative span or fewer than one backward launch.
void check_attention_params(const AttentionParams& params);

/// See the header comment. `kernel.cls` must be kAttention.
AttentionEstimate estimate_attention(const KernelDesc& kernel, const DeviceProfile& device,
                                     const AchievableFractions& achievable,
                                     const AttentionParams& params);

/// core time of the header comment in seconds: estimate.seconds + (launches - 1) x
/// kernel_overhead.
double attention_seconds(const KernelDesc& kernel, const DeviceProfile& device,
                         const AchievableFractions& achievable, const AttentionParams& params,
                         Duration kernel_overhead);

}  // namespace upsim
