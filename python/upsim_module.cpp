// upsim._core: the Python extension module behind the `upsim` package (python/upsim/). It runs
// scenarios in this process through the library the CLI uses (tools/run_documents.h) and returns
// the run's documents (summary.txt, summary.json, ranks / links / ops CSV); the package's Python
// turns them into a Result with pandas DataFrames. Errors of the input become upsim.ConfigError
// (a ValueError), a run that cannot complete upsim.SimulationError (a RuntimeError); the messages
// are the CLI's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "calibration/fitting/kernel_measurements.h"
#include "sim/config/config_error.h"
#include "sim/config/config_node.h"
#include "sim/executor.h"
#include "sim/formats/parse_error.h"
#include "tools/collective_commands.h"
#include "tools/kernel_commands.h"
#include "tools/run_documents.h"
#include "tools/scenario.h"
#include "tools/schema_command.h"
#include "tools/sweep_command.h"
#include "tools/validation/validate_memory.h"
#include "tools/validation/validate_workloads.h"
#include "tools/version.h"

namespace py = pybind11;

namespace {

/// The documents of one run as a dict of str (and `warnings`, a list of str).
py::dict run(const std::string& scenario, const std::vector<std::string>& overrides,
             const std::optional<std::string>& text) {
  upsim::cli::RunDocuments documents;
  {
    // The run holds no Python object; other Python threads may go on meanwhile.
    py::gil_scoped_release release;
    upsim::ConfigDocument doc = text ? upsim::ConfigDocument::parse_string(*text, scenario)
                                     : upsim::ConfigDocument::load_file(scenario);
    for (const std::string& assignment : overrides)
      doc.apply_override(assignment);
    documents = upsim::cli::run_in_memory(doc, upsim::cli::RunIdentity{scenario, overrides});
  }
  py::dict out;
  out["summary_text"] = documents.summary_text;
  out["resolved_yaml"] = documents.resolved_yaml;
  out["summary_json"] = documents.summary_json;
  out["ranks_csv"] = documents.ranks_csv;
  out["links_csv"] = documents.links_csv;
  out["ops_csv"] = documents.ops_csv;
  out["warnings"] = documents.warnings;
  return out;
}

/// `upsim sweep ARGS...` in this process: {exit_code, folder, stdout, stderr}.
py::dict sweep(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  upsim::cli::SweepOutcome outcome;
  {
    py::gil_scoped_release release;
    outcome = upsim::cli::run_sweep(args, out, err);
  }
  py::dict result;
  result["exit_code"] = outcome.exit_code;
  result["folder"] = outcome.folder.string();
  result["stdout"] = out.str();
  result["stderr"] = err.str();
  return result;
}

/// `upsim validate SUBJECT ARGS...` in this process: {exit_code, stdout}. A bad option is a
/// std::logic_error (Boost.Program_options' errors), raised as upsim.ConfigError.
py::dict validate(const std::string& subject, const std::vector<std::string>& args) {
  using Main = int (*)(const std::vector<std::string>&, std::ostream&);
  Main main = nullptr;
  if (subject == "workloads") main = &upsim::cli::validate_workloads_main;
  if (subject == "memory") main = &upsim::cli::validate_memory_main;
  if (subject == "kernels") main = &upsim::cli::validate_kernels_main;
  if (subject == "collectives") main = &upsim::cli::validate_collectives_main;
  if (main == nullptr) {
    throw upsim::ConfigError(
        "validate", 0, "",
        "unknown subject `" + subject + "`; valid: collectives, kernels, memory, workloads");
  }
  std::ostringstream out;
  int code = 0;
  {
    py::gil_scoped_release release;
    try {
      code = main(args, out);
    } catch (const std::logic_error& e) {
      throw upsim::ConfigError("validate " + subject, 0, "", e.what());
    }
  }
  py::dict result;
  result["exit_code"] = code;
  result["stdout"] = out.str();
  return result;
}

/// The schema (tools/schema_command.h) as a list of dicts.
py::list schema(const std::string& prefix, const std::vector<std::string>& scenarios,
                bool with_files) {
  std::vector<upsim::cli::SchemaKey> keys;
  {
    py::gil_scoped_release release;
    keys = upsim::cli::read_schema({scenarios.begin(), scenarios.end()}, with_files);
  }
  py::list out;
  for (const upsim::cli::SchemaKey* k : upsim::cli::keys_below(keys, prefix)) {
    py::dict row;
    row["key"] = k->path;
    row["meaning"] = upsim::cli::meaning_text(*k);
    row["read_as"] = k->types;
    row["ranges"] = k->ranges;
    row["defaults"] = k->defaults;
    row["families"] = k->families;
    row["in_referenced_file"] = k->in_referenced_file;
    out.append(row);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "upsim's simulator core; use the `upsim` package (upsim.run) rather than this module.";
  m.attr("__version__") = std::string(upsim::cli::kVersion);
  static py::exception<upsim::ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
  static py::exception<upsim::SimulationError> simulation_error(m, "SimulationError",
                                                                PyExc_RuntimeError);
  // Shown as upsim.ConfigError / upsim.SimulationError, where the package exports them.
  config_error.attr("__module__") = "upsim";
  simulation_error.attr("__module__") = "upsim";
  // Files a scenario reads (traces, measurement tables) that do not parse are input errors too.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const upsim::ConfigError& e) {
      config_error(e.what());
    } catch (const upsim::ParseError& e) {
      config_error(e.what());
    } catch (const upsim::CalibrationDataError& e) {
      config_error(e.what());
    } catch (const upsim::SimulationError& e) {
      simulation_error(e.what());
    }
  });
  m.def("run", &run, py::arg("scenario"), py::arg("overrides") = std::vector<std::string>{},
        py::arg("text") = std::nullopt,
        "Runs a scenario to steady state; returns its documents as a dict of str.\n\n"
        "scenario: the scenario file, or with `text` the name it is read as (file references\n"
        "resolve against its folder); overrides: 'a.b=value' assignments, applied in order.");
  m.def("schema", &schema, py::arg("prefix") = std::string(),
        py::arg("scenarios") = std::vector<std::string>{}, py::arg("with_files") = false,
        "Every scenario key the readers read, with type, ranges, defaults and families.");
  m.def("validate", &validate, py::arg("subject"), py::arg("args"),
        "Runs `upsim validate SUBJECT ARGS...` in this process; returns {exit_code, stdout}.");
  m.def("sweep", &sweep, py::arg("args"),
        "Runs `upsim sweep ARGS...` in this process; returns {exit_code, folder, stdout, "
        "stderr}.");
}
