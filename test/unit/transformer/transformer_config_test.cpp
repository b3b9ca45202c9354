#include "workloads/transformer/transformer_config.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim {
namespace {

/// GPT-3 175B as Megatron trained it (Narayanan et al. SC21, arXiv 2104.04473, Table 1's 175B
/// row: 96 layers, hidden 12288, 96 heads; TP 8, PP 8 on 1024 GPUs, batch 1536), with
/// `extra` appended to the workload map and `parallel_extra` to its parallelism map.
std::string gpt3(const std::string& extra = "", const std::string& parallel_extra = "") {
  return R"(workload:
  model: transformer
  architecture: gpt
  layers: 96
  hidden: 12288
  heads: 96
  vocab: 51200
  seq: 2048
  micro_batch: 1
  global_batch: 1536
  dtype: fp16
  parallelism:
    tensor: 8
    sequence: true
    pipeline: 8
)" + parallel_extra +
         extra;
}

std::string llama2_70b(const std::string& extra = "") {
  // Llama 2 70B (Touvron et al. 2023, arXiv 2307.09288; the released config.json): 80 layers,
  // hidden 8192, 64 heads, 8 key/value heads, ffn 28672, vocab 32000.
  return R"(workload:
  model: transformer
  architecture: llama
  layers: 80
  hidden: 8192
  heads: 64
  kv_heads: 8
  ffn: 28672
  vocab: 32000
  seq: 4096
  global_batch: 1024
  dtype: bf16
  parallelism:
    tensor: 8
    pipeline: 4
)" + extra;
}

TransformerConfig parse(const std::string& yaml, uint32_t gpus) {
  return test_configs::parse_workload(yaml, gpus);
}

/// Parses and returns the ConfigError message (what()), or "" if parsing succeeded.
std::string error_of(const std::string& yaml, uint32_t gpus) {
  return test_configs::workload_error(yaml, gpus);
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(TransformerConfig, GptPresetAndGpt3Shape) {
  const TransformerConfig c = parse(gpt3(), 1024);
  EXPECT_EQ(c.architecture, "gpt");
  EXPECT_EQ(c.layers, 96);
  EXPECT_EQ(c.kv_heads, 96);
  EXPECT_EQ(c.ffn, 4 * 12288);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.dtype, DType::kFp16);
  EXPECT_TRUE(c.causal);
  EXPECT_EQ(c.norm, TransformerNorm::kLayerNorm);
  EXPECT_EQ(c.activation, TransformerActivation::kGelu);
  EXPECT_EQ(c.position, TransformerPosition::kLearned);
  EXPECT_EQ(c.attention, AttentionImpl::kFlash);
  EXPECT_TRUE(c.bias);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_DOUBLE_EQ(c.dropout, 0.1);
  EXPECT_EQ(c.parallelism.tensor, 8);
  EXPECT_TRUE(c.parallelism.sequence);
  EXPECT_EQ(c.parallelism.pipeline, 8);
  EXPECT_EQ(c.parallelism.data, 16);  // 1024 / (8 x 8)
  EXPECT_EQ(c.parallelism.schedule, PipelineSchedule::k1F1B);
  EXPECT_EQ(c.parallelism.ddp_bucket_bytes, 25LL << 20);
  EXPECT_EQ(c.micro_batches(), 96);  // 1536 / (1 x 16)
  EXPECT_EQ(c.recompute, Recompute::kNone);
  EXPECT_EQ(c.optimizer, TransformerOptimizer::kAdam);
  EXPECT_TRUE(c.master_weights);
  EXPECT_TRUE(c.mirror_data_parallel);
  EXPECT_EQ(c.padded_vocab(), 51200);
  // GPT-3 175B: 12 L h^2 (1 + 13 / (12 h) + ...) ~ 174.6e9 with these shapes and a 51200 vocab.
  const int64_t params = transformer_parameters(c);
  std::printf("GPT-3 175B parameters: %.2fe9\n", static_cast<double>(params) / 1e9);
  EXPECT_NEAR(static_cast<double>(params), 174.6e9, 0.2e9);
}

TEST(TransformerConfig, LlamaPresetWithGroupedQueryAttention) {
  const TransformerConfig c = parse(llama2_70b(), 256);
  EXPECT_EQ(c.norm, TransformerNorm::kRmsNorm);
  EXPECT_EQ(c.activation, TransformerActivation::kSwiglu);
  EXPECT_EQ(c.position, TransformerPosition::kRotary);
  EXPECT_FALSE(c.bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_DOUBLE_EQ(c.dropout, 0.0);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.ffn, 28672);
  EXPECT_EQ(c.parallelism.data, 8);
  EXPECT_EQ(c.micro_batches(), 128);
  EXPECT_EQ(c.dtype, DType::kBf16);
  // 32000 is a multiple of 128 but not of 128 x 8 = 1024: Megatron pads to 32768.
  EXPECT_EQ(c.padded_vocab(), 32768);
  const int64_t params = transformer_parameters(c);
  std::printf("Llama 2 70B parameters (padded vocab): %.3fe9\n", static_cast<double>(params) / 1e9);
  // The released model has 68.98e9 parameters with vocab 32000; padding adds 2 x 768 x 8192.
  EXPECT_NEAR(static_cast<double>(params), 68.977e9 + 2 * 768 * 8192, 0.01e9);
}

TEST(TransformerConfig, LlamaFfnDefaultsToTwoThirdsOfFourHRoundedTo256) {
  const std::string yaml = replace(llama2_70b(), "  ffn: 28672\n", "");
  // Llama 7B's rule on hidden 8192: 2 x 32768 / 3 = 21845 -> 22016.
  EXPECT_EQ(parse(yaml, 256).ffn, 22016);
  const std::string small =
      replace(replace(yaml, "hidden: 8192", "hidden: 4096"), "heads: 64\n", "heads: 32\n");
  EXPECT_EQ(parse(small, 256).ffn, 11008);  // Llama 7B
}

