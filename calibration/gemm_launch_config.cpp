#include "calibration/gemm_launch_config.h"

#include <algorithm>

namespace upsim {

GemmLaunch read_gemm_launch(const ConfigNode& kernels, const DeviceProfile& device) {
  GemmLaunch launch;
  const std::string schedule = kernels.get_choice_or(
      "gemm_schedule", {"auto", "per_tile", "static_persistent", "dynamic_persistent"}, "auto");
  launch.schedule = schedule == "auto" ? default_gemm_schedule(device.compute_capability)
                                       : *gemm_schedule_from_name(schedule);
  launch.sm_carveout = static_cast<int32_t>(
      kernels.get_int_in_or("gemm_sm_carveout", 0, std::max<int64_t>(0, device.sm_count - 1), 0));
  return launch;
}

}  // namespace upsim
