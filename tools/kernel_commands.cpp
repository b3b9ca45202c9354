#include "tools/kernel_commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/fit_kernel_calibration.h"
#include "calibration/fitting/hdf5_measurements.h"
#include "calibration/fitting/kernel_measurements.h"
#include "calibration/fitting/kernel_validation.h"
#include "calibration/fitting/launch_measurements.h"
#include "calibration/fitting/transformer_layer_check.h"
#include "calibration/hardware_profile.h"
#include "calibration/kernel_calibration.h"
#include "sim/config/config_node.h"
#include "sim/config/quantity_parse.h"
#include "tools/command_line.h"
#include "tools/interrupt_cleanup.h"
#include "tools/output_folder.h"
#include "tools/shipped_files.h"
#include "topology/fabric_loader.h"
#include "topology/fitting/collective_validation.h"
#include "topology/nccl_tuning.h"

namespace upsim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

struct MeasurementOptions {
  std::string llmcompass_dir = shipped_path("test/data/llmcompass");
  std::string gpu = "A100";
  std::vector<std::string> csv_files;
  std::vector<std::string> hdf5_files;
  std::string hardware = shipped_path("configs/hardware/a100_sxm4_80gb.yaml");
  /// TABLE=PROFILE: the --csv / --hdf5 table TABLE was measured on the GPU of PROFILE.
  std::vector<std::string> measured_on;
};

void add_measurement_options(po::options_description& desc, MeasurementOptions& m) {
  desc.add_options()  //
      ("llmcompass", po::value<std::string>(&m.llmcompass_dir)->default_value(m.llmcompass_dir),
       "folder with LLMCompass sweeps {matmul,softmax,layernorm,gelu}_<GPU>.csv; \"\" for none")  //
      ("gpu-name", po::value<std::string>(&m.gpu)->default_value(m.gpu),
       "the <GPU> suffix of the LLMCompass files")  //
      ("csv", po::value<std::vector<std::string>>(&m.csv_files)->composing(),
       "a measurement table in upsim's CSV format (calibration/fitting/kernel_measurements.h); "
       "repeatable")  //
      ("hdf5", po::value<std::vector<std::string>>(&m.hdf5_files)->composing(),
       "a measurement table in upsim's HDF5 layout (calibration/fitting/hdf5_measurements.h); "
       "repeatable")  //
      ("hardware", po::value<std::string>(&m.hardware)->default_value(m.hardware),
       "hardware profile of the GPU the measurements were taken on")  //
      ("measured-on", po::value<std::vector<std::string>>(&m.measured_on)->composing(),
       "TABLE=PROFILE: the --csv or --hdf5 table TABLE was measured on the GPU of hardware "
       "profile PROFILE, another memory, form factor or clock of --hardware's chip (A100 PCIe "
       "for an A100 SXM4 fit): its rows are priced on that profile; repeatable");
}

HardwareProfile read_hardware(const std::string& path) {
  ConfigDocument doc = ConfigDocument::load_file(path);
  HardwareProfile hw = load_hardware_profile(doc.root());
  doc.check_all_keys_used();
  return hw;
}

/// --measured-on TABLE=PROFILE: each table's profile, loaded. A TABLE that is not one of the
/// --csv / --hdf5 inputs, an entry without `=`, or a PROFILE of another chip than --hardware's
/// (compute capability or SM count differ: its fitted shape terms would not transfer) is a
/// command-line error.
std::map<std::string, std::shared_ptr<const HardwareProfile>> measured_on_profiles(
    const MeasurementOptions& m) {
  std::map<std::string, std::shared_ptr<const HardwareProfile>> out;
  if (m.measured_on.empty()) return out;
  const HardwareProfile fit = read_hardware(m.hardware);
  for (const std::string& entry : m.measured_on) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      throw po::error(fmt::format("--measured-on `{}`: expected TABLE=PROFILE", entry));
    }
    const std::string table = entry.substr(0, eq);
    const bool given =
        std::find(m.csv_files.begin(), m.csv_files.end(), table) != m.csv_files.end() ||
        std::find(m.hdf5_files.begin(), m.hdf5_files.end(), table) != m.hdf5_files.end();
    if (!given) {
      throw po::error(fmt::format(
          "--measured-on `{}`: `{}` is not one of the --csv or --hdf5 tables", entry, table));
    }
    auto on = std::make_shared<const HardwareProfile>(read_hardware(entry.substr(eq + 1)));
    const DeviceProfile& a = on->device;
    const DeviceProfile& b = fit.device;
    if (a.compute_capability != b.compute_capability || a.sm_count != b.sm_count) {
      throw po::error(fmt::format(
          "--measured-on `{}`: {} is another chip than --hardware's {} (compute capability "
          "{}.{} vs {}.{}, {} vs {} SMs): only another memory, form factor or clock of the fitted "
          "chip can lend its measurements",
          entry, a.name, b.name, a.compute_capability / 10, a.compute_capability % 10,
          b.compute_capability / 10, b.compute_capability % 10, a.sm_count, b.sm_count));
    }
    out[table] = std::move(on);
  }
  return out;
}

