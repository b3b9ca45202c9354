// Importers of kernel measurement tables and their errors
// (calibration/fitting/kernel_measurements.h).
#include "calibration/fitting/kernel_measurements.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/fitting/fit_kernel_calibration.h"
#include "calibration/fitting/kernel_validation.h"
#include "calibration/hardware_profile.h"
#include "sim/config/config_node.h"
#include "test/unit/calibration/temp_table.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_TEST_DATA_DIR;
const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

using test::write_temp_table;

/// The shipped hardware profile `file` (configs/hardware/).
HardwareProfile shipped_profile(const char* file) {
  ConfigDocument doc = ConfigDocument::load_file(kConfigs / "hardware" / file);
  return load_hardware_profile(doc.root());
}

std::string csv_error(const std::string& text) {
  try {
    read_measurement_csv(write_temp_table("table.csv", text));
  } catch (const CalibrationDataError& e) {
    return e.what();
  }
  return "no error";
}

TEST(KernelMeasurements, ReadsTheUpsimTable) {
  const auto rows = read_measurement_csv(write_temp_table("ok.csv",
                                                          "# a comment\n"
                                                          "op,dtype,m,n,k,batch,time_us\n"
                                                          "gemm,fp16,128,256,64,2,10.5\n"
                                                          "gelu,fp16,1,1000,,,3\n"
                                                          "gemm,bf16,64,64,64,1,2\n"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].op, "gemm");
  EXPECT_EQ(rows[0].kernel.batch, 2);
  EXPECT_EQ(rows[0].kernel.k, 64);
  EXPECT_DOUBLE_EQ(rows[0].seconds, 10.5e-6);
  EXPECT_EQ(rows[1].kernel.memory_op, MemoryOp::kGelu);
  EXPECT_DOUBLE_EQ(rows[1].kernel.bytes_read, 2000.0);
  // Alternating split per op in file order: gemm train, gemm held out; gelu train.
  EXPECT_FALSE(rows[0].held_out);
  EXPECT_FALSE(rows[1].held_out);
  EXPECT_TRUE(rows[2].held_out);
  EXPECT_NE(rows[0].origin.find("ok.csv:3"), std::string::npos);
}

// The tables bench/gpu/gpu_microbench writes (gemm.csv, memory.csv; synthetic samples of their
// layout): every op, dtype and batch it emits reads back.
TEST(KernelMeasurements, ReadsTheGpuMicrobenchTables) {
  const std::filesystem::path dir = UPSIM_CALIBRATION_TEST_DATA;
  const auto gemm = read_measurement_csv(dir / "microbench_synthetic_gemm.csv");
  ASSERT_EQ(gemm.size(), 3u);
  EXPECT_EQ(gemm[1].kernel.dtype, DType::kFp8);
  EXPECT_EQ(gemm[1].kernel.batch, 192);
  EXPECT_EQ(gemm[2].kernel.dtype, DType::kTf32);
  EXPECT_DOUBLE_EQ(gemm[2].seconds, 40.25e-6);
  const auto memory = read_measurement_csv(dir / "microbench_synthetic_memory.csv");
  ASSERT_EQ(memory.size(), 5u);
  EXPECT_EQ(memory[0].kernel.memory_op, MemoryOp::kCopy);
  EXPECT_EQ(memory[1].kernel.memory_op, MemoryOp::kBinary);
  EXPECT_EQ(memory[2].kernel.memory_op, MemoryOp::kRmsNorm);
  EXPECT_EQ(memory[3].kernel.memory_op, MemoryOp::kSum);
  EXPECT_EQ(memory[4].kernel.memory_op, MemoryOp::kSoftmax);
  EXPECT_EQ(memory[4].kernel.row_elements, 2048);
}

TEST(KernelMeasurements, SplitColumnOverridesTheAlternation) {
  const auto rows = read_measurement_csv(
      write_temp_table("split.csv", "op,dtype,m,n,time_us,split\nrelu,fp32,4,4,1,held_out\n"));
  EXPECT_TRUE(rows.at(0).held_out);
}

