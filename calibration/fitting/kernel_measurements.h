// Kernel measurement tables for `upsim calibrate` and `upsim validate kernels`: the importers
// that turn measured sweeps into KernelMeasurement rows, and the train / held-out split.
//
// Formats:
//  - upsim measurement CSV (read_measurement_csv), one kernel per line, a header naming the
//    columns in any order (other columns are ignored: a source's own labels may stay):
//      op        required  `gemm` or a memory_op_name() (gelu, softmax, layernorm, relu, ...)
//      dtype     required  dtype_name() (fp32, tf32, fp16, bf16, fp8, int8)
//      m, n      required  gemm: m x n output; memory op: m rows of n elements (n elements: m 1)
//      k         gemm only the reduction dimension
//      batch     optional  gemm batch (default 1)
//      reads, writes  optional  memory op only: tensors of m x n elements the kernel reads and
//                writes (reads > 0, writes >= 0; an empty field or no column: 1 and 1), for an
//                op whose traffic is not one read and one write (silu(a) * b reads two and writes
//                one); a norm's weight is added either way (traffic rule below)
//      time_us   required  measured time of one call, > 0
//      split     optional  `train` or `held_out`; without the column, the alternating split
//    Lines starting with '#' and blank lines are skipped. Every table here is CSV as
//    sim/formats/csv.h reads it: RFC 4180 quoting, blanks around a field dropped.
//    A table whose header has a `head_dim` column is an attention table instead (same reader),
//    one fused-attention kernel per line:
//      op        required  attention_forward, attention_backward or
//                attention_forward_backward (one forward and one backward call, timed together:
//                KernelMeasurement::forward_and_backward)
//      implementation required  flash2, flash3, cudnn, flash1 or triton (AttentionKernel)
//      dtype     required  fp16 or bf16 (any dtype_name())
//      causal    required  true or false
//      batch, heads, seq, head_dim   required  sequences, query heads, positions, head dimension
//      kv_heads  optional  default heads (grouped-query attention: fewer)
//      seq_kv    optional  key positions, default seq
//      time_us or tflops   exactly one: the time of one call, or the kernel's rate, with FLOPs
//                counted as attention_work (roofline_kernel_cost.h) counts them, which is
//                how the FlashAttention papers count (4 seq_q seq_kv head_dim per head, half
//                when causal, x2.5 backward, x3.5 forward + backward)
//      split     optional  as above
//    The row's op is "<op>/<implementation>" (attention_forward/flash3).
//    A `# harness: none` metadata line (either kind of table) says the times are the kernels'
//    own (KernelMeasurement::harness_none); `# harness: fitted` says they hold a fixed per-call
//    cost of the timing loop (a launch floor, an event pair) that the fit describes, and
//    validation compares them through the calibration's harness of their op when it has one; a
//    table that declares neither is read as `fitted` (KernelMeasurement::harness_declared). `#
//    provenance: measured | published | physics` says where the figures come from
//    (KernelMeasurement::provenance).
//    `# curve: NAME` (a memory-op table; NAME of lower-case letters, digits and `_`) gives the
//    table's ops a curve of their own: a kernel whose achieved bandwidth is not its family's
//    (Megatron's jit-fused SwiGLU runs well below a plain elementwise kernel) is fitted
//    and priced apart from the family (KernelMeasurement::curve).
//  - upsim embedding-op CSV (read_embedding_op_csv), one table-batched embedding op per line,
//    a header naming the columns in any order; columns not listed here are ignored:
//      op        required  embedding_forward or embedding_backward
//      dtype     required  weight dtype
//      batch, tables, rows, dim   required  bags per table, tables, rows per table (mean), dim
//      lookups   required  indices of the op over all tables (pooling = lookups / (batch tables))
//      time_us   required  measured time of the op (e.g. the sum of its kernels), > 0
//      index_bytes optional 4 or 8 (default 4); optimizer optional sgd, adagrad,
//                rowwise_adagrad (default sgd); split optional train / held_out (default
//                held_out: the embedding model has no fitted parameters yet)
//  - LLMCompass real-hardware sweeps (test/data/llmcompass, ae/figure5/*/real_hardware/ of
//    PrincetonUniversity/LLMCompass): headerless, fp16, timed as the median wall-clock time of
//    one PyTorch call plus torch.cuda.synchronize():
//      matmul_<gpu>.csv     M, N, K, "<t>ms", "<x>Tflops"     (the code prints M, N, K)
//      softmax_<gpu>.csv, layernorm_<gpu>.csv   M, N, G elements/s
//      gelu_<gpu>.csv       elements, G elements/s
//
// Traffic of a memory op of m rows x n elements in dtype e (memory_op_kernel): every op reads and
// writes m n e bytes (times the row's reads and writes); layernorm also reads its weight and
// bias, 2 n e, rms_norm its weight, n e. row_elements = n for the row-wise ops (softmax,
// layernorm, rms_norm, sum, cross_entropy).
//
// Split (assign_alternating_split): within each source file and op, rows in file order alternate
// train, held out, train, ... (0-based even index = train). The LLMCompass sweeps are powers of
// two, so every held-out point lies between two training points of its sweep.
//
// Errors: CalibrationDataError naming the file and line: unreadable file, missing column, wrong
// field count, a non-number, unknown op or dtype, non-positive time, size or throughput; a
// ParseError naming the file, line and column for malformed quoting.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "calibration/hardware_profile.h"
#include "sim/cost_models.h"