TEST(TransformerConfig, BertAndMptPresets) {
  const TransformerConfig bert =
      parse(replace(gpt3(), "architecture: gpt", "architecture: bert"), 1024);
  EXPECT_FALSE(bert.causal);
  EXPECT_TRUE(bert.bias);
  EXPECT_TRUE(bert.tied_embeddings);
  const TransformerConfig mpt =
      parse(replace(gpt3(), "architecture: gpt", "architecture: mpt"), 1024);
  EXPECT_TRUE(mpt.causal);
  EXPECT_EQ(mpt.position, TransformerPosition::kAlibi);
  EXPECT_EQ(mpt.norm, TransformerNorm::kLayerNorm);
  EXPECT_FALSE(mpt.bias);
  EXPECT_TRUE(mpt.tied_embeddings);
  EXPECT_EQ(mpt.ffn, 4 * 12288);
}

TEST(TransformerConfig, ExplicitKeysOverrideThePreset) {
  const TransformerConfig c =
      parse(gpt3("  norm: rms_norm\n  position: rotary\n  bias: false\n  tied_embeddings: "
                 "false\n  causal: false\n  attention: unfused\n  dropout: 0.0\n  "
                 "master_weights: false\n  mirror_data_parallel: false\n  recompute: selective\n "
                 " optimizer: adamw\n  optimizer_impl: foreach\n"),
            1024);
  EXPECT_EQ(c.norm, TransformerNorm::kRmsNorm);
  EXPECT_EQ(c.position, TransformerPosition::kRotary);
  EXPECT_FALSE(c.bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.attention, AttentionImpl::kUnfused);
  EXPECT_FALSE(c.master_weights);
  EXPECT_FALSE(c.mirror_data_parallel);
  EXPECT_EQ(c.recompute, Recompute::kSelective);
  EXPECT_EQ(c.optimizer, TransformerOptimizer::kAdamW);
  EXPECT_EQ(c.optimizer_impl, OptimizerImpl::kForeach);
}

TEST(TransformerConfig, AttentionNamesTheFusedKernel) {
  EXPECT_EQ(parse(gpt3(), 1024).attention_kernel, AttentionKernel::kFlash2);
  const std::vector<std::pair<std::string, AttentionKernel>> names{
      {"flash", AttentionKernel::kFlash2},  {"flash2", AttentionKernel::kFlash2},
      {"flash3", AttentionKernel::kFlash3}, {"cudnn", AttentionKernel::kCudnn},
      {"flash1", AttentionKernel::kFlash1}, {"triton", AttentionKernel::kTriton}};
  for (const auto& [name, kernel] : names) {
    const TransformerConfig c = parse(gpt3("  attention: " + name + "\n"), 1024);
    EXPECT_EQ(c.attention, AttentionImpl::kFlash) << name;
    EXPECT_EQ(c.attention_kernel, kernel) << name;
  }
  try {
    parse(gpt3("  attention: flash4\n"), 1024);
    ADD_FAILURE() << "accepted flash4";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("workload.attention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudnn"), std::string::npos) << e.what();
  }
}

// The fused kernels exist for some GPUs only: FA3 on Hopper (9.0), FA2 and cuDNN's from Ampere.
TEST(TransformerConfig, AttentionKernelsNeedTheirComputeCapability) {
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kFlash3, 90));
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kFlash2, 80));
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kCudnn, 100));
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kFlash3, 0));  // not stated
  const auto a100 = attention_kernel_unsupported(AttentionKernel::kFlash3, 80);
  ASSERT_TRUE(a100);
  EXPECT_NE(a100->find("9.0 (Hopper) only, the GPU has 8.0"), std::string::npos) << *a100;
  EXPECT_TRUE(attention_kernel_unsupported(AttentionKernel::kFlash3, 100));
  const auto v100 = attention_kernel_unsupported(AttentionKernel::kFlash2, 70);
  ASSERT_TRUE(v100);
  EXPECT_NE(v100->find("8.0 (Ampere) or later, the GPU has 7.0"), std::string::npos) << *v100;
  EXPECT_TRUE(attention_kernel_unsupported(AttentionKernel::kCudnn, 75));
  // FlashAttention v1 from Turing, the Triton FlashAttention from Ampere; both run on Hopper.
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kFlash1, 75));
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kFlash1, 90));
  EXPECT_FALSE(attention_kernel_unsupported(AttentionKernel::kTriton, 90));
  const auto v100_flash1 = attention_kernel_unsupported(AttentionKernel::kFlash1, 70);
  ASSERT_TRUE(v100_flash1);
  EXPECT_NE(v100_flash1->find("7.5 (Turing) or later"), std::string::npos) << *v100_flash1;
  const auto t4_triton = attention_kernel_unsupported(AttentionKernel::kTriton, 75);
  ASSERT_TRUE(t4_triton);
  EXPECT_NE(t4_triton->find("Triton FlashAttention (triton) needs compute capability 8.0"),
            std::string::npos)
      << *t4_triton;
}