/// The rows of every input of `m`; a note on `notes` for each table that declares no harness
/// (kernel_measurements.h: read as `fitted`).
std::vector<KernelMeasurement> read_measurements(const MeasurementOptions& m,
                                                 std::ostream* notes = nullptr) {
  const auto measured_on = measured_on_profiles(m);
  std::vector<KernelMeasurement> rows;
  if (!m.llmcompass_dir.empty()) rows = read_llmcompass_dir(m.llmcompass_dir, m.gpu);
  const auto add = [&](const std::string& file, std::vector<KernelMeasurement> more) {
    const auto it = measured_on.find(file);
    if (it != measured_on.end()) {
      for (KernelMeasurement& row : more)
        row.measured_on = it->second;
    }
    if (notes != nullptr && !more.empty() && !more.front().harness_declared) {
      *notes << fmt::format(
          "note: {} declares no harness (`# harness: none` for kernel times, `# harness: fitted` "
          "for times holding a per-call cost of the timing loop): read as fitted\n",
          file);
    }
    rows.insert(rows.end(), more.begin(), more.end());
  };
  for (const std::string& f : m.csv_files)
    add(f, read_measurement_csv(f));
  for (const std::string& f : m.hdf5_files)
    add(f, read_measurement_hdf5(f));
  if (rows.empty()) {
    throw std::runtime_error("no measurements: give --llmcompass, --csv or --hdf5");
  }
  return rows;
}

/// The inputs of `m` in reading order, for a file's provenance line.
std::vector<std::string> input_names(const MeasurementOptions& m) {
  std::vector<std::string> inputs;
  if (!m.llmcompass_dir.empty()) {
    inputs.push_back(fmt::format("LLMCompass sweeps in {}", m.llmcompass_dir));
  }
  inputs.insert(inputs.end(), m.csv_files.begin(), m.csv_files.end());
  inputs.insert(inputs.end(), m.hdf5_files.begin(), m.hdf5_files.end());
  return inputs;
}

/// Where the layer files live and what prices the layer's all-reduces.
struct LayerOptions {
  bool enabled = false;
  std::string data_dir = shipped_path("test/data/llmcompass");
  std::string topology = shipped_path("configs/topologies/a100x4_nvlink.yaml");
  bool from_tables = false;  ///< the layer's ops against the given measurement tables
};

/// The two all-reduce rows of a phase, priced on the fabric's flow network with the built-in
/// NCCL-like tuning (one all-reduce of the phase's bytes over every GPU of the fabric, alone,
/// as `upsim validate collectives` prices a point).
std::vector<LayerCheckRow> price_layer_all_reduces(LayerPhase phase,
                                                   const std::vector<double>& measured,
                                                   const Fabric& fabric) {
  std::vector<LayerCheckRow> rows;
  const int64_t bytes = llmcompass_gpt3_all_reduce_bytes(phase);
  for (size_t i = 0; i < kLayerAllReduceRows.size(); ++i) {
    const double seconds = measured.at(10 + i);
    const std::vector<MeasuredCollective> point{{bytes, seconds * 1e6}};
    const CollectiveValidation v =
        validate_all_reduce(fabric, nccl_like_tuning(), point, "layer all-reduce");
    LayerCheckRow row;
    row.name = std::string(kLayerAllReduceRows[i]);
    row.measured_seconds = seconds;
    row.predicted_seconds = v.points.at(0).predicted_us * 1e-6;
    row.error = row.predicted_seconds / row.measured_seconds - 1.0;
    rows.push_back(row);
  }
  return rows;
}

