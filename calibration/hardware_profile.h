// Hardware profiles: configs/hardware/*.yaml -> the DeviceProfile the engine hands to kernel cost
// models, plus the measured achievable fractions of the datasheet peaks.
//
// Contract:
//  - Every quantity in a profile file carries its unit ("19.5TFLOP/s", "1555GB/s", "40MiB") and a
//    comment naming its source (datasheet, a file under test/data, or a paper).
//  - Zero or negative values are ConfigErrors at the offending key. A dtype without a dedicated
//    unit on the device is omitted from `peak_flops` and reads as a zero FlopRate.
//  - Every value lies in a documented range (kHardwareRanges below), or the file is a ConfigError
//    naming the key and the range. The ranges reach far beyond today's GPUs (a B200 peaks at
//    4.5 PFLOP/s dense fp8, 8 TB/s HBM, 192 GB, 148 SMs, ~2 GHz), so a what-if ("10x the HBM
//    bandwidth") stays inside, while a typo or a unit slip (sm_count: 1e9, a clock in Hz,
//    "19.5FLOP/s") that would overflow an int or price kernels for days is stopped.
//  - Peaks follow the SMs and their clock: peak(dtype) = SMs x clock x the per-SM rate per
//    cycle. The shipped profiles pin the peaks (datasheet dense peaks per dtype), which fixes
//    the per-SM rate as peak / (SMs x clock) at the SM count and clock the peaks are stated at:
//    `peak_flops_at: {sm_count, sm_boost_clock_mhz}`, by default the profile's own `sm_count`
//    and `sm_boost_clock_mhz` as its file writes them (ConfigNode::as_written: before --set or
//    a sweep's override), a default written into the resolved scenario so that it runs again
//    alike. A profile whose sm_count or clock differs from peak_flops_at (a what-if) scales every
//    peak by (sm_count / peak_flops_at.sm_count) x (clock / peak_flops_at.sm_boost_clock_mhz).
//    What is stated relative to the peaks follows them: the achievable fractions, the fp8 rate,
//    the calibration files' fitted GEMM scales and the attention efficiencies (all fractions of
//    the peak). The L2 bandwidth scales with the clock, not with the SM count: the whitepapers
//    state it per clock (A100 5120 bytes/clk, V100 2048 bytes/clk: NVIDIA A100 Tensor Core GPU
//    Architecture whitepaper, "L2 cache read bandwidth"; as remembered, not re-checked in this
//    session), and it is delivered by the L2 slices of the memory partitions, whose number does
//    not change with the SMs. HBM bandwidth and size scale with neither (the memory clock and
//    the stacks set them), and neither do times fitted in seconds (kernel_overhead, the
//    embedding model's latencies and floors, the host overheads). Embedding lookups are priced
//    at the stated SM count (calibrated_kernel_cost.h says why).
//  - Clocks and power: kernels run at the boost clock unless the profile states the clock it
//    holds under sustained load, `sustained_sm_clock_mhz` (at most sm_boost_clock_mhz: a measured
//    or vendor-stated clock of a power- or thermally limited part), or a power cap,
//    `power_limit_w` below `tdp_w` (both in W; the board's cap and its rated TDP), from which the
//    clock follows as boost x (power_limit_w / tdp_w)^(1/3): CMOS dynamic power is a C V^2 f and
//    the voltage follows the clock in the DVFS range, so power ~ f^3 (a physics prior, named so;
//    a measured sustained clock replaces it). Either scales every compute peak and the L2
//    bandwidth by clock / boost (after the what-if scaling above), not the HBM bandwidth; the
//    achievable fractions and fitted scales follow the peaks. Giving both, one power key alone,
//    a limit above the TDP or a sustained clock above the boost clock is a ConfigError.
//    DeviceProfile::sustained_sm_clock_mhz records the clock (0: boost).
//  - `pcie_generation` gives the host link (pcie_x16_bandwidth), which also caps a fabric's
//    PCIe links at the GPU (topology/fabric_loader.h).
//  - The achievable fractions are not part of DeviceProfile (a sim/ type that holds datasheet
//    facts only): they describe what a real software stack reaches on that device, and they are
//    parameters of one kernel model (the roofline). They live in the same file as the peaks they
//    divide, so HardwareProfile carries both and tools/ passes `achievable` to the roofline.
//  - `kernel_overhead` (optional, 0 .. 1 ms) is the GPU time every kernel takes beyond its
//    modelled work on this GPU: a trivial kernel's execution plus the gap before the next kernel
//    of a busy stream can start (the engine puts no gap between a stream's kernels). Measured
//    from GPU-side kernel timestamps (Kineto traces) where test/data has them, else borrowed
//    and said so in the file. The calibrated kernel model adds it to every GEMM, memory-bound
//    and attention kernel (calibrated_kernel_cost.h); a profile without it gets the calibration
//    file's kernel_overhead (its fitted GPU's) and a borrowed-calibration note. The launch call
//    on the host is the host overhead T4 (configs/host/); the embedding model prices each
//    FBGEMM kernel with its own kernel_floor (2.032 us, fitted on V100 traces).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/cost_models.h"