// FlashAttention v1 and the Triton FlashAttention take what flash-attn v1.0.9 takes: head dims
// up to 128, no window, no ring attention; the Triton kernel no variable-length batch. Each
// refusal names the key.
TEST(TransformerConfig, V1AttentionKernelsRefuseWhatTheyCannotRun) {
  const std::vector<std::array<std::string, 3>> refused{
      {"  attention: flash1\n  head_dim: 192\n", "", "head dims up to 128"},
      {"  attention: triton\n  sliding_window: 1024\n", "", "no sliding window"},
      {"  attention: flash1\n", "    context: 2\n", "context parallel 2"},
      {"  attention: triton\n  sequences: {layout: packed, mean_length: 1024}\n", "",
       "padded batches only"},
  };
  for (const auto& [keys, parallel, why] : refused) {
    try {
      parse(gpt3(keys, parallel), 2048);
      ADD_FAILURE() << "accepted " << keys;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("workload.attention"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse(gpt3("  attention: flash1\n  head_dim: 128\n"), 1024).attention_kernel,
            AttentionKernel::kFlash1);
}

// cuda_graphs: per-layer graphs; refused for a Megatron-Core MoE layer, whose token counts the
// host waits for inside the layer, dropless or dropping to a capacity factor.
TEST(TransformerConfig, CudaGraphsAreRefusedWithMoeLayers) {
  EXPECT_TRUE(parse(llama2_70b("  cuda_graphs: true\n"), 1024).cuda_graphs);
  EXPECT_FALSE(parse(llama2_70b(), 1024).cuda_graphs);
  for (const char* capacity : {"0", "1.25"}) {
    const std::string moe =
        std::string("  moe: {experts: 8, top_k: 2, capacity_factor: ") + capacity + "}\n";
    const std::string e = error_of(llama2_70b("  cuda_graphs: true\n" + moe), 1024);
    EXPECT_NE(e.find("workload.cuda_graphs: a Megatron-Core MoE layer"), std::string::npos) << e;
    EXPECT_NE(e.find("padded to the capacity"), std::string::npos) << e;
  }
}

TEST(TransformerConfig, EveryParallelismKeyAndMoe) {
  const std::string yaml = R"(workload:
  model: transformer
  architecture: llama
  layers: 32
  hidden: 4096
  heads: 32
  kv_heads: 8
  ffn: 14336
  vocab: 32000
  seq: 4096
  global_batch: 256
  moe:
    experts: 8
    top_k: 2
    capacity_factor: 0
    shared_experts: 1
    expert_ffn: 14336
    every: 2
    imbalance: 0.3
  parallelism:
    tensor: 2
    sequence: true
    pipeline: 4
    virtual_stages: 2
    schedule: 1f1b
    context: 2
    expert: 4
    zero: 1
    fsdp: none
    order: tp-cp-ep-dp-pp
    ddp_bucket: 40MiB
)";
  const TransformerConfig c = parse(yaml, 64);
  EXPECT_EQ(c.parallelism.data, 4);  // 64 / (2 x 4 x 2)
  EXPECT_EQ(c.parallelism.schedule, PipelineSchedule::kInterleaved1F1B);
  EXPECT_EQ(c.parallelism.ddp_bucket_bytes, 40LL << 20);
  EXPECT_EQ(c.moe.experts, 8);
  EXPECT_EQ(c.moe.shared_experts, 1);
  EXPECT_DOUBLE_EQ(c.moe.capacity_factor, 0.0);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.micro_batches(), 64);
}

TEST(TransformerConfig, OrderIsReadAsAPermutation) {
  const TransformerConfig c = parse(gpt3("", "    order: tp-dp-cp-ep-pp\n"), 1024);
  EXPECT_EQ(c.parallelism.order[1], ParallelDim::kData);
  EXPECT_EQ(c.parallelism.order[4], ParallelDim::kPipeline);
  const std::string e = error_of(gpt3("", "    order: tp-dp-pp\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.order: `tp-dp-pp` is not a permutation of tp, cp, ep, "
                   "dp, pp"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of(gpt3("", "    order: tp-cp-ep-dp-dp\n"), 1024).find("order"),
            std::string::npos);
}

TEST(TransformerConfig, HeadsNotDivisibleByTensor) {
  const std::string e = error_of(replace(gpt3(), "tensor: 8", "tensor: 5"), 320);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(
      e.find("scenario.yaml:6: workload.heads: 96 heads are not divisible by tensor parallel 5"),
      std::string::npos)
      << e;
}

TEST(TransformerConfig, KvHeadsRules) {
  std::string e = error_of(replace(llama2_70b(), "kv_heads: 8", "kv_heads: 7"), 256);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.kv_heads: 7 kv_heads do not divide heads 64"), std::string::npos) << e;
  e = error_of(replace(llama2_70b(), "kv_heads: 8", "kv_heads: 16") + "    data: 8\n", 256);
  EXPECT_EQ(e, "");  // 16 kv heads over tensor 8: two per rank
  e = error_of(
      replace(replace(llama2_70b(), "kv_heads: 8", "kv_heads: 32"), "tensor: 8", "tensor: 64"),
      1024);
  EXPECT_EQ(e, "");  // fewer key/value heads than ... (32 < 64): replicated twice
  e = error_of(replace(replace(replace(llama2_70b(), "heads: 64", "heads: 48"), "kv_heads: 8",
                               "kv_heads: 12"),
                       "hidden: 8192", "hidden: 6144"),
               256);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.kv_heads: 12 kv_heads are not divisible by tensor parallel 8"),
            std::string::npos)
      << e;
  // Two key/value heads replicated over tensor 8: allowed (Megatron replicates them).
  EXPECT_EQ(error_of(replace(llama2_70b(), "kv_heads: 8", "kv_heads: 2"), 256), "");
}

// Sizes the generator multiplies: each outside its documented range, or a product above its
// bound, is an error naming the key. Before, seq 2^62 wrapped a GEMM to m = 0 and vocab 2^63-1
// to a negative n (an internal "gemm model" error at best).
TEST(TransformerConfig, SizesOutsideTheirRangesOrOverflowingProductsNameTheKey) {
  const auto expect_error = [](const std::string& yaml, const std::string& want) {
    const std::string e = error_of(yaml, 1024);
    EXPECT_NE(e.find(want), std::string::npos) << "want: " << want << "\ngot: " << e;
  };
  expect_error(replace(gpt3(), "seq: 2048", "seq: 4611686018427387904"),
               "workload.seq: must be between 1 and 16777216, got 4611686018427387904");
  expect_error(replace(gpt3(), "vocab: 51200", "vocab: 9223372036854775807"),
               "workload.vocab: must be between 1 and 16777216");
  expect_error(replace(gpt3(), "layers: 96", "layers: 2147483647"),
               "workload.layers: must be between 1 and 4096");
  expect_error(replace(gpt3(), "global_batch: 1536", "global_batch: 9223372036854775807"),
               "workload.global_batch: must be between 1 and 2147483648");
  expect_error(replace(gpt3(), "tensor: 8", "tensor: 4294967296"),
               "parallelism.tensor: must be between 1 and 16777216");
  // Each within its range, the product not.
  expect_error(replace(gpt3(), "seq: 2048", "seq: 16777216"),
               "workload.seq: micro_batch 1 x seq 16777216^2 x hidden 12288 is above 2^56");
  expect_error(
      replace(replace(gpt3(), "seq: 2048", "seq: 16777216"), "micro_batch: 1", "micro_batch: 1024"),
      "workload.seq: micro_batch 1024 x seq 16777216 is above 4294967296 tokens");
  expect_error(
      replace(replace(gpt3(), "tensor: 8", "tensor: 4096"), "pipeline: 8", "pipeline: 8192"),
      "parallelism: tensor 4096 x pipeline 8192 x context 1 is above 16777216 GPUs");
  expect_error(replace(gpt3(), "hidden: 12288", "hidden: 1048320"),
               "workload.layers: 96 layers of hidden 1048320, ffn 4193280 are above 2^50");
}

