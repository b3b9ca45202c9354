// Strict configuration reading: a ConfigDocument owns a parsed YAML tree, ConfigNode is a view
// into it that remembers which keys a reader asked for.
//
// Contract:
//  - Every error throws upsim::ConfigError with the file, 1-based line and key path of the value
//    ("workload.embeddings.rows", "links[3].bandwidth"). Values given with --set report
//    `--set <key path>` instead of a file and line.
//  - Strict types: a value of the wrong type is an error, never a silent default. Integers,
//    numbers and booleans must be plain (unquoted) YAML scalars; 1.5 is not an integer; booleans
//    are true/false (True/TRUE/False/FALSE); a map or sequence where a scalar is expected is an
//    error. Quantities need units ("1.5us", "25GB/s", "312TFLOP/s", "4KiB"; see units.h).
//  - Strict keys: has / child / optional_child / get_* / get_*_or / load_reference record the key
//    as asked for in that map (even when it is absent). check_all_keys_used() then reports the
//    first key, in document order, that is present but was never asked for, with the nearest
//    asked-for key as a suggestion. Duplicate keys in one map are an error when loading.
//  - An empty value (`key:` / `~`) behaves as an empty map for lookups, so `embeddings:` with
//    nothing under it takes every default.
//  - get_*_or writes the default into the tree when the key is absent, so resolved_yaml() states
//    every value the run used. Defaults are appended to their map in the order they were read.
//  - File references: get_path() resolves a path relative to the directory of the file holding
//    the key (never the working directory; a path given with --set is taken as written).
//    load_reference() loads that YAML (or CSV) file, inlines it in place of the path string and
//    returns its root; key paths continue from the referencing key, file and line name the loaded
//    file. A map (or, for a CSV file, a sequence) given in place of the path is taken as the
//    inline content (a resolved document, whose references are inlined, therefore loads again).
//  - Errors quote a file's content only where it is of the expected kind, and then at most one
//    short line: a value or key of a YAML map, never a whole file that parsed as one scalar
//    ("plain text (a YAML scalar)"), never a CSV's header or fields (named by line and column
//    number), never text that yaml-cpp's messages would echo. Control characters are escaped.
//    Values given with --set are the user's own and are quoted.
//  - Lifetime: a ConfigNode is valid while its ConfigDocument lives. apply_override() may replace
//    nodes, so apply all overrides before reading.
//  - Values as written: apply_override() keeps the value a file states for a key it replaces;
//    as_written() returns it, so that a reader can tell a what-if from the file's own value
//    (hardware_profile.h scales the pinned peaks by a --set SM count against the file's).
//  - Keys read for a use (ConfigDocument::unused_key_warnings): a key a reader reads only on
//    behalf of some model is consumed only when that model is active. A reader marks such reads
//    with read_for(use): every key looked up through the returned view, or through a view
//    reached from it, is recorded as read for `use`, a name the reader publishes beside its
//    schema ("fabric link capacity" in topology/fabric_loader.h, the hardware profile's uses in
//    calibration/hardware_profile.h). A key looked up through a view without a use is consumed
//    unconditionally. The composition root, which knows the models it built, names the uses no
//    active model reads, each with the reason; unused_key_warnings() then names every key the
//    input states (in a file or by --set; never a default) that was read only for such uses,
//    with its file and line, one warning per use. Reading records, it never changes a value.
//  - No global state: documents are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/time.h"
#include "sim/units.h"