namespace upsim {

/// A `compute_capability` of "major.minor" (one digit each, as NVIDIA's CUDA GPU table writes
/// it: 7.0, 8.0, 9.0, 10.0): major x 10 + minor. ConfigError at the node otherwise.
int32_t compute_capability(const ConfigNode& node);

/// Fractions of the datasheet peaks that real kernels reach, each in (0, 1].
struct AchievableFractions {
  /// Achieved / datasheet arithmetic rate (best measured GEMM over the datasheet peak).
  double compute = 1.0;
  /// Achieved / datasheet HBM bandwidth (best measured streaming kernel over the datasheet).
  double memory = 1.0;
  /// Achieved / datasheet fp8 arithmetic rate (best measured fp8 matmul over the fp8 peak);
  /// 0 = not measured. The calibrated model prices an fp8 GEMM without an fp8 fit at this rate
  /// (calibrated_kernel_cost.h).
  double fp8_compute = 0.0;
};

/// The documented ranges of a profile's values (inclusive).
struct HardwareRanges {
  FlopRate min_peak = FlopRate::flops_per_second(1e9);                 ///< 1 GFLOP/s
  FlopRate max_peak = FlopRate::flops_per_second(1e18);                ///< 1 EFLOP/s per GPU
  Bandwidth min_memory_bandwidth = Bandwidth::bytes_per_second(1e9);   ///< 1 GB/s
  Bandwidth max_memory_bandwidth = Bandwidth::bytes_per_second(1e15);  ///< 1 PB/s
  int64_t min_memory_bytes = int64_t{1} << 20;                         ///< HBM: 1 MiB
  int64_t max_memory_bytes = int64_t{1} << 50;                         ///< HBM: 1 PiB
  int64_t min_l2_bytes = int64_t{1} << 10;                             ///< 1 KiB
  int64_t max_l2_bytes = int64_t{1} << 36;                             ///< 64 GiB
  int64_t max_sm_count = 65'536;
  int64_t max_sm_clock_mhz = 100'000;  ///< 100 GHz
};
inline constexpr HardwareRanges kHardwareRanges{};

/// Uses of a profile's keys (ConfigNode::read_for): what each group feeds, so that the
/// composition root can name the groups no active model reads. name and hbm.size are read
/// unconditionally.
/// peak_flops, peak_flops_at, sm_count, sm_boost_clock_mhz, achievable.compute_fraction: every
/// kernel model prices arithmetic at the peaks.
inline constexpr std::string_view kHardwareComputeUse = "hardware compute";
/// hbm.bandwidth, achievable.memory_fraction: kernel models, and device-to-device copies.
inline constexpr std::string_view kHardwareMemoryUse = "hardware memory bandwidth";
/// l2.size, l2.bandwidth: the calibrated model's embedding-bag model.
inline constexpr std::string_view kHardwareL2Use = "hardware L2";
/// achievable.fp8_compute_fraction: the calibrated model's fp8 GEMMs.
inline constexpr std::string_view kHardwareFp8Use = "hardware fp8 rate";
/// kernel_overhead: the calibrated model, unless its section states its own.
inline constexpr std::string_view kHardwareKernelOverheadUse = "hardware kernel overhead";
/// pcie_generation: host <-> device copies (the collective models' host link, the fabric's
/// PCIe links at the GPUs).
inline constexpr std::string_view kHardwareHostLinkUse = "hardware host link";

struct HardwareProfile {
  DeviceProfile device;
  AchievableFractions achievable;
  /// GPU time per kernel beyond its modelled work (see the contract); nullopt = not stated.
  std::optional<Duration> kernel_overhead;
  /// The SM count the stated peaks hold at (peak_flops_at.sm_count): the chip as its profile
  /// states it, of which `device.sm_count` may be a what-if.
  int32_t stated_sm_count = 0;
  /// Device names CUDA reports for this GPU (cudaGetDeviceProperties, as Kineto's
  /// deviceProperties record them) that the name rule does not match to `device.name`
  /// (`recorded_names`, optional): a trace recorded under one ran on this profile's GPU.
  std::vector<std::string> recorded_names;
};

/// Reads a hardware profile document (schema in configs/hardware/a100_sxm4_40gb.yaml):
///   name, compute_capability (optional, "major.minor"), peak_flops.{fp32,tf32,fp16,bf16,fp8,
///   int8}, peak_flops_at.{sm_count,
///   sm_boost_clock_mhz} (optional, see the contract), hbm.{bandwidth,size},
///   l2.{size, bandwidth (optional)}, sm_count, sm_boost_clock_mhz, sustained_sm_clock_mhz or
///   tdp_w + power_limit_w (optional, see the contract), pcie_generation,
///   achievable.{compute_fraction, memory_fraction, fp8_compute_fraction (optional, only with an
///   fp8 peak)}, kernel_overhead (optional), recorded_names (optional list of non-empty names). The
///   DeviceProfile's peaks and L2 bandwidth are the stated ones scaled to sm_count and the clock
///   (the contract). Throws ConfigError (via node.fail) for missing keys, unknown dtypes, values
///   outside kHardwareRanges (a scaled peak too, at the key that scaled it) and fractions outside
///   (0, 1].
HardwareProfile load_hardware_profile(const ConfigNode& node);

/// What each key of a profile means, one line each (sim/config/key_meaning.h).
std::span<const KeyMeaning> hardware_profile_key_meanings();

/// Per-direction bandwidth of a x16 PCIe link of `generation` (3, 4 or 5): transfer rate
/// (8, 16, 32 GT/s per lane, PCI-SIG base specifications 3.0 / 4.0 / 5.0) x 16 lanes x 128/130
/// line coding / 8 bits = 15.754, 31.508, 63.015 GB/s. nullopt for any other generation.
std::optional<Bandwidth> pcie_x16_bandwidth(int64_t generation);

}  // namespace upsim