TEST(TransformerConfig, HiddenNotDivisibleByHeads) {
  const std::string e = error_of(replace(gpt3(), "hidden: 12288", "hidden: 12300"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.hidden: 12300 is not divisible by heads 96"), std::string::npos) << e;
}

TEST(TransformerConfig, LayersNotDivisibleByPipelineTimesVirtualStages) {
  std::string e = error_of(replace(gpt3(), "layers: 96", "layers: 100"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.layers: 100 layers are not divisible by pipeline 8 x "
                   "virtual_stages 1 = 8"),
            std::string::npos)
      << e;
  e = error_of(gpt3("", "    virtual_stages: 5\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.layers: 96 layers are not divisible by pipeline 8 x "
                   "virtual_stages 5 = 40"),
            std::string::npos)
      << e;
}

TEST(TransformerConfig, GlobalBatchNotDivisibleByMicroBatchTimesData) {
  const std::string e = error_of(replace(gpt3(), "global_batch: 1536", "global_batch: 1000"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.global_batch: 1000 sequences are not divisible by micro_batch 1 x "
                   "data 16 = 16"),
            std::string::npos)
      << e;
}

TEST(TransformerConfig, InterleavedNeedsMicroBatchesMultipleOfPipeline) {
  // 16 x 12 = 192 sequences: 12 micro-batches, not a multiple of pipeline 8.
  const std::string e = error_of(
      replace(gpt3("", "    virtual_stages: 2\n"), "global_batch: 1536", "global_batch: 192"),
      1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.global_batch: gives 12 micro-batches per iteration, but "
                   "interleaved 1F1B"),
            std::string::npos)
      << e;
  EXPECT_EQ(error_of(gpt3("", "    virtual_stages: 2\n"), 1024), "");
}

TEST(TransformerConfig, SequencesReadTheirLayoutMeanAndDeviation) {
  const TransformerConfig padded = parse(llama2_70b(), 32);
  EXPECT_EQ(padded.sequences.layout, SequenceLayout::kPadded);
  EXPECT_EQ(padded.micro_batch_tokens(), 4096);
  const TransformerConfig packed =
      parse(llama2_70b("  sequences: {layout: packed, mean_length: 1024, length_std: 512}\n"), 32);
  EXPECT_EQ(packed.sequences.layout, SequenceLayout::kPacked);
  EXPECT_DOUBLE_EQ(packed.sequences.mean_length, 1024);
  EXPECT_DOUBLE_EQ(packed.sequences.length_std, 512);
  EXPECT_EQ(packed.micro_batch_tokens(), 4096);
  const TransformerConfig unpadded =
      parse(llama2_70b("  sequences: {layout: unpadded, mean_length: 1000.4}\n"), 32);
  EXPECT_EQ(unpadded.micro_batch_tokens(), 1000);
}

TEST(TransformerConfig, SequencesOutsideWhatSamplesOfOneToSeqTokensCanBeNameTheKey) {
  std::string e = error_of(llama2_70b("  sequences: {layout: padded, mean_length: 5000}\n"), 32);
  EXPECT_NE(e.find("workload.sequences.mean_length"), std::string::npos) << e;
  // Lengths in [1, 4096] with mean 1024 deviate by at most sqrt(1023 x 3072) = 1772.8.
  e = error_of(llama2_70b("  sequences: {layout: packed, mean_length: 1024, length_std: 1800}\n"),
               32);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.sequences.length_std: 1800 is more than samples of 1 .. seq 4096 "
                   "tokens with mean_length 1024 can deviate (at most 1773)"),
            std::string::npos)
      << e;
  e = error_of(llama2_70b("  sequences: {layout: ragged}\n"), 32);
  EXPECT_NE(e.find("workload.sequences.layout"), std::string::npos) << e;
  e = error_of(llama2_70b("  attention: unfused\n  sequences: {layout: unpadded}\n"), 32);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.sequences.layout: unpadded sequences need a fused attention"),
            std::string::npos)
      << e;
  // Transformer Engine's context parallel takes variable-length batches on its K/V ring only.
  const std::string packed_cp =
      replace(llama2_70b("  sequences: {layout: packed, mean_length: 512}\n"), "    pipeline: 4\n",
              "    pipeline: 4\n    context: 2\n");
  EXPECT_EQ(parse(packed_cp, 64).parallelism.context, 2);
  e = error_of(replace(packed_cp, "    context: 2\n", "    context: 2\n    context_comm: a2a\n"),
               64);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.sequences.layout: packed sequences with context parallel 2 need "
                   "parallelism.context_comm: p2p"),
            std::string::npos)
      << e;
}

TEST(TransformerConfig, LambIsApexFusedLambOnly) {
  EXPECT_EQ(parse(gpt3("  optimizer: lamb\n"), 1024).optimizer, TransformerOptimizer::kLamb);
  const std::string e = error_of(gpt3("  optimizer: lamb\n  optimizer_impl: foreach\n"), 1024);
  EXPECT_NE(e.find("workload.optimizer_impl: lamb runs as Apex's FusedLAMB only"),
            std::string::npos)
      << e;
}

/// bert-base-uncased (Devlin et al., arXiv 1810.04805; HuggingFace config.json: 12 layers,
/// hidden 768, 12 heads, ffn 3072, vocab 30522, 512 positions) with `extra` keys.
std::string bert_base(const std::string& extra) {
  return R"(workload:
  model: transformer
  architecture: bert
  layers: 12
  hidden: 768
  heads: 12
  vocab: 30522
  seq: 512
  micro_batch: 8
)" + extra;
}

