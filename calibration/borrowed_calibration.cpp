#include "calibration/borrowed_calibration.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
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
  // "OP: no measured curve, REST" -> ops by REST, in name order (the set is sorted).
  constexpr std::string_view kCurveNote = ": no measured curve, ";
  std::map<std::string, std::vector<std::string>> ops_of_reason;
  std::vector<std::string> out;
  for (const std::string& note : notes) {
    const size_t at = note.find(kCurveNote);
    if (at == std::string::npos || note.find(' ') < at) {
      out.push_back(note);
      continue;
    }
    ops_of_reason[note.substr(at + kCurveNote.size())].push_back(note.substr(0, at));
  }
  for (const auto& [reason, ops] : ops_of_reason)
    out.push_back(fmt::format("{}{}{}", fmt::join(ops, ", "), kCurveNote, reason));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace upsim
