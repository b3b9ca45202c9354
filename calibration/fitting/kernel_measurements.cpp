#include "calibration/fitting/kernel_measurements.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

#include "calibration/kernel_calibration.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/formats/csv.h"
#include "sim/formats/text.h"
#include "sim/input_file.h"

namespace upsim {
namespace {

/// The measurement tables' CSV: blanks around fields dropped, blank lines and `#` comment lines
/// skipped.
constexpr CsvOptions kTableCsv{.trim_blanks = true, .skip_blank_lines = true, .comment = '#'};

/// The contents of `path`, a measurement table.
std::string read_table_text(const std::filesystem::path& path) {
  // Measurement CSVs are megabytes; a gigabyte is not one.
  if (const auto why = input_file_problem(path, kGiB)) {
    throw CalibrationDataError(fmt::format("{}: {}", path.string(), *why));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CalibrationDataError(fmt::format("{}: cannot open file", path.string()));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The records of `path` (kTableCsv); malformed quoting is a ParseError.
std::vector<CsvRecord> read_records(const std::filesystem::path& path) {
  return read_csv(read_table_text(path), path.string(), kTableCsv);
}

[[noreturn]] void fail(const std::filesystem::path& path, int64_t line, std::string_view message) {
  throw CalibrationDataError(fmt::format("{}:{}: {}", path.string(), line, message));
}

double parse_number(const std::filesystem::path& path, int64_t line, std::string_view field,
                    std::string_view what) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size()) {
    fail(path, line, fmt::format("{} {} is not a number", what, quoted_field(field)));
  }
  return value;
}

/// A positive whole number (a dimension).
int64_t parse_dim(const std::filesystem::path& path, int64_t line, std::string_view field,
                  std::string_view what) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size()) {
    fail(path, line, fmt::format("{} {} is not a whole number", what, quoted_field(field)));
  }
  if (value <= 0) fail(path, line, fmt::format("{} must be positive, got {}", what, value));
  return value;
}

double positive(const std::filesystem::path& path, int64_t line, double value,
                std::string_view what) {
  if (!(value > 0.0)) fail(path, line, fmt::format("{} must be positive, got {}", what, value));
  return value;
}

/// `field` with the unit suffix `unit` removed ("0.19ms" -> 0.19).
double parse_with_unit(const std::filesystem::path& path, int64_t line, std::string_view field,
                       std::string_view unit, std::string_view what) {
  if (!field.ends_with(unit)) {
    fail(path, line, fmt::format("{} {} must end in `{}`", what, quoted_field(field), unit));
  }
  field.remove_suffix(unit.size());
  return parse_number(path, line, trim_blanks(field), what);
}

void expect_fields(const std::filesystem::path& path, const CsvRecord& record, size_t count,
                   std::string_view columns) {
  if (record.fields.size() != count) {
    fail(path, record.line,
         fmt::format("expected {} fields ({}), got {}", count, columns, record.fields.size()));
  }
}

std::string origin(const std::filesystem::path& path, int64_t line) {
  return fmt::format("{}:{}", path.string(), line);
}

std::string valid_ops() {
  std::string out = "gemm";
  for (std::string_view name : kMemoryOpNames) {
    if (name != "unspecified") out += fmt::format(", {}", name);
  }
  return out;
}

using ColumnIndex = std::map<std::string, size_t, std::less<>>;

/// The fields of a data record; a record with another field count than the header fails.
const std::vector<std::string>& row_fields(const std::filesystem::path& path,
                                           const CsvRecord& record, size_t columns) {
  if (record.fields.size() != columns) {
    fail(path, record.line,
         fmt::format("expected {} fields as in the header, got {}", columns, record.fields.size()));
  }
  return record.fields;
}

/// The index of an optional column, if the header has it.
std::optional<size_t> optional_column(const ColumnIndex& column, std::string_view name) {
  const auto it = column.find(name);
  if (it == column.end()) return std::nullopt;
  return it->second;
}