TEST(TransformerConfig, TaskHeadsReadTheirKeysAndCountTheirParameters) {
  const TransformerConfig lm = parse(bert_base(""), 1);
  EXPECT_EQ(lm.head.kind, TaskHeadKind::kLanguageModel);
  EXPECT_EQ(lm.vocabulary_rows(), 8 * 512);
  const TransformerConfig mlm = parse(bert_base("  head: mlm\n"), 1);
  EXPECT_EQ(mlm.head.predictions, 77);  // round(0.15 x 512)
  const TransformerConfig nvidia = parse(bert_base("  head: mlm\n  predictions: 76\n"), 1);
  EXPECT_EQ(nvidia.vocabulary_rows(), 8 * 76);
  // BertForPreTraining of bert-base-uncased has 110,106,428 parameters (HuggingFace
  // transformers, model.num_parameters()): embeddings 23,837,184 (word, 512 positions, 2 token
  // types, LayerNorm), 12 layers of 7,087,872, pooler 590,592, masked-LM transform 592,128,
  // decoder bias 30,522, next-sentence classifier 1,538. upsim leaves out the token-type
  // embedding (1,536) and pads the vocabulary to 30,592 (Megatron's multiple of 128): 70 more
  // rows of the tied embedding and 70 more decoder biases.
  EXPECT_EQ(transformer_parameters(nvidia), 110106428 - 1536 + 70 * 768 + 70);
  const TransformerConfig yelp = parse(bert_base("  head: classification\n  labels: 5\n"), 1);
  EXPECT_EQ(yelp.vocabulary_rows(), 0);
  EXPECT_EQ(transformer_parameters(yelp),
            transformer_parameters(lm) + 768 * 768 + 768 + 768 * 5 + 5);
  std::string e = error_of(bert_base("  predictions: 20\n"), 1);
  EXPECT_NE(e.find("workload.predictions: counts the masked-LM head's predicted positions: needs "
                   "`head: mlm` (head is lm)"),
            std::string::npos)
      << e;
  e = error_of(bert_base("  head: mlm\n  labels: 3\n"), 1);
  EXPECT_NE(e.find("workload.labels"), std::string::npos) << e;
  e = error_of(bert_base("  head: mlm\n  predictions: 600\n"), 1);
  EXPECT_NE(e.find("workload.predictions"), std::string::npos) << e;
  e = error_of(bert_base("  head: span\n"), 1);
  EXPECT_NE(e.find("workload.head"), std::string::npos) << e;
  EXPECT_TRUE(parse(bert_base("  loss: eager\n"), 1).head.eager_loss);
  EXPECT_FALSE(lm.head.eager_loss);
  e = error_of(bert_base("  head: classification\n  loss: eager\n"), 1);
  EXPECT_NE(e.find("workload.loss: is the vocabulary cross-entropy's implementation"),
            std::string::npos)
      << e;
}

TEST(TransformerConfig, OpRecomputeNeedsFusedAttentionAndDenseLayers) {
  EXPECT_EQ(parse(llama2_70b("  recompute: op\n"), 32).recompute, Recompute::kOp);
  const std::string e = error_of(llama2_70b("  recompute: op\n  attention: unfused\n"), 32);
  EXPECT_NE(e.find("workload.recompute: op (per-op selective checkpointing) is modelled for fused "
                   "attention and dense layers only"),
            std::string::npos)
      << e;
}

TEST(TransformerConfig, ContextCommNeedsContextParallelAndUlyssesDivisibleHeads) {
  const std::string cp2 = "    pipeline: 4\n    context: 2\n";
  TransformerConfig c =
      parse(replace(llama2_70b(), "    pipeline: 4\n", cp2 + "    context_comm: all_gather\n"), 64);
  EXPECT_EQ(c.parallelism.context_comm, ContextComm::kAllGather);
  std::string e = error_of(
      replace(llama2_70b(), "    pipeline: 4\n", "    pipeline: 4\n    context_comm: a2a\n"), 32);
  EXPECT_NE(e.find("workload.parallelism.context_comm: chooses how context-parallel ranks "
                   "exchange the sequence: needs context > 1"),
            std::string::npos)
      << e;
  // Llama 2 70B at TP 8: 8 query heads and 1 key/value head per tensor rank, not divisible by 2.
  e = error_of(replace(llama2_70b(), "    pipeline: 4\n", cp2 + "    context_comm: a2a\n"), 64);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.context_comm: a2a splits the heads over context "
                   "parallel 2: the 8 query and 1 key/value heads per tensor rank must be "
                   "divisible by it"),
            std::string::npos)
      << e;
}

/// DeepSeek-V3 (DeepSeek-AI, arXiv 2412.19437, section 4.2 and its config.json): 61 layers,
/// hidden 7168, 128 heads of multi-head latent attention, 3 dense layers of ffn 18432, then MoE
/// layers of 256 routed experts (top 8) and 1 shared expert of 2048, vocabulary 129280.
std::string deepseek_v3(const std::string& extra = "") {
  return R"(workload:
  model: transformer
  architecture: llama
  layers: 61
  hidden: 7168
  heads: 128
  ffn: 18432
  vocab: 129280
  tied_embeddings: false
  seq: 4096
  mla: {q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64,
        v_head_dim: 128}
  moe: {experts: 256, top_k: 8, shared_experts: 1, expert_ffn: 2048, first_dense: 3,
        capacity_factor: 0}
)" + extra;
}

TEST(TransformerConfig, LatentAttentionCountsDeepSeekV3AsPublished) {
  const TransformerConfig c = parse(deepseek_v3(), 1);
  EXPECT_TRUE(c.mla.enabled());
  EXPECT_EQ(c.head_dim(), 160);  // (192 + 128) / 2
  EXPECT_FALSE(c.is_moe_layer(2));
  EXPECT_TRUE(c.is_moe_layer(3));
  // The paper: 671B total parameters (the multi-token-prediction module's 14B apart); per layer
  // of latent attention 187,107,328 (W_qa 7168 x 1536, its norm, W_qb 1536 x 128 x 192, W_kva
  // 7168 x 576, its norm, W_kvb 512 x 128 x 256, W_o 16384 x 7168).
  EXPECT_EQ(latent_attention_parameters(c.mla, 7168, 128, 1), 187107328);
  EXPECT_NEAR(static_cast<double>(transformer_parameters(c)) / 671e9, 1.0, 0.001);
  std::string e = error_of(deepseek_v3("  kv_heads: 8\n"), 1);
  EXPECT_NE(e.find("workload.kv_heads: latent attention up-projects keys and values for every "
                   "head"),
            std::string::npos)
      << e;
  e = error_of(deepseek_v3("  attention: unfused\n"), 1);
  EXPECT_NE(e.find("workload.mla: needs a fused attention"), std::string::npos) << e;
}