TEST(KernelMeasurements, BadTablesGiveClearErrors) {
  EXPECT_NE(csv_error("op,dtype,m,n\ngemm,fp16,1,1\n").find("missing column `time_us`"),
            std::string::npos);
  EXPECT_NE(csv_error("op,dtype,m,n,time_us\nrelu,fp16,1,1,0\n").find("time_us must be positive"),
            std::string::npos);
  EXPECT_NE(csv_error("op,dtype,m,n,time_us\nrelu,fp16,1,1,-3\n").find("time_us must be positive"),
            std::string::npos);
  const std::string unknown = csv_error("op,dtype,m,n,time_us\nswish,fp16,1,1,1\n");
  EXPECT_NE(unknown.find("table.csv:2: unknown op `swish`; valid: gemm, relu"), std::string::npos)
      << unknown;
  EXPECT_NE(csv_error("op,dtype,m,n,time_us\nrelu,fp64,1,1,1\n").find("unknown dtype `fp64`"),
            std::string::npos);
  EXPECT_NE(csv_error("op,dtype,m,n,time_us\ngemm,fp16,1,1,1\n").find("needs the column `k`"),
            std::string::npos);
  EXPECT_NE(csv_error("op,dtype,m,n,time_us\nrelu,fp16,1,1\n").find("expected 5 fields"),
            std::string::npos);
  EXPECT_NE(csv_error("op,dtype,m,n,time_us\nrelu,fp16,x,1,1\n").find("m `x` is not a whole"),
            std::string::npos);
  EXPECT_NE(csv_error("").find("no header"), std::string::npos);
  EXPECT_THROW(read_measurement_csv(kData / "does_not_exist.csv"), CalibrationDataError);
}

// `reads` and `writes`: a memory op's traffic in tensors of m x n elements (silu(a) * b reads two,
// writes one); an empty field keeps the default of one each, a norm keeps its weight.
TEST(KernelMeasurements, ReadsAndWritesColumnsSetAMemoryOpsTraffic) {
  const auto rows = read_measurement_csv(write_temp_table("traffic.csv",
                                                          "op,dtype,m,n,k,reads,writes,time_us\n"
                                                          "swiglu,bf16,8,100,,2,1,3\n"
                                                          "rms_norm,bf16,8,100,,3,0,3\n"
                                                          "relu,fp32,8,100,,,,3\n"
                                                          "cross_entropy,fp32,8,100,,2,1,3\n"
                                                          "gemm,bf16,8,8,8,,,3\n"));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_DOUBLE_EQ(rows[0].kernel.bytes_read, 2 * 800 * 2.0);
  EXPECT_DOUBLE_EQ(rows[0].kernel.bytes_written, 800 * 2.0);
  EXPECT_DOUBLE_EQ(rows[1].kernel.bytes_read, 3 * 800 * 2.0 + 100 * 2.0);  // + the weight
  EXPECT_DOUBLE_EQ(rows[1].kernel.bytes_written, 0.0);
  EXPECT_DOUBLE_EQ(rows[2].kernel.bytes_read, 800 * 4.0);
  EXPECT_DOUBLE_EQ(rows[2].kernel.bytes_written, 800 * 4.0);
  EXPECT_EQ(rows[3].kernel.row_elements, 100);  // cross-entropy is row-wise
  const std::string head = "op,dtype,m,n,k,reads,writes,time_us\n";
  EXPECT_NE(csv_error(head + "relu,fp16,1,1,,0,1,1\n").find("table.csv:2: reads must be positive"),
            std::string::npos);
  EXPECT_NE(csv_error(head + "relu,fp16,1,1,,1,-1,1\n").find("writes must be >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(csv_error(head + "relu,fp16,1,1,,two,1,1\n").find("reads `two` is not a number"),
            std::string::npos);
  EXPECT_NE(csv_error(head + "gemm,fp16,1,1,1,2,1,1\n").find("reads and writes are for memory ops"),
            std::string::npos);
}

// measurement_of and measurement_csv_text: a GEMM and memory ops of any traffic (a trace's
// kernel reads its inputs and writes the largest) become rows that read back as the same
// kernels, with their split and metadata; a kernel of no m x n shape has none.
TEST(KernelMeasurements, MeasurementsOfKernelsWriteAndReadBackAsATable) {
  KernelDesc add;
  add.cls = KernelClass::kMemoryBound;
  add.dtype = DType::kFp32;
  add.memory_op = MemoryOp::kBinary;
  add.bytes_read = 3 * 4096.0 * 4;  // a [4096] tensor and half of one more, read
  add.bytes_written = 2 * 4096.0 * 4;
  KernelDesc norm =
      memory_op_kernel(MemoryOp::kLayerNorm, DType::kBf16, 64, 1024, MemoryTraffic{2.0, 1.0});
  std::vector<KernelMeasurement> rows;
  rows.push_back(*measurement_of(gemm_kernel(DType::kTf32, 2, 64, 128, 256), 12.5e-6, "g"));
  rows.push_back(*measurement_of(add, 3e-6, "a"));
  rows.push_back(*measurement_of(norm, 7.25e-6, "n"));
  rows[2].held_out = true;
  EXPECT_DOUBLE_EQ(rows[1].traffic.reads, 1.5);
  const std::string text = measurement_csv_text(rows, {{"gpu", "Test GPU"}, {"harness", "none"}});
  EXPECT_TRUE(text.starts_with("# gpu: Test GPU\n# harness: none\n")) << text;
  const auto back = read_measurement_csv(write_temp_table("written.csv", text));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].kernel.dtype, DType::kTf32);
  EXPECT_EQ(back[0].kernel.batch, 2);
  EXPECT_DOUBLE_EQ(back[0].seconds, 12.5e-6);
  EXPECT_DOUBLE_EQ(back[1].kernel.bytes_read, add.bytes_read);
  EXPECT_DOUBLE_EQ(back[1].kernel.bytes_written, add.bytes_written);
  EXPECT_DOUBLE_EQ(back[2].kernel.bytes_read, norm.bytes_read);
  EXPECT_EQ(back[2].kernel.row_elements, 1024);
  EXPECT_TRUE(back[2].held_out);
  EXPECT_FALSE(back[1].held_out);
  EXPECT_TRUE(back[0].harness_none);
  KernelDesc odd = add;
  odd.bytes_written = 3.0;  // under one fp32 element
  EXPECT_FALSE(measurement_of(odd, 1e-6, "odd"));
  KernelDesc attention;
  attention.cls = KernelClass::kAttention;
  EXPECT_FALSE(measurement_of(attention, 1e-6, "attention"));
  EXPECT_THROW(measurement_csv_text(rows, {{"bad key", "x"}}), CalibrationDataError);
}

