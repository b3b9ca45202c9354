// The interfaces through which the engine asks for durations, and the value types they take.
//
// Contract (ARCHITECTURE.md "Cost models"): implementations are pure functions of their value-type
// arguments and of parameters fixed at construction. They never see the engine, the task graph
// or the fabric, they are deterministic, and they are const (safe to share between engines).
// Implementations live in calibration/ (kernel, CPU, collective cost models) and topology/
// (fabric-aware network models); tools/ picks them by name from the scenario.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/all_to_all_sizes.h"
#include "sim/parallel_dim.h"
#include "sim/time.h"
#include "sim/units.h"

namespace upsim {

using RankId = uint32_t;

/// Element type of a kernel's arithmetic.
enum class DType : uint8_t { kFp32, kTf32, kFp16, kBf16, kFp8, kInt8 };
inline constexpr size_t kDTypeCount = 6;
std::string_view dtype_name(DType dtype);
/// Bytes per element in device memory (tf32 is stored as fp32).
int64_t dtype_bytes(DType dtype);
/// The DType whose dtype_name() is `name`, or nullopt.
std::optional<DType> parse_dtype(std::string_view name);

/// Facts about one GPU model that cost models read. Filled from configs/hardware/*.yaml by
/// calibration/; every field is a datasheet or measured value cited in that file.
struct DeviceProfile {
  std::string name;
  /// Dense peak arithmetic rate per DType (indexed by static_cast<size_t>(DType)) at sm_count
  /// SMs and sm_boost_clock_mhz: a what-if on either has scaled the profile's stated peaks
  /// (calibration/hardware_profile.h). Zero where the device has no such unit.
  std::array<FlopRate, kDTypeCount> peak_flops{};
  Bandwidth hbm_bandwidth;
  int64_t hbm_bytes = 0;
  /// At sm_boost_clock_mhz (it scales with the clock, not with the SM count).
  Bandwidth l2_bandwidth;
  int64_t l2_bytes = 0;
  int32_t sm_count = 0;
  /// CUDA compute capability, major x 10 + minor (90 = 9.0, Hopper); 0 = not stated. Which
  /// kernels exist for the device (FlashAttention-3 is sm90 only) depends on it.
  int32_t compute_capability = 0;
  /// SM boost clock (datasheet or whitepaper), MHz. With sm_count it ties the fp32 peak to the
  /// FP32 lanes per SM (peak = 2 x lanes x SMs x clock); the profiles are checked against it.
  int32_t sm_boost_clock_mhz = 0;
  /// The SM clock under sustained load when a profile states it below the boost clock (a
  /// power-capped or thermally limited part), MHz; the peaks are scaled to it. 0: the boost clock.
  int32_t sustained_sm_clock_mhz = 0;
  /// Host link (PCIe) bandwidth per direction, for host<->device copies: the x16 rate of the
  /// GPU's PCIe generation, which also caps a fabric's PCIe links at the GPU
  /// (topology/fabric_loader.h).
  Bandwidth host_link_bandwidth;