/// `validate kernels --layer`: the GPT-3 175B layer of LLMCompass, prefill and decode.
void print_layer_check(const LayerOptions& layer, const std::string& calibration,
                       const CalibratedKernelCost& model, const HardwareProfile& hw,
                       std::ostream& out) {
  ConfigDocument fabric_doc = ConfigDocument::load_file(layer.topology);
  const Fabric fabric = load_fabric(fabric_doc.root());
  out << fmt::format(
      "\nGPT-3 175B layer (d_model 12288, 96 heads, fp16, batch 8, TP 4), per GPU, vs "
      "LLMCompass' measurements on A100 80GB\n"
      "  source: github.com/PrincetonUniversity/LLMCompass ae/figure5/ijkl/real_hardware "
      "(BSD-3-Clause), copies in {}\n"
      "  held out: no row of these files is read by any fit; the kernel model is {} (fitted on "
      "the matmul / softmax / layernorm / gelu sweeps), each op predicted as its sweep's timing "
      "harness measures (calibration/fitting/transformer_layer_check.h)\n"
      "  all-reduces: the flow network on {} with the built-in NCCL-like tuning (fitted on "
      "measured all-reduce sweeps that include LLMCompass' own 4x A100 sweep, the same system: "
      "these two rows are not among its points, the system is)\n",
      layer.data_dir, calibration, layer.topology);
  if (hw.device.name != "A100-SXM4-80GB") {
    out << fmt::format(
        "  what-if: measured on A100-SXM4-80GB, priced on {}: the errors are changes, not "
        "errors\n",
        hw.device.name);
  }
  for (const auto& [phase, file] : {std::pair{LayerPhase::kPrefill, "transformer_A100.csv"},
                                    std::pair{LayerPhase::kDecode, "transformerAR_A100.csv"}}) {
    const std::vector<double> measured =
        read_llmcompass_layer_latencies(fs::path(layer.data_dir) / file);
    LayerCheck check = check_llmcompass_gpt3_layer(phase, measured, model, hw.device);
    check.collective_rows = price_layer_all_reduces(phase, measured, fabric);
    out << fmt::format("{} ({}):\n", layer_phase_name(phase), file);
    out << format_layer_check(check);
  }
  const std::vector<KernelMeasurement> sweeps = read_llmcompass_dir(layer.data_dir, "A100");
  for (const std::string& line : layer_shapes_in_sweeps(sweeps)) {
    out << fmt::format("  same shape as a sweep row: {}\n", line);
  }
}

/// The kernel measurements the project ships, per GPU generation: the hardware profile they
/// were measured on, the calibration fitted on them and the tables (paths from the repository
/// root).
struct ShippedKernelSet {
  std::string generation;
  std::string hardware;
  std::string calibration;
  std::string llmcompass_dir;
  std::vector<std::string> csv_files;
  /// TABLE=PROFILE for the tables measured on another GPU of the generation (--measured-on).
  std::vector<std::string> measured_on;
  /// Published tables no fit reads, each validated on its own (held out), and TABLE=PROFILE for
  /// those measured on another GPU of the generation.
  std::vector<std::string> checks = {};
  std::vector<std::string> checks_measured_on = {};
};

