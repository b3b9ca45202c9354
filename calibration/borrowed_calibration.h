// The distinct borrowed-calibration notes of one run: what a scenario prints once each as a
// warning (KernelCostModel::borrowed_calibration, sim/cost_models.h).
//
// Contract:
//  - Asks the model about every kernel task the model prices (tasks with a fixed, measured
//    duration are skipped), once per (kernel description, device name) pair; the device of a
//    task on rank r is devices[r], or devices[0] for every rank when `devices` holds one
//    profile.
//  - A model's line that joins several notes with "; " (CalibratedKernelCost does) is split
//    into them, so that a note common to many kernels (e.g. "calibration fitted on X, used for
//    Y") appears once.
//  - Notes of memory ops that share everything after their op name ("OP: no measured curve,
//    priced with ...", the form CalibratedKernelCost writes) are one note naming the ops,
//    comma-separated in name order ("binary, copy, relu: no measured curve, ..."): one warning
//    per curve and reason, not one per op.
//  - The result is sorted and free of duplicates: deterministic for a graph and models.
//  - Throws std::invalid_argument when `devices` is empty or shorter than the graph's ranks
//    (and not a single profile for all), and lets the model's errors through (e.g. an fp8 GEMM
//    on a device without an fp8 peak).
#pragma once

#include <string>
#include <vector>

#include "sim/cost_models.h"
#include "sim/task_graph.h"

namespace upsim {

std::vector<std::string> borrowed_calibration_notes(const KernelCostModel& model,
                                                    const TaskGraph& graph,
                                                    const std::vector<DeviceProfile>& devices);

}  // namespace upsim
