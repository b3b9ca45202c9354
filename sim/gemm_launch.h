// How a GPU's GEMM library launches a GEMM's thread blocks (CTAs), which decides what a GEMM
// loses while communication kernels hold SMs (sim/executor.h runs it; this file is the policy and
// its arithmetic, pure).
//
//  - kPerTile: one CTA per output tile (or split-K slice), as cuBLAS's sm70 / sm80 kernels
//    launch them. CTAs queue for SMs and an SM freed by one is taken by the next, so a GEMM beside
//    a collective runs on the SMs left at a proportional rate: the executor's fluid share.
//  - kStaticPersistent: min(tiles, SMs) CTAs, each looping over a fixed share of the tiles
//    (CUTLASS 3's sm90 persistent tile schedulers, which cuBLAS 12's Hopper GEMMs use: grid =
//    the SM count the launch queried, KernelHardwareInfo). A CTA that finds no SM free waits
//    for one and then does its whole share: with h SMs held by a collective, h CTAs run after
//    the others and the GEMM takes twice as long. Measured: "the matmuls take 2x as long to
//    complete when they are overlapped with a NCCL kernel", cuBLAS launching 132 CTAs on an
//    H100 under FSDP (pytorch/pytorch#143988, which added torch._C._set_sm_carveout_experimental
//    in #144974 / #147966); "statically-scheduled persistent kernels will run 2x slower when
//    wave quantization occurs" (NVIDIA/cutlass#2471). CTAs already resident are not preempted.
//  - kDynamicPersistent: persistent CTAs that claim tiles at run time (Blackwell's Cluster
//    Launch Control, NVIDIA/cutlass#2471): a CTA that starts late claims what is left, so the
//    fluid share holds, as for kPerTile.
//
// A carveout (torch._C._set_sm_carveout_experimental, Transformer Engine's NVTE_EXT_MARGIN_SM)
// launches every GEMM on SMs - carveout SMs, so a collective on at most that many SMs does not
// split it; the GEMM then runs on fewer SMs whether or not anything runs beside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace upsim {

enum class GemmSchedule : uint8_t { kPerTile, kStaticPersistent, kDynamicPersistent };

/// "per_tile", "static_persistent", "dynamic_persistent".
std::string_view gemm_schedule_name(GemmSchedule schedule);
std::optional<GemmSchedule> gemm_schedule_from_name(std::string_view name);

/// The schedule cuBLAS's GEMMs use on a GPU of this compute capability (major x 10 + minor):
/// static persistent on sm90 (Hopper), dynamic persistent from sm100 (Blackwell), per tile
/// before (and when the capability is not stated, 0).
GemmSchedule default_gemm_schedule(int32_t compute_capability);

struct GemmLaunch {
  GemmSchedule schedule = GemmSchedule::kPerTile;
  /// SMs every GEMM leaves free (0: none).
  int32_t sm_carveout = 0;
};

/// The CTAs of one statically scheduled persistent GEMM at its launch.
struct PersistentGrid {
  int64_t grid = 0;      ///< CTAs launched: min(per-tile CTAs, SMs it may use)
  int64_t resident = 0;  ///< CTAs that find an SM at launch (>= 1)
  int64_t deferred = 0;  ///< CTAs that wait for an SM: grid - resident
};

/// A persistent GEMM of `tile_ctas` per-tile CTAs (tiles x split-K slices, > 0) launched on a GPU
/// of `sms` SMs, of which it leaves `reserved_sms` free (carveout, or the margin Transformer
/// Engine leaves for the communication it overlaps) while `busy_sms` run communication kernels.
PersistentGrid persistent_grid(int64_t tile_ctas, int32_t sms, int32_t reserved_sms,
                               int32_t busy_sms);

/// How long such a GEMM runs when each CTA's share takes `cta_ps` and nothing frees an SM before
/// the first CTAs finish: the deferred CTAs run in batches of `resident`.
int64_t persistent_duration_ps(const PersistentGrid& grid, int64_t cta_ps);

}  // namespace upsim
