// The calibrated kernel model on a whole transformer layer: LLMCompass' measured per-op times of
// one GPT-3 175B layer on A100 (Zhang et al., "LLMCompass: Enabling Efficient Hardware Design
// for Large Language Model Inference", ISCA 2024; https://github.com/PrincetonUniversity/
// LLMCompass, ae/figure5/ijkl/real_hardware/transformer_A100.csv = prefill,
// transformerAR_A100.csv = one autoregressive decode step), priced op by op. This is the core of
// `upsim validate kernels --layer` and of test/unit/calibration/transformer_layer_kernels_test.cpp.
//
// The layer (LLMCompass software_model/transformer.py, TransformerBlockInitComputationTP and
// TransformerBlockAutoRegressionTP, driven by ae/figure5/ijkl/test_transformer.py): d_model
// 12288, 96 heads of 128, fp16, batch 8, tensor parallel over 4 GPUs (24 heads and d_model / 4
// per GPU). Prefill: sequence 2048. Decode: one new token per sequence against a KV cache of
// s + output_token_length = 2048 + 1024 = 3072 tokens, to which the new key / value is
// concatenated, so the attention GEMMs run over 3073 keys (test_transformer.py passes
// `s + output_token_length` as the model's seq_len).
//
// Per GPU (b = batch, s = prefill sequence, kv = 3073, h = 24 heads, d = 12288, fp16):
//   op              prefill                               decode
//   Q_K_V           3 x gemm [b s, d] x [d, d/4]           3 x gemm [b, d] x [d, d/4]
//   Q_mul_K         bmm b h x [s, 128] x [128, s]          bmm b h x [1, 128] x [128, kv]
//   A_mul_V         bmm b h x [s, s] x [s, 128]            bmm b h x [1, kv] x [kv, 128]
//   Wo_proj         gemm [b s, d/4] x [d/4, d]             gemm [b, d/4] x [d/4, d]
//   W1_proj         gemm [b s, d] x [d, d]                 gemm [b, d] x [d, d]
//   W2_proj         gemm [b s, d] x [d, d]                 gemm [b, d] x [d, d]
//   Softmax         b h s rows of s                         b h rows of kv
//   LayerNorm_MHA   b s rows of d                          b rows of d
//   LayerNorm_FFN   as LayerNorm_MHA                       as LayerNorm_MHA
//   GeLU            b s 4d/4 elements                      b 4d/4 elements
//   AllReduce_MHA   b s d fp16 over the 4 GPUs             b d fp16 over the 4 GPUs
//   AllReduce_FFN   as AllReduce_MHA                       as AllReduce_MHA
// (W1 is [d, 4d / 4] and W2 [4d / 4, d] per GPU, both d x d.)
//
// How LLMCompass timed each op (its run_on_gpu): each op alone with its sweep's harness, the
// median wall-clock time of one PyTorch call plus torch.cuda.synchronize(); Q_K_V is one
// projection timed and multiplied by 3; the two AllReduce rows are not printed by run_on_gpu
// (their source is not stated). So the kernel ops are predicted as their sweep's harness
// predicts a sweep point (kernel_validation.h: max(floor, offset + core time)), x 3 for Q_K_V.
// The all-reduces are collectives: tools/ prices them on the 4x A100 NVLink fabric
// (llmcompass_gpt3_all_reduce_bytes).
//
// The LayerNorm rows, too, are the sweep's harness as it stands. The code computes them as
// run_on_gpu() minus gpu_kernel_launch_overhead() (the median of a 1 x 1 x 1 fp32 call), but
// in the run that wrote these files that subtraction removed next to nothing: the decode row,
// [8, 1, 12288] (0.4 MB, 0.2 us at HBM speed), reads 48.04 us, the level of the decode GeLU row
// (47.92 us, not subtracted) and of the layer norm sweep's own smallest points (52-54 us), all
// of them the harness floor of a torch.compile'd call. Had the subtraction removed a floor of
// its own, the row would be a few us. LLMCompass' own simulation of this layer
// (software_model/transformer.py, compile_and_simulate) reads the rows the same way: it adds
// the full per-call layer norm overhead (45 us on A100, hardware_model/compute_module.py) to
// each LayerNorm, as it does to the sweep points.
//
// Held out: no row of either file is read by any fit (fit_kernel_calibration reads the matmul,
// softmax, layernorm and gelu sweeps only); W1 / W2 of the prefill coincide in shape with a
// matmul sweep row of the training half (layer_shapes_in_sweeps reports it).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/kernel_measurements.h"
#include "sim/cost_models.h"

