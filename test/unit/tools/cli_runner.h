// Runs the upsim executable as a user would, from a test: `upsim <args>` in a working folder,
// with stdout and stderr captured apart and the exit code (128 + signal for a killed process).
// The arguments are shell words (tests quote paths with quote()); only tests use a shell here.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace upsim::test {

struct CliResult {
  int exit_code = -1;
  std::string output;  ///< stdout, then stderr
  std::string out;     ///< stdout alone (results; warnings and progress go to stderr)
  std::string err;     ///< stderr alone
};

/// `s` as one single-quoted shell word.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

inline std::string read_whole_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs `<prefix> upsim <args>` with `cwd` as working folder; `prefix` is shell text run before
/// (e.g. "ulimit -v 800000;").
inline CliResult run_upsim(const std::string& args, const std::filesystem::path& cwd,
                           const std::string& prefix = "") {
  const std::filesystem::path err_file = std::filesystem::temp_directory_path() /
                                         ("upsim_cli_runner_stderr_" + std::to_string(::getpid()));
  const std::string cmd = "cd " + quote(cwd.string()) + " && " + prefix + " " +
                          quote(UPSIM_BINARY) + " " + args + " 2>" + quote(err_file.string());
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0)
    r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = read_whole_file(err_file);
  std::filesystem::remove(err_file);
  r.output = r.out + r.err;
  return r;
}

}  // namespace upsim::test
