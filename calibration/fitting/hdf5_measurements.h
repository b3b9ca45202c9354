// Kernel measurement tables in HDF5 for `upsim calibrate kernels` / `upsim validate kernels`
// (--hdf5 FILE): the same rows as upsim's measurement CSV (kernel_measurements.h), stored
// column-wise, one group per op.
//
// Layout (HDF5 1.10 or later; h5py writes it with plain `create_group` / `create_dataset`):
//   /                  file attributes, all optional strings:
//                        gpu      the GPU the kernels ran on, e.g. "A100" (not read)
//                        source   where the numbers come from (tool, sweep, paper) (not read)
//                        provenance  measured, published or physics: every row's
//                                 KernelMeasurement::provenance (read; written when every row
//                                 states the same one)
//                        harness  `none` or `fitted`: every row's harness_none /
//                                 harness_declared (read; written when every row has the same
//                                 one), as the CSV's `# key: value` lines
//                                 (kernel_measurements.h)
//                        curve    a curve name: every memory-op row's KernelMeasurement::curve
//                                 (read; written when some row has one: rows on two curves, or
//                                 a curve beside rows without one, cannot be stored)
//                      and any other string attributes: the metadata of the tables converted
//                      (`upsim convert kernels`: the `# key: value` lines of its CSV inputs,
//                      e.g. bench/gpu's cuda_driver, sm_clock_max_mhz, measured_utc)
//   /<op>/             one group per op: `gemm` or a memory_op_name() (gelu, softmax, layernorm,
//                      relu, ...). Every object at the root must be such a group. In each group,
//                      1-D datasets of one common length (one element per measured kernel):
//     dtype    required  string (fixed or variable length; upsim writes fixed, 8 bytes):
//                        dtype_name() (fp32, tf32, fp16, bf16, fp8, int8)
//     m, n     required  integer, > 0: gemm m x n output; memory op m rows of n elements
//     k        gemm only required, integer, > 0: the reduction dimension
//     batch    gemm only optional, integer, > 0 (default 1)
//     reads, writes  memory ops only, optional: float, reads > 0, writes >= 0 (default 1 and 1):
//                        tensors of m x n read and written (the CSV's columns; written when
//                        some row of the op states other than 1 and 1)
//     time_s or time_us  required, exactly one of them: float or integer, > 0: measured time
//                        of one call in seconds (time_s, what upsim writes: exact round trip)
//                        or microseconds (time_us, as in the CSV)
//     split    optional  integer: 0 train, 1 held out; without it, the rows of the group
//                        alternate train, held out, ... in dataset order, the CSV rule
//                        (assign_alternating_split: per file and op)
//   Any other dataset or object in a group is an error. Groups are read in creation order when
//   the file tracks it (write_measurement_hdf5 does), else in name order; rows within a group in
//   dataset order. A row's origin is "<file>:/<op>[<index>]".
//
// Bounds, checked before any data is read: at most 10,000,000 rows per dataset, fixed-length
// strings of 1 to 256 bytes.
// Errors: CalibrationDataError naming the file and, where there is one, the group and dataset:
// unreadable file, unknown op group, missing or unknown dataset, not 1-D, lengths differ, wrong
// element class, unknown dtype, non-positive dimension or time, split not 0 / 1.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibration/fitting/kernel_measurements.h"

namespace upsim {

/// The rows of an HDF5 measurement file (layout above). libhdf5 reads it in a child process
/// (it crashes and loops on some corrupt files); a child that has not reported within
/// `time_limit` (default: 10 s plus 1 s per 4 MiB of file) is killed and the file is an error.
std::vector<KernelMeasurement> read_measurement_hdf5(
    const std::filesystem::path& path,
    std::optional<std::chrono::milliseconds> time_limit = std::nullopt);

/// Writes `rows` in the layout above (creating or truncating `path`), with `split` from
/// held_out, groups in order of the ops' first rows. Rows of ops other than gemm and memory ops
/// (embedding ops), and memory-op rows that are not a memory_op_kernel() of some m x n, throw
/// CalibrationDataError; so does a file that cannot be written.
/// `attributes` are written as further file attributes (names not empty, not `gpu` or
/// `source`, and distinct; else CalibrationDataError). The file is a regular file: a symbolic
/// link, device or folder at `path` is an error, never followed.
void write_measurement_hdf5(
    const std::filesystem::path& path, const std::vector<KernelMeasurement>& rows,
    std::string_view gpu, std::string_view source,
    const std::vector<std::pair<std::string, std::string>>& attributes = {});

/// The bytes write_measurement_hdf5 writes, built in memory (libhdf5 opens no path); `path` is
/// the name errors give. `upsim convert kernels` writes them through its temporary-file rule.
std::string measurement_hdf5_image(
    const std::filesystem::path& path, const std::vector<KernelMeasurement>& rows,
    std::string_view gpu, std::string_view source,
    const std::vector<std::pair<std::string, std::string>>& attributes = {});

}  // namespace upsim