/// The header's columns; every name in `required` must be there (`usage` lists the columns).
ColumnIndex read_header(const std::filesystem::path& path, const std::vector<CsvRecord>& records,
                        std::initializer_list<std::string_view> required, std::string_view usage) {
  if (records.empty()) throw CalibrationDataError(fmt::format("{}: no header line", path.string()));
  const std::vector<std::string>& header = records.front().fields;
  // The required columns first: a file of another kind fails here, before any of its names
  // would be quoted.
  for (std::string_view name : required) {
    if (std::find(header.begin(), header.end(), name) == header.end()) {
      fail(path, records.front().line, fmt::format("missing column `{}` ({})", name, usage));
    }
  }
  ColumnIndex column;
  for (size_t i = 0; i < header.size(); ++i) {
    const auto [first, inserted] = column.emplace(header[i], i);
    if (!inserted) {
      fail(path, records.front().line,
           fmt::format("columns {} and {} of the header have the same name {}", first->second + 1,
                       i + 1, quoted_field(header[i])));
    }
  }
  return column;
}

DType parse_dtype_field(const std::filesystem::path& path, int64_t line, std::string_view text) {
  const std::optional<DType> dtype = parse_dtype(text);
  if (!dtype) {
    fail(path, line,
         fmt::format("unknown dtype {}; valid: fp32, tf32, fp16, bf16, fp8, int8",
                     quoted_field(text)));
  }
  return *dtype;
}

/// A `time_us` field: a positive number of microseconds, returned in seconds.
double parse_time_us(const std::filesystem::path& path, int64_t line, std::string_view field) {
  return positive(path, line, parse_number(path, line, field, "time_us"), "time_us") * 1e-6;
}

bool parse_split(const std::filesystem::path& path, int64_t line, std::string_view split) {
  if (split != "train" && split != "held_out") {
    fail(path, line,
         fmt::format("split must be `train` or `held_out`, got {}", quoted_field(split)));
  }
  return split == "held_out";
}

bool parse_bool_field(const std::filesystem::path& path, int64_t line, std::string_view field,
                      std::string_view what) {
  if (field != "true" && field != "false") {
    fail(path, line,
         fmt::format("{} must be `true` or `false`, got {}", what, quoted_field(field)));
  }
  return field == "true";
}

/// The rows of an attention table (the header comment's second format).
std::vector<KernelMeasurement> read_attention_rows(const std::filesystem::path& path,
                                                   const std::vector<CsvRecord>& records) {
  const ColumnIndex column = read_header(
      path, records,
      {"op", "implementation", "dtype", "causal", "batch", "heads", "seq", "head_dim"},
      "required: op, implementation, dtype, causal, batch, heads, seq, head_dim, and time_us or "
      "tflops; optional: kv_heads, seq_kv, split");
  const size_t columns = records.front().fields.size();
  const std::optional<size_t> time_col = optional_column(column, "time_us");
  const std::optional<size_t> tflops_col = optional_column(column, "tflops");
  if (time_col.has_value() == tflops_col.has_value()) {
    fail(path, records.front().line, "an attention table needs exactly one of time_us, tflops");
  }
  const std::optional<size_t> kv_col = optional_column(column, "kv_heads");
  const std::optional<size_t> seq_kv_col = optional_column(column, "seq_kv");
  const std::optional<size_t> split_col = optional_column(column, "split");
  std::vector<KernelMeasurement> rows;
  for (size_t i = 1; i < records.size(); ++i) {
    const CsvRecord& record = records[i];
    const int64_t line = record.line;
    const std::vector<std::string>& f = row_fields(path, record, columns);
    const std::string_view op = f[column.at("op")];
    if (op != "attention_forward" && op != "attention_backward" &&
        op != "attention_forward_backward") {
      fail(path, line,
           fmt::format("unknown op {}; valid: attention_forward, attention_backward, "
                       "attention_forward_backward",
                       quoted_field(op)));
    }
    const std::string_view impl_name = f[column.at("implementation")];
    const std::optional<AttentionKernel> impl = parse_attention_kernel(impl_name);
    if (!impl) {
      fail(path, line,
           fmt::format("unknown implementation {}; valid: {}", quoted_field(impl_name),
                       attention_kernel_names()));
    }
    AttentionShape a;
    a.batch = parse_dim(path, line, f[column.at("batch")], "batch");
    a.heads = parse_dim(path, line, f[column.at("heads")], "heads");
    a.kv_heads = kv_col ? parse_dim(path, line, f[*kv_col], "kv_heads") : a.heads;
    if (a.heads % a.kv_heads != 0) {
      fail(path, line,
           fmt::format("heads ({}) must be a multiple of kv_heads ({})", a.heads, a.kv_heads));
    }
    a.seq_q = parse_dim(path, line, f[column.at("seq")], "seq");
    a.seq_kv = seq_kv_col ? parse_dim(path, line, f[*seq_kv_col], "seq_kv") : a.seq_q;
    a.head_dim = parse_dim(path, line, f[column.at("head_dim")], "head_dim");
    a.causal = parse_bool_field(path, line, f[column.at("causal")], "causal");
    a.backward = op == "attention_backward";
    a.implementation = *impl;
    KernelMeasurement row;
    row.op = fmt::format("{}/{}", op, impl_name);
    row.kernel.cls = KernelClass::kAttention;
    row.kernel.dtype = parse_dtype_field(path, line, f[column.at("dtype")]);
    row.kernel.attention = a;
    row.forward_and_backward = op == "attention_forward_backward";
    if (time_col) {
      row.seconds = parse_time_us(path, line, f[*time_col]);
    } else {
      const double tflops =
          positive(path, line, parse_number(path, line, f[*tflops_col], "tflops"), "tflops");
      row.seconds = attention_row_flops(row.kernel, row.forward_and_backward) / (tflops * 1e12);
    }
    if (split_col) row.held_out = parse_split(path, line, f[*split_col]);
    row.origin = origin(path, line);
    rows.push_back(std::move(row));
  }
  if (!split_col) assign_alternating_split(rows);
  return rows;
}