namespace upsim {

enum class LayerPhase { kPrefill, kDecode };

/// "prefill" or "decode".
std::string_view layer_phase_name(LayerPhase phase);

/// One kernel op of the layer as LLMCompass timed it.
struct LayerKernelOp {
  std::string name;        ///< LLMCompass' row name, e.g. "Q_mul_K"
  std::string harness_op;  ///< the calibration's `measurement` entry of the sweep that timed it
  KernelDesc kernel;
  double calls = 1.0;  ///< Q_K_V: one projection timed, reported x 3
};

/// The ten kernel ops of the layer, in the file's row order (table in the header comment).
std::vector<LayerKernelOp> llmcompass_gpt3_layer_ops(LayerPhase phase);

/// Names of the two collective rows (rows 11 and 12 of the file).
inline constexpr std::array<std::string_view, 2> kLayerAllReduceRows{"AllReduce_MHA",
                                                                     "AllReduce_FFN"};

/// Bytes each GPU all-reduces in one of the layer's all-reduces: b x tokens x d x 2 (fp16).
int64_t llmcompass_gpt3_all_reduce_bytes(LayerPhase phase);

/// The twelve latencies (seconds) of an LLMCompass layer file: one number per line, blank lines
/// ignored. A line that is not exactly one positive number (e.g. two numbers run together,
/// "1.2e-053.4e-05") or a count other than 12 throws CalibrationDataError naming file and line.
std::vector<double> read_llmcompass_layer_latencies(const std::filesystem::path& path);

/// The op as LLMCompass' harness reports it (see the header comment), in seconds.
double predicted_layer_op_seconds(const CalibratedKernelCost& model, const DeviceProfile& device,
                                  const LayerKernelOp& op);

struct LayerCheckRow {
  std::string name;
  double measured_seconds = 0.0;
  double predicted_seconds = 0.0;
  double error = 0.0;  ///< predicted / measured - 1
};

struct LayerCheck {
  LayerPhase phase = LayerPhase::kPrefill;
  std::vector<LayerCheckRow> kernel_rows;  ///< the ten kernel ops
  /// The two all-reduces, when priced (tools/ fills them); empty otherwise.
  std::vector<LayerCheckRow> collective_rows;
  double kernel_measured_seconds = 0.0;
  double kernel_predicted_seconds = 0.0;
  double kernel_geomean_abs_error = 0.0;
  double kernel_max_abs_error = 0.0;
};

/// Prices the ten kernel ops against `measured` (the file's 12 latencies; rows 11-12 ignored
/// here).
LayerCheck check_llmcompass_gpt3_layer(LayerPhase phase, const std::vector<double>& measured,
                                       const CalibratedKernelCost& model,
                                       const DeviceProfile& device);

/// The table of one phase: per op measured, predicted (us) and error, the kernel sum, and, when
/// collective_rows are filled, the all-reduces and the whole layer's sum. Deterministic.
std::string format_layer_check(const LayerCheck& check);

/// Whether measurement row `m` times exactly the kernel of layer op `op` (same op name, dtype and
/// shape).
bool same_layer_kernel(const KernelMeasurement& m, const LayerKernelOp& op);

/// The layer's kernel ops against kernels measured one by one on some GPU (e.g. bench/gpu's
/// gemm.csv and memory.csv, which hold the layer's shapes): each op's measured time is the row
/// with its op, dtype and shape (x calls for Q_K_V; the first such row), predicted as that row
/// with `model` (its `measurement` harness: the calibration fitted on such tables describes
/// theirs). A row in the fit's training half is named "<op> [train]" (in-sample). Ops without a
/// row go to `missing` (their names) and out of the sums.
LayerCheck check_gpt3_layer_against_tables(LayerPhase phase,
                                           const std::vector<KernelMeasurement>& rows,
                                           const CalibratedKernelCost& model,
                                           const DeviceProfile& device,
                                           std::vector<std::string>& missing);

/// Sweep rows (`sweeps`, e.g. read_llmcompass_dir) whose op and shape equal a layer op's,
/// as "<op> (<phase>) = <origin> (training|held out)" lines: what of the layer a fit has seen.
std::vector<std::string> layer_shapes_in_sweeps(const std::vector<KernelMeasurement>& sweeps);

}  // namespace upsim
