#include "workloads/transformer/task_head.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/config/config_enum.h"

namespace upsim {

namespace {

constexpr std::array<std::string_view, 3> kHeadNames = {"lm", "mlm", "classification"};
constexpr std::array<TaskHeadKind, 3> kHeads = {
    TaskHeadKind::kLanguageModel, TaskHeadKind::kMaskedLm, TaskHeadKind::kClassification};
/// Devlin et al. (arXiv 1810.04805), section 3.1: 15% of the token positions are predicted.
constexpr double kMaskedFraction = 0.15;
constexpr int64_t kMaxLabels = int64_t{1} << 24;

}  // namespace

std::string_view task_head_name(TaskHeadKind kind) {
  return kHeadNames[static_cast<size_t>(kind)];
}

TaskHead read_task_head(const ConfigNode& workload, int64_t seq) {
  TaskHead head;
  head.kind = read_enum(workload, "head", kHeadNames, kHeads, TaskHeadKind::kLanguageModel);
  const std::string_view name = task_head_name(head.kind);
  if (workload.has("predictions") && head.kind != TaskHeadKind::kMaskedLm) {
    workload.child("predictions")
        .fail(fmt::format("counts the masked-LM head's predicted positions: needs `head: mlm` "
                          "(head is {})",
                          name));
  }
  if (workload.has("labels") && head.kind != TaskHeadKind::kClassification) {
    workload.child("labels").fail(
        fmt::format("counts a sequence classifier's classes: needs `head: classification` (head "
                    "is {})",
                    name));
  }
  if (head.kind == TaskHeadKind::kMaskedLm) {
    const auto masked = std::max<int64_t>(
        1, static_cast<int64_t>(std::llround(kMaskedFraction * static_cast<double>(seq))));
    head.predictions = workload.get_int_in_or("predictions", 1, seq, masked);
    head.labels = 2;
  }
  if (head.kind == TaskHeadKind::kClassification) {
    head.labels = workload.get_int_in_or("labels", 1, kMaxLabels, 2);
  }
  constexpr std::array<std::string_view, 2> kLossNames = {"fused", "eager"};
  head.eager_loss = workload.get_choice_or("loss", kLossNames, "fused") == "eager";
  if (head.eager_loss && head.kind == TaskHeadKind::kClassification) {
    workload.child("loss").fail(
        "is the vocabulary cross-entropy's implementation; a classification head has none");
  }
  return head;
}

}  // namespace upsim