// `# curve: NAME` gives a table's ops a curve of their own: the fit makes it, maps the op to it,
// and the op counts as measured; an op's tables must agree on it.
TEST(KernelMeasurements, ACurveDeclarationFitsTheOpOnItsOwnCurve) {
  const auto declared = read_measurement_csv(
      write_temp_table("own.csv",
                       "# curve: fused_swiglu\nop,dtype,m,n,reads,writes,time_us\n"
                       "swiglu,bf16,8192,1024,2,1,40\nswiglu,bf16,8192,2048,2,1,75\n"
                       "swiglu,bf16,8192,4096,2,1,145\nswiglu,bf16,8192,8192,2,1,290\n"));
  ASSERT_EQ(declared.size(), 4u);
  EXPECT_EQ(declared[0].curve, "fused_swiglu");
  const auto plain = read_measurement_csv(
      write_temp_table("plain.csv",
                       "op,dtype,m,n,time_us\nrelu,bf16,8192,1024,15\nrelu,bf16,8192,2048,25\n"
                       "relu,bf16,8192,4096,45\nrelu,bf16,8192,8192,85\n"));
  std::vector<KernelMeasurement> rows = declared;
  rows.insert(rows.end(), plain.begin(), plain.end());
  const HardwareProfile h100 = shipped_profile("h100_sxm5_80gb.yaml");
  const KernelCalibration c = fit_kernel_calibration(rows, h100, "test").calibration;
  EXPECT_EQ(c.curve_of_op[static_cast<size_t>(MemoryOp::kSwiglu)], "fused_swiglu");
  EXPECT_EQ(c.curve_of_op[static_cast<size_t>(MemoryOp::kRelu)], "elementwise");
  ASSERT_TRUE(c.curves.contains("fused_swiglu"));
  // The declared kernel moves 1.5x the bytes of the relu rows in about 3.4x the time.
  EXPECT_LT(c.curves.at("fused_swiglu").bandwidth_scale,
            0.6 * c.curves.at("elementwise").bandwidth_scale);
  EXPECT_TRUE(c.measured("swiglu"));
  EXPECT_TRUE(c.curve_fitted(MemoryOp::kBinary));  // on the elementwise curve relu fitted

  // The same op on its default curve in another table: refused, naming both rows.
  const auto undeclared = read_measurement_csv(
      write_temp_table("undeclared.csv", "op,dtype,m,n,time_us\nswiglu,bf16,8192,1024,40\n"));
  rows.insert(rows.end(), undeclared.begin(), undeclared.end());
  try {
    fit_kernel_calibration(rows, h100, "test");
    ADD_FAILURE() << "fitted one op on two curves";
  } catch (const CalibrationDataError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("undeclared.csv:2: op `swiglu` is fitted on its default curve here and "
                        "on curve `fused_swiglu` at"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("own.csv:3"), std::string::npos) << what;
  }
  EXPECT_NE(csv_error("# curve: Fused-SwiGLU\nop,dtype,m,n,time_us\nrelu,fp16,1,1,1\n")
                .find("table.csv:1: curve `Fused-SwiGLU` is not a curve name"),
            std::string::npos);
  EXPECT_NE(csv_error("# curve: mine\nop,dtype,m,n,k,time_us\ngemm,fp16,1,1,1,1\n")
                .find("table.csv:3: `# curve: mine` is for a table of memory ops"),
            std::string::npos);
}