namespace upsim {

class CalibrationDataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Tensors of m x n elements a memory op reads and writes (the table's `reads`, `writes`).
struct MemoryTraffic {
  double reads = 1.0;   ///< > 0
  double writes = 1.0;  ///< >= 0
};

struct KernelMeasurement {
  /// "gemm" or a memory_op_name().
  std::string op;
  KernelDesc kernel;
  /// Measured time of one call, seconds (> 0).
  double seconds = 0.0;
  bool held_out = false;
  /// "file:line" the row came from.
  std::string origin;
  /// The table declares `# harness: none`: the measured time is the kernel's own, and validation
  /// compares it with the model's kernel duration, whatever harness the calibration describes.
  bool harness_none = false;
  /// The table declares its harness: `# harness: none` (above) or `# harness: fitted` (its times
  /// hold a fixed per-call cost of the timing loop, which the fit describes in the calibration's
  /// `measurement` section). LLMCompass sweeps declare `fitted` by their format. A table that
  /// declares neither is read as `fitted`, and the commands say so.
  bool harness_declared = false;
  /// An attention table's `attention_forward_backward` row: `seconds` is one forward plus one
  /// backward call of `kernel`'s shape (kernel.attention.backward is false), as the
  /// FlashAttention benchmarks time their "fwd + bwd" figures. Priced as the two kernels'
  /// durations (kernel_validation.h, fit_attention.h); its FLOPs: attention_row_flops.
  bool forward_and_backward = false;
  /// The table's `# provenance:` (measured, published or physics; kernel_calibration.h), or ""
  /// when it states none.
  std::string provenance;
  /// A memory op's traffic as its table states it (kernel holds the bytes it implies).
  MemoryTraffic traffic;
  /// The GPU the row was measured on when it is not the fit's or the validation's (`--hardware`):
  /// its profile prices the row (fit_kernel_calibration.h). nullptr: that GPU.
  std::shared_ptr<const HardwareProfile> measured_on;
  /// The table's `# curve:` for a memory op: the name of the memory-bound curve its rows fit and
  /// its op is priced on, or "" for the op's default curve (default_curve_of_op()).
  std::string curve;
};

/// The kMemoryBound descriptor of `op` over m rows of n elements (traffic rule above).
KernelDesc memory_op_kernel(MemoryOp op, DType dtype, int64_t m, int64_t n,
                            MemoryTraffic traffic = {});

/// A memory op's row in the table's terms: m rows of n elements and the traffic.
struct MemoryOpShape {
  int64_t m = 0;
  int64_t n = 0;
  MemoryTraffic traffic;
};

/// The m, n and traffic that memory_op_kernel() turns into `kernel` (its op, dtype, bytes and
/// row), taking one write of the m x n tensor when `traffic` is not given; nullopt when there are
/// none (no memory op, no bytes written, bytes that are no whole number of elements).
std::optional<MemoryOpShape> memory_op_shape(const KernelDesc& kernel,
                                             std::optional<MemoryTraffic> traffic = std::nullopt);

/// A measurement of `kernel` (a gemm_kernel(), or a memory-bound kernel memory_op_shape() can
/// state) that took `seconds`; nullopt for any other kernel.
std::optional<KernelMeasurement> measurement_of(const KernelDesc& kernel, double seconds,
                                                std::string origin);

/// The backward kernel of a forward attention kernel's shape (`forward`: kAttention, not backward).
KernelDesc attention_backward_of(const KernelDesc& forward);

/// The FLOPs of an attention row's `kernel` (attention_work), plus its backward's when
/// `forward_and_backward` (KernelMeasurement::forward_and_backward): what its rate counts.
double attention_row_flops(const KernelDesc& kernel, bool forward_and_backward);

/// `rows` as upsim's measurement CSV (columns op, dtype, m, n, k, batch, reads, writes, time_us
/// and split, with time_us to the nanosecond), after the `# key: value` lines of `metadata` in
/// order; read_measurement_csv reads it back. Throws CalibrationDataError for a row the format
/// cannot state (measurement_of) or a metadata key or value with a line break.
std::string measurement_csv_text(const std::vector<KernelMeasurement>& rows,
                                 const std::vector<std::pair<std::string, std::string>>& metadata);

/// The profile that prices `row`: the one it was measured on (KernelMeasurement::measured_on),
/// else `fit`, the fit's or the validation's.
inline const HardwareProfile& profile_of(const KernelMeasurement& row, const HardwareProfile& fit) {
  return row.measured_on ? *row.measured_on : fit;
}

/// A `# curve:` name: lower-case letters, digits and `_`, not empty.
bool is_curve_name(std::string_view name);

std::vector<KernelMeasurement> read_measurement_csv(const std::filesystem::path& path);

/// The key and value of one `# key: value` comment line (key: no blanks), or nullopt for any
/// other line.
std::optional<std::pair<std::string, std::string>> csv_metadata_entry(std::string_view line);

/// The `# key: value` lines of a measurement CSV (bench/gpu writes the GPU, driver, clocks and
/// UTC time so), in file order; other comment lines are skipped. Keys and values are trimmed;
/// an empty key is skipped. Throws CalibrationDataError when the file cannot be read, ParseError
/// when it is not CSV (a `#` inside a quoted field starts no comment).
std::vector<std::pair<std::string, std::string>> read_csv_metadata(
    const std::filesystem::path& path);

std::vector<KernelMeasurement> read_embedding_op_csv(const std::filesystem::path& path);

std::vector<KernelMeasurement> read_llmcompass_matmul(const std::filesystem::path& path);
/// softmax / layernorm files: `op` is MemoryOp::kSoftmax or kLayerNorm.
std::vector<KernelMeasurement> read_llmcompass_rowwise(const std::filesystem::path& path,
                                                       MemoryOp op);
std::vector<KernelMeasurement> read_llmcompass_elementwise(const std::filesystem::path& path,
                                                           MemoryOp op);
/// matmul, softmax, layernorm and gelu `_<gpu>.csv` from `dir`, each split alternately;
/// provenance "published".
std::vector<KernelMeasurement> read_llmcompass_dir(const std::filesystem::path& dir,
                                                   std::string_view gpu);

/// Marks the rows of each (origin file, op) alternately train / held out (see above).
void assign_alternating_split(std::vector<KernelMeasurement>& rows);

}  // namespace upsim