/// The sets with their paths from the repository root, as written below.
std::vector<ShippedKernelSet> shipped_kernel_sets_from_root() {
  const std::vector<std::string> h100_tables = {
      "test/data/xla-matmul/h100_xla_matmul.csv",
      "test/data/flash-attention-3/h100_attention_tflops.csv",
      "test/data/liger-kernel/h100_rms_norm_forward.csv",
      "test/data/liger-kernel/h100_relu_squared.csv",
      "test/data/liger-kernel/h100_megatron_swiglu_forward.csv",
      "test/data/liger-kernel/h100_megatron_cross_entropy_forward.csv",
      "test/data/softmax-kernel-h100/h100_torch_softmax.csv",
      "test/data/liger-kernel/h100_torch_layer_norm_forward.csv",
      "test/data/neusight/h100_fp32_gemm.csv",
      "test/data/flash-attention-2/h100_attention_fwd_bwd_tflops.csv"};
  std::vector<std::string> h100_cuda12_1_tables = h100_tables;
  for (const char* vidur :
       {"test/data/vidur/h100_llama2_7b_gemm.csv", "test/data/vidur/h100_codellama_34b_gemm.csv",
        "test/data/vidur/h100_llama2_70b_gemm.csv"})
    h100_cuda12_1_tables.emplace_back(vidur);
  return {
      {"V100",
       "configs/hardware/v100_sxm2_32gb.yaml",
       "configs/calibration/v100_deepbench.yaml",
       "",
       {"test/data/deepbench/v100_dgx1_gemm.csv", "test/data/neusight/v100_pcie_memory_ops.csv"},
       {"test/data/neusight/v100_pcie_memory_ops.csv=configs/hardware/v100_pcie_32gb.yaml"},
       {"test/data/pytorch-docs/v100_fp16_gemm.csv", "test/data/neusight/v100_fp32_gemm.csv"},
       {"test/data/neusight/v100_fp32_gemm.csv=configs/hardware/v100_pcie_32gb.yaml"}},
      {"A100",
       "configs/hardware/a100_sxm4_80gb.yaml",
       "configs/calibration/a100_llmcompass.yaml",
       "test/data/llmcompass",
       {"test/data/liger-kernel/a100_torch_cross_entropy_forward.csv",
        "test/data/triton-matmul/a100_pcie_fp32_cublas.csv",
        "test/data/vidur/a100_llama2_7b_gemm.csv", "test/data/vidur/a100_llama2_70b_gemm.csv",
        "test/data/holistic-trace-analysis/a100_tf32_recsys_gemm.csv",
        "test/data/flash-attention-2/a100_attention_fwd_bwd_tflops.csv"},
       {"test/data/triton-matmul/a100_pcie_fp32_cublas.csv=configs/hardware/a100_pcie_80gb.yaml",
        "test/data/vidur/a100_llama2_7b_gemm.csv=configs/hardware/a100_pcie_80gb.yaml",
        "test/data/vidur/a100_llama2_70b_gemm.csv=configs/hardware/a100_pcie_80gb.yaml",
        "test/data/holistic-trace-analysis/a100_tf32_recsys_gemm.csv=configs/hardware/"
        "a100_sxm4_40gb.yaml"},
       {"test/data/azure-ai-benchmarking/a100_sxm4_fp16_cublaslt.csv",
        "test/data/pytorch-docs/a100_gemm_10240.csv",
        "test/data/triton-matmul/a100_tf32_triton_regression.csv"},
       {"test/data/triton-matmul/a100_tf32_triton_regression.csv=configs/hardware/"
        "a100_sxm4_40gb.yaml"}},
      {"H100",
       "configs/hardware/h100_sxm5_80gb.yaml",
       "configs/calibration/h100_xla.yaml",
       "",
       h100_tables,
       {},
       {"test/data/azure-ai-benchmarking/h100_sxm5_fp8_cublaslt.csv",
        "test/data/deepgemm/h800_fp8_gemm.csv", "test/data/tracelens/h100_bf16_gemm.csv",
        "test/data/tracelens/h100_flash2_forward.csv", "test/data/vidur/h100_llama2_70b_gemm.csv"}},
      // The same GPU under CUDA 12.1's cuBLAS (PyTorch's cu121 builds): h100_xla.yaml's
      // tables plus that cuBLAS's in-model GEMM kernel times, which anchor its GEMM rate.
      {"H100 with CUDA 12.1's cuBLAS",
       "configs/hardware/h100_sxm5_80gb.yaml",
       "configs/calibration/h100_cuda12_1.yaml",
       "",
       h100_cuda12_1_tables,
       {},
       {"test/data/tracelens/h100_bf16_gemm.csv"}},
      {"H200",
       "configs/hardware/h200_sxm_141gb.yaml",
       "configs/calibration/h100_xla.yaml",
       "",
       {},
       {},
       {"test/data/azure-ai-benchmarking/h200_sxm_fp8_cublaslt.csv",
        "test/data/hp-rms-norm/h200_flashinfer_fused_add_rmsnorm.csv"}},
      {"B200",
       "configs/hardware/b200_sxm_180gb.yaml",
       "configs/calibration/b200_xla.yaml",
       "",
       {"test/data/xla-matmul/b200_xla_matmul.csv", "test/data/cudnn-frontend/b200_sdpa_bf16.csv",
        "test/data/liger-kernel/b200_memory_ops.csv",
        "test/data/liger-kernel/b200_torch_layer_norm_forward.csv",
        "test/data/liger-kernel/b200_torch_cross_entropy_forward.csv",
        "test/data/hp-rms-norm/b200_flashinfer_fused_add_rmsnorm.csv"},
       {}},
  };
}

