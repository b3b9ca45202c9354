#include "calibration/calibrated_kernel_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "calibration/attention_kernel_model.h"
#include "calibration/optimizer_kernel_model.h"
#include "sim/config/quantity_parse.h"

namespace upsim {
namespace {

const std::optional<GemmParams>& own_gemm(const KernelCalibration& c, DType dtype) {
  return c.gemm_by_dtype[static_cast<size_t>(dtype)];
}

/// The fit an fp8 GEMM without its own borrows: bf16, else fp16, else `default` (nullopt).
std::optional<DType> fp8_donor(const KernelCalibration& c) {
  for (DType d : {DType::kBf16, DType::kFp16}) {
    if (own_gemm(c, d)) return d;
  }
  return std::nullopt;
}

}  // namespace

CalibratedKernelCost::CalibratedKernelCost(KernelCalibration calibration,
                                           AchievableFractions achievable,
                                           std::string kernel_overhead_note,
                                           int32_t lookup_sm_count)
    : calibration_(std::move(calibration)),
      achievable_(achievable),
      kernel_overhead_note_(std::move(kernel_overhead_note)),
      lookup_sm_count_(lookup_sm_count) {
  if (lookup_sm_count_ < 0) {
    throw std::invalid_argument("calibrated: the lookup SM count must not be negative");
  }
  if (calibration_.kernel_overhead < Duration::zero()) {
    throw std::invalid_argument("calibrated: kernel_overhead must not be negative");
  }
  if (!(achievable_.compute > 0.0 && achievable_.compute <= 1.0) ||
      !(achievable_.memory > 0.0 && achievable_.memory <= 1.0)) {
    throw std::invalid_argument("calibrated: achievable fractions must be in (0, 1]");
  }
  check_gemm_params(calibration_.gemm);
  for (const auto& own : calibration_.gemm_by_dtype) {
    if (own) check_gemm_params(*own);
  }
  for (const auto& [name, curve] : calibration_.curves) {
    check_memory_curve(curve);
  }
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    (void)calibration_.curve_for(static_cast<MemoryOp>(i));
  }
  check_embedding_params(calibration_.embedding);
  for (const auto& section : calibration_.attention) {
    if (section) check_attention_params(section->params);
  }
  if (!(achievable_.fp8_compute >= 0.0 && achievable_.fp8_compute <= 1.0)) {
    throw std::invalid_argument("calibrated: the fp8 achievable fraction must be in [0, 1]");
  }
}

double CalibratedKernelCost::memory_bound_core_seconds(const KernelDesc& kernel,
                                                       const DeviceProfile& device) const {
  const MemoryCurve& own = calibration_.curve_for(kernel.memory_op);
  if (kernel.fused_pointwise_read <= 0.0 && kernel.fused_pointwise_written <= 0.0) {
    return memory_bound_seconds(kernel, device, achievable_, own);
  }
  KernelDesc main = kernel;
  main.bytes_read -= kernel.fused_pointwise_read;
  main.bytes_written -= kernel.fused_pointwise_written;
  KernelDesc pointwise = kernel;
  pointwise.memory_op = MemoryOp::kBinary;
  pointwise.row_elements = 0;
  pointwise.bytes_read = kernel.fused_pointwise_read;
  pointwise.bytes_written = kernel.fused_pointwise_written;
  return memory_bound_seconds(main, device, achievable_, own) +
         memory_bound_seconds(pointwise, device, achievable_,
                              calibration_.curve_for(MemoryOp::kBinary));
}

double CalibratedKernelCost::core_seconds(const KernelDesc& kernel,
                                          const DeviceProfile& device) const {
  switch (kernel.cls) {
    case KernelClass::kGemm:
      return gemm_estimate(kernel, device).seconds;
    case KernelClass::kMemoryBound:
      if (kernel.memory_op == MemoryOp::kOptimizer &&
          kernel.optimizer.kind != OptimizerKind::kUnspecified) {
        const int64_t launches = optimizer_traffic(kernel.optimizer, kernel.dtype).launches;
        return optimizer_seconds(kernel, device, achievable_,
                                 calibration_.curve_for(kernel.memory_op)) +
               static_cast<double>(std::max<int64_t>(launches - 1, 0)) *
                   calibration_.kernel_overhead.seconds();
      }
      return memory_bound_core_seconds(kernel, device);
    case KernelClass::kEmbeddingForward:
    case KernelClass::kEmbeddingBackward:
      if (lookup_sm_count_ > 0 && lookup_sm_count_ != device.sm_count) {
        DeviceProfile stated = device;
        stated.sm_count = lookup_sm_count_;
        return embedding_seconds(kernel, stated, achievable_, calibration_.embedding);
      }
      return embedding_seconds(kernel, device, achievable_, calibration_.embedding);
    case KernelClass::kAttention:
      return attention_seconds(kernel, device, achievable_,
                               calibration_.attention_for(kernel.attention.implementation),
                               calibration_.kernel_overhead);
  }
  throw std::invalid_argument("calibrated: unknown kernel class");
}