TEST(TransformerConfig, FusedAttentionNeedsSixteenBitInputs) {
  std::string e = error_of(bert_base("  dtype: fp32\n  attention: flash\n"), 1);
  EXPECT_NE(e.find("workload.attention: the fused attention kernels (flash, flash3, cudnn, "
                   "flash1, triton; flash is the default) take 16-bit inputs, not fp32"),
            std::string::npos)
      << e;
  e = error_of(bert_base("  dtype: tf32\n"), 1);  // flash by default
  EXPECT_NE(e.find("workload.attention: the fused attention kernels"), std::string::npos) << e;
  EXPECT_EQ(parse(bert_base("  dtype: fp32\n  attention: unfused\n"), 1).dtype, DType::kFp32);
}

TEST(TransformerConfig, UnknownDtypeListsTheValidOnes) {
  const std::string e = error_of(replace(gpt3(), "dtype: fp16", "dtype: fp64"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.dtype: unknown dtype `fp64`"), std::string::npos) << e;
  EXPECT_NE(e.find("valid: fp32, tf32, fp16, bf16, fp8"), std::string::npos) << e;
}

TEST(TransformerConfig, GpuCountMismatch) {
  std::string e = error_of(gpt3("", "    data: 8\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.data: tensor 8 x pipeline 8 x context 1 x data 8 = "
                   "512 GPUs, but the platform has 1024 GPUs"),
            std::string::npos)
      << e;
  e = error_of(gpt3(), 1000);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism: the platform's 1000 GPUs are not divisible by tensor "
                   "8 x pipeline 8 x context 1 = 64"),
            std::string::npos)
      << e;
  // Unknown GPU count: data defaults to 1.
  EXPECT_EQ(parse(replace(gpt3(), "global_batch: 1536", "global_batch: 96"), 0).parallelism.data,
            1);
}

TEST(TransformerConfig, SequenceAndVirtualStagesNeedTheirParallelism) {
  std::string e = error_of(replace(gpt3(), "tensor: 8", "tensor: 1"), 128);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.sequence: sequence parallel"), std::string::npos) << e;
  e = error_of(replace(gpt3("", "    virtual_stages: 2\n"), "pipeline: 8", "pipeline: 1"), 128);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.virtual_stages: 2 virtual stages (interleaved 1F1B) "
                   "need parallelism.pipeline > 1"),
            std::string::npos)
      << e;
}

TEST(TransformerConfig, ZeroAndFsdpExcludeEachOther) {
  const std::string e = error_of(gpt3("", "    zero: 1\n    fsdp: full_shard\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.fsdp: PyTorch FSDP and ZeRO"), std::string::npos) << e;
  EXPECT_NE(error_of(gpt3("", "    zero: 4\n"), 1024).find("workload.parallelism.zero"),
            std::string::npos);
}

TEST(TransformerConfig, GradientSyncAppliesToShardedParametersOnly) {
  const std::string e = error_of(gpt3("", "    gradient_sync: last_micro_batch\n"), 1024);
  EXPECT_NE(e.find("workload.parallelism.gradient_sync: applies to sharded parameters only"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of(gpt3("", "    fsdp: full_shard\n    gradient_sync: sometimes\n"), 1024)
                .find("workload.parallelism.gradient_sync"),
            std::string::npos);
  EXPECT_EQ(error_of(gpt3("", "    fsdp: full_shard\n    gradient_sync: last_micro_batch\n"), 1024),
            "");
}

TEST(TransformerConfig, OverlapParamGatherNeedsTheDistributedOptimizer) {
  EXPECT_NE(error_of(gpt3("", "    overlap_param_gather: true\n"), 1024)
                .find("workload.parallelism.overlap_param_gather: overlaps the distributed "
                      "optimizer's parameter all-gather: needs zero 1 or 2"),
            std::string::npos);
  EXPECT_NE(error_of(gpt3("",
                          "    zero: 1\n    overlap_grad_reduce: false\n"
                          "    overlap_param_gather: true\n"),
                     1024)
                .find("needs overlap_grad_reduce: true"),
            std::string::npos);
  EXPECT_EQ(error_of(gpt3("", "    zero: 1\n    overlap_param_gather: true\n"), 1024), "");
}

TEST(TransformerConfig, RecomputeLayersNeedsFullRecomputeAndFitsAChunk) {
  std::string e = error_of(gpt3("  recompute_layers: 2\n", ""), 1024);
  EXPECT_NE(e.find("workload.recompute_layers: counts fully recomputed layers: needs "
                   "`recompute: full`"),
            std::string::npos)
      << e;
  // gpt3(): 96 layers over pipeline 8: 12 per chunk.
  e = error_of(gpt3("  recompute: full\n  recompute_layers: 13\n", ""), 1024);
  EXPECT_NE(e.find("workload.recompute_layers: 13 layers, but each model chunk holds 12"),
            std::string::npos)
      << e;
  EXPECT_EQ(error_of(gpt3("  recompute: full\n  recompute_layers: 12\n", ""), 1024), "");
}

TEST(TransformerConfig, TpCommOverlapNeedsSequenceParallel) {
  // gpt3(): tensor 8 with sequence parallel.
  EXPECT_EQ(error_of(gpt3("", "    tp_comm_overlap: true\n"), 1024), "");
  const std::string e = error_of(
      replace(gpt3("", "    tp_comm_overlap: true\n"), "sequence: true", "sequence: false"), 1024);
  EXPECT_NE(e.find("workload.parallelism.tp_comm_overlap: overlaps the sequence-parallel"),
            std::string::npos)
      << e;
}

// An explicit head dimension (Gemma 7B: hidden 3072, 16 heads of 256, so Q is 4096 wide; Gemma
// Team, arXiv 2403.08295, Table 1: 28 layers, GeGLU MLP of 24576, vocabulary 256000 with tied
// embeddings: 8.54 B parameters).
TEST(TransformerConfig, ExplicitHeadDimWidensQAndCountsItsParameters) {
  const TransformerConfig c = parse(R"(workload:
  model: transformer
  architecture: llama
  layers: 28
  hidden: 3072
  heads: 16
  head_dim: 256
  activation: geglu
  ffn: 24576
  vocab: 256000
  tied_embeddings: true
  seq: 8192
)",
                                    1);
  EXPECT_EQ(c.head_dim(), 256);
  const double params = static_cast<double>(transformer_parameters(c));
  EXPECT_NEAR(params / 8.54e9, 1.0, 0.005) << params;
  // 3072 is divisible by 16 heads but 3000 is not: fine with head_dim, refused without.
  const std::string yaml =
      "workload:\n  model: transformer\n  layers: 2\n  hidden: 3000\n  heads: 16\n"
      "  vocab: 1000\n  seq: 128\n";
  EXPECT_EQ(error_of(yaml + "  head_dim: 128\n", 1), "");
  EXPECT_NE(error_of(yaml, 1).find("or give head_dim"), std::string::npos) << error_of(yaml, 1);
}