/// What a table's `# harness:` and `# provenance:` metadata declare.
struct TableDeclarations {
  bool no_harness = false;
  bool harness_declared = false;
  std::string provenance;
  std::string curve;
};

TableDeclarations table_declarations(const std::filesystem::path& path,
                                     const std::vector<CsvComment>& comments) {
  TableDeclarations out;
  for (const CsvComment& comment : comments) {
    const auto entry = csv_metadata_entry(comment.text);
    if (!entry) continue;
    if (entry->first == "harness") {
      if (entry->second != "none" && entry->second != "fitted") {
        fail(path, comment.line,
             fmt::format("harness {} is not known; valid: none (kernel time as measured, no "
                         "floor or offset), fitted (a per-call cost the fit describes)",
                         quoted_field(entry->second)));
      }
      out.no_harness = entry->second == "none";
      out.harness_declared = true;
    } else if (entry->first == "provenance") {
      if (!is_provenance(entry->second)) {
        fail(path, comment.line,
             fmt::format("provenance {} is not known; valid: measured, published, physics",
                         quoted_field(entry->second)));
      }
      out.provenance = entry->second;
    } else if (entry->first == "curve") {
      if (!is_curve_name(entry->second)) {
        fail(path, comment.line,
             fmt::format("curve {} is not a curve name (lower-case letters, digits and `_`)",
                         quoted_field(entry->second)));
      }
      out.curve = entry->second;
    }
  }
  return out;
}

}  // namespace

bool is_curve_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
  });
}

KernelDesc memory_op_kernel(MemoryOp op, DType dtype, int64_t m, int64_t n, MemoryTraffic traffic) {
  const double e = static_cast<double>(dtype_bytes(dtype));
  const double elements = static_cast<double>(m) * static_cast<double>(n);
  KernelDesc d;
  d.cls = KernelClass::kMemoryBound;
  d.dtype = dtype;
  d.memory_op = op;
  d.bytes_read = traffic.reads * elements * e;
  d.bytes_written = traffic.writes * elements * e;
  if (op == MemoryOp::kLayerNorm) d.bytes_read += 2.0 * static_cast<double>(n) * e;
  if (op == MemoryOp::kRmsNorm) d.bytes_read += static_cast<double>(n) * e;
  if (op == MemoryOp::kSoftmax || op == MemoryOp::kLayerNorm || op == MemoryOp::kRmsNorm ||
      op == MemoryOp::kSum || op == MemoryOp::kCrossEntropy) {
    d.row_elements = n;
  }
  return d;
}