  FlopRate peak(DType dtype) const { return peak_flops[static_cast<size_t>(dtype)]; }
};

/// The device a compute kernel sees while `held_sms` of its SMs run other kernels (NCCL's
/// communication kernels: one thread block per channel, each resident on an SM for the whole
/// collective): the SMs left, and every peak scaled by SMs left / SMs, since a peak is a per-SM
/// rate times the SM count. Memory and L2 bandwidth are unchanged: the SMs left still reach
/// them. At least one SM is left. `held_sms` <= 0 returns the device as it is.
inline DeviceProfile device_with_sms_held(const DeviceProfile& device, int32_t held_sms) {
  if (held_sms <= 0 || device.sm_count <= 1) return device;
  DeviceProfile left = device;
  left.sm_count = std::max<int32_t>(1, device.sm_count - held_sms);
  const double scale = static_cast<double>(left.sm_count) / static_cast<double>(device.sm_count);
  for (FlopRate& peak : left.peak_flops)
    peak = peak * scale;
  return left;
}

/// What a GPU kernel computes, in terms a cost model can price.
enum class KernelClass : uint8_t {
  kGemm,               ///< batch x (m x k) * (k x n) matrix multiply
  kMemoryBound,        ///< elementwise / reduction / copy: bytes moved and flops given
  kEmbeddingForward,   ///< table-batched embedding-bag lookup (pooled)
  kEmbeddingBackward,  ///< embedding-bag backward with fused optimizer update
  kAttention,          ///< scaled dot-product attention core (KernelDesc::attention)
};
std::string_view kernel_class_name(KernelClass cls);

/// What a kMemoryBound kernel computes. Kernel models that price every memory-bound kernel
/// alike ignore it; the calibrated model (calibration/calibrated_kernel_cost.h) picks the
/// achieved-bandwidth curve of the op's family by it. kUnspecified = a generic elementwise kernel.
enum class MemoryOp : uint8_t {
  kUnspecified,
  kRelu,          ///< relu, threshold_backward
  kGelu,          ///< gelu and its backward
  kSigmoid,       ///< sigmoid and its backward
  kTanh,          ///< tanh and its backward
  kSoftmax,       ///< row-wise softmax and its backward
  kLayerNorm,     ///< row-wise layer norm and its backward
  kDropout,       ///< dropout and its backward
  kBinary,        ///< add / sub / mul / div and other two-input elementwise ops (losses included)
  kSum,           ///< reductions (sum, mean)
  kCopy,          ///< copy_, contiguous, fill_, zero_
  kCat,           ///< cat and split copies
  kTranspose,     ///< transpose copies
  kIndex,         ///< index / index_put_ gathers and scatters (the DLRM tril gather)
  kOptimizer,     ///< optimizer updates (SGD, Adagrad, Adam; fused and foreach)
  kRmsNorm,       ///< row-wise RMS norm and its backward (Llama)
  kRotary,        ///< rotary position embedding applied to q and k, and its backward
  kSwiglu,        ///< gated activation silu(a) * b and its backward (Llama's SwiGLU MLP); GeGLU
                  ///< (gelu(a) * b), which moves the same bytes
  kCrossEntropy,  ///< softmax cross-entropy over the vocabulary (row-wise) and its backward
};
inline constexpr size_t kMemoryOpCount = 19;
inline constexpr std::array<std::string_view, kMemoryOpCount> kMemoryOpNames{
    "unspecified", "relu",     "gelu",   "sigmoid", "tanh",         "softmax",   "layernorm",
    "dropout",     "binary",   "sum",    "copy",    "cat",          "transpose", "index",
    "optimizer",   "rms_norm", "rotary", "swiglu",  "cross_entropy"};
inline std::string_view memory_op_name(MemoryOp op) {
  return kMemoryOpNames[static_cast<size_t>(op)];
}
/// The MemoryOp whose memory_op_name() is `name`, or nullopt.
inline std::optional<MemoryOp> parse_memory_op(std::string_view name) {
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    if (kMemoryOpNames[i] == name) return static_cast<MemoryOp>(i);
  }
  return std::nullopt;
}

/// Optimizer fused into the embedding-bag backward (FBGEMM `split_embedding_backward_codegen_*`).
enum class FusedEmbeddingOptimizer : uint8_t {
  kSgd,             ///< w -= lr g
  kAdagrad,         ///< element-wise momentum: one fp32 state per weight element
  kRowWiseAdagrad,  ///< one fp32 state per row
  kAdam,            ///< two fp32 states per weight element (exp_avg, exp_avg_sq)
};

/// How a kEmbeddingBackward applies the lookups' gradients to the tables.
enum class EmbeddingUpdate : uint8_t {
  /// FBGEMM's split_embedding_backward_codegen_*: the indices sorted and deduplicated, each
  /// distinct row updated once by the fused optimizer.
  kFusedDeduplicated,
  /// PyTorch's sparse gradient (nn.Embedding(sparse=True), at::embedding_sparse_backward): one
  /// value row per lookup, applied by torch.optim.SGD as dense.add_(sparse), which is one
  /// index_add_ over the uncoalesced values (atomic adds into the table; no sort, no
  /// deduplication; aten/src/ATen/native/sparse/cuda/SparseCUDATensorMath.cu
  /// add_out_dense_sparse_cuda). SGD only.
  kScatterAdd,
};
std::string_view embedding_update_name(EmbeddingUpdate update);

