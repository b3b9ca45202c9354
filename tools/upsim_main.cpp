// upsim: the command-line front end. The only place that turns errors into exit codes:
//   0 success, 1 the simulation could not complete, 2 bad input (config, files, options).
#include <fmt/format.h>
#include <unistd.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "calibration/fitting/kernel_measurements.h"
#include "sim/config/config_error.h"
#include "sim/executor.h"
#include "sim/formats/parse_error.h"
#include "tools/collective_commands.h"
#include "tools/diff_command.h"
#include "tools/init_command.h"
#include "tools/interrupt_cleanup.h"
#include "tools/kernel_commands.h"
#include "tools/memory_limit.h"
#include "tools/plan_command.h"
#include "tools/plot_command.h"
#include "tools/run_command.h"
#include "tools/schema_command.h"
#include "tools/shard_command.h"
#include "tools/sweep_command.h"
#include "tools/trace_commands.h"
#include "tools/validation/validate_memory.h"
#include "tools/validation/validate_workloads.h"
#include "tools/version.h"

namespace po = boost::program_options;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitSimulationFailed = 1;
constexpr int kExitBadInput = 2;

const char* kTopUsage =
    "upsim — predicts the per-iteration training time of ML workloads on multi-GPU platforms\n"
    "and explains it, by discrete-event simulation of CPU launch threads, CUDA streams and\n"
    "collectives.\n"
    "\n"
    "usage: upsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  init dlrm|transformer|trace DIR\n"
    "                  write DIR/scenario.yaml, a commented starter scenario that runs as is\n"
    "  schema [KEY]    every scenario key with the type, range and default its reader uses\n"
    "  run SCENARIO    simulate a scenario (configs/*.yaml); prints the predicted iteration\n"
    "                  time and a per-rank breakdown, writes a Chrome trace (Perfetto) and the\n"
    "                  resolved scenario. `upsim run --help` lists its options.\n"
    "  plan SCENARIO   search the parallel layout of a transformer scenario (tensor, pipeline,\n"
    "                  virtual stages, data parallel, micro-batch) by simulation; ranks them with\n"
    "                  tokens/s and MFU and writes the best as a scenario (best.yaml)\n"
    "  shard SCENARIO  search a DLRM scenario's sharding types and table placement by simulated\n"
    "                  iteration time (load imbalance, exposed communication, table memory per\n"
    "                  GPU) and write the best placement as a plan file (`sharding: plan`)\n"
    "  sweep STUDY     run a scenario at every point of a grid of overrides (a what-if\n"
    "                  study, configs/studies/*.yaml) into one results table; -j N, resumable\n"
    "  diff RUN_A RUN_B\n"
    "                  what changed between two runs' outputs: iteration time, breakdown,\n"
    "                  the ops and kernels that changed most\n"
    "  plot RESULTS.csv --x AXIS | plot RUN_DIR\n"
    "                  SVG plots with gnuplot: iteration time against a sweep axis, stacked\n"
    "                  breakdowns, link utilisation\n"
    "  validate kernels\n"
    "                  compare the kernel models with measured kernel times (held-out error)\n"
    "  validate collectives\n"
    "                  compare the fabric + collective model with measured nccl-tests sweeps\n"
    "  validate traces DIR\n"
    "                  replay per-rank PyTorch traces; measured vs predicted iteration time\n"
    "  validate workloads\n"
    "                  published Megatron-LM, llm-foundry (MPT), NeMo and DeepLearningExamples\n"
    "                  training steps, measured vs predicted step time\n"
    "  validate memory\n"
    "                  published per-GPU training memory (HuggingFace's BERT-large on V100,\n"
    "                  torchtitan's Llama 3 8B on H100),\n"
    "                  measured vs estimated\n"
    "  calibrate kernels --out FILE\n"
    "                  fit the calibrated kernel model on measured sweeps\n"
    "  calibrate launch --csv launch.csv\n"
    "                  the kernel floor (kernel_overhead) from bench/gpu's launch table\n"
    "  calibrate host-overheads TRACE... --out FILE\n"
    "                  extract host overheads T1-T5 from PyTorch Kineto traces\n"
    "  calibrate collectives --topology FABRIC --nccl-tests LOG --out FILE\n"
    "                  fit the collective tuning on measured nccl-tests output\n"
    "  convert kernels --out FILE.h5 --csv FILE...\n"
    "                  write kernel measurement CSVs in upsim's HDF5 layout\n"
    "  convert traces DIR --out FILE.csv\n"
    "                  the kernels of PyTorch traces as a kernel measurement table\n"
    "  (each command takes --help)\n"
    "\n"
    "options:\n"
    "  -h, --help      this help\n"
    "  --version       print the version\n";