// GeGLU is gated: without an ffn it takes the 2/3 x 4h width that keeps a gated MLP's
// parameters those of 4h ungated (Shazeer, arXiv 2002.05202, section 2), as SwiGLU does.
TEST(TransformerConfig, GegluIsGatedAndNamedInTheActivationError) {
  const std::string yaml =
      "workload:\n  model: transformer\n  layers: 2\n  hidden: 3072\n  heads: 16\n"
      "  vocab: 1000\n  seq: 128\n";
  const TransformerConfig geglu = parse(yaml + "  activation: geglu\n", 1);
  const TransformerConfig swiglu = parse(yaml + "  activation: swiglu\n", 1);
  EXPECT_EQ(geglu.activation, TransformerActivation::kGeglu);
  EXPECT_TRUE(gated_activation(geglu.activation));
  EXPECT_EQ(geglu.ffn, swiglu.ffn);
  EXPECT_EQ(transformer_parameters(geglu), transformer_parameters(swiglu));
  const std::string e = error_of(yaml + "  activation: reglu\n", 1);
  EXPECT_NE(e.find("geglu"), std::string::npos) << e;
}

TEST(TransformerConfig, SlidingWindowNeedsFusedAttentionAndNoContextParallel) {
  EXPECT_EQ(error_of(gpt3("  attention: flash\n  sliding_window: 4096\n", ""), 1024), "");
  EXPECT_NE(error_of(gpt3("  attention: unfused\n  sliding_window: 4096\n", ""), 1024)
                .find("workload.sliding_window: needs the fused attention"),
            std::string::npos);
  EXPECT_NE(
      error_of(gpt3("  full_attention_every: 2\n", ""), 1024).find("workload.full_attention_every"),
      std::string::npos);
}

TEST(TransformerConfig, ShardGroupNeedsShardedParametersAndDividesDataParallel) {
  // gpt3(): 1024 GPUs over tensor 8 x pipeline 8: data 16.
  EXPECT_EQ(error_of(gpt3("", "    fsdp: full_shard\n    shard_group: 8\n"), 1024), "");
  EXPECT_NE(error_of(gpt3("", "    fsdp: full_shard\n    shard_group: 3\n"), 1024)
                .find("workload.parallelism.shard_group: 3 does not divide the 16"),
            std::string::npos);
  EXPECT_NE(error_of(gpt3("", "    shard_group: 8\n"), 1024).find("needs fsdp or zero: 3"),
            std::string::npos);
}

