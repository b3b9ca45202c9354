#include "sim/gemm_launch.h"

#include <algorithm>
#include <array>
#include <utility>

namespace upsim {
namespace {

constexpr std::array<std::pair<GemmSchedule, std::string_view>, 3> kScheduleNames = {{
    {GemmSchedule::kPerTile, "per_tile"},
    {GemmSchedule::kStaticPersistent, "static_persistent"},
    {GemmSchedule::kDynamicPersistent, "dynamic_persistent"},
}};

}  // namespace

std::string_view gemm_schedule_name(GemmSchedule schedule) {
  for (const auto& [s, name] : kScheduleNames)
    if (s == schedule) return name;
  return "per_tile";
}

std::optional<GemmSchedule> gemm_schedule_from_name(std::string_view name) {
  for (const auto& [s, n] : kScheduleNames)
    if (n == name) return s;
  return std::nullopt;
}

GemmSchedule default_gemm_schedule(int32_t compute_capability) {
  if (compute_capability >= 100) return GemmSchedule::kDynamicPersistent;
  if (compute_capability >= 90) return GemmSchedule::kStaticPersistent;
  return GemmSchedule::kPerTile;
}

PersistentGrid persistent_grid(int64_t tile_ctas, int32_t sms, int32_t reserved_sms,
                               int32_t busy_sms) {
  PersistentGrid g;
  const int64_t usable = std::max<int64_t>(1, static_cast<int64_t>(sms) - reserved_sms);
  g.grid = std::min(std::max<int64_t>(1, tile_ctas), usable);
  const int64_t free_sms = std::max<int64_t>(1, static_cast<int64_t>(sms) - busy_sms);
  g.resident = std::min(g.grid, free_sms);
  g.deferred = g.grid - g.resident;
  return g;
}

int64_t persistent_duration_ps(const PersistentGrid& grid, int64_t cta_ps) {
  const int64_t batches = 1 + (grid.deferred + grid.resident - 1) / grid.resident;
  return grid.deferred > 0 ? batches * cta_ps : cta_ps;
}

}  // namespace upsim