/// The shipped sets, their paths below shipped_root() (tools/shipped_files.h).
std::vector<ShippedKernelSet> shipped_kernel_sets() {
  std::vector<ShippedKernelSet> sets = shipped_kernel_sets_from_root();
  for (ShippedKernelSet& set : sets) {
    set.hardware = shipped_path(set.hardware);
    set.calibration = shipped_path(set.calibration);
    set.llmcompass_dir = shipped_path(set.llmcompass_dir);
    for (std::string& f : set.csv_files)
      f = shipped_path(f);
    for (std::string& f : set.checks)
      f = shipped_path(f);
    for (std::string& pair : set.measured_on)
      pair = shipped_pair(pair);
    for (std::string& pair : set.checks_measured_on)
      pair = shipped_pair(pair);
  }
  return sets;
}

/// What a calibration prices without a fit of its own: GEMM dtypes `device` has a unit for on
/// `default`, memory ops
/// whose curve no measured op fitted, attention implementations without a section.
std::vector<std::string> unfitted_families(const KernelCalibration& c,
                                           const DeviceProfile& device) {
  std::vector<std::string> out;
  std::vector<std::string> dtypes;
  for (DType d : {DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16, DType::kFp8}) {
    const bool has_unit = device.peak(d).flops_per_second() > 0.0;
    if (has_unit && !c.gemm_by_dtype[static_cast<size_t>(d)]) dtypes.emplace_back(dtype_name(d));
  }
  if (!dtypes.empty()) out.push_back(fmt::format("gemm {}", fmt::join(dtypes, ", ")));
  std::vector<std::string> ops;
  for (size_t i = 0; i < kMemoryOpCount; ++i) {
    const auto op = static_cast<MemoryOp>(i);
    if (op != MemoryOp::kUnspecified && !c.curve_fitted(op)) ops.emplace_back(kMemoryOpNames[i]);
  }
  if (!ops.empty()) out.push_back(fmt::format("memory-bound {}", fmt::join(ops, ", ")));
  std::vector<std::string> attention;
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    if (!c.attention[i])
      attention.emplace_back(attention_kernel_name(static_cast<AttentionKernel>(i)));
  }
  if (!attention.empty()) out.push_back(fmt::format("attention {}", fmt::join(attention, ", ")));
  return out;
}

/// `validate kernels --shipped`: per generation, the held-out table of every shipped
/// measurement set against the calibration fitted on it, with the data's provenance, and the
/// families that calibration prices on defaults.
void print_shipped_kernel_validation(std::ostream& out) {
  for (const ShippedKernelSet& set : shipped_kernel_sets()) {
    const HardwareProfile hw = read_hardware(set.hardware);
    ConfigDocument doc = ConfigDocument::load_file(set.calibration);
    const CalibratedKernelCost model(load_kernel_calibration(doc.root()), hw.achievable);
    MeasurementOptions m;
    m.llmcompass_dir = set.llmcompass_dir;
    m.hardware = set.hardware;
    m.csv_files = set.csv_files;
    m.measured_on = set.measured_on;
    if (set.csv_files.empty() && set.llmcompass_dir.empty()) {
      out << fmt::format("{} ({}), calibration {} (fitted on {}), no tables of its own\n",
                         set.generation, hw.device.name, set.calibration,
                         model.calibration().fitted_on);
    } else {
      const std::vector<KernelMeasurement> rows = read_measurements(m);
      out << fmt::format("{} ({}), calibration {}, measurements: {}\n", set.generation,
                         hw.device.name, set.calibration, fmt::join(input_names(m), "; "));
      out << format_kernel_validation(validate_kernels(rows, model, hw.device));
    }
    const std::vector<std::string> unfitted = unfitted_families(model.calibration(), hw.device);
    out << fmt::format(
        "  no fit of its own (default parameters): {}\n",
        unfitted.empty() ? std::string("none") : fmt::format("{}", fmt::join(unfitted, "; ")));
    for (const std::string& check : set.checks) {
      MeasurementOptions c;
      c.llmcompass_dir = "";
      c.hardware = set.hardware;
      c.csv_files = {check};
      for (const std::string& entry : set.checks_measured_on) {
        if (entry.starts_with(check + "=")) c.measured_on.push_back(entry);
      }
      out << fmt::format("  held-out check (no fit reads it): {}\n", check);
      out << format_kernel_validation(validate_kernels(read_measurements(c), model, hw.device));
    }
    out << "\n";
  }
  out << "H200 is the H100's chip (132 SMs, compute capability 9.0): the H100 file is its own "
         "there, on the H200 profile's bandwidth. No calibration is fitted on H100 PCIe (114 "
         "SMs): it borrows the H100 file, and a run says so.\n";
}