/// The update rule of a MemoryOp::kOptimizer kernel (PyTorch torch.optim, default options:
/// no weight decay except AdamW's decoupled one, no amsgrad, no nesterov, steps on the host).
/// kUnspecified = a generic memory-bound kernel priced by bytes_read / bytes_written.
enum class OptimizerKind : uint8_t {
  kUnspecified,
  kSgd,          ///< w -= lr g
  kSgdMomentum,  ///< + one momentum buffer
  kAdagrad,      ///< + one state sum
  kAdam,         ///< + exp_avg, exp_avg_sq
  kAdamW,        ///< Adam with decoupled weight decay (one more pass over w when foreach)
  /// LAMB (You et al., arXiv 1904.00962) as NVIDIA Apex's FusedLAMB runs it (NVIDIA's BERT
  /// pretraining): Adam's moments plus a per-tensor trust ratio ||w|| / ||update||. Fused only.
  kLamb,
};
inline constexpr size_t kOptimizerKindCount = 7;
std::string_view optimizer_kind_name(OptimizerKind kind);

/// How the update is launched: kForeach = the torch._foreach_* sequence (foreach=True), one
/// multi_tensor_apply per op; kFused = one fused multi_tensor_apply op (fused=True).
enum class OptimizerImpl : uint8_t { kForeach, kFused };
std::string_view optimizer_impl_name(OptimizerImpl impl);

/// A kOptimizer kernel's update: the rule, the implementation and the parameter tensors it
/// updates. Plain data; the optimizer model (calibration/) derives traffic and launches.
struct OptimizerShape {
  OptimizerKind kind = OptimizerKind::kUnspecified;
  OptimizerImpl impl = OptimizerImpl::kForeach;
  /// Elements of each parameter tensor, in parameter order (zero-sized tensors are skipped, as
  /// multi_tensor_apply does).
  std::vector<int64_t> tensor_elements{};
  /// The CUDA build passes 32 KB kernel arguments (CUDA >= 12.1, driver >= 530), which raises
  /// multi_tensor_apply's tensors and blocks per launch.
  bool large_kernel_args = false;
  bool operator==(const OptimizerShape&) const = default;
};

/// Bins of the reuse-factor histogram (Lin et al., TPDS 2024): bin 0 holds distinct rows
/// accessed once, (0, 1]; bin i in 1..15 holds (2^(i-1), 2^i]; bin 16 holds (2^15, inf).
inline constexpr size_t kReuseHistogramBins = 17;

/// One table of a table-batched embedding-bag op, when the tables differ.
struct EmbeddingTableShape {
  int64_t rows = 0;
  int64_t dim = 0;
  /// Mean rows per bag in this batch.
  double pooling = 0.0;
  /// Reuse-factor histogram of this table's indices in one batch: fraction of the distinct rows
  /// whose access count falls in each bin (sums to 1). Empty = unknown: models that use it then
  /// assume uniformly random indices over `rows`.
  std::vector<double> reuse_histogram{};
  bool operator==(const EmbeddingTableShape&) const = default;
};

/// Table-batched embedding-bag shape: `tables` tables looked up for `batch` samples each, with
/// `pooling` rows per bag on average, rows of `dim` elements, `rows` rows per table on average.
/// When `per_table` is non-empty it describes each table and takes precedence over `tables`,
/// `rows`, `dim`, `pooling` and `reuse_histogram` for the models that read it (the calibrated
/// embedding model does; the roofline reads the averages only).
struct EmbeddingShape {
  int64_t batch = 0;
  int64_t tables = 0;
  int64_t rows = 0;
  int64_t dim = 0;
  double pooling = 0.0;
  /// Reuse-factor histogram shared by all tables (see EmbeddingTableShape); empty = unknown.
  std::vector<double> reuse_histogram{};
  std::vector<EmbeddingTableShape> per_table{};
  /// Bytes of one index (FBGEMM takes int32 or int64 indices).
  int64_t index_bytes = 4;
  /// kEmbeddingBackward: the optimizer fused into the backward.
  FusedEmbeddingOptimizer optimizer = FusedEmbeddingOptimizer::kSgd;
  /// kEmbeddingBackward: how the gradients reach the tables (kScatterAdd: SGD only; the op is
  /// then the optimizer step's index_add_, its values in `dtype`).
  EmbeddingUpdate update = EmbeddingUpdate::kFusedDeduplicated;
  bool operator==(const EmbeddingShape&) const = default;
};

