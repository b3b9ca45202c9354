// Unpadded and packed samples (sequence_lengths.h): the attention sequences keep the samples'
// tokens and query-key pairs; packing two samples per row halves a row's attention work and
// leaves its GEMMs alone; unpadding removes the padding's GEMM rows; padded samples with a
// stated mean length run exactly the padded step.
#include "workloads/transformer/sequence_lengths.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

TEST(SequenceLengths, AttentionSequencesKeepTheSamplesTokensAndQueryKeyPairs) {
  struct Case {
    SequenceLayout layout;
    int64_t micro_batch, seq;
    double mean, std;
  };
  for (const Case& k : {Case{SequenceLayout::kPacked, 1, 8192, 2000, 1500},
                        Case{SequenceLayout::kPacked, 4, 4096, 700, 0},
                        Case{SequenceLayout::kUnpadded, 32, 512, 260, 120},
                        Case{SequenceLayout::kUnpadded, 256, 128, 90, 30}}) {
    const SequenceLengths lengths{k.layout, k.mean, k.std};
    const AttentionSequences a = attention_sequences(lengths, k.micro_batch, k.seq);
    const double tokens = as_double(micro_batch_tokens(lengths, k.micro_batch, k.seq));
    const double samples = tokens / k.mean;
    const double pairs = samples * (k.mean * k.mean + k.std * k.std);
    const std::string where =
        fmt::format("{} b {} seq {} mean {} std {}", sequence_layout_name(k.layout), k.micro_batch,
                    k.seq, k.mean, k.std);
    EXPECT_NEAR(as_double(a.batch) * as_double(a.length * a.length) / pairs, 1.0, 0.002) << where;
    // A whole number of sequences: the tokens within sqrt(n / (n -+ 1/2)) of the samples'.
    EXPECT_NEAR(as_double(a.batch * a.length) / tokens, 1.0,
                std::sqrt(1.0 + 0.5 / as_double(a.batch)) - 1.0 + 0.002)
        << where;
    EXPECT_LE(a.length, k.seq) << where;
    EXPECT_GE(as_double(a.length), k.mean - 0.5) << where;
  }
  // Padded: the micro-batch's own sequences, whatever the samples' lengths.
  const AttentionSequences padded = attention_sequences({SequenceLayout::kPadded, 100, 50}, 8, 512);
  EXPECT_EQ(padded.batch, 8);
  EXPECT_EQ(padded.length, 512);
}

/// FLOPs of rank 0's fused-attention kernels and of its GEMMs in one step of `c`.
struct StepFlops {
  double attention = 0;
  double gemm = 0;
};

StepFlops step_flops(const TransformerConfig& c) {
  StepFlops f;
  for (const KernelDesc& k : test_configs::step_kernels(c)) {
    if (k.cls == KernelClass::kAttention) f.attention += attention_work(k).flops;
    if (k.cls == KernelClass::kGemm) f.gemm += 2.0 * as_double(k.batch * k.m) * k.n * k.k;
  }
  return f;
}

TEST(SequenceLengths, PackingTwoSamplesPerRowHalvesTheAttentionWorkAndKeepsTheGemms) {
  for (const bool causal : {true, false}) {
    TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 8192);
    c.causal = causal;
    const StepFlops padded = step_flops(c);
    c.sequences = {SequenceLayout::kPacked, 4096, 0};
    const StepFlops packed = step_flops(c);
    EXPECT_DOUBLE_EQ(packed.gemm, padded.gemm);
    EXPECT_NEAR(packed.attention / padded.attention, 0.5, 1e-9) << "causal " << causal;
  }
}

TEST(SequenceLengths, PackedSamplesOverContextParallelSplitTheirWorkAsPaddedOnesDo) {
  // Transformer Engine's K/V ring on a THD batch: every sample in 2 cp load-balanced chunks, so
  // each of 2 context ranks does half the attention and half the GEMMs of one rank without.
  TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, 8192);
  c.sequences = {SequenceLayout::kPacked, 2048, 0};
  const StepFlops whole = step_flops(c);
  c.parallelism.context = 2;
  const StepFlops split = step_flops(c);
  EXPECT_NEAR(split.attention / whole.attention, 0.5, 1e-9);
  EXPECT_NEAR(split.gemm / whole.gemm, 0.5, 1e-3);
  TaskGraph g;
  generate_transformer(c, {1}, g);
  int64_t collectives = 0;
  for (TaskId t = 0; t < g.task_count(); ++t)
    collectives += g.task(t).rank == 0 && g.task(t).kind == TaskKind::kCollective;
  EXPECT_GT(collectives, 0) << "the K/V ring runs";
}

TEST(SequenceLengths, UnpaddingHalfPaddedSamplesHalvesTheGemmsAndQuartersTheAttention) {
  TransformerConfig c = test_configs::small_gpt(2);
  c.causal = false;  // BERT-like
  const StepFlops padded = step_flops(c);
  c.sequences = {SequenceLayout::kUnpadded, 256, 0};
  const StepFlops unpadded = step_flops(c);
  EXPECT_NEAR(unpadded.gemm / padded.gemm, 0.5, 1e-9);
  EXPECT_NEAR(unpadded.attention / padded.attention, 0.25, 1e-9);
  // Model FLOPs: the real tokens, each attending to its own sample.
  TransformerConfig full = test_configs::small_gpt(2);
  full.seq = 256;
  full.global_batch = c.global_batch;
  EXPECT_DOUBLE_EQ(transformer_model_flops(c), transformer_model_flops(full));
}

TEST(SequenceLengths, PaddedSamplesWithAStatedMeanRunThePaddedStep) {
  TransformerConfig c = test_configs::small_gpt(2);
  TaskGraph plain;
  generate_transformer(c, {1}, plain);
  c.sequences = {SequenceLayout::kPadded, 100, 40};
  TaskGraph stated;
  generate_transformer(c, {1}, stated);
  ASSERT_EQ(plain.task_count(), stated.task_count());
  for (TaskId t = 0; t < plain.task_count(); ++t) {
    if (plain.task(t).kind != TaskKind::kKernel) continue;
    ASSERT_EQ(plain.kernel(t), stated.kernel(t)) << "task " << t;
  }
}

TEST(SequenceLengths, PackedAttentionTimeFollowsItsWorkOnH100) {
  // The attention kernels of a packed row with two samples take about half the padded row's
  // time: half the work, priced a little less efficiently (shorter key spans).
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const HardwareProfile& hw = h100.hw;
  const CalibratedKernelCost& model = h100.model;
  const auto attention_seconds = [&](const TransformerConfig& c) {
    TaskGraph g;
    const LayerKernels k = add_layer_kernels(c, layer_sizes(c), g);
    return model.kernel_duration(g.kernel_desc(k.attn_fwd), hw.device).seconds() +
           model.kernel_duration(g.kernel_desc(k.attn_bwd), hw.device).seconds();
  };
  TransformerConfig c = test_configs::llama(1, 4096, 32, 8, 14336, 8192);
  const double padded = attention_seconds(c);
  c.sequences = {SequenceLayout::kPacked, 4096, 0};
  const double packed = attention_seconds(c);
  std::printf(
      "H100 attention fwd + bwd, one row of 8192: %.3f ms padded, %.3f ms packed (2 x "
      "4096)\n",
      padded * 1e3, packed * 1e3);
  EXPECT_GE(packed / padded, 0.5);
  EXPECT_LE(packed / padded, 0.6);
}

}  // namespace
}  // namespace upsim