namespace upsim {

namespace config_detail {
struct Node;
struct DocumentState;
struct NodeAccess;
}  // namespace config_detail

/// A use of configuration values that no active model has (see the contract, "Keys read for a
/// use"): the composition root names it and says why.
struct InactiveUse {
  /// The name readers pass to ConfigNode::read_for.
  std::string use;
  /// Why no active model reads it, as a clause that names the model: "interconnect model
  /// `seed_curve` prices collectives with the seed paper's fitted size -> bandwidth curves, not
  /// the fabric's links".
  std::string reason;
  /// false: every key read only for this use is reported. true: only the values among them
  /// that --set gave, each at its own key (keys a library file states for other models, such
  /// as a profile's L2 size under a kernel model without a cache model, or a fallback another
  /// file replaces, are not news until a what-if changes them).
  bool only_if_set = false;
};

/// The longest latency, overhead or floor a configuration file may state (1 s): measured ones are
/// nanoseconds to microseconds, so a value past it is a unit slip ("5s" for 5 us), while every
/// what-if stays inside. The readers of hardware, fabric, tuning, calibration and host files
/// share it.
inline constexpr Duration kMaxConfiguredLatency = Duration::from_ms(1000);

class ConfigNode {
 public:
  // --- Location -----------------------------------------------------------------------------
  /// "workload.embeddings.rows", "links[3].bandwidth"; empty for the document root.
  const std::string& key_path() const { return key_path_; }
  /// 1-based line of this value in file(); 0 for values from --set and defaults.
  int line() const;
  /// The file this value was read from; "--set" for command-line overrides.
  const std::filesystem::path& file() const;
  /// Throws a ConfigError at this node's location (for semantic errors found by a reader).
  [[noreturn]] void fail(std::string message) const;

  // --- Shape --------------------------------------------------------------------------------
  bool is_map() const;
  bool is_sequence() const;
  bool is_scalar() const;
  /// An empty value: `key:`, `key: ~`, `key: null`.
  bool is_null() const;
  /// Elements of a sequence or entries of a map; 0 for null; a scalar is an error.
  size_t size() const;
  /// Elements of a sequence (key paths `key[i]`); empty for null; anything else is an error.
  std::vector<ConfigNode> items() const;
  /// Keys of a map in file order (defaults and --set additions last); does not mark them asked.
  std::vector<std::string> map_keys() const;
  /// Every entry of a map in file order; marks every key asked (for maps keyed by user names).
  std::vector<std::pair<std::string, ConfigNode>> map_entries() const;
  /// Every entry of a map in file order without marking any key asked: for code that inspects a
  /// document and must leave its strict-key check as it was (sim/config/referenced_files.h).
  std::vector<std::pair<std::string, ConfigNode>> peek_map_entries() const;
  /// Throws ConfigError unless this is a map (or null: an empty one), saying what the reader
  /// expected: "expected a YAML map (a GPU hardware profile), got plain text (a YAML scalar)".
  /// Readers of a file call it first. Errors describe a file's content, never quote it: a file
  /// that is one scalar is "plain text", a CSV "a CSV table"; --set values are quoted.
  void expect_map(std::string_view what) const;

  // --- Keyed access (this node must be a map or null) ---------------------------------------
  /// Keys are single map keys: "rows", never "a.b".
  bool has(std::string_view key) const;
  /// The input states `key` (in a file or by --set): present, and not a default a get_*_or
  /// wrote into the tree. For readers that treat a stated value as a constraint.
  bool states(std::string_view key) const;
  /// Missing key -> ConfigError "missing required key `key`".
  ConfigNode child(std::string_view key) const;
  std::optional<ConfigNode> optional_child(std::string_view key) const;
  /// The map at `key`; when absent, an empty map added to the tree (as a default is), so that
  /// the defaults a reader writes into it appear in resolved_yaml().
  ConfigNode child_or_empty_map(std::string_view key) const;

  // --- Value of this node -------------------------------------------------------------------
  int64_t as_int() const;
  double as_double() const;
  bool as_bool() const;
  /// Any scalar (plain or quoted) as written.
  std::string as_string() const;
  Duration as_duration() const;
  Bandwidth as_bandwidth() const;
  FlopRate as_flop_rate() const;
  /// Whole bytes with a unit: "4KiB", "25GB", "512B" (a bare number only for 0).
  int64_t as_bytes() const;
  std::vector<int64_t> as_int_list() const;
  std::vector<std::string> as_string_list() const;