/// The fused-attention kernel a framework runs (the kernels differ on one GPU: FlashAttention-2
/// reaches about 35% of H100's peak, FlashAttention-3 about 75%; Shah et al., arXiv 2407.08608).
enum class AttentionKernel : uint8_t {
  kFlash2,  ///< FlashAttention-2 (Dao-AILab flash-attn 2.x; PyTorch SDPA's flash backend)
  kFlash3,  ///< FlashAttention-3 (flash-attn hopper/, sm90 only)
  kCudnn,   ///< cuDNN fused attention (Transformer Engine's FusedAttention, PyTorch SDPA cuDNN)
  kFlash1,  ///< FlashAttention v1 (flash-attn 1.x, the fmha kernels; Dao et al., NeurIPS 2022)
  kTriton,  ///< flash-attn 1.x's Triton FlashAttention (flash_attn_triton.py; llm-foundry's
            ///< `attn_impl: triton` runs a copy of it on pre-MLIR Triton)
};
inline constexpr size_t kAttentionKernelCount = 5;
/// "flash2", "flash3", "cudnn", "flash1", "triton".
std::string_view attention_kernel_name(AttentionKernel kernel);
/// The AttentionKernel whose attention_kernel_name() is `name`, or nullopt.
std::optional<AttentionKernel> parse_attention_kernel(std::string_view name);
/// Every attention_kernel_name() in enum order, joined by ", " (for error messages).
std::string attention_kernel_names();

/// The core of scaled dot-product attention, softmax(q k^T / sqrt(d)) v, for `batch` sequences
/// of `heads` query heads (grouped-query attention: `kv_heads` key/value heads, each shared by
/// heads / kv_heads query heads). Projections, rotary and dropout outside the core are separate
/// kernels.
struct AttentionShape {
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t seq_q = 0;   ///< query positions per sequence
  int64_t seq_kv = 0;  ///< key/value positions per sequence
  int64_t head_dim = 0;
  /// Causal mask: each query attends to the keys at or before its position (decoder models);
  /// a fused kernel then skips the masked half of the score blocks.
  bool causal = false;
  /// true: the backward (dq, dk, dv); false: the forward.
  bool backward = false;
  /// true: one fused kernel (FlashAttention-2 style: scores never reach device memory);
  /// false: the unfused path's batched GEMMs and softmax are separate kernels, and a kAttention
  /// descriptor does not occur (the workload emits them as kGemm and kMemoryBound kernels).
  bool fused = true;
  /// The fused kernel's implementation (fused only).
  AttentionKernel implementation = AttentionKernel::kFlash2;
  /// Sliding-window attention: each query attends to at most the `window` keys nearest before
  /// it (Mistral, GPT-OSS's local layers; with a causal mask); 0: no window.
  int64_t window = 0;
  bool operator==(const AttentionShape&) const = default;

  /// Keys one query attends to, on average over the queries: seq_kv; half of it (the mean of
  /// 1 .. seq) under a causal mask, which fused kernels count as half the blocks; with a causal
  /// window w <= seq, (seq w - w (w - 1) / 2) / seq (the first w queries see fewer); without a
  /// causal mask, min(window, seq_kv).
  double mean_keys_per_query() const {
    const double s = static_cast<double>(seq_kv);
    if (window <= 0 || window >= seq_kv) return causal ? 0.5 * s : s;
    const double w = static_cast<double>(window);
    return causal ? w - w * (w - 1.0) / (2.0 * s) : w;
  }
};

/// How a grouped GEMM's rows fall to its groups (MoE experts: one group per local expert, each
/// with its own k x n weight, as Megatron-Core's GroupedMLP and TE's GroupedLinear run them).
/// routed > 0: `routed` rows go to the kernel's `batch` groups independently and uniformly (a
/// balanced router), so group g gets X_g ~ Binomial(routed, 1 / batch) rows and keeps
/// min(X_g, cap) of them (cap 0: all; a capacity factor drops the rest); the kernel's `m` is
/// then the mean rows per group (for names and tables). routed = 0: every group has exactly m
/// rows (a batched GEMM).
struct GroupedRows {
  int64_t routed = 0;
  int64_t cap = 0;
  bool operator==(const GroupedRows&) const = default;
};