std::optional<MemoryOpShape> memory_op_shape(const KernelDesc& kernel,
                                             std::optional<MemoryTraffic> traffic) {
  if (kernel.cls != KernelClass::kMemoryBound || kernel.memory_op == MemoryOp::kUnspecified) {
    return std::nullopt;
  }
  const MemoryOp op = kernel.memory_op;
  const double e = static_cast<double>(dtype_bytes(kernel.dtype));
  const double weights = op == MemoryOp::kLayerNorm ? 2.0 : op == MemoryOp::kRmsNorm ? 1.0 : 0.0;
  const double row = static_cast<double>(std::max<int64_t>(kernel.row_elements, 0));
  const double read_elements = kernel.bytes_read / e - weights * row;
  MemoryOpShape out;
  double elements = 0.0;
  if (traffic) {
    out.traffic = *traffic;
    elements = read_elements / out.traffic.reads;
  } else {
    elements = kernel.bytes_written / e;
    if (!(elements > 0.0)) return std::nullopt;
    out.traffic = MemoryTraffic{read_elements / elements, 1.0};
    if (!(out.traffic.reads > 0.0)) return std::nullopt;
  }
  elements = std::round(elements);
  if (!(elements >= 1.0)) return std::nullopt;
  out.n = kernel.row_elements > 0 ? kernel.row_elements : static_cast<int64_t>(elements);
  out.m = kernel.row_elements > 0
              ? static_cast<int64_t>(std::round(elements / static_cast<double>(out.n)))
              : 1;
  if (out.m <= 0 || out.n <= 0) return std::nullopt;
  const KernelDesc back = memory_op_kernel(op, kernel.dtype, out.m, out.n, out.traffic);
  const auto near = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); };
  if (!near(back.bytes_read, kernel.bytes_read) ||
      !near(back.bytes_written, kernel.bytes_written) || back.row_elements != kernel.row_elements) {
    return std::nullopt;
  }
  return out;
}

std::optional<KernelMeasurement> measurement_of(const KernelDesc& kernel, double seconds,
                                                std::string origin) {
  KernelMeasurement row;
  row.seconds = seconds;
  row.origin = std::move(origin);
  if (kernel.cls == KernelClass::kGemm) {
    row.op = "gemm";
    row.kernel = gemm_kernel(kernel.dtype, kernel.batch, kernel.m, kernel.n, kernel.k);
    return row;
  }
  const std::optional<MemoryOpShape> shape = memory_op_shape(kernel);
  if (!shape) return std::nullopt;
  row.op = std::string(memory_op_name(kernel.memory_op));
  row.traffic = shape->traffic;
  row.kernel = memory_op_kernel(kernel.memory_op, kernel.dtype, shape->m, shape->n, row.traffic);
  return row;
}

std::string measurement_csv_text(const std::vector<KernelMeasurement>& rows,
                                 const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::string out;
  for (const auto& [key, value] : metadata) {
    if (key.find_first_of("\r\n: ") != std::string::npos || key.empty() ||
        value.find_first_of("\r\n") != std::string::npos) {
      throw CalibrationDataError(
          fmt::format("metadata `{}` cannot be a `# key: value` line of a measurement table", key));
    }
    out += fmt::format("# {}: {}\n", key, value);
  }
  out += "op,dtype,m,n,k,batch,reads,writes,time_us,split\n";
  for (const KernelMeasurement& r : rows) {
    const std::string_view dtype = dtype_name(r.kernel.dtype);
    const std::string split = r.held_out ? "held_out" : "train";
    const std::string time_us = fmt::format("{:.3f}", r.seconds * 1e6);
    if (r.op == "gemm" && r.kernel.cls == KernelClass::kGemm) {
      out += fmt::format("gemm,{},{},{},{},{},,,{},{}\n", dtype, r.kernel.m, r.kernel.n, r.kernel.k,
                         r.kernel.batch, time_us, split);
      continue;
    }
    const std::optional<MemoryOpShape> shape = memory_op_shape(r.kernel, r.traffic);
    if (!shape || r.op != memory_op_name(r.kernel.memory_op)) {
      throw CalibrationDataError(fmt::format(
          "{}: op `{}` has no row in a measurement table (gemm or a memory op of m x n)", r.origin,
          r.op));
    }
    out += fmt::format("{},{},{},{},,,{},{},{},{}\n", r.op, dtype, shape->m, shape->n,
                       shape->traffic.reads, shape->traffic.writes, time_us, split);
  }
  return out;
}