  // --- Keyed getters: required, and with a default written into the tree when absent --------
  int64_t get_int(std::string_view key) const;
  int64_t get_int_or(std::string_view key, int64_t default_value) const;
  double get_double(std::string_view key) const;
  double get_double_or(std::string_view key, double default_value) const;
  bool get_bool(std::string_view key) const;
  bool get_bool_or(std::string_view key, bool default_value) const;
  std::string get_string(std::string_view key) const;
  std::string get_string_or(std::string_view key, std::string_view default_value) const;
  Duration get_duration(std::string_view key) const;
  Duration get_duration_or(std::string_view key, Duration default_value) const;
  Bandwidth get_bandwidth(std::string_view key) const;
  Bandwidth get_bandwidth_or(std::string_view key, Bandwidth default_value) const;
  FlopRate get_flop_rate(std::string_view key) const;
  FlopRate get_flop_rate_or(std::string_view key, FlopRate default_value) const;
  int64_t get_bytes(std::string_view key) const;
  int64_t get_bytes_or(std::string_view key, int64_t default_value) const;
  std::vector<int64_t> get_int_list(std::string_view key) const;
  std::vector<std::string> get_string_list(std::string_view key) const;

  // --- Validation helpers -------------------------------------------------------------------
  /// Zero or negative -> "must be a positive integer, got 0".
  int64_t get_positive_int(std::string_view key) const;
  int64_t get_positive_int_or(std::string_view key, int64_t default_value) const;
  /// The value must be one of `choices`; the error names the key, suggests the nearest choice
  /// and lists all: "unknown sharder `x`; did you mean `y`? valid: a, b".
  std::string get_choice(std::string_view key, std::span<const std::string_view> choices) const;
  std::string get_choice(std::string_view key,
                         std::initializer_list<std::string_view> choices) const;
  std::string get_choice_or(std::string_view key, std::span<const std::string_view> choices,
                            std::string_view default_value) const;
  std::string get_choice_or(std::string_view key, std::initializer_list<std::string_view> choices,
                            std::string_view default_value) const;

  /// Documented ranges (a reader states each range and why beside the key's schema): a value
  /// outside [lo, hi], or a NaN / infinite number, -> "must be between LO and HI, got V", the
  /// bounds printed in the value's units. The _or forms write the default as get_*_or does.
  int64_t as_int_in(int64_t lo, int64_t hi) const;
  double as_double_in(double lo, double hi) const;
  Duration as_duration_in(Duration lo, Duration hi) const;
  Bandwidth as_bandwidth_in(Bandwidth lo, Bandwidth hi) const;
  FlopRate as_flop_rate_in(FlopRate lo, FlopRate hi) const;
  int64_t as_bytes_in(int64_t lo, int64_t hi) const;
  int64_t get_int_in(std::string_view key, int64_t lo, int64_t hi) const;
  int64_t get_int_in_or(std::string_view key, int64_t lo, int64_t hi, int64_t default_value) const;
  double get_double_in(std::string_view key, double lo, double hi) const;
  double get_double_in_or(std::string_view key, double lo, double hi, double default_value) const;
  Duration get_duration_in(std::string_view key, Duration lo, Duration hi) const;
  Duration get_duration_in_or(std::string_view key, Duration lo, Duration hi,
                              Duration default_value) const;
  Bandwidth get_bandwidth_in(std::string_view key, Bandwidth lo, Bandwidth hi) const;
  Bandwidth get_bandwidth_in_or(std::string_view key, Bandwidth lo, Bandwidth hi,
                                Bandwidth default_value) const;
  int64_t get_bytes_in(std::string_view key, int64_t lo, int64_t hi) const;

  // --- Uses and written values (see the contract) ------------------------------------------
  /// A view of this node whose reads record every key they look up (here and below) as read
  /// for `use` (a non-empty name). The innermost read_for of a chain wins.
  ConfigNode read_for(std::string_view use) const;
  /// The value as its file states it, before a --set replaced it (with that file's line): this
  /// node itself when no --set replaced it; nullopt when --set gave it and no file states it.
  std::optional<ConfigNode> as_written() const;

  // --- File references ----------------------------------------------------------------------
  /// The path stored at `key`, resolved against the directory of the file that holds the key.
  /// After load_reference(key) it returns the loaded file's path.
  std::filesystem::path get_path(std::string_view key) const;
  /// Loads the YAML file named at `key` (see get_path), inlines it at `key` and returns its
  /// root. A missing file, a malformed file or a reference cycle throws ConfigError. Calling it
  /// again for the same key returns the already loaded content. A `.csv` file loads as a
  /// sequence of maps, one per data line, keyed by the header's column names (empty fields
  /// absent; RFC 4180 quoting; values are numbers or names), with the CSV's line numbers.
  ///
  ///   rows,pooling,sharding_type          ->  - {rows: 1000000, pooling: 20}
  ///   1000000,20,                             - {rows: 5000, pooling: 1, sharding_type: ...}
  ///   5000,1,data_parallel
  ConfigNode load_reference(std::string_view key) const;