/// What a kernel does, as the kernel cost models read it. Equal descriptions (operator==, field
/// by field) cost the same: TaskGraph stores each distinct one once.
struct KernelDesc {
  KernelClass cls = KernelClass::kMemoryBound;
  DType dtype = DType::kFp32;
  // kGemm: batch x (m x k) * (k x n); a grouped GEMM's groups may hold unequal rows (grouped).
  int64_t batch = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  GroupedRows grouped;
  // kMemoryBound: total bytes read and written from device memory, and arithmetic operations.
  double bytes_read = 0.0;
  double bytes_written = 0.0;
  double flops = 0.0;
  // kMemoryBound: the op, and for row-wise ops (softmax, layernorm, sum over the last dim) the
  // elements per row (0 = not row-wise or unknown).
  MemoryOp memory_op = MemoryOp::kUnspecified;
  int64_t row_elements = 0;
  // kMemoryBound: the part of bytes_read / bytes_written that a pointwise prologue or epilogue
  // fused into the kernel moves (TorchInductor fusing a residual add into the next norm): models
  // that price by op price it as MemoryOp::kBinary, the rest as memory_op, in one kernel.
  double fused_pointwise_read = 0.0;
  double fused_pointwise_written = 0.0;
  // kMemoryBound with memory_op kOptimizer: the update, when known (models that do not read it
  // use bytes_read / bytes_written, which the emitter fills consistently).
  OptimizerShape optimizer;
  // kEmbeddingForward / kEmbeddingBackward.
  EmbeddingShape embedding;
  // kAttention (dtype = the q/k/v element type).
  AttentionShape attention;
  bool operator==(const KernelDesc&) const = default;
};

/// A kGemm descriptor: batch x (m x k) * (k x n) in `dtype`.
KernelDesc gemm_kernel(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k);

class KernelCostModel {
 public:
  virtual ~KernelCostModel() = default;
  /// Predicted execution time of one kernel on `device`. Must be >= 0.
  virtual Duration kernel_duration(const KernelDesc& kernel, const DeviceProfile& device) const = 0;
  /// When the model prices `kernel` on `device` with parameters measured for something else (a
  /// dtype without its own fit, another GPU, an op without a measured curve), one line saying
  /// what was borrowed from what, e.g. "gemm fp8: no fp8 fit, priced with the bf16 fit scaled by
  /// the peak ratio". nullopt when the kernel is priced from its own calibration. Scenarios
  /// print each distinct line once as a warning. Deterministic, like kernel_duration.
  virtual std::optional<std::string> borrowed_calibration(const KernelDesc& kernel,
                                                          const DeviceProfile& device) const {
    (void)kernel;
    (void)device;
    return std::nullopt;
  }
  /// The CTAs a per-tile launch of GEMM `kernel` has on `device` (output tiles x split-K
  /// slices), which a persistent schedule caps at the SM count (sim/gemm_launch.h); 0 when the
  /// model states no tiling (the executor then shares SMs as for a per-tile launch).
  virtual int64_t gemm_ctas(const KernelDesc& kernel, const DeviceProfile& device) const {
    (void)kernel;
    (void)device;
    return 0;
  }
};

/// Which part of a host-side PyTorch op a CPU task stands for (Lin et al., TPDS 2024).
enum class HostPhase : uint8_t {
  kOpBegin,  ///< gap since the previous op (T1) + op start to its first launch (T2)
  kLaunch,   ///< one runtime launch call (T4), plus the gap since the previous launch (T5)
             ///< when it is not the op's first launch
  kOpEnd,    ///< end of the last launch to op end (T3)
  kOpBody,   ///< an op that launches nothing: T1 + its whole host time (T5 in the seed)
  kMarker,   ///< zero-cost bookkeeping (iteration marks)
  /// One cudaGraphLaunch replaying a captured CUDA graph: one runtime call however many GPU
  /// tasks the graph holds (TaskGraph::add_graph_launch).
  kGraphLaunch,
};
/// The number of HostPhase values (the last one + 1): tables indexed by phase size by it.
inline constexpr size_t kHostPhaseCount = static_cast<size_t>(HostPhase::kGraphLaunch) + 1;
std::string_view host_phase_name(HostPhase phase);

