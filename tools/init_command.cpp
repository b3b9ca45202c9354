#include "tools/init_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <filesystem>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <system_error>

#include "tools/command_line.h"
#include "tools/input_text.h"
#include "tools/output_folder.h"
#include "tools/shipped_files.h"

namespace upsim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

/// A starter is a page of YAML; anything larger is not one.
constexpr std::uintmax_t kMaxStarterBytes = 1 << 20;

bool reference_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' ||
         c == '/';
}

}  // namespace

std::string absolute_references(std::string_view starter, const std::string& starter_folder) {
  const fs::path folder = fs::absolute(starter_folder);
  std::string out;
  size_t i = 0;
  while (i < starter.size()) {
    // A reference starts a YAML value: after ": ", "[", "{" or ", ".
    const bool value_start =
        i >= 1 && (starter[i - 1] == ' ' || starter[i - 1] == '[' || starter[i - 1] == '{');
    if (value_start && starter.substr(i, 3) == "../") {
      size_t end = i;
      while (end < starter.size() && reference_char(starter[end]))
        ++end;
      out += (folder / std::string(starter.substr(i, end - i))).lexically_normal().string();
      i = end;
      continue;
    }
    out += starter[i++];
  }
  return out;
}

int init_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string kind;
  std::string dir;
  bool force = false;
  po::options_description desc(
      "usage: upsim init dlrm|transformer|trace DIR [--force]\n\n"
      "Writes DIR/scenario.yaml, a commented starter scenario that runs as it is\n"
      "(`upsim run DIR/scenario.yaml`): dlrm (DLRM on 4x A100), transformer (a Llama-style 1B\n"
      "on one DGX H100, TP2 DP4) or trace (a measured 8-rank step replayed from its PyTorch\n"
      "traces). Its references to shipped files are absolute paths, so DIR can be anywhere.\n\n"
      "options");
  desc.add_options()("help,h", "this help")  //
      ("force", po::bool_switch(&force), "replace an existing DIR/scenario.yaml");
  po::options_description hidden;
  hidden.add_options()("kind", po::value<std::string>(&kind))  //
      ("dir", po::value<std::string>(&dir));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("kind", 1).add("dir", 1);
  po::variables_map vm;
  if (!parse_command_line(args, all, out, vm, &positional, &desc)) return 0;
  if (kind.empty()) {
    throw po::error("upsim init: missing KIND (dlrm, transformer or trace) and DIR");
  }
  if (std::find(std::begin(kStarterKinds), std::end(kStarterKinds), kind) ==
      std::end(kStarterKinds)) {
    throw po::error(fmt::format(
        "upsim init: `{}` is no starter; give dlrm, transformer or trace, then a folder", kind));
  }
  if (dir.empty())
    throw po::error("upsim init: missing DIR (the folder to write scenario.yaml to)");

  const fs::path starter = shipped_path(fmt::format("configs/starters/{}.yaml", kind));
  std::string text;
  if (const std::optional<std::string> problem = read_input_text(starter, kMaxStarterBytes, text)) {
    throw std::runtime_error(
        fmt::format("cannot read the starter {}: {}", starter.string(), *problem));
  }
  const fs::path target = fs::path(dir) / "scenario.yaml";
  refuse_to_overwrite(target, force);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw std::runtime_error(fmt::format("cannot create {}: {}", dir, ec.message()));
  }
  write_file_atomically(target, absolute_references(text, starter.parent_path().string()));
  out << fmt::format("wrote {} (a {} starter); run it: upsim run {}\n", target.string(), kind,
                     target.string());
  return 0;
}

}  // namespace upsim::cli