/// Parses `args`; returns false (after printing help) when --help was given.
bool parse(const std::vector<std::string>& args, const po::options_description& desc,
           std::ostream& out) {
  po::variables_map vm;
  return parse_command_line(args, desc, out, vm);
}

}  // namespace

int calibrate_kernels_main(const std::vector<std::string>& args, std::ostream& out) {
  MeasurementOptions m;
  std::string output;
  std::string source;
  bool force = false;
  po::options_description desc(
      "usage: upsim calibrate kernels --out FILE [options]\n\n"
      "Fits the calibrated kernel model (GEMM tiles and efficiency, memory-bound bandwidth "
      "curves)\non the training half of measured sweeps and writes a calibration file that "
      "scenarios use\nas `kernels: {model: calibrated, calibration: FILE}`. Prints the fit "
      "error on training and\nheld-out points. Deterministic.\n\noptions");
  desc.add_options()("help,h", "this help")                                                //
      ("out,o", po::value<std::string>(&output)->required(), "calibration file to write")  //
      ("force", po::bool_switch(&force), "overwrite an existing --out file")               //
      ("source", po::value<std::string>(&source),
       "provenance recorded in the file (default: the input files)");
  add_measurement_options(desc, m);
  if (!parse(args, desc, out)) return 0;
  refuse_to_overwrite(output, force);
  const HardwareProfile hw = read_hardware(m.hardware);
  const std::vector<KernelMeasurement> rows = read_measurements(m, &out);
  if (source.empty()) source = fmt::format("{}", fmt::join(input_names(m), "; "));
  const CalibrationResult result = fit_kernel_calibration(rows, hw, source);
  write_file_atomically(output, calibration_file_text(result));
  out << format_kernel_validation(result.validation);
  out << fmt::format("wrote {}\n", output);
  return 0;
}

int calibrate_launch_main(const std::vector<std::string>& args, std::ostream& out) {
  std::string table_file;
  std::string output;
  bool force = false;
  po::options_description desc(
      "usage: upsim calibrate launch --csv launch.csv [--out FILE] [options]\n\n"
      "Reads the launch-floor table of bench/gpu/gpu_microbench (launch.csv) and prints every "
      "measured\nquantity, then the hardware-profile line it sets: kernel_overhead = the GPU "
      "time of an empty\nkernel launched back to back on one stream (calibration/"
      "launch_measurements.h). With --out\nthe line and its provenance go to FILE, for a "
      "profile under configs/hardware/.\n\noptions");
  desc.add_options()("help,h", "this help")                                               //
      ("csv", po::value<std::string>(&table_file)->required(), "the launch.csv to read")  //
      ("out,o", po::value<std::string>(&output), "YAML fragment to write")                //
      ("force", po::bool_switch(&force), "overwrite an existing --out file");
  if (!parse(args, desc, out)) return 0;
  if (!output.empty()) refuse_to_overwrite(output, force);
  const LaunchTable table = read_launch_csv(table_file);
  const auto meta = [&](const std::string& key) {
    const auto it = table.metadata.find(key);
    return it == table.metadata.end() ? std::string("(not recorded)") : it->second;
  };
  out << fmt::format("{}: {} quantities measured on {} at {}\n", table_file, table.rows.size(),
                     meta("gpu"), meta("measured_utc"));
  out << fmt::format("{:<32} {:>12} {:>12}\n", "quantity", "bytes", "time_us");
  for (const LaunchQuantity& q : table.rows)
    out << fmt::format("{:<32} {:>12} {:>12.4f}\n", q.name, q.bytes, q.time_us);
  const Duration overhead = kernel_overhead_from(table);
  const std::string fragment = fmt::format(
      "# upsim calibrate launch: {} ({}, driver {}, runtime {}, measured {}): an empty kernel "
      "launched back to back on one stream takes {:.4f} us of GPU time per call.\n"
      "kernel_overhead: {}\n",
      table_file, meta("gpu"), meta("cuda_driver"), meta("cuda_runtime"), meta("measured_utc"),
      overhead.us(), format_duration_exact(overhead));
  out << "\n" << fragment;
  if (!output.empty()) {
    write_file_atomically(output, fragment);
    out << fmt::format("wrote {}\n", output);
  }
  return 0;
}