struct HostOpDesc {
  std::string_view op_name;  ///< PyTorch op the work belongs to, e.g. "aten::addmm"
  HostPhase phase = HostPhase::kOpBody;
  uint32_t launch_index = 0;  ///< for kLaunch: 0 for the op's first launch
};

/// The seed's host overheads T1-T5 (Lin et al., TPDS 2024) of one host: the parameters of the
/// host-overhead CPU model (calibration/host_overhead_cpu_cost.h), which workloads that measure
/// them (workloads/trace/trace_host_overheads.h) also produce. Plain data.
struct OpHostOverheads {
  std::optional<Duration> t2;
  std::optional<Duration> t3;
  std::optional<Duration> t5;
};
struct HostOverheads {
  Duration t1;  ///< gap between two consecutive ops
  Duration t4;  ///< one launch call
  Duration default_t2;
  Duration default_t3;
  /// T5 between two launches of an op missing from `ops`.
  Duration default_t5;
  /// T5 (whole host time) of an op without launches missing from `ops`.
  Duration default_body;
  /// Per op name; an absent value falls back to the defaults.
  std::map<std::string, OpHostOverheads, std::less<>> ops;
};

class CpuCostModel {
 public:
  virtual ~CpuCostModel() = default;
  virtual Duration host_duration(const HostOpDesc& op) const = 0;
};

enum class CollectiveKind : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kSendRecv,
};
std::string_view collective_kind_name(CollectiveKind kind);

/// One collective call across a group of ranks.
struct CollectiveDesc {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  /// Ranks of the group, in group order. A member is a GPU index (the `device` of the graph rank
  /// that runs on it, see RankInfo), which equals the graph rank id unless the workload
  /// simulates only some ranks.
  std::vector<RankId> members;
  /// Bytes of each member's input buffer (all-reduce, all-gather input, reduce-scatter input,
  /// broadcast payload). For kAllToAll see `send_bytes`.
  int64_t bytes = 0;
  /// kAllToAll only: send_bytes.at(i, j) is what member i sends to member j (n = members.size();
  /// dense or outer-product, see AllToAllSizes); uneven splits (all-to-allv) are the general
  /// case. Empty: bytes / n to every pair.
  AllToAllSizes send_bytes;
  /// Rank symmetry: how many members are simulated (have a task in the task graph); the others
  /// are mirrored by a simulated rank doing the same work at the same time, so the rendezvous
  /// waits for the simulated ones only, while the network still moves every member's bytes.
  /// 0 = every member is simulated.
  uint32_t simulated_members = 0;
  /// The parallel dimension of the group (the transformer's tp / cp / ep / pp / dp groups);
  /// kOther for the rest. Observers split exposed communication by it and find the pipeline
  /// bubble with it; the network ignores it.
  ParallelDim parallel_dim = ParallelDim::kOther;
  /// SMs the communication kernel holds on each member GPU while it runs, when the workload
  /// knows them (Transformer Engine's userbuffers: num_sm of its overlap config); -1: the
  /// network model's (NetworkModel::communication_sms). The network ignores it otherwise.
  int32_t sms = -1;
  /// The GEMMs launched beside it leave its `sms` free (Transformer Engine's userbuffers
  /// overlap with set_sm_margin, its default for the bulk and pipeline methods): they do not lose
  /// CTAs to it under a persistent schedule (sim/gemm_launch.h).
  bool gemm_sm_margin = false;
};

enum class TransferKind : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice };
std::string_view transfer_kind_name(TransferKind kind);

/// A copy on one rank (cudaMemcpy family).
struct TransferDesc {
  TransferKind kind = TransferKind::kHostToDevice;
  RankId rank = 0;
  int64_t bytes = 0;
};

/// Pure timing of collectives and copies, for network models that do not track link state.
class CollectiveCostModel {
 public:
  virtual ~CollectiveCostModel() = default;
  virtual Duration collective_duration(const CollectiveDesc& collective) const = 0;
  virtual Duration transfer_duration(const TransferDesc& transfer) const = 0;
};

}  // namespace upsim
