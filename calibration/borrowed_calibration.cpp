#include "calibration/borrowed_calibration.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace upsim {

std::vector<std::string> borrowed_calibration_notes(const KernelCostModel& model,
                                                    const TaskGraph& graph,
                                                    const std::vector<DeviceProfile>& devices) {
  if (devices.empty() || (devices.size() != 1 && devices.size() < graph.rank_count())) {
    throw std::invalid_argument(
        fmt::format("borrowed_calibration_notes: {} device profiles for {} ranks", devices.size(),
                    graph.rank_count()));
  }
  std::set<std::pair<KernelDescId, std::string_view>> asked;
  std::set<std::string> notes;
  for (TaskId id = 0; id < graph.task_count(); ++id) {
    const Task& task = graph.task(id);
    if (task.kind != TaskKind::kKernel || task.fixed_ps >= 0) continue;
    const DeviceProfile& device = devices.size() == 1 ? devices.front() : devices[task.rank];
    if (!asked.emplace(graph.kernel_desc_of(id), device.name).second) continue;
    const std::optional<std::string> line = model.borrowed_calibration(graph.kernel(id), device);
    if (!line) continue;
    std::string_view rest = *line;
    while (!rest.empty()) {
      const size_t cut = rest.find("; ");
      notes.emplace(rest.substr(0, cut));
      if (cut == std::string_view::npos) break;
      rest.remove_prefix(cut + 2);
    }
  }
  return {notes.begin(), notes.end()};
}

}  // namespace upsim