int convert_kernels_main(const std::vector<std::string>& args, std::ostream& out) {
  MeasurementOptions m;
  m.llmcompass_dir.clear();
  std::string output;
  std::string source;
  bool force = false;
  po::options_description desc(
      "usage: upsim convert kernels --out FILE.h5 (--csv FILE | --llmcompass DIR)... [options]\n\n"
      "Writes kernel measurements given as CSV (upsim's format, calibration/"
      "kernel_measurements.h, or\nLLMCompass sweeps) into upsim's HDF5 layout "
      "(calibration/fitting/hdf5_measurements.h), keeping\neach row's train / held-out split. "
      "Embedding rows have no HDF5 layout and are refused.\n\noptions");
  desc.add_options()("help,h", "this help")                                         //
      ("out,o", po::value<std::string>(&output)->required(), "HDF5 file to write")  //
      ("force", po::bool_switch(&force), "overwrite an existing --out file")        //
      ("llmcompass", po::value<std::string>(&m.llmcompass_dir),
       "folder with LLMCompass sweeps {matmul,softmax,layernorm,gelu}_<GPU>.csv")  //
      ("gpu-name", po::value<std::string>(&m.gpu)->default_value(m.gpu),
       "the GPU the rows were measured on (the <GPU> suffix of LLMCompass files; stored as the "
       "file's `gpu` attribute)")  //
      ("csv", po::value<std::vector<std::string>>(&m.csv_files)->composing(),
       "a measurement table in upsim's CSV format; repeatable")  //
      ("hdf5", po::value<std::vector<std::string>>(&m.hdf5_files)->composing(),
       "an HDF5 measurement table to merge in; repeatable")  //
      ("source", po::value<std::string>(&source),
       "the file's `source` attribute (default: the input files)");
  if (!parse(args, desc, out)) return 0;
  refuse_to_overwrite(output, force);
  const std::vector<KernelMeasurement> rows = read_measurements(m);
  if (source.empty()) source = fmt::format("{}", fmt::join(input_names(m), "; "));
  // The CSV inputs' `# key: value` metadata (bench/gpu: driver, clocks, time of the run) as file
  // attributes; a key whose value differs between inputs is kept per input, as
  // "<file name>:<key>".
  std::vector<std::pair<std::string, std::string>> attributes;
  const auto attribute = [&](const std::string& name) {
    return std::find_if(
        attributes.begin(), attributes.end(),
        [&](const std::pair<std::string, std::string>& a) { return a.first == name; });
  };
  for (const std::string& f : m.csv_files) {
    for (const std::pair<std::string, std::string>& entry : read_csv_metadata(f)) {
      // The rows carry these (write_measurement_hdf5 states them when every row agrees).
      if (entry.first == "provenance" || entry.first == "harness") continue;
      const std::string key =
          entry.first == "gpu" || entry.first == "source" ? "table_" + entry.first : entry.first;
      const auto same = attribute(key);
      if (same == attributes.end()) {
        attributes.emplace_back(key, entry.second);
      } else if (same->second != entry.second) {
        const std::string scoped = fs::path(f).filename().string() + ":" + key;
        if (attribute(scoped) == attributes.end()) attributes.emplace_back(scoped, entry.second);
      }
    }
  }
  // Built in memory, then written through a temporary file as every output: a failed or
  // interrupted write leaves nothing, and no link at either name is followed.
  write_file_atomically(output, measurement_hdf5_image(output, rows, m.gpu, source, attributes));
  std::map<std::string, std::array<size_t, 2>> per_op;  // op -> {train, held out}
  for (const KernelMeasurement& row : rows)
    ++per_op[row.op][row.held_out ? 1 : 0];
  for (const auto& [op, n] : per_op) {
    out << fmt::format("{:<12} {:>5} rows ({} train, {} held out)\n", op, n[0] + n[1], n[0], n[1]);
  }
  if (!attributes.empty()) {
    std::vector<std::string> names;
    for (const std::pair<std::string, std::string>& a : attributes)
      names.push_back(a.first);
    out << fmt::format("metadata of the tables as file attributes: {}\n", fmt::join(names, ", "));
  }
  out << fmt::format("wrote {} ({} rows)\n", output, rows.size());
  return 0;
}