int64_t CalibratedKernelCost::gemm_ctas(const KernelDesc& kernel,
                                        const DeviceProfile& device) const {
  if (kernel.cls != KernelClass::kGemm) return 0;
  const GemmEstimate e = gemm_estimate(kernel, device);
  return e.tiles * e.split_k;
}

GemmEstimate CalibratedKernelCost::gemm_estimate(const KernelDesc& kernel,
                                                 const DeviceProfile& device) const {
  if (kernel.dtype != DType::kFp8 || own_gemm(calibration_, DType::kFp8)) {
    return estimate_gemm(kernel, device, achievable_, calibration_.gemm_for(kernel.dtype));
  }
  const std::optional<DType> donor = fp8_donor(calibration_);
  AchievableFractions fp8 = achievable_;
  if (achievable_.fp8_compute > 0.0) fp8.compute = achievable_.fp8_compute;
  GemmParams params = donor ? *own_gemm(calibration_, *donor) : calibration_.gemm;
  // k_overhead is the per-tile prologue / epilogue in K-elements at the donor's rate. Its time
  // does not shrink at the fp8 rate (loading the first stages and writing the 16-bit output
  // tile take what they took), so in fp8 K-elements it is longer by the rate ratio.
  const double donor_peak = device.peak(donor.value_or(DType::kBf16)).flops_per_second();
  const double fp8_peak = device.peak(DType::kFp8).flops_per_second();
  if (donor_peak > 0.0 && fp8_peak > 0.0) {
    params.k_overhead *= (fp8_peak * fp8.compute) / (donor_peak * achievable_.compute);
  }
  return estimate_gemm(kernel, device, fp8, params);
}