namespace {

std::vector<KernelMeasurement> read_kernel_rows(const std::filesystem::path& path,
                                                const std::vector<CsvRecord>& records) {
  if (!records.empty()) {
    const std::vector<std::string>& header = records.front().fields;
    if (std::find(header.begin(), header.end(), "head_dim") != header.end()) {
      return read_attention_rows(path, records);
    }
  }
  const ColumnIndex column =
      read_header(path, records, {"op", "dtype", "m", "n", "time_us"},
                  "required: op, dtype, m, n, time_us; optional: k, batch, reads, writes, split");
  const size_t columns = records.front().fields.size();
  const std::optional<size_t> k_col = optional_column(column, "k");
  const std::optional<size_t> batch_col = optional_column(column, "batch");
  const std::optional<size_t> reads_col = optional_column(column, "reads");
  const std::optional<size_t> writes_col = optional_column(column, "writes");
  const std::optional<size_t> split_col = optional_column(column, "split");

  std::vector<KernelMeasurement> rows;
  for (size_t i = 1; i < records.size(); ++i) {
    const CsvRecord& record = records[i];
    const std::vector<std::string>& f = row_fields(path, record, columns);
    KernelMeasurement row;
    row.op = std::string(f[column.at("op")]);
    const DType dtype = parse_dtype_field(path, record.line, f[column.at("dtype")]);
    const int64_t m = parse_dim(path, record.line, f[column.at("m")], "m");
    const int64_t n = parse_dim(path, record.line, f[column.at("n")], "n");
    if (row.op == "gemm") {
      if (!k_col) fail(path, record.line, "a gemm row needs the column `k`");
      const int64_t k = parse_dim(path, record.line, f[*k_col], "k");
      const int64_t batch = batch_col ? parse_dim(path, record.line, f[*batch_col], "batch") : 1;
      row.kernel = gemm_kernel(dtype, batch, m, n, k);
      if ((reads_col && !f[*reads_col].empty()) || (writes_col && !f[*writes_col].empty())) {
        fail(path, record.line,
             "reads and writes are for memory ops; a gemm row leaves them empty");
      }
    } else {
      const std::optional<MemoryOp> op = parse_memory_op(row.op);
      if (!op || *op == MemoryOp::kUnspecified) {
        fail(path, record.line,
             fmt::format("unknown op {}; valid: {}", quoted_field(row.op), valid_ops()));
      }
      MemoryTraffic traffic;
      if (reads_col && !f[*reads_col].empty()) {
        traffic.reads = positive(path, record.line,
                                 parse_number(path, record.line, f[*reads_col], "reads"), "reads");
      }
      if (writes_col && !f[*writes_col].empty()) {
        traffic.writes = parse_number(path, record.line, f[*writes_col], "writes");
        if (!(traffic.writes >= 0.0)) {
          fail(path, record.line, fmt::format("writes must be >= 0, got {}", traffic.writes));
        }
      }
      row.kernel = memory_op_kernel(*op, dtype, m, n, traffic);
      row.traffic = traffic;
    }
    row.seconds = parse_time_us(path, record.line, f[column.at("time_us")]);
    if (split_col) row.held_out = parse_split(path, record.line, f[*split_col]);
    row.origin = origin(path, record.line);
    rows.push_back(std::move(row));
  }
  if (!split_col) assign_alternating_split(rows);
  return rows;
}

}  // namespace

std::vector<KernelMeasurement> read_measurement_csv(const std::filesystem::path& path) {
  std::vector<CsvComment> comments;
  const std::vector<CsvRecord> records =
      read_csv(read_table_text(path), path.string(), kTableCsv, comments);
  const TableDeclarations declared = table_declarations(path, comments);
  std::vector<KernelMeasurement> rows = read_kernel_rows(path, records);
  for (KernelMeasurement& row : rows) {
    row.harness_none = declared.no_harness;
    row.harness_declared = declared.harness_declared;
    row.provenance = declared.provenance;
    if (declared.curve.empty()) continue;
    if (row.kernel.cls != KernelClass::kMemoryBound) {
      throw CalibrationDataError(
          fmt::format("{}: `# curve: {}` is for a table of memory ops, and this row is `{}`",
                      row.origin, declared.curve, row.op));
    }
    row.curve = declared.curve;
  }
  return rows;
}

std::optional<std::pair<std::string, std::string>> csv_metadata_entry(std::string_view line) {
  const std::string_view t = trim_blanks(line);
  if (t.empty() || t.front() != '#') return std::nullopt;
  const std::string_view body = trim_blanks(t.substr(1));
  const size_t colon = body.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view key = trim_blanks(body.substr(0, colon));
  if (key.empty() || key.find(' ') != std::string_view::npos) return std::nullopt;
  return std::pair{std::string(key), std::string(trim_blanks(body.substr(colon + 1)))};
}

