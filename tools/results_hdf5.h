// A sweep's results table as HDF5 (results.h5): a PyTables table that pandas reads as the
// DataFrame pandas.read_csv makes of results.csv beside it: `pandas.read_hdf(path)` (its one
// key, "results") gives the same column names (but for a `/`: below) in the same order and the
// same dtypes. Row i is point i. A column is, by its cells (the first rule that holds):
//  - int64: every cell an integer ([+-]digits) that int64 holds;
//  - bool: every cell true, True, TRUE, false, False or FALSE (read_csv's true/false values);
//  - float64: every cell a decimal number ([+-] digits [. digits] [e [+-] digits]), inf,
//    infinity or nan (any case), or empty (NaN);
//  - otherwise text (str in pandas): UTF-8 bytes in a fixed-width string as wide as the
//    column's longest cell (null-terminated unless full: PyTables' StringAtom), an empty cell
//    written as "nan" (pandas' nan_rep), which pandas reads back as NaN, as read_csv reads an
//    empty cell. A table without rows has text columns only (read_csv's object columns).
// read_csv differs only where a cell is another of its default NaN spellings ("NA", "None",
// "null", "N/A", ...: text here, NaN there) or a true/false column has an empty cell (text
// here, bool and NaN there); a text cell "nan" reads as NaN in both.
//
// Layout: PyTables' format 2.1 (its Group and Table objects), no pandas metadata and no pickled
// attribute anywhere:
//   /               attributes CLASS "GROUP", PYTABLES_FORMAT_VERSION "2.1", TITLE "",
//                   VERSION "1.0"
//   /results        attributes CLASS "GROUP", TITLE "", VERSION "1.0"
//   /results/table  one-dimensional dataset of a compound type, one member per column in table
//                   order, named as the column (a `/` in the name, PyTables' separator of nested
//                   columns, written as `.`), packed: H5T_STD_I64LE, H5T_STD_B8LE (0 / 1,
//                   PyTables' BoolAtom), H5T_IEEE_F64LE or H5T_C_S1 (ASCII cset, as PyTables
//                   writes strings); attributes CLASS "TABLE", VERSION "2.7", TITLE "", NROWS
//                   (int64), and per member i FIELD_<i>_NAME and FIELD_<i>_FILL (0, false, 0.0,
//                   or the one-byte empty string).
// Text attributes are UTF-8 fixed-width scalars as long as the text, the empty one a null
// dataspace, as PyTables writes a Python str. pandas reads a group without a pandas_type
// attribute that holds a PyTables Table named "table" as a "generic_table" (pandas'
// pandas/io/pytables.py: HDFStore._create_storer, GenericTable, GenericIndexCol: one column per
// member, fixed-width strings decoded by _unconvert_string_array, a 0..n-1 index). pandas' own
// layouts need pickles: "frame_table" stores index_cols, values_cols and non_index_axes as
// pickled attributes, and "fixed" stores text columns as pickled VLArray objects. h5py:
// `h5py.File(path)["results/table"]["iteration_ms"]` is one column as a NumPy array. No object
// timestamps are stored, so the same table gives the same bytes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace upsim::cli {

/// The HDF5 file of `header` and `rows` (rows[i][c], as parsed from the CSV), built in memory
/// (libhdf5's core driver without a backing store: libhdf5 opens no path). The same table gives
/// the same bytes. Throws std::runtime_error when libhdf5 fails.
std::string results_hdf5_image(const std::vector<std::string>& header,
                               const std::vector<std::vector<std::string>>& rows);

/// Writes results_hdf5_image(header, rows) to `path` with write_file_atomically (through
/// <path>.tmp; a symbolic link or any other non-regular file at either name is refused, never
/// followed). Throws std::runtime_error naming the file on failure.
void write_results_hdf5(const std::filesystem::path& path, const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace upsim::cli
