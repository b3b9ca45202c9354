// Reader of raw nccl-tests output: the stdout of all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf and broadcast_perf (NVIDIA/nccl-tests src/common.cu; from
// 2.17.3 the printing is in src/util.cu, writeResultHeader / writeBenchmarkLinePreamble /
// writeBenchmarkLineBody).
//
// The layout it reads:
//  - header comments: "# nccl-tests version ...", "# Collective test starting: all_reduce_perf"
//    (nccl-tests 2.16.7 and later), "# nThread 1 nGpus 1 minBytes ...", and one line per rank
//    "#  Rank  3 Group  0 Pid  6902 on host device  3 [0000:0c:00] NVIDIA H100 80GB HBM3";
//  - the column header "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time ...",
//    followed by a units line "#  (B)  (elements) ...". Older releases print fewer columns (no
//    root, no redop for all-gather) or call them "bytes N type op ... error"; the reader finds
//    each column by its name in this header, so every one of these variants reads;
//  - one row per size, whitespace-separated: size, count, type, redop, root, then out-of-place
//    time (us), algbw (GB/s), busbw (GB/s), #wrong ("0" or "N/A"), then the same four in-place.
//    With -d all / -o all several rows share a size (one per type / op);
//  - footer comments ("# Out of bounds values ...", "# Avg bus bandwidth ...").
// Lines that are neither comments nor rows (NCCL INFO logs, mpirun messages, Markdown around a
// pasted log) are skipped: a row is a line after the column header whose first field is a whole
// number. A "[1,0]<stdout>:" prefix (mpirun --tag-output) is removed first.
//
// Contract:
//  - `size` is what nccl-tests prints: max(send, receive) bytes of one rank, so each rank's
//    input for all-reduce, reduce-scatter, all-to-all and broadcast, and each rank's output
//    (n x input) for all-gather. For every collective nccl-tests' algbw = size / time; busbw =
//    algbw x nccl_tests_bus_factor(kind, n) (topology/fitting/collective_validation.h).
//  - The collective comes from "# Collective test starting: <program>"; where the log has no
//    such line, from NcclTestsReadOptions::kind. Ranks come from the "#  Rank" lines; where
//    there are none, from NcclTestsReadOptions::ranks (0 = unknown). An option that contradicts
//    the file is an error.
//  - Errors are std::runtime_error "FILE:LINE: what was found, what was expected" (FILE alone
//    when no line is at fault): a column header without size / count / type / time / algbw /
//    busbw, a row with too few columns or a field that is not a number, a non-positive time,
//    rank lines out of order, a second run in one file, an unsupported program, no table or no
//    rows at all, an option that contradicts the log.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"
#include "topology/fitting/collective_validation.h"

namespace upsim {

/// One result row of an nccl-tests table.
struct NcclTestsRow {
  int line = 0;             ///< line in the file, from 1
  int64_t bytes = 0;        ///< the `size` column
  int64_t count = 0;        ///< the `count` column (elements)
  std::string type;         ///< e.g. "float"
  std::string redop;        ///< e.g. "sum", "none"; empty when the layout has no such column
  double time_us = 0.0;     ///< out-of-place time, per-call average
  double algbw_gbps = 0.0;  ///< out-of-place algbw as printed (GB/s = 1e9 B/s)
  double busbw_gbps = 0.0;  ///< out-of-place busbw as printed
  std::optional<double> in_place_time_us;
};

struct NcclTestsLog {
  std::string file;     ///< the name errors use
  std::string program;  ///< e.g. "all_reduce_perf"; empty when the log does not say
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint32_t ranks = 0;              ///< 0 when neither the log nor the options say
  std::vector<NcclTestsRow> rows;  ///< in file order
};

struct NcclTestsReadOptions {
  /// For logs without "# Collective test starting:"; must agree with the log when it has one.
  std::optional<CollectiveKind> kind;
  /// For logs without "#  Rank" lines; must agree with the log when it has them.
  std::optional<uint32_t> ranks;
};

/// The collective of an nccl-tests program or short name: "all_reduce_perf" or "all_reduce",
/// "all_gather", "reduce_scatter", "alltoall" (also "all_to_all"), "broadcast"; a directory
/// prefix is ignored. nullopt for anything else.
std::optional<CollectiveKind> nccl_tests_collective(std::string_view program);
/// The names nccl_tests_collective() accepts, for messages.
std::string_view nccl_tests_collective_names();

/// Parses `text` (the whole output); `file` names it in errors.
NcclTestsLog parse_nccl_tests_output(std::string_view text, std::string file,
                                     const NcclTestsReadOptions& options = {});
/// Reads and parses a file; throws std::runtime_error when it cannot be read.
NcclTestsLog read_nccl_tests_output(const std::filesystem::path& path,
                                    const NcclTestsReadOptions& options = {});

/// (size, out-of-place time) of every row, in file order.
std::vector<MeasuredCollective> measured_points(const NcclTestsLog& log);

}  // namespace upsim