 private:
  friend class ConfigDocument;
  friend struct config_detail::NodeAccess;

  ConfigNode(config_detail::DocumentState* doc, config_detail::Node* node, std::string key_path,
             uint32_t use = 0)
      : doc_(doc), node_(node), key_path_(std::move(key_path)), use_(use) {}

  config_detail::DocumentState* doc_;
  config_detail::Node* node_;
  std::string key_path_;
  /// Index of the use this view reads for in the document's table; 0 = unconditional.
  uint32_t use_ = 0;
};

/// A scalar a reader read (ConfigDocument::read_keys).
struct ReadKey {
  std::string
      path;  ///< as --set takes it: dotted, a sequence item by its index ("a.tables.0.rows")
  std::string type;   ///< what the reader expected ("an integer", "one of a, b", ...)
  std::string range;  ///< the range it checked ("1 .. 64"), or empty
  std::optional<std::string> default_value;  ///< the default it would take; none: required
  std::string value;                         ///< the value it read (YAML text)
  bool defaulted = false;                    ///< the value is the default: no input states it
  bool in_referenced_file = false;           ///< below a file the document references
};

class ConfigDocument {
 public:
  /// Missing or unreadable file, malformed YAML (with its line) -> ConfigError.
  static ConfigDocument load_file(const std::filesystem::path& path);
  /// Parses `yaml` as if read from `display_name`; references resolve against its directory.
  static ConfigDocument parse_string(std::string_view yaml, std::string display_name);

  ConfigDocument(ConfigDocument&&) noexcept;
  ConfigDocument& operator=(ConfigDocument&&) noexcept;
  ConfigDocument(const ConfigDocument&) = delete;
  ConfigDocument& operator=(const ConfigDocument&) = delete;
  ~ConfigDocument();

  /// Applies `path.to.key=value` (also `list.2.key=value` / `list[2].key=value`). The value is
  /// parsed as YAML. Missing maps on the way are created; a sequence index may equal the size
  /// (append). A path running through a file reference that is not loaded yet is applied when
  /// the reader loads it. Malformed assignments throw ConfigError with file "--set".
  void apply_override(std::string_view assignment);
  /// The key paths of the applied overrides, as written before `=` ("platform.gpu"), in order.
  const std::vector<std::string>& overrides() const;

  ConfigNode root();
  /// The file the document was loaded from (or its display name).
  const std::filesystem::path& file() const;

  /// Throws ConfigError for the first present key, in document order, that no reader asked for,
  /// and for --set paths that ran into a value that was never loaded as a reference.
  void check_all_keys_used() const;

  /// One warning per use in `inactive` for which the input states keys that readers read only
  /// for inactive uses (see the contract): "<reason>, so these keys change nothing: `a.b`
  /// (file:line), `c` (--set c), ...". A map whose every key is unused is named once, not key by
  /// key; at most kMaxNamedUnusedKeys keys are named per warning, then "and N more". In the
  /// order of `inactive`; deterministic.
  std::vector<std::string> unused_key_warnings(std::span<const InactiveUse> inactive) const;
  static constexpr size_t kMaxNamedUnusedKeys = 8;

  /// The effective configuration as YAML: overrides applied, defaults written, references
  /// inlined, paths read with get_path() (and not inlined) written absolute, so that the
  /// document runs again from wherever it is saved. Deterministic: the same input and reads
  /// (from the same working directory) give byte-identical output.
  std::string resolved_yaml() const;

  /// Every scalar a reader has read so far, in document order, with what it was read as: the
  /// schema of this document as its readers define it (`upsim schema`), and the key paths --set
  /// takes (`upsim run --keys`, shell completion).
  std::vector<ReadKey> read_keys() const;

 private:
  explicit ConfigDocument(std::unique_ptr<config_detail::DocumentState> state);

  std::unique_ptr<config_detail::DocumentState> state_;
};

}  // namespace upsim
