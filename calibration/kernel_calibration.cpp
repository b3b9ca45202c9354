#include "calibration/kernel_calibration.h"

#include "calibration/hardware_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "sim/config/quantity_parse.h"

namespace upsim {
namespace {

constexpr std::string_view kElementwiseCurve = "elementwise";

// The documented ranges of a calibration file's values (kernel_calibration.h). Scales multiply a
// roofline time and fits land near 1 (0.62 .. 1.28 in the shipped files), tiles are CUTLASS /
// cuBLAS thread-block tiles (64 .. 256), latencies are microseconds.
constexpr double kMinScale = 0.01;
constexpr double kMaxScale = 100.0;
constexpr int64_t kMaxTile = 4096;
constexpr double kMaxKOverhead = 1e6;

double scale(const ConfigNode& node, std::string_view key) {
  return node.get_double_in(key, kMinScale, kMaxScale);
}
Duration latency_or(const ConfigNode& node, std::string_view key, Duration default_value) {
  return node.get_duration_in_or(key, Duration::zero(), kMaxConfiguredLatency, default_value);
}

GemmParams read_gemm(const ConfigNode& node) {
  GemmParams p;
  p.tile_m = node.get_int_in("tile_m", 1, kMaxTile);
  p.tile_n = node.get_int_in("tile_n", 1, kMaxTile);
  p.k_overhead = node.get_double_in("k_overhead", 0.0, kMaxKOverhead);
  p.compute_scale = scale(node, "compute_scale");
  p.memory_scale = scale(node, "memory_scale");
  try {
    check_gemm_params(p);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
  return p;
}

MemoryCurve read_curve(const ConfigNode& node) {
  MemoryCurve c;
  c.bandwidth_scale = scale(node, "bandwidth_scale");
  c.long_row_bytes = node.get_int_in("long_row_bytes", 0, int64_t{1} << 40);
  c.long_row_read_passes = node.get_double_in("long_row_read_passes", 1.0, 64.0);
  c.full_reread_row_bytes = node.get_int_in_or("full_reread_row_bytes", 0, int64_t{1} << 40, 0);
  try {
    check_memory_curve(c);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
  return c;
}

EmbeddingParams read_embedding(const ConfigNode& node) {
  EmbeddingParams p;
  p.l2_usable_fraction = node.get_double("l2_usable_fraction");
  p.warps_per_sm = node.get_int_in("warps_per_sm", 1, 1024);
  p.dram_scale = scale(node, "dram_scale");
  p.l2_scale = scale(node, "l2_scale");
  p.dim_factor_32 = scale(node, "dim_factor_32");
  p.dim_factor_64 = scale(node, "dim_factor_64");
  p.sort_radix_bits = node.get_int_in("sort_radix_bits", 1, 32);
  // The latency terms are optional so that files written before them keep loading; a missing
  // key keeps the EmbeddingParams default (the V100 trace fit).
  p.sort_single_tile_items =
      node.get_int_in_or("sort_single_tile_items", 0, int64_t{1} << 30, p.sort_single_tile_items);
  p.kernel_floor = latency_or(node, "kernel_floor", p.kernel_floor);
  p.forward_latency = latency_or(node, "forward_latency", p.forward_latency);
  p.forward_row_latency = latency_or(node, "forward_row_latency", p.forward_row_latency);
  p.index_step_latency = latency_or(node, "index_step_latency", p.index_step_latency);
  p.sort_tile_latency = latency_or(node, "sort_tile_latency", p.sort_tile_latency);
  p.sort_upsweep_latency = latency_or(node, "sort_upsweep_latency", p.sort_upsweep_latency);
  p.sort_pass_latency = latency_or(node, "sort_pass_latency", p.sort_pass_latency);
  p.encode_latency = latency_or(node, "encode_latency", p.encode_latency);
  p.update_latency = latency_or(node, "update_latency", p.update_latency);
  try {
    check_embedding_params(p);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
  return p;
}

HarnessOverhead read_harness(const ConfigNode& node) {
  HarnessOverhead h{node.get_duration_in("floor", Duration::zero(), kMaxConfiguredLatency),
                    node.get_duration_in("offset", Duration::zero(), kMaxConfiguredLatency)};
  h.compute_speedup = node.get_double_in_or("compute_speedup", kMinScale, kMaxScale, 1.0);
  return h;
}

std::string valid_ops() {
  std::string out;
  for (std::string_view name : kMemoryOpNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string gemm_yaml(const GemmParams& p) {
  return fmt::format(
      "{{tile_m: {}, tile_n: {}, k_overhead: {}, compute_scale: {}, memory_scale: {}}}", p.tile_m,
      p.tile_n, p.k_overhead, p.compute_scale, p.memory_scale);
}

/// A YAML double-quoted scalar.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The keys read_attention_params reads.
constexpr std::array<std::string_view, 9> kAttentionParamKeys = {"block_m",
                                                                 "forward_efficiency_64",
                                                                 "forward_efficiency_128",
                                                                 "forward_efficiency_256",
                                                                 "backward_efficiency_64",
                                                                 "backward_efficiency_128",
                                                                 "backward_efficiency_256",
                                                                 "half_efficiency_span",
                                                                 "backward_launches"};

}  // namespace

AttentionParams read_attention_params(const ConfigNode& node) {
  AttentionParams p;
  p.block_m = node.get_int_in_or("block_m", 1, kMaxTile, p.block_m);
  p.forward_efficiency_64 = node.get_double_or("forward_efficiency_64", p.forward_efficiency_64);
  p.forward_efficiency_128 = node.get_double_or("forward_efficiency_128", p.forward_efficiency_128);
  p.forward_efficiency_256 = node.get_double_or("forward_efficiency_256", p.forward_efficiency_128);
  p.backward_efficiency_64 = node.get_double_or("backward_efficiency_64", p.backward_efficiency_64);
  p.backward_efficiency_128 =
      node.get_double_or("backward_efficiency_128", p.backward_efficiency_128);
  p.backward_efficiency_256 =
      node.get_double_or("backward_efficiency_256", p.backward_efficiency_128);
  p.half_efficiency_span =
      node.get_double_in_or("half_efficiency_span", 0.0, 1e9, p.half_efficiency_span);
  p.backward_launches = node.get_int_in_or("backward_launches", 1, 64, p.backward_launches);
  try {
    check_attention_params(p);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
  return p;
}

std::array<std::optional<AttentionCalibration>, kAttentionKernelCount> read_attention_sections(
    const ConfigNode& node) {
  if (!node.is_map()) {
    node.fail(fmt::format("must be a map (per implementation: {})", attention_kernel_names()));
  }
  std::array<std::optional<AttentionCalibration>, kAttentionKernelCount> out{};
  bool per_implementation = false;
  for (const auto& entry : node.map_entries())
    per_implementation |= parse_attention_kernel(entry.first).has_value();
  if (!per_implementation) {
    for (const auto& [name, value] : node.map_entries()) {
      if (std::find(kAttentionParamKeys.begin(), kAttentionParamKeys.end(), name) ==
          kAttentionParamKeys.end()) {
        value.fail(fmt::format(
            "neither an attention implementation ({}) nor a parameter of the attention model ({})",
            attention_kernel_names(), fmt::join(kAttentionParamKeys, ", ")));
      }
    }
    out[static_cast<size_t>(AttentionKernel::kFlash2)] =
        AttentionCalibration{read_attention_params(node), "", ""};
    return out;
  }
  for (const auto& [name, value] : node.map_entries()) {
    const std::optional<AttentionKernel> kernel = parse_attention_kernel(name);
    if (!kernel) {
      value.fail(fmt::format(
          "unknown attention implementation `{}`; valid: {} (the parameters go inside an "
          "implementation's section, or all directly under `attention:` for flash2)",
          name, attention_kernel_names()));
    }
    if (!value.is_map()) value.fail("must be a map of attention-model parameters");
    AttentionCalibration section;
    if (value.has("provenance")) {
      section.provenance = value.get_choice("provenance", kProvenanceNames);
    }
    section.source = value.get_string_or("source", "");
    section.params = read_attention_params(value);
    out[static_cast<size_t>(*kernel)] = std::move(section);
  }
  return out;
}

AttentionParams KernelCalibration::attention_for(AttentionKernel implementation) const {
  if (const auto& own = attention[static_cast<size_t>(implementation)]) return own->params;
  if (const auto& flash2 = attention[static_cast<size_t>(AttentionKernel::kFlash2)]) {
    return flash2->params;
  }
  return AttentionParams{};
}

bool KernelCalibration::measured(std::string_view op) const {
  if (measurement.contains(std::string(op))) return true;
  return std::any_of(fit_errors.begin(), fit_errors.end(), [&](const FitError& f) {
    return std::string_view(f.op).substr(0, f.op.find('/')) == op;
  });
}

bool KernelCalibration::curve_fitted(MemoryOp op) const {
  const std::string& curve = curve_of_op[static_cast<size_t>(op)];
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    if (curve_of_op[i] == curve && measured(kMemoryOpNames[i])) return true;
  }
  return false;
}

bool KernelCalibration::fitted_on_configuration_of(const DeviceProfile& device) const {
  if (!fitted_on_device || device.compute_capability <= 0 || device.sm_count <= 0) return false;
  const FittedDevice& f = *fitted_on_device;
  return f.compute_capability == device.compute_capability && f.sm_count == device.sm_count;
}

const GemmParams& KernelCalibration::gemm_for(DType dtype) const {
  const std::optional<GemmParams>& own = gemm_by_dtype[static_cast<size_t>(dtype)];
  return own ? *own : gemm;
}

const MemoryCurve& KernelCalibration::curve_for(MemoryOp op) const {
  const std::string& name = curve_of_op[static_cast<size_t>(op)];
  const auto it = curves.find(name);
  if (it == curves.end()) {
    throw std::invalid_argument(fmt::format(
        "calibration: op `{}` maps to curve `{}`, which is not defined", memory_op_name(op), name));
  }
  return it->second;
}

std::array<std::string, kMemoryOpCount> default_curve_of_op() {
  std::array<std::string, kMemoryOpCount> out;
  out.fill(std::string(kElementwiseCurve));
  out[static_cast<size_t>(MemoryOp::kSoftmax)] = "softmax";
  out[static_cast<size_t>(MemoryOp::kLayerNorm)] = "layernorm";
  // No measured sweep of their own: the row-wise ops take the curve of the closest measured op
  // (one read and one write pass per row, as layer norm and softmax).
  out[static_cast<size_t>(MemoryOp::kRmsNorm)] = "layernorm";
  out[static_cast<size_t>(MemoryOp::kCrossEntropy)] = "softmax";
  return out;
}

KernelCalibration load_kernel_calibration(const ConfigNode& node) {
  node.expect_map("a kernel calibration, as `upsim calibrate kernels` writes it");
  KernelCalibration c;
  c.fitted_on = node.get_string("fitted_on");
  if (node.has("fitted_on_device")) {
    const ConfigNode d = node.child("fitted_on_device");
    d.expect_map("the fitted GPU's {compute_capability, sm_count, sm_boost_clock_mhz}");
    FittedDevice f;
    f.compute_capability = compute_capability(d.child("compute_capability"));
    f.sm_count = static_cast<int32_t>(d.get_int_in("sm_count", 1, 100000));
    f.sm_boost_clock_mhz = static_cast<int32_t>(d.get_int_in("sm_boost_clock_mhz", 1, 100000));
    c.fitted_on_device = f;
  }
  c.source = node.get_string("source");
  // 0 .. 1 ms: measured launch floors are a few microseconds (the seed's 5 us).
  c.kernel_overhead =
      node.read_for(kCalibrationKernelOverheadUse)
          .get_duration_in("kernel_overhead", Duration::zero(), Duration::from_ms(1));

  const ConfigNode gemm = node.child("gemm");
  if (!gemm.is_map()) gemm.fail("must be a map from `default` or a dtype to GEMM parameters");
  bool has_default = false;
  for (const auto& [key, value] : gemm.map_entries()) {
    if (key == "default") {
      c.gemm = read_gemm(value);
      has_default = true;
      continue;
    }
    const std::optional<DType> dtype = parse_dtype(key);
    if (!dtype) value.fail(fmt::format("unknown dtype `{}` (or `default`)", key));
    c.gemm_by_dtype[static_cast<size_t>(*dtype)] = read_gemm(value);
  }
  if (!has_default) gemm.fail("missing required key `default`");

  const ConfigNode memory = node.child("memory_bound");
  const ConfigNode curves = memory.child("curves");
  if (!curves.is_map() || curves.size() == 0) curves.fail("must be a non-empty map of curves");
  for (const auto& [name, value] : curves.map_entries()) {
    c.curves.emplace(name, read_curve(value));
  }
  const ConfigNode ops = memory.child("ops");
  if (!ops.is_map()) ops.fail("must be a map from op name to curve name");
  std::array<bool, kMemoryOpCount> seen{};
  for (const auto& [name, value] : ops.map_entries()) {
    const std::optional<MemoryOp> op = parse_memory_op(name);
    if (!op) value.fail(fmt::format("unknown op `{}`; valid: {}", name, valid_ops()));
    const std::string curve = value.as_string();
    if (!c.curves.contains(curve)) {
      value.fail(fmt::format("curve `{}` is not defined under memory_bound.curves", curve));
    }
    c.curve_of_op[static_cast<size_t>(*op)] = curve;
    seen[static_cast<size_t>(*op)] = true;
  }
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    if (!seen[i]) ops.fail(fmt::format("missing op `{}`", kMemoryOpNames[i]));
  }

  c.embedding = read_embedding(node.child("embedding"));
  if (const auto attention = node.read_for(kCalibrationAttentionUse).optional_child("attention")) {
    c.attention = read_attention_sections(*attention);
  }

  if (const auto measurement = node.optional_child("measurement")) {
    for (const auto& [name, value] : measurement->map_entries()) {
      if (name != "gemm" && !parse_memory_op(name)) {
        value.fail(fmt::format("unknown op `{}`; valid: gemm, {}", name, valid_ops()));
      }
      c.measurement.emplace(name, read_harness(value.read_for(kCalibrationValidationUse)));
    }
  }
  if (const auto fit = node.optional_child("fit")) {
    c.split = fit->read_for(kCalibrationValidationUse).get_string("split");
    for (const ConfigNode& row : fit->child("errors").items()) {
      FitError e;
      e.op = row.get_string("op");
      const ConfigNode numbers = row.read_for(kCalibrationValidationUse);
      e.train_points = static_cast<size_t>(numbers.get_int("train_points"));
      e.held_out_points = static_cast<size_t>(numbers.get_int("held_out_points"));
      e.train_geomean = numbers.get_double("train_geomean");
      e.held_out_geomean = numbers.get_double("held_out_geomean");
      if (row.has("data")) {
        e.provenance = numbers.get_choice("data", {"measured", "published", "physics", "mixed"});
      }
      c.fit_errors.push_back(e);
    }
  }
  return c;
}

std::string kernel_calibration_yaml(const KernelCalibration& c, const std::string& header) {
  std::string out = header;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += fmt::format("fitted_on: {}\n", quoted(c.fitted_on));
  if (c.fitted_on_device) {
    const FittedDevice& d = *c.fitted_on_device;
    out += fmt::format(
        "fitted_on_device: {{compute_capability: {}.{}, sm_count: {}, sm_boost_clock_mhz: {}}}\n",
        d.compute_capability / 10, d.compute_capability % 10, d.sm_count, d.sm_boost_clock_mhz);
  }
  out += fmt::format("source: {}\n", quoted(c.source));
  out += fmt::format("kernel_overhead: {}\n", format_duration_exact(c.kernel_overhead));
  out += "gemm:\n";
  out += fmt::format("  default: {}\n", gemm_yaml(c.gemm));
  for (size_t i = 0; i < kDTypeCount; ++i) {
    if (c.gemm_by_dtype[i]) {
      out += fmt::format("  {}: {}\n", dtype_name(static_cast<DType>(i)),
                         gemm_yaml(*c.gemm_by_dtype[i]));
    }
  }
  out += "memory_bound:\n  curves:\n";
  for (const auto& [name, curve] : c.curves) {
    // full_reread_row_bytes only when it ramps (a step is the schema's default).
    const std::string ramp =
        curve.full_reread_row_bytes > curve.long_row_bytes
            ? fmt::format(", full_reread_row_bytes: {}", curve.full_reread_row_bytes)
            : std::string();
    out += fmt::format(
        "    {}: {{bandwidth_scale: {}, long_row_bytes: {}, long_row_read_passes: {}{}}}\n", name,
        curve.bandwidth_scale, curve.long_row_bytes, curve.long_row_read_passes, ramp);
  }
  out += "  ops:\n";
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    out += fmt::format("    {}: {}\n", kMemoryOpNames[i], c.curve_of_op[i]);
  }
  const EmbeddingParams& e = c.embedding;
  out += fmt::format(
      "embedding:\n  l2_usable_fraction: {}\n  warps_per_sm: {}\n  dram_scale: {}\n"
      "  l2_scale: {}\n  dim_factor_32: {}\n  dim_factor_64: {}\n  sort_radix_bits: {}\n"
      "  sort_single_tile_items: {}\n",
      e.l2_usable_fraction, e.warps_per_sm, e.dram_scale, e.l2_scale, e.dim_factor_32,
      e.dim_factor_64, e.sort_radix_bits, e.sort_single_tile_items);
  for (const auto& [key, value] :
       {std::pair<std::string_view, Duration>{"kernel_floor", e.kernel_floor},
        {"forward_latency", e.forward_latency},
        {"forward_row_latency", e.forward_row_latency},
        {"index_step_latency", e.index_step_latency},
        {"sort_tile_latency", e.sort_tile_latency},
        {"sort_upsweep_latency", e.sort_upsweep_latency},
        {"sort_pass_latency", e.sort_pass_latency},
        {"encode_latency", e.encode_latency},
        {"update_latency", e.update_latency}}) {
    out += fmt::format("  {}: {}\n", key, format_duration_exact(value));
  }
  bool attention_header = false;
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    if (!c.attention[i]) continue;
    if (!attention_header) out += "attention:\n";
    attention_header = true;
    const AttentionCalibration& section = *c.attention[i];
    const AttentionParams& a = section.params;
    out += fmt::format("  {}:\n", attention_kernel_name(static_cast<AttentionKernel>(i)));
    if (!section.provenance.empty()) out += fmt::format("    provenance: {}\n", section.provenance);
    if (!section.source.empty()) out += fmt::format("    source: {}\n", quoted(section.source));
    out += fmt::format(
        "    block_m: {}\n    forward_efficiency_64: {}\n    forward_efficiency_128: {}\n"
        "    forward_efficiency_256: {}\n    backward_efficiency_64: {}\n"
        "    backward_efficiency_128: {}\n    backward_efficiency_256: {}\n"
        "    half_efficiency_span: {}\n    backward_launches: {}\n",
        a.block_m, a.forward_efficiency_64, a.forward_efficiency_128, a.forward_efficiency_256,
        a.backward_efficiency_64, a.backward_efficiency_128, a.backward_efficiency_256,
        a.half_efficiency_span, a.backward_launches);
  }
  if (!c.measurement.empty()) {
    out += "measurement:\n";
    for (const auto& [name, h] : c.measurement) {
      out += fmt::format("  {}: {{floor: {}, offset: {}", name, format_duration_exact(h.floor),
                         format_duration_exact(h.offset));
      if (h.compute_speedup != 1.0) out += fmt::format(", compute_speedup: {}", h.compute_speedup);
      out += "}\n";
    }
  }
  if (!c.split.empty() || !c.fit_errors.empty()) {
    out += "fit:\n";
    out += fmt::format("  split: {}\n", quoted(c.split));
    out += "  errors:\n";
    for (const FitError& f : c.fit_errors) {
      const std::string data = f.provenance.empty() ? "" : fmt::format(", data: {}", f.provenance);
      out += fmt::format(
          "    - {{op: {}{}, train_points: {}, held_out_points: {}, train_geomean: {:.4f}, "
          "held_out_geomean: {:.4f}}}\n",
          f.op, data, f.train_points, f.held_out_points, f.train_geomean, f.held_out_geomean);
    }
  }
  return out;
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> kernel_calibration_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"fitted_on", "hardware profile name of the GPU the sweeps ran on"},
      {"fitted_on_device.compute_capability", "that GPU's compute capability"},
      {"fitted_on_device.sm_count", "that GPU's SM count"},
      {"fitted_on_device.sm_boost_clock_mhz", "that GPU's boost clock (recorded)"},
      {"source", "where the measurements came from"},
      {"kernel_overhead", "time added to every kernel when the hardware profile states none"},
      {"gemm.*.tile_m", "GEMM output tile rows of one CTA (elements)"},
      {"gemm.*.tile_n", "GEMM output tile columns of one CTA (elements)"},
      {"gemm.*.k_overhead", "a tile's prologue and epilogue, in units of one k step"},
      {"gemm.*.compute_scale", "fitted factor on the achievable compute rate"},
      {"gemm.*.memory_scale", "fitted factor on the achievable HBM bandwidth"},
      {"memory_bound.curves.*.bandwidth_scale", "fitted factor on the achievable HBM bandwidth"},
      {"memory_bound.curves.*.long_row_bytes",
       "row size above which a row is read more than once; 0: never"},
      {"memory_bound.curves.*.long_row_read_passes",
       "reads of a row at full_reread_row_bytes and beyond"},
      {"memory_bound.curves.*.full_reread_row_bytes",
       "row size at which every pass rereads the row; 0: a step at long_row_bytes"},
      {"memory_bound.ops.*", "the curve this memory-bound op is priced with"},
      {"embedding.l2_usable_fraction", "share of L2 that holds table rows"},
      {"embedding.warps_per_sm", "resident lookup warps per SM, one bag each"},
      {"embedding.dram_scale", "fitted factor on the achievable HBM bandwidth of lookups"},
      {"embedding.l2_scale", "fitted factor on the L2 bandwidth of lookups"},
      {"embedding.dim_factor_32", "time factor of rows 32 wide or narrower"},
      {"embedding.dim_factor_64", "time factor of rows 33 to 64 wide"},
      {"embedding.sort_radix_bits", "key bits sorted per radix pass in the backward"},
      {"embedding.sort_single_tile_items",
       "the backward's sort fits one tile up to this many indices"},
      {"embedding.kernel_floor", "the shortest an FBGEMM kernel takes"},
      {"embedding.forward_latency", "fixed latency of the forward lookup kernel"},
      {"embedding.forward_row_latency", "forward latency per looked-up row of the longest bag"},
      {"embedding.index_step_latency", "backward index linearisation, per 32 lookups of a bag"},
      {"embedding.sort_tile_latency", "backward sort when it fits one tile"},
      {"embedding.sort_upsweep_latency", "backward sort's histogram and scan"},
      {"embedding.sort_pass_latency", "backward sort, per radix pass"},
      {"embedding.encode_latency", "backward run-length encoding of the sorted indices"},
      {"embedding.update_latency", "backward row update kernels"},
      {"attention.*.provenance", "measured, published or physics: where the parameters come from"},
      {"attention.*.source", "where the figures are"},
      {"attention.*.block_m", "query (forward) or key (backward) rows of one thread block"},
      {"attention.*.forward_efficiency_*", "forward share of the peak at this head dimension"},
      {"attention.*.backward_efficiency_*", "backward share of the peak at this head dimension"},
      {"attention.*.half_efficiency_span",
       "keys per query at which the efficiency is half its peak"},
      {"attention.*.backward_launches", "kernels one backward launches"},
      {"measurement.*.floor", "validation only: the harness's shortest measured time"},
      {"measurement.*.offset", "validation only: the harness's time added to each kernel"},
      {"measurement.*.compute_speedup",
       "validation only: the harness's GEMM rate over the sustained one"},
      {"fit.split", "validation only: how the points were split into training and held out"},
      {"fit.errors[].op", "the fitted op"},
      {"fit.errors[].data", "provenance of its points: measured, published, physics or mixed"},
      {"fit.errors[].train_points", "training points"},
      {"fit.errors[].held_out_points", "held-out points"},
      {"fit.errors[].train_geomean", "geometric-mean error on the training points"},
      {"fit.errors[].held_out_geomean", "geometric-mean error on the held-out points"},
  };
  return kMeanings;
}

}  // namespace upsim