// A forward-plus-backward row (the FlashAttention benchmarks' "fwd + bwd" figures): its time
// holds both directions' FLOPs (3.5x the forward's), validation prices both kernels, and a fit
// on such rows alone ties each head dim's backward efficiency to its forward one at the
// defaults' ratio, recovering a section that priced them.
TEST(KernelMeasurements, ForwardBackwardAttentionRowsArePricedAndFittedAsTwoKernels) {
  const HardwareProfile a100 = shipped_profile("a100_sxm4_80gb.yaml");
  const auto rows = read_measurement_csv(
      write_temp_table("pairs.csv",
                       "# harness: none\n"
                       "op,implementation,dtype,causal,batch,heads,seq,head_dim,tflops\n"
                       "attention_forward_backward,flash1,fp16,true,4,16,4096,128,80\n"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, "attention_forward_backward/flash1");
  EXPECT_TRUE(rows[0].forward_and_backward);
  EXPECT_FALSE(rows[0].kernel.attention.backward);
  EXPECT_EQ(rows[0].kernel.attention.implementation, AttentionKernel::kFlash1);
  EXPECT_DOUBLE_EQ(rows[0].seconds, 3.5 * 4.0 * 4 * 16 * 4096.0 * 4096.0 * 128 / 2 / 80e12);
  ConfigDocument file =
      ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  KernelCalibration base = load_kernel_calibration(file.root());
  for (auto& section : base.attention)
    section.reset();
  const CalibratedKernelCost defaults(base, a100.achievable);
  EXPECT_DOUBLE_EQ(
      predicted_measurement_seconds(defaults, rows[0], a100.device),
      defaults.kernel_duration(rows[0].kernel, a100.device).seconds() +
          defaults.kernel_duration(attention_backward_of(rows[0].kernel), a100.device).seconds());

  // Rows a known section prices, at head dims 64 and 128, every sequence of the figures.
  AttentionParams truth;
  truth.forward_efficiency_64 = 0.30;
  truth.forward_efficiency_128 = 0.25;
  truth.backward_efficiency_64 =
      0.30 * AttentionParams{}.backward_efficiency_64 / AttentionParams{}.forward_efficiency_64;
  truth.backward_efficiency_128 =
      0.25 * AttentionParams{}.backward_efficiency_128 / AttentionParams{}.forward_efficiency_128;
  truth.half_efficiency_span = 150.0;
  KernelCalibration priced = base;
  priced.attention[static_cast<size_t>(AttentionKernel::kFlash1)] =
      AttentionCalibration{truth, "published", "test"};
  const CalibratedKernelCost model(priced, a100.achievable);
  std::string table =
      "# harness: none\nop,implementation,dtype,causal,batch,heads,seq,head_dim,time_us\n";
  for (const int64_t d : {64, 128}) {
    for (int64_t seq = 512; seq <= 16384; seq *= 2) {
      for (const bool causal : {false, true}) {
        KernelDesc k = rows[0].kernel;
        k.attention =
            AttentionShape{16384 / seq, 2048 / d, 2048 / d, seq,  seq,
                           d,           causal,   false,    true, AttentionKernel::kFlash1};
        const double us = (model.kernel_duration(k, a100.device).seconds() +
                           model.kernel_duration(attention_backward_of(k), a100.device).seconds()) *
                          1e6;
        table += fmt::format("attention_forward_backward,flash1,fp16,{},{},{},{},{},{:.6f}\n",
                             causal, 16384 / seq, 2048 / d, seq, d, us);
      }
    }
  }
  const auto synthetic = read_measurement_csv(write_temp_table("synthetic.csv", table));
  const KernelCalibration fitted = fit_kernel_calibration(synthetic, a100, "test").calibration;
  const auto& section = fitted.attention[static_cast<size_t>(AttentionKernel::kFlash1)];
  ASSERT_TRUE(section);
  EXPECT_NEAR(section->params.forward_efficiency_64, 0.30, 0.01);
  EXPECT_NEAR(section->params.forward_efficiency_128, 0.25, 0.01);
  EXPECT_NEAR(section->params.backward_efficiency_128 / section->params.forward_efficiency_128,
              AttentionParams{}.backward_efficiency_128 / AttentionParams{}.forward_efficiency_128,
              0.002);
  EXPECT_NE(section->source.find("backward tied to forward"), std::string::npos) << section->source;
  EXPECT_NE(csv_error("op,implementation,dtype,causal,batch,heads,seq,head_dim,tflops\n"
                      "attention_fwd_bwd,flash2,fp16,true,1,1,1,64,1\n")
                .find("valid: attention_forward, attention_backward, attention_forward_backward"),
            std::string::npos);
}

// An attention table: rows by TFLOP/s (FLOPs as attention_work counts them) or by time, the op
// labelled with its implementation, the declarations applied to every row.
TEST(KernelMeasurements, ReadsAttentionTablesAndTheirDeclarations) {
  const auto rows = read_measurement_csv(
      write_temp_table("attention.csv",
                       "# harness: none\n# provenance: published\n"
                       "op,implementation,dtype,causal,batch,heads,seq,head_dim,tflops\n"
                       "attention_forward,flash3,bf16,true,2,16,4096,128,500\n"
                       "attention_backward,cudnn,fp16,false,1,8,8192,64,400\n"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op, "attention_forward/flash3");
  EXPECT_EQ(rows[1].op, "attention_backward/cudnn");
  const AttentionShape& a = rows[0].kernel.attention;
  EXPECT_EQ(rows[0].kernel.cls, KernelClass::kAttention);
  EXPECT_EQ(a.implementation, AttentionKernel::kFlash3);
  EXPECT_TRUE(a.causal);
  EXPECT_FALSE(a.backward);
  EXPECT_EQ(a.kv_heads, 16);
  EXPECT_EQ(a.seq_kv, 4096);
  // 4 x 2 x 16 x 4096^2 x 128 / 2 (causal) FLOPs at 500 TFLOP/s.
  EXPECT_DOUBLE_EQ(rows[0].seconds, 4.0 * 2 * 16 * 4096.0 * 4096.0 * 128 / 2 / 500e12);
  // Backward: 2.5 x the forward's FLOPs.
  EXPECT_DOUBLE_EQ(rows[1].seconds, 2.5 * 4.0 * 8 * 8192.0 * 8192.0 * 64 / 400e12);
  EXPECT_TRUE(rows[1].kernel.attention.backward);
  for (const KernelMeasurement& r : rows) {
    EXPECT_TRUE(r.harness_none);
    EXPECT_EQ(r.provenance, "published");
  }
  const std::string head = "op,implementation,dtype,causal,batch,heads,seq,head_dim,";
  EXPECT_NE(csv_error(head + "tflops\nattention_forward,flash4,fp16,true,1,1,1,64,1\n")
                .find("table.csv:2: unknown implementation `flash4`"),
            std::string::npos);
  EXPECT_NE(csv_error(head + "tflops\nattention_forward,flash2,fp16,maybe,1,1,1,64,1\n")
                .find("causal must be `true` or `false`"),
            std::string::npos);
  EXPECT_NE(csv_error(head + "tflops,time_us\nattention_forward,flash2,fp16,true,1,1,1,64,1,1\n")
                .find("exactly one of time_us, tflops"),
            std::string::npos);
  EXPECT_NE(csv_error(head + "kv_heads,tflops\nattention_forward,flash2,fp16,true,1,6,1,64,4,1\n")
                .find("heads (6) must be a multiple of kv_heads (4)"),
            std::string::npos);
  // An attention row in a dtype the profile has no unit for names its row, before any pricing.
  const HardwareProfile a100 = shipped_profile("a100_sxm4_80gb.yaml");
  const auto fp8 = read_measurement_csv(write_temp_table(
      "fp8.csv", head + "tflops\nattention_forward,flash2,fp8,true,1,8,512,64,1\n"));
  try {
    require_priceable(fp8.at(0), a100.device);
    ADD_FAILURE() << "priced an fp8 attention on an A100";
  } catch (const CalibrationDataError& e) {
    EXPECT_NE(std::string(e.what()).find("fp8.csv:2: a fp8 attention_forward/flash2 kernel"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(csv_error("# harness: wallclock\nop,dtype,m,n,time_us\nrelu,fp16,1,1,1\n")
                .find("table.csv:1: harness `wallclock` is not known; valid: none (kernel time "
                      "as measured, no floor or offset), fitted"),
            std::string::npos);
  // `fitted` declares a harness the fit describes; a table without a declaration declares
  // none, and is read the same way.
  const auto fitted = read_measurement_csv(
      write_temp_table("fitted.csv", "# harness: fitted\nop,dtype,m,n,time_us\nrelu,fp16,1,1,9\n"));
  EXPECT_TRUE(fitted.at(0).harness_declared);
  EXPECT_FALSE(fitted.at(0).harness_none);
  const auto plain = read_measurement_csv(
      write_temp_table("plain.csv", "op,dtype,m,n,time_us\nrelu,fp16,1,1,9\n"));
  EXPECT_FALSE(plain.at(0).harness_declared);
  EXPECT_FALSE(plain.at(0).harness_none);
  EXPECT_TRUE(rows.at(0).harness_declared);  // `none` is a declaration too
  EXPECT_NE(csv_error("# provenance: guess\nop,dtype,m,n,time_us\nrelu,fp16,1,1,1\n")
                .find("provenance `guess` is not known"),
            std::string::npos);
}

// `# harness: none`: validation compares the kernel duration, not the calibration's harness of
// the op (the A100 file describes LLMCompass' wall-clock harness for gemm).
TEST(KernelMeasurements, HarnessNoneComparesTheKernelDuration) {
  const HardwareProfile a100 = shipped_profile("a100_sxm4_80gb.yaml");
  ConfigDocument file =
      ConfigDocument::load_file(kConfigs / "calibration" / "a100_llmcompass.yaml");
  const CalibratedKernelCost model(load_kernel_calibration(file.root()), a100.achievable);
  ASSERT_TRUE(model.calibration().measurement.contains("gemm"));
  KernelMeasurement row;
  row.op = "gemm";
  row.kernel = gemm_kernel(DType::kFp16, 1, 256, 256, 256);
  row.seconds = 1e-5;
  const double through_harness = predicted_measurement_seconds(model, row, a100.device);
  row.harness_none = true;
  const double kernel = predicted_measurement_seconds(model, row, a100.device);
  EXPECT_DOUBLE_EQ(kernel, model.kernel_duration(row.kernel, a100.device).seconds());
  EXPECT_GT(through_harness, kernel);  // the harness's floor (29.6 us) is above the kernel's time
}

// A GEMM table of kernel times (`# harness: none`: a trace's kernel durations) fits its rate
// against the model's kernel duration, no harness. Beside a harness-timed table of the same
// dtype, the kernel times still set the rate (compute_scale) and the timed rows fit the harness,
// whose compute_speedup is then relative to that rate.
TEST(KernelMeasurements, AGemmTableOfKernelTimesFitsWithoutAHarness) {
  const HardwareProfile a100 = shipped_profile("a100_sxm4_80gb.yaml");
  // 2 m n k / time: 150 TFLOP/s at 4096^3 and below for the smaller shapes.
  const auto rows = read_measurement_csv(
      write_temp_table("gemm.csv",
                       "# harness: none\nop,dtype,m,n,k,time_us\ngemm,fp16,4096,4096,4096,916.3\n"
                       "gemm,fp16,2048,2048,2048,131.3\ngemm,fp16,8192,8192,8192,6871.9\n"
                       "gemm,fp16,1024,1024,1024,27.5\ngemm,fp16,4096,1024,4096,249.2\n"));
  const CalibrationResult fit = fit_kernel_calibration(rows, a100, "test");
  EXPECT_FALSE(fit.calibration.measurement.contains("gemm"));
  const GemmParams& p = fit.calibration.gemm_for(DType::kFp16);
  EXPECT_LT(p.compute_scale, 1.0);  // 150 TFLOP/s is below the profile's 271 (MAMF)
  ASSERT_EQ(fit.validation.size(), 1u);
  EXPECT_LT(fit.validation[0].train_geomean, 0.10);
  // The same shapes timed through a harness 20 us above the kernel and at a third more speed
  // (every row a training row): the harness takes the difference, the rate stays the kernels'.
  std::string timed_csv = "op,dtype,m,n,k,time_us,split\n";
  for (const KernelMeasurement& r : rows) {
    const double flops = 2.0 * static_cast<double>(r.kernel.m) * static_cast<double>(r.kernel.n) *
                         static_cast<double>(r.kernel.k);
    timed_csv += fmt::format("gemm,fp16,{},{},{},{:.3f},train\n", r.kernel.m, r.kernel.n,
                             r.kernel.k, 20.0 + flops / 200e12 * 1e6);
  }
  std::vector<KernelMeasurement> mixed = rows;
  const auto timed = read_measurement_csv(write_temp_table("timed.csv", timed_csv));
  mixed.insert(mixed.end(), timed.begin(), timed.end());
  const CalibrationResult both = fit_kernel_calibration(mixed, a100, "test");
  ASSERT_TRUE(both.calibration.measurement.contains("gemm"));
  const HarnessOverhead& harness = both.calibration.measurement.at("gemm");
  const GemmParams& rate = both.calibration.gemm_for(DType::kFp16);
  EXPECT_NEAR(rate.compute_scale, p.compute_scale, 0.05 * p.compute_scale);
  EXPECT_GT(harness.compute_speedup, 1.1);  // 200 against about 150 TFLOP/s
  ASSERT_EQ(both.validation.size(), 1u);
  EXPECT_LT(both.validation[0].train_geomean, 0.10);
  EXPECT_EQ(both.calibration.gemm_for(DType::kTf32).compute_scale, 1.0);  // unmeasured: physics
}

TEST(KernelMeasurements, ReadsTheLlmcompassSweeps) {
  const auto all = read_llmcompass_dir(kData / "llmcompass", "A100");
  ASSERT_EQ(all.size(), 20u + 22u + 22u + 20u);
  // matmul_A100.csv line 1: M 64, N = K = 12288, 0.1900 ms.
  EXPECT_EQ(all[0].op, "gemm");
  EXPECT_EQ(all[0].kernel.m, 64);
  EXPECT_DOUBLE_EQ(all[0].seconds, 0.19e-3);
  EXPECT_FALSE(all[0].held_out);
  EXPECT_TRUE(all[1].held_out);
  // gelu_A100.csv line 1: 1024 elements at 0.021262214336633663 G elements/s.
  const KernelMeasurement& gelu = all[20 + 22 + 22];
  EXPECT_EQ(gelu.op, "gelu");
  EXPECT_DOUBLE_EQ(gelu.seconds, 1024 / 0.021262214336633663e9);
}

TEST(KernelMeasurements, BadLlmcompassRowsGiveClearErrors) {
  const auto error = [](const std::string& text, auto reader) {
    try {
      reader(write_temp_table("sweep.csv", text));
    } catch (const CalibrationDataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto matmul = [](const std::filesystem::path& p) { return read_llmcompass_matmul(p); };
  const auto softmax = [](const std::filesystem::path& p) {
    return read_llmcompass_rowwise(p, MemoryOp::kSoftmax);
  };
  EXPECT_NE(error("64, 128, 128, 0.0ms, 1Tflops\n", matmul).find("time must be positive"),
            std::string::npos);
  EXPECT_NE(error("64, 128, 128, 0.1s, 1Tflops\n", matmul).find("must end in `ms`"),
            std::string::npos);
  EXPECT_NE(error("64, 128, 128\n", matmul).find("expected 5 fields"), std::string::npos);
  EXPECT_NE(error("4096, 32, -1\n", softmax).find("throughput must be positive"),
            std::string::npos);
}

TEST(KernelMeasurements, FitRefusesAnEmptyTrainingSet) {
  HardwareProfile hw;
  std::vector<KernelMeasurement> rows(1);
  rows[0].op = "relu";
  rows[0].kernel = memory_op_kernel(MemoryOp::kRelu, DType::kFp16, 1, 10);
  rows[0].seconds = 1e-6;
  rows[0].held_out = true;
  EXPECT_THROW(fit_kernel_calibration(rows, hw, "x"), CalibrationDataError);
}

}  // namespace
}  // namespace upsim
