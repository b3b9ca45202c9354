// ConfigError: the one error type of the configuration layer.
//
// Contract: carries the file a value came from, its 1-based line (0 = unknown), the key path of
// the value ("workload.embeddings.rows", "links[3].bandwidth"; empty = the document root) and a
// message. what() is one line:
//   configs/dlrm_4gpu.yaml:12: workload.global_batch: expected an integer, got "abc"
// Values that came from a command-line override have file kOverrideSource and no line; what()
// then reads `--set workload.global_batch: ...`.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace upsim {

/// The file name a ConfigError reports for values given on the command line with --set.
inline constexpr std::string_view kOverrideSource = "--set";

class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, std::string key_path, std::string message)
      : std::runtime_error(format(file, line, key_path, message)),
        file_(std::move(file)),
        line_(line),
        key_path_(std::move(key_path)),
        message_(std::move(message)) {}

  const std::string& file() const { return file_; }
  /// 1-based line in file(); 0 when unknown (command-line overrides, defaults).
  int line() const { return line_; }
  const std::string& key_path() const { return key_path_; }
  /// The message without the location prefix.
  const std::string& message() const { return message_; }

 private:
  static std::string format(const std::string& file, int line, const std::string& key_path,
                            const std::string& message) {
    std::string out = file;
    if (file == kOverrideSource) {
      if (!key_path.empty()) out += " " + key_path;
    } else {
      if (line > 0) out += ":" + std::to_string(line);
      if (!key_path.empty()) out += ": " + key_path;
    }
    out += ": " + message;
    return out;
  }

  std::string file_;
  int line_;
  std::string key_path_;
  std::string message_;
};

}  // namespace upsim