int run_main(const std::vector<std::string>& args) {
  upsim::cli::RunOptions options;
  std::vector<std::string> overrides;
  std::string trace_ranks;
  std::string trace_iterations;
  std::string trace_format;
  po::options_description desc(
      "usage: upsim run SCENARIO [options]\n\n"
      "Simulates SCENARIO (a YAML file, e.g. configs/dlrm_4gpu.yaml) and prints the predicted\n"
      "per-iteration time with a per-rank breakdown: GPU compute busy, communication, exposed\n"
      "communication, rendezvous wait, CPU-bound idle. Writes into the output folder:\n"
      "  trace.json      Chrome trace: open it in ui.perfetto.dev or chrome://tracing; a run\n"
      "                  of more than 1 M tasks draws only the ranks its workload suggests\n"
      "                  (transformers: one per pipeline stage), --trace-ranks all draws all\n"
      "  kineto/         with --trace-format kineto, instead of trace.json: one PyTorch profiler\n"
      "                  (Kineto) trace per rank, rank_N.json, which Holistic Trace Analysis\n"
      "                  reads as a job's trace folder and a trace scenario replays\n"
      "  summary.txt     the printed summary\n"
      "  scenario.yaml   the fully resolved scenario (overrides applied, defaults written,\n"
      "                  referenced files inlined); `upsim run` on it reproduces the run\n\n"
      "options");
  desc.add_options()           //
      ("help,h", "this help")  //
      ("set,s", po::value<std::vector<std::string>>(&overrides)->composing(),
       "override a scenario value, e.g. --set workload.global_batch=2048 or "
       "--set platform.gpu=configs/hardware/h100_sxm5_80gb.yaml (repeatable; applied in order; "
       "a path given here is relative to the working directory)")  //
      ("out,o", po::value<std::string>(&options.out_dir),
       "output folder (default: upsim-out/<scenario name>, or -2, -3, ... if that exists); "
       "existing files in it are not overwritten without --force")  //
      ("trace", po::value<std::string>(&options.trace_file),
       "write the Chrome trace to this file instead of <out>/trace.json (--trace-format kineto: "
       "the Kineto traces into this folder instead of <out>/kineto)")  //
      ("trace-format", po::value<std::string>(&trace_format),
       "chrome (default: trace.json for Perfetto) or kineto (<out>/kineto/rank_N.json, one "
       "PyTorch profiler trace per rank, for HTA and `model: trace` scenarios)")  //
      ("trace-ranks", po::value<std::string>(&trace_ranks),
       "graph ranks the trace draws (kineto: the ranks written): `all`, or ranks and ranges such "
       "as 0-7,56 (default: "
       "all, except that a run of more than 1 M tasks draws the ranks its workload suggests)")  //
      ("trace-iterations", po::value<std::string>(&trace_iterations),
       "iterations the trace draws: all, last, N or N-M (default: all, except that a "
       "run of more than 1 M tasks draws its last)")  //
      ("trace-gzip", po::bool_switch(&options.trace_gzip),
       "write <out>/trace.json.gz (gzip; Perfetto opens it) instead of trace.json, or "
       "rank_N.json.gz Kineto traces (default for runs of more than 1 M tasks)")     //
      ("no-trace", po::bool_switch(&options.no_trace), "do not write a trace")       //
      ("force", po::bool_switch(&options.force), "overwrite existing output files")  //
      ("quiet,q", po::bool_switch(&options.quiet),
       "print only the predicted iteration time in milliseconds")  //
      ("dry-run", po::bool_switch(&options.dry_run),
       "build the scenario and print what would run (platform, workload, memory, the graph's "
       "size and the resolved scenario) without simulating or writing anything")  //
      ("keys", po::bool_switch(&options.list_keys),
       "print the key paths --set takes for this scenario (those inside referenced files "
       "too), one per line, without simulating");
  po::options_description hidden;
  hidden.add_options()("scenario", po::value<std::string>(&options.scenario));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description positional;
  positional.add("scenario", 1);

  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return kExitOk;
  }
  po::notify(vm);
  if (options.scenario.empty()) {
    std::cerr << "upsim run: missing SCENARIO (a YAML file, e.g. configs/dlrm_4gpu.yaml); see "
                 "`upsim run --help`\n";
    return kExitBadInput;
  }
  options.overrides = overrides;
  options.progress = ::isatty(STDERR_FILENO) != 0 && !options.quiet;
  if (vm.count("trace-ranks")) options.trace_ranks = trace_ranks;
  if (vm.count("trace-iterations")) options.trace_iterations = trace_iterations;
  if (vm.count("trace-format")) options.trace_format = trace_format;
  upsim::cli::run_scenario(options, std::cout, std::cerr);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  upsim::cli::install_interrupt_cleanup();
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::cout << kTopUsage;
      return args.empty() ? kExitBadInput : kExitOk;
    }
    if (args[0] == "--version") {
      std::cout << "upsim " << upsim::cli::kVersion << "\n";
      return kExitOk;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (command == "run") return run_main(args);
    if (command == "init") return upsim::cli::init_main(args, std::cout);
    if (command == "schema") return upsim::cli::schema_main(args, std::cout);
    if (command == "shard") return upsim::cli::shard_main(args, std::cout, std::cerr);
    if (command == "plan") return upsim::cli::plan_main(args, std::cout, std::cerr);
    if (command == "sweep") return upsim::cli::sweep_main(args, std::cout, std::cerr);
    if (command == "diff") return upsim::cli::diff_main(args, std::cout);
    if (command == "plot") return upsim::cli::plot_main(args, std::cout, std::cerr);
    if (command == "convert") {
      if (!args.empty() && args[0] == "kernels") {
        args.erase(args.begin());
        return upsim::cli::convert_kernels_main(args, std::cout);
      }
      if (!args.empty() && args[0] == "traces") {
        args.erase(args.begin());
        return upsim::cli::convert_traces_main(args, std::cout);
      }
      if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::cout << "usage: upsim convert SUBJECT [options]   (upsim convert SUBJECT --help for "
                     "each)\nsubjects: kernels, traces\n";
        return 0;
      }
      std::cerr << fmt::format(
          "upsim convert: unknown or missing subject `{}`; valid: kernels, traces\n",
          args.empty() ? "" : args[0]);
      return kExitBadInput;
    }
    if (command == "calibrate" || command == "validate") {
      const std::string what = args.empty() ? "" : args[0];
      if (!args.empty()) args.erase(args.begin());
      if (what == "--help" || what == "-h") {
        std::cout << fmt::format(
            "usage: upsim {} SUBJECT [options]   (upsim {} SUBJECT --help for each)\n"
            "subjects: {}\n",
            command, command,
            command == "calibrate" ? "collectives, host-overheads, kernels, launch"
                                   : "collectives, kernels, memory, traces, workloads");
        return 0;
      }
      if (command == "calibrate" && what == "kernels") {
        return upsim::cli::calibrate_kernels_main(args, std::cout);
      }
      if (command == "validate" && what == "kernels") {
        return upsim::cli::validate_kernels_main(args, std::cout);
      }
      if (command == "calibrate" && what == "launch") {
        return upsim::cli::calibrate_launch_main(args, std::cout);
      }
      if (command == "calibrate" && what == "host-overheads") {
        return upsim::cli::calibrate_host_overheads_main(args, std::cout);
      }
      if (command == "calibrate" && what == "collectives") {
        return upsim::cli::calibrate_collectives_main(args, std::cout);
      }
      if (command == "validate" && what == "collectives") {
        return upsim::cli::validate_collectives_main(args, std::cout);
      }
      if (command == "validate" && what == "traces") {
        return upsim::cli::validate_traces_main(args, std::cout);
      }
      if (command == "validate" && what == "workloads") {
        return upsim::cli::validate_workloads_main(args, std::cout);
      }
      if (command == "validate" && what == "memory") {
        return upsim::cli::validate_memory_main(args, std::cout);
      }
      std::cerr << fmt::format(
          "upsim {}: unknown or missing subject `{}`; valid: {}\n", command, what,
          command == "calibrate" ? "collectives, host-overheads, kernels, launch"
                                 : "collectives, kernels, memory, traces, workloads");
      return kExitBadInput;
    }
    std::cerr << fmt::format(
        "upsim: unknown command `{}`; valid: init, schema, run, plan, shard, sweep, diff, plot, "
        "validate, "
        "calibrate, "
        "convert "
        "(see "
        "`upsim --help`)\n",
        command);
    return kExitBadInput;
  } catch (const upsim::ConfigError& e) {
    std::cerr << "upsim: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const upsim::ParseError& e) {
    std::cerr << "upsim: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const upsim::CalibrationDataError& e) {
    std::cerr << "upsim: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const po::error& e) {
    std::cerr << "upsim: " << e.what() << " (see `upsim --help`)\n";
    return kExitBadInput;
  } catch (const upsim::SimulationError& e) {
    std::cerr << "upsim: simulation failed: " << e.what() << "\n";
    return kExitSimulationFailed;
  } catch (const std::bad_alloc&) {
    const upsim::cli::MemoryLimit limit = upsim::cli::process_memory_limit();
    std::cerr << fmt::format(
        "upsim: error: out of memory ({}: {} MiB); simulate a smaller scenario (fewer GPUs, "
        "layers or iterations)\n",
        limit.source, limit.bytes >> 20);
    return kExitSimulationFailed;
  } catch (const std::exception& e) {
    std::cerr << "upsim: error: " << e.what() << "\n";
    return kExitBadInput;
  }
}