std::vector<std::pair<std::string, std::string>> read_csv_metadata(
    const std::filesystem::path& path) {
  std::vector<CsvComment> comments;
  (void)read_csv(read_table_text(path), path.string(), kTableCsv, comments);
  std::vector<std::pair<std::string, std::string>> out;
  for (const CsvComment& comment : comments) {
    if (auto entry = csv_metadata_entry(comment.text)) out.push_back(std::move(*entry));
  }
  return out;
}

std::vector<KernelMeasurement> read_embedding_op_csv(const std::filesystem::path& path) {
  const std::vector<CsvRecord> records = read_records(path);
  const ColumnIndex column = read_header(
      path, records, {"op", "dtype", "batch", "tables", "rows", "dim", "lookups", "time_us"},
      "required: op, dtype, batch, tables, rows, dim, lookups, time_us; optional: "
      "index_bytes, optimizer, split");
  const size_t columns = records.front().fields.size();
  const std::optional<size_t> index_col = optional_column(column, "index_bytes");
  const std::optional<size_t> optimizer_col = optional_column(column, "optimizer");
  const std::optional<size_t> split_col = optional_column(column, "split");

  std::vector<KernelMeasurement> rows;
  for (size_t i = 1; i < records.size(); ++i) {
    const CsvRecord& record = records[i];
    const std::vector<std::string>& f = row_fields(path, record, columns);
    KernelMeasurement row;
    row.op = std::string(f[column.at("op")]);
    KernelDesc& k = row.kernel;
    if (row.op == "embedding_forward") {
      k.cls = KernelClass::kEmbeddingForward;
    } else if (row.op == "embedding_backward") {
      k.cls = KernelClass::kEmbeddingBackward;
    } else {
      fail(path, record.line,
           fmt::format("unknown op {}; valid: embedding_forward, embedding_backward",
                       quoted_field(row.op)));
    }
    k.dtype = parse_dtype_field(path, record.line, f[column.at("dtype")]);
    EmbeddingShape& e = k.embedding;
    e.batch = parse_dim(path, record.line, f[column.at("batch")], "batch");
    e.tables = parse_dim(path, record.line, f[column.at("tables")], "tables");
    e.rows = parse_dim(path, record.line, f[column.at("rows")], "rows");
    e.dim = parse_dim(path, record.line, f[column.at("dim")], "dim");
    const int64_t lookups = parse_dim(path, record.line, f[column.at("lookups")], "lookups");
    e.pooling = static_cast<double>(lookups) / static_cast<double>(e.batch * e.tables);
    if (index_col) {
      e.index_bytes = parse_dim(path, record.line, f[*index_col], "index_bytes");
      if (e.index_bytes != 4 && e.index_bytes != 8) {
        fail(path, record.line, fmt::format("index_bytes must be 4 or 8, got {}", e.index_bytes));
      }
    }
    if (optimizer_col) {
      const std::string_view name = f[*optimizer_col];
      if (name == "sgd") {
        e.optimizer = FusedEmbeddingOptimizer::kSgd;
      } else if (name == "adagrad") {
        e.optimizer = FusedEmbeddingOptimizer::kAdagrad;
      } else if (name == "rowwise_adagrad") {
        e.optimizer = FusedEmbeddingOptimizer::kRowWiseAdagrad;
      } else {
        fail(path, record.line,
             fmt::format("unknown optimizer {}; valid: sgd, adagrad, rowwise_adagrad",
                         quoted_field(name)));
      }
    }
    row.seconds = parse_time_us(path, record.line, f[column.at("time_us")]);
    row.held_out = split_col ? parse_split(path, record.line, f[*split_col]) : true;
    row.origin = origin(path, record.line);
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

/// One fp16 memory-bound row of an LLMCompass sweep: `m` x `n` elements processed at
/// `rate_text` G elements/s.
KernelMeasurement llmcompass_memory_row(const std::filesystem::path& path, const CsvRecord& record,
                                        MemoryOp op, int64_t m, int64_t n,
                                        std::string_view rate_text) {
  const double rate = positive(
      path, record.line, parse_number(path, record.line, rate_text, "throughput"), "throughput");
  KernelMeasurement row;
  row.op = std::string(memory_op_name(op));
  row.kernel = memory_op_kernel(op, DType::kFp16, m, n);
  row.seconds = static_cast<double>(m) * static_cast<double>(n) / (rate * 1e9);
  row.origin = origin(path, record.line);
  return row;
}

}  // namespace

std::vector<KernelMeasurement> read_llmcompass_matmul(const std::filesystem::path& path) {
  std::vector<KernelMeasurement> rows;
  for (const CsvRecord& record : read_records(path)) {
    const std::vector<std::string>& f = record.fields;
    expect_fields(path, record, 5, "M, N, K, time ms, TFLOP/s");
    const int64_t m = parse_dim(path, record.line, f[0], "M");
    const int64_t n = parse_dim(path, record.line, f[1], "N");
    const int64_t k = parse_dim(path, record.line, f[2], "K");
    const double ms = parse_with_unit(path, record.line, f[3], "ms", "time");
    positive(path, record.line, parse_with_unit(path, record.line, f[4], "Tflops", "throughput"),
             "throughput");
    KernelMeasurement row;
    row.op = "gemm";
    row.kernel = gemm_kernel(DType::kFp16, 1, m, n, k);
    row.seconds = positive(path, record.line, ms, "time") * 1e-3;
    row.origin = origin(path, record.line);
    rows.push_back(std::move(row));
  }
  assign_alternating_split(rows);
  return rows;
}

std::vector<KernelMeasurement> read_llmcompass_rowwise(const std::filesystem::path& path,
                                                       MemoryOp op) {
  std::vector<KernelMeasurement> rows;
  for (const CsvRecord& record : read_records(path)) {
    const std::vector<std::string>& f = record.fields;
    expect_fields(path, record, 3, "M, N, G elements/s");
    const int64_t m = parse_dim(path, record.line, f[0], "M");
    const int64_t n = parse_dim(path, record.line, f[1], "N");
    rows.push_back(llmcompass_memory_row(path, record, op, m, n, f[2]));
  }
  assign_alternating_split(rows);
  return rows;
}

std::vector<KernelMeasurement> read_llmcompass_elementwise(const std::filesystem::path& path,
                                                           MemoryOp op) {
  std::vector<KernelMeasurement> rows;
  for (const CsvRecord& record : read_records(path)) {
    const std::vector<std::string>& f = record.fields;
    expect_fields(path, record, 2, "elements, G elements/s");
    const int64_t n = parse_dim(path, record.line, f[0], "elements");
    rows.push_back(llmcompass_memory_row(path, record, op, 1, n, f[1]));
  }
  assign_alternating_split(rows);
  return rows;
}

std::vector<KernelMeasurement> read_llmcompass_dir(const std::filesystem::path& dir,
                                                   std::string_view gpu) {
  const auto file = [&](std::string_view stem) {
    return dir / fmt::format("{}_{}.csv", stem, gpu);
  };
  std::vector<KernelMeasurement> all = read_llmcompass_matmul(file("matmul"));
  for (auto&& part : {read_llmcompass_rowwise(file("softmax"), MemoryOp::kSoftmax),
                      read_llmcompass_rowwise(file("layernorm"), MemoryOp::kLayerNorm),
                      read_llmcompass_elementwise(file("gelu"), MemoryOp::kGelu)}) {
    all.insert(all.end(), part.begin(), part.end());
  }
  // LLMCompass' authors measured these on their A100 and published them, each the wall-clock
  // time of one PyTorch call and its synchronisation: a per-call cost the fit describes.
  for (KernelMeasurement& row : all) {
    row.provenance = "published";
    row.harness_declared = true;
  }
  return all;
}

void assign_alternating_split(std::vector<KernelMeasurement>& rows) {
  std::map<std::pair<std::string, std::string>, size_t> seen;
  for (KernelMeasurement& row : rows) {
    const std::string file = row.origin.substr(0, row.origin.rfind(':'));
    const size_t index = seen[{file, row.op}]++;
    row.held_out = index % 2 == 1;
  }
}

KernelDesc attention_backward_of(const KernelDesc& forward) {
  KernelDesc backward = forward;
  backward.attention.backward = true;
  return backward;
}

double attention_row_flops(const KernelDesc& kernel, bool forward_and_backward) {
  double flops = attention_work(kernel).flops;
  if (forward_and_backward) flops += attention_work(attention_backward_of(kernel)).flops;
  return flops;
}

}  // namespace upsim