std::optional<std::string> CalibratedKernelCost::borrowed_calibration(
    const KernelDesc& kernel, const DeviceProfile& device) const {
  std::vector<std::string> notes;
  const KernelCalibration& c = calibration_;
  if (c.fitted_on != device.name && !c.fitted_on_configuration_of(device)) {
    notes.push_back(fmt::format("calibration fitted on {}, used for {}", c.fitted_on, device.name));
  }
  switch (kernel.cls) {
    case KernelClass::kGemm: {
      if (own_gemm(c, kernel.dtype)) break;
      const std::string_view dtype = dtype_name(kernel.dtype);
      if (kernel.dtype != DType::kFp8) {
        notes.push_back(fmt::format(
            "gemm {}: no {} fit in the calibration fitted on {}, priced with its default GEMM "
            "parameters at the {} peak",
            dtype, dtype, c.fitted_on, dtype));
        break;
      }
      const std::optional<DType> donor = fp8_donor(c);
      const std::string donor_name = donor ? std::string(dtype_name(*donor)) : "default";
      const double fp8_peak = device.peak(DType::kFp8).flops_per_second();
      const double donor_peak = device.peak(donor.value_or(DType::kBf16)).flops_per_second();
      if (fp8_peak <= 0.0 || donor_peak <= 0.0) {
        notes.push_back(
            fmt::format("gemm fp8: device `{}` has no fp8 peak (cannot be priced)", device.name));
      } else if (achievable_.fp8_compute > 0.0) {
        const double ratio =
            fp8_peak * achievable_.fp8_compute / (donor_peak * achievable_.compute);
        notes.push_back(fmt::format(
            "gemm fp8: no fp8 fit in the calibration fitted on {}, {} fit x measured fp8/{} "
            "MAMF ratio {:.3f}",
            c.fitted_on, donor_name, donor ? donor_name : "bf16", ratio));
      } else {
        notes.push_back(fmt::format(
            "gemm fp8: no fp8 fit in the calibration fitted on {} and no measured fp8 rate for "
            "{}, {} fit x datasheet fp8/{} peak ratio {:.3f}",
            c.fitted_on, device.name, donor_name, donor ? donor_name : "bf16",
            fp8_peak / donor_peak));
      }
      break;
    }
    case KernelClass::kMemoryBound: {
      if (kernel.memory_op == MemoryOp::kUnspecified) break;
      const std::string_view op = memory_op_name(kernel.memory_op);
      if (c.measured(op)) break;
      const std::string& curve = c.curve_of_op[static_cast<size_t>(kernel.memory_op)];
      if (c.curve_fitted(kernel.memory_op)) {
        // The elementwise curve is the family of every streaming op (one pass over its
        // operands); only a row-wise op priced on another op's row-wise curve is borrowed.
        if (curve != "elementwise") {
          notes.push_back(
              fmt::format("{}: no measured curve, priced with the {} curve", op, curve));
        }
      } else {
        notes.push_back(fmt::format(
            "{}: no measured curve, priced with the {} curve, which the calibration fitted on "
            "{} does not fit either (its parameters are defaults)",
            op, curve, c.fitted_on));
      }
      break;
    }
    case KernelClass::kAttention: {
      const AttentionKernel impl = kernel.attention.implementation;
      const std::string_view name = attention_kernel_name(impl);
      const auto& own = c.attention[static_cast<size_t>(impl)];
      const auto& flash2 = c.attention[static_cast<size_t>(AttentionKernel::kFlash2)];
      if (own) {
        if (own->provenance == "physics") {
          // The section may be the calibration file's or the scenario's own (kernels.attention).
          notes.push_back(fmt::format(
              "attention {}: priced with a section of physics-only parameters, nothing measured "
              "({})",
              name, own->source.empty() ? "no source given" : own->source));
        }
      } else if (flash2) {
        notes.push_back(fmt::format(
            "attention {}: no {} section in the calibration fitted on {}, priced with its "
            "flash2 (FlashAttention-2) section",
            name, name, c.fitted_on));
      } else {
        notes.push_back(fmt::format(
            "attention {}: no {} section in the calibration fitted on {}, priced with "
            "FlashAttention-2 efficiencies measured on A100 (Dao 2023, arXiv 2307.08691)",
            name, name, c.fitted_on));
      }
      break;
    }
    case KernelClass::kEmbeddingForward:
    case KernelClass::kEmbeddingBackward:
      break;
  }
  const bool adds_overhead =
      kernel.cls != KernelClass::kEmbeddingForward && kernel.cls != KernelClass::kEmbeddingBackward;
  if (adds_overhead && !kernel_overhead_note_.empty()) notes.push_back(kernel_overhead_note_);
  if (notes.empty()) return std::nullopt;
  std::string out = notes.front();
  for (size_t i = 1; i < notes.size(); ++i)
    out += "; " + notes[i];
  return out;
}

Duration CalibratedKernelCost::kernel_duration(const KernelDesc& kernel,
                                               const DeviceProfile& device) const {
  const Duration core = Duration::from_seconds_f(core_seconds(kernel, device));
  if (kernel.cls == KernelClass::kEmbeddingForward ||
      kernel.cls == KernelClass::kEmbeddingBackward) {
    return core;
  }
  return core + calibration_.kernel_overhead;
}

CalibratedKernelCost load_calibrated(const ConfigNode& node, const HardwareProfile& hardware) {
  node.get_choice("model", {"calibrated"});
  const ConfigNode file = node.child("calibration").is_map() ? node.child("calibration")
                                                             : node.load_reference("calibration");
  KernelCalibration calibration = load_kernel_calibration(file);
  std::string kernel_overhead_note;
  if (node.has("kernel_overhead")) {
    // 0 .. 1 ms: measured per-kernel overheads are a few microseconds.
    calibration.kernel_overhead =
        node.get_duration_in("kernel_overhead", Duration::zero(), Duration::from_ms(1));
  } else if (hardware.kernel_overhead) {
    calibration.kernel_overhead = *hardware.kernel_overhead;
  } else {
    kernel_overhead_note = fmt::format(
        "kernel overhead: the hardware profile of {} states none, the calibration's {} (its "
        "fitted GPU's)",
        hardware.device.name, format_duration(calibration.kernel_overhead));
  }
  // A scenario may state the attention kernels its software runs (e.g. a FlashAttention
  // generation other than the calibration's).
  if (node.has("attention")) {
    const auto sections = read_attention_sections(node.child("attention"));
    for (size_t i = 0; i < kAttentionKernelCount; ++i) {
      if (sections[i]) calibration.attention[i] = sections[i];
    }
  }
  try {
    return CalibratedKernelCost(std::move(calibration), hardware.achievable,
                                std::move(kernel_overhead_note), hardware.stated_sm_count);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

}  // namespace upsim
