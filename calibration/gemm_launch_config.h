// Reads how the platform's GEMMs launch their CTAs (sim/gemm_launch.h) from the scenario's
// `platform.kernels` section:
//   gemm_schedule: auto | per_tile | static_persistent | dynamic_persistent   (default auto: the
//       schedule cuBLAS uses on the GPU's compute capability, default_gemm_schedule: static
//       persistent on Hopper, dynamic persistent on Blackwell, per tile before)
//   gemm_sm_carveout: SMs every GEMM leaves free, 0 .. sm_count - 1 (default 0): PyTorch's
//       torch._C._set_sm_carveout_experimental, Transformer Engine's NVTE_EXT_MARGIN_SM
// A what-if: "what if our GEMMs left NCCL 24 SMs?" is gemm_sm_carveout: 24.
#pragma once

#include "sim/config/config_node.h"
#include "sim/cost_models.h"
#include "sim/gemm_launch.h"

namespace upsim {

/// The launch policy of `kernels` (the platform.kernels section) for GEMMs on `device`. Throws
/// ConfigError naming the key for an unknown schedule or a carveout outside its range.
GemmLaunch read_gemm_launch(const ConfigNode& kernels, const DeviceProfile& device);

}  // namespace upsim