TEST(TransformerConfig, MoeErrors) {
  const std::string moe = "  moe:\n    experts: 8\n    top_k: 2\n";
  std::string e = error_of(gpt3(moe, "    expert: 3\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.expert: moe.experts 8 are not divisible by expert "
                   "parallel 3"),
            std::string::npos)
      << e;
  // data 16 x context 1 = 16 is not a multiple of expert 32 (64 experts).
  e = error_of(gpt3("  moe:\n    experts: 64\n", "    expert: 32\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.expert: expert parallel 32 does not divide data 16 x "
                   "context 1 = 16"),
            std::string::npos)
      << e;
  e = error_of(gpt3("  moe:\n    experts: 2\n    top_k: 3\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.moe.top_k: each token is routed to top_k 3 experts, but "
                   "moe.experts is 2"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of(gpt3("", "    expert: 2\n"), 1024).find("workload.parallelism.expert"),
            std::string::npos);
  EXPECT_EQ(error_of(gpt3(moe, "    expert: 8\n"), 1024), "");
}

// Megatron-Core builds the expert-parallel groups from a second rank layout in the same order
// (tp, ep, expert data parallel, pp); where its pipeline stride differs from the dense one the
// groups would span stages, so the order is refused, naming it.
TEST(TransformerConfig, ExpertGroupsThatWouldSpanPipelineStagesAreRefused) {
  const std::string moe = "  moe:\n    experts: 8\n";
  // tp-cp-ep-pp-dp with EP 2 and CP 1: stages are tp 8 apart for attention, tp 8 x ep 2 for
  // the experts.
  const std::string e = error_of(gpt3(moe, "    expert: 2\n    order: tp-cp-ep-pp-dp\n"), 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.parallelism.order: `tp-cp-ep-pp-dp` puts pipeline stages 8 rank(s) "
                   "apart in the dense layers (tp 8 x cp 1 before pp) but 16 apart in the expert "
                   "layers (tp 8 x ep 2 before pp"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("parallelism.expert and parallelism.context"), std::string::npos) << e;
  // EP 2 out of CP 2 before pp: both strides are 16.
  EXPECT_EQ(error_of(gpt3(moe, "    expert: 2\n    context: 2\n    order: tp-cp-ep-pp-dp\n"), 1024),
            "");
  // pp last: always the same stride; so without expert parallel.
  EXPECT_EQ(error_of(gpt3(moe, "    expert: 8\n    context: 2\n    order: tp-dp-ep-cp-pp\n"), 1024),
            "");
  EXPECT_EQ(error_of(gpt3(moe, "    order: tp-cp-ep-pp-dp\n    context: 2\n"), 1024), "");
}

TEST(TransformerConfig, SeqNotDivisibleByTwiceContext) {
  const std::string e = error_of(
      replace(gpt3("", "    context: 4\n"), "global_batch: 1536", "global_batch: 384"), 1024);
  EXPECT_EQ(e, "");  // 2048 % 8 == 0
  const std::string bad = error_of(
      replace(replace(gpt3("", "    context: 4\n"), "global_batch: 1536", "global_batch: 384"),
              "seq: 2048", "seq: 2044"),
      1024);
  std::printf("%s\n", bad.c_str());
  EXPECT_NE(bad.find("workload.seq: 2044 is not divisible by 2 x context parallel 4 = 8"),
            std::string::npos)
      << bad;
}

// The unfused attention has no ring exchange: with context parallel it would attend only to
// the local chunk. Megatron-Core refuses it too (DotProductAttention: "Context parallelism is
// only supported by TEDotProductAttention!").
TEST(TransformerConfig, ContextParallelNeedsFlashAttention) {
  const std::string yaml = replace(gpt3("  attention: unfused\n", "    context: 2\n"),
                                   "global_batch: 1536", "global_batch: 768");
  const std::string e = error_of(yaml, 1024);
  std::printf("%s\n", e.c_str());
  EXPECT_NE(e.find("workload.attention: context parallel 2 (parallelism.context) needs the fused "
                   "attention (flash)"),
            std::string::npos)
      << e;
  EXPECT_EQ(error_of(replace(yaml, "attention: unfused", "attention: flash"), 1024), "");
}

TEST(TransformerConfig, VocabIsPaddedNotRejected) {
  // GPT-2's 50257 tokens: Megatron pads to 50688 at tensor 4 (multiple of 512).
  const TransformerConfig c = parse(
      replace(replace(gpt3(), "vocab: 51200", "vocab: 50257"), "tensor: 8", "tensor: 4"), 1024);
  EXPECT_EQ(c.padded_vocab(), 50688);
}

TEST(TransformerConfig, Fp8RecipeOnlyWithFp8GemmsAndNamedValues) {
  const std::string fp8 = replace(llama2_70b(), "dtype: bf16", "dtype: fp8");
  EXPECT_EQ(parse(fp8, 256).fp8_recipe, Fp8Recipe::kDelayed);  // TE's default
  EXPECT_EQ(parse(replace(fp8, "dtype: fp8", "dtype: fp8\n  fp8_recipe: current"), 256).fp8_recipe,
            Fp8Recipe::kCurrent);
  EXPECT_EQ(parse(replace(fp8, "dtype: fp8", "dtype: fp8\n  fp8_recipe: block"), 256).fp8_recipe,
            Fp8Recipe::kBlock);
  std::string e = error_of(replace(fp8, "dtype: fp8", "dtype: fp8\n  fp8_recipe: mx"), 256);
  EXPECT_NE(e.find("fp8_recipe"), std::string::npos) << e;
  EXPECT_NE(e.find("mx"), std::string::npos) << e;
  e = error_of(replace(llama2_70b(), "dtype: bf16", "dtype: bf16\n  fp8_recipe: delayed"), 256);
  EXPECT_NE(e.find("fp8_recipe"), std::string::npos) << e;
  EXPECT_NE(e.find("fp8 only"), std::string::npos) << e;
}

TEST(TransformerConfig, MissingShapeKeyAndUnknownKey) {
  EXPECT_NE(error_of(replace(gpt3(), "  layers: 96\n", ""), 1024).find("layers"),
            std::string::npos);
  EXPECT_NE(error_of(gpt3("  layer: 3\n"), 1024).find("unknown key `layer`"), std::string::npos);
  EXPECT_NE(error_of(replace(gpt3(), "architecture: gpt", "architecture: gpt4"), 1024)
                .find("unknown architecture `gpt4`"),
            std::string::npos);
}

TEST(TransformerConfig, AbsentParallelismTakesEveryDefault) {
  const std::string yaml = R"(workload:
  model: transformer
  layers: 2
  hidden: 256
  heads: 4
  vocab: 1000
  seq: 128
)";
  const TransformerConfig c = parse(yaml, 4);
  EXPECT_EQ(c.parallelism.data, 4);
  EXPECT_EQ(c.parallelism.tensor, 1);
  EXPECT_EQ(c.global_batch, 4);  // micro_batch x data x pipeline
  EXPECT_EQ(c.padded_vocab(), 1024);
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

/// A 4-layer GPT-OSS-shaped attention stack (64 heads of 64, 8 key/value heads, window 128 on
/// every other layer) with `extra` keys.
std::string gpt_oss(const std::string& extra) {
  return R"(workload:
  model: transformer
  architecture: llama
  layers: 4
  hidden: 2880
  heads: 64
  head_dim: 64
  kv_heads: 8
  ffn: 2880
  vocab: 201088
  seq: 4096
  micro_batch: 1
  sliding_window: 128
  full_attention_every: 2
  parallelism:
    tensor: 2
)" + extra;
}

TEST(TransformerConfig, AttentionSinksAddOneParameterPerHeadAndNeedAKernelThatTakesThem) {
  const TransformerConfig plain = parse(gpt_oss("  attention: cudnn\n"), 2);
  const TransformerConfig sinks =
      parse(gpt_oss("  attention: cudnn\n  attention_sinks: true\n"), 2);
  EXPECT_TRUE(sinks.attention_sinks);
  EXPECT_EQ(transformer_parameters(sinks) - transformer_parameters(plain), 4 * 64);
  // Each tensor rank holds the sinks of its heads, and the optimizer steps them.
  int64_t stepped = 0;
  int64_t stepped_plain = 0;
  for (const auto& [config, count] :
       {std::pair{&sinks, &stepped}, std::pair{&plain, &stepped_plain}}) {
    TaskGraph g;
    generate_transformer(*config, {2}, g);
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.kind != TaskKind::kKernel || task.rank != 0) continue;
      const KernelDesc& k = g.kernel(t);
      if (k.memory_op != MemoryOp::kOptimizer) continue;
      for (const int64_t n : k.optimizer.tensor_elements)
        *count += n;
      break;  // one optimizer step
    }
  }
  EXPECT_EQ(stepped - stepped_plain, 4 * 64 / 2);
  // Eager attention (HuggingFace's) takes them too, without the window.
  const std::string eager = replace(gpt_oss("  attention: unfused\n  attention_sinks: true\n"),
                                    "  sliding_window: 128\n  full_attention_every: 2\n", "");
  EXPECT_TRUE(parse(eager, 2).attention_sinks);
  for (const char* kernel : {"flash", "flash2", "flash3"}) {
    const std::string e =
        error_of(gpt_oss(std::string("  attention: ") + kernel + "\n  attention_sinks: true\n"), 2);
    EXPECT_NE(e.find("attention_sinks"), std::string::npos) << kernel << ": " << e;
    EXPECT_NE(e.find("cudnn"), std::string::npos) << kernel << ": " << e;
  }
}

}  // namespace
}  // namespace upsim
