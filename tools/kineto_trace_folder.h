// The folder of Kineto traces a run writes (`upsim run --trace-format kineto`): one PyTorch
// profiler trace per rank (sim/export/kineto_trace_writer.h), the layout of a training job's
// trace folder that HTA's TraceAnalysis(trace_dir=...) and a trace scenario (`workload: {model:
// trace, traces: DIR}`) read.
//
// Contract:
//  - A rank's file is rank_<its GPU>.json, or rank_<its GPU>.json.gz gzip-compressed (the GPU:
//    TaskGraph::device_of, the global rank its distributedInfo states), in <out>/kineto/ or the
//    folder --trace names.
//  - Only regular files are written or replaced, and existing ones only with --force
//    (tools/output_folder.h); a path that should be the folder and is something else (a file,
//    a link) is an error naming it.
//  - An older run's traces in <out>/kineto/ (rank_<n>.json[.gz] files this run does not write)
//    are stale: `upsim run --force` removes them when it publishes its own outputs.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/export/kineto_trace_writer.h"
#include "sim/task_graph.h"

namespace upsim::cli {

/// The folder's name inside a run's output folder.
inline constexpr const char* kKinetoFolder = "kineto";

/// The files of graph ranks `ranks` (nullopt: every rank) in `folder`, in rank order. Throws
/// std::invalid_argument when two of them run on one GPU (their files would have one name).
std::vector<KinetoRankFile> kineto_rank_files(const TaskGraph& graph,
                                              const std::optional<std::vector<RankId>>& ranks,
                                              const std::filesystem::path& folder, bool gzip);

/// Throws std::runtime_error when `folder` exists and is not a folder (a link to one included).
void check_kineto_folder(const std::filesystem::path& folder);

/// Throws std::runtime_error naming the first of `files` that exists, unless `force`; `choose`
/// ends the message ("choose another --trace folder").
void check_kineto_files_free(const std::vector<KinetoRankFile>& files, bool force,
                             std::string_view choose);

/// The regular files of `folder` named as a rank's trace (rank_<n>.json, rank_<n>.json.gz)
/// that `keep` does not list, sorted; none when `folder` is not a folder.
std::vector<std::filesystem::path> stale_kineto_files(const std::filesystem::path& folder,
                                                      const std::vector<KinetoRankFile>& keep);

}  // namespace upsim::cli