int validate_kernels_main(const std::vector<std::string>& args, std::ostream& out) {
  MeasurementOptions m;
  std::string calibration = shipped_path("configs/calibration/a100_llmcompass.yaml");
  bool points = false;
  bool shipped = false;
  LayerOptions layer;
  po::options_description desc(
      "usage: upsim validate kernels [options]\n\n"
      "Compares the calibrated kernel model with measured kernel times and prints, per op, the "
      "geomean\n|predicted / measured - 1| on the training and the held-out points (the split "
      "is in\ncalibration/fitting/kernel_measurements.h). The defaults are the shipped files (the "
      "repository\nroot, or the installed share/upsim).\n\noptions");
  desc.add_options()("help,h", "this help")  //
      ("calibration", po::value<std::string>(&calibration)->default_value(calibration),
       "calibration file (from `upsim calibrate kernels`)")           //
      ("points", po::bool_switch(&points), "also print every point")  //
      ("shipped", po::bool_switch(&shipped),
       "every shipped measurement set, per GPU generation, against the calibration fitted on "
       "it (ignores the other options)")  //
      ("layer", po::bool_switch(&layer.enabled),
       "also price every op of LLMCompass' measured GPT-3 175B layer on A100 (prefill and one "
       "decode step, TP 4): per op measured, predicted and error, the all-reduces on the "
       "4x A100 NVLink fabric, and the layer's sum")  //
      ("layer-data", po::value<std::string>(&layer.data_dir)->default_value(layer.data_dir),
       "folder with transformer_A100.csv and transformerAR_A100.csv")  //
      ("layer-topology", po::value<std::string>(&layer.topology)->default_value(layer.topology),
       "fabric that prices the layer's all-reduces")  //
      ("layer-from-tables", po::bool_switch(&layer.from_tables),
       "also price the GPT-3 layer's kernel ops against the rows of the given --csv / --hdf5 "
       "tables that have the layer's shapes (bench/gpu's gemm.csv and memory.csv hold them): "
       "the composite check on the GPU those tables were measured on");
  add_measurement_options(desc, m);
  if (!parse(args, desc, out)) return 0;
  if (shipped) {
    print_shipped_kernel_validation(out);
    return 0;
  }
  const HardwareProfile hw = read_hardware(m.hardware);
  ConfigDocument doc = ConfigDocument::load_file(calibration);
  const CalibratedKernelCost model(load_kernel_calibration(doc.root()), hw.achievable);
  doc.check_all_keys_used();
  const std::vector<KernelMeasurement> rows = read_measurements(m, &out);
  out << fmt::format("kernel model `calibrated` ({}) on {} vs measurements\n", calibration,
                     hw.device.name);
  // Where the parameters came from, so that the reader knows which rows are in-sample.
  out << fmt::format(
      "calibration fitted on {} ({}); `train` rows of those measurements are in-sample (the fit "
      "read them), `held-out` rows are not; split: {}\n",
      model.calibration().fitted_on, model.calibration().source,
      model.calibration().split.empty() ? "not recorded" : model.calibration().split);
  if (points) out << format_kernel_points(rows, model, hw.device);
  out << format_kernel_validation(validate_kernels(rows, model, hw.device));
  if (layer.enabled) print_layer_check(layer, calibration, model, hw, out);
  if (layer.from_tables) {
    out << fmt::format(
        "\nGPT-3 175B layer (d_model 12288, 96 heads, fp16, batch 8, TP 4), per GPU, each kernel "
        "op vs its row in the measurement tables ({}), predicted by {}; rows marked [train] are "
        "in the tables' training half (in-sample when the calibration was fitted on these "
        "tables), the others in their held-out half\n",
        fmt::join(input_names(m), "; "), calibration);
    for (LayerPhase phase : {LayerPhase::kPrefill, LayerPhase::kDecode}) {
      std::vector<std::string> missing;
      const LayerCheck check =
          check_gpt3_layer_against_tables(phase, rows, model, hw.device, missing);
      out << fmt::format("{}:\n", layer_phase_name(phase));
      if (check.kernel_rows.empty()) {
        out << "  no op of the layer has a row in the tables\n";
      } else {
        out << format_layer_check(check);
      }
      if (!missing.empty()) {
        out << fmt::format("  not measured (no row with their shape): {}\n",
                           fmt::join(missing, ", "));
      }
    }
  }
  return 0;
}

}  // namespace upsim::cli
