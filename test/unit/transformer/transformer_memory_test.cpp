#include "workloads/transformer/transformer_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "test/unit/transformer/test_configs.h"

namespace upsim {
namespace {

constexpr double kGB = 1e9;
constexpr int64_t k80GB = 80LL * 1000 * 1000 * 1000;  // A100 / H100 80 GB

int64_t part(const MemoryFootprint& f, const std::string& name) {
  for (const MemoryFootprint::Part& p : f.parts) {
    if (p.name == name) return p.bytes;
  }
  return 0;
}

void print(const std::string& label, const MemoryFootprint& f) {
  std::printf("%s, %s:", label.c_str(), f.owner.c_str());
  for (const MemoryFootprint::Part& p : f.parts)
    std::printf(" %s %.2f GB,", p.name.c_str(), static_cast<double>(p.bytes) / kGB);
  std::printf(" total %.2f GB\n", static_cast<double>(f.total_bytes()) / kGB);
}

/// GPT-3 175B as Megatron-LM trained it (Narayanan et al. SC21, arXiv 2104.04473, Table 1):
/// fp16, TP 8, PP 8 on 1024 GPUs (DP 16), batch 1536, micro-batch 1, full recomputation, no
/// sequence parallelism (it came later).
TransformerConfig gpt3_175b() {
  TransformerConfig c;
  c.architecture = "gpt";
  c.layers = 96;
  c.hidden = 12288;
  c.heads = 96;
  c.kv_heads = 96;
  c.ffn = 4 * 12288;
  c.vocab = 51200;
  c.seq = 2048;
  c.micro_batch = 1;
  c.global_batch = 1536;
  c.dtype = DType::kFp16;
  c.dropout = 0.1;
  c.recompute = Recompute::kFull;
  c.parallelism.tensor = 8;
  c.parallelism.pipeline = 8;
  c.parallelism.data = 16;
  return c;
}

/// A Llama-style 7B (Touvron et al. 2023: 32 layers, hidden 4096, 32 heads, ffn 11008, vocab
/// 32000) in bf16 on one node of 8 GPUs, data parallel only.
TransformerConfig llama_7b_dp8() {
  TransformerConfig c = test_configs::llama(32, 4096, 32, 32, 11008, 4096);
  c.global_batch = 64;
  c.tied_embeddings = false;
  c.recompute = Recompute::kFull;
  c.parallelism.data = 8;
  return c;
}

TEST(TransformerMemory, Gpt3_175bFitsAndMatchesHandComputedParts) {
  const TransformerConfig c = gpt3_175b();
  const int64_t h = c.hidden;
  // One layer on one of 8 tensor ranks: QKV h x 3h/8 (+ 3h/8 bias), output projection h/8 x h
  // (+ h replicated bias), MLP h x 4h/8 and 4h/8 x h (+ 4h/8 and h biases), two LayerNorms 4h.
  const int64_t layer = 12 * h * h / 8 + 3 * h / 8 + h + 4 * h / 8 + h + 4 * h;
  // Stage 0: 12 layers, the vocabulary-parallel embedding 51200/8 x h, learned positions.
  const int64_t stage0 = 12 * layer + 51200 / 8 * h + 2048 * h;
  EXPECT_EQ(transformer_stage_parameters(c, 0).total(), stage0);
  // Stage 7: 12 layers, final LayerNorm, the tied output layer's copy.
  EXPECT_EQ(transformer_stage_parameters(c, 7).total(), 12 * layer + 2 * h + 51200 / 8 * h);

  const MemoryFootprint f = transformer_memory(c, 0);
  print("GPT-3 175B TP8 PP8 DP16 full recompute", f);
  // Megatron-LM's distributed-optimizer table, fp16 params + fp16 grads: 2 + 2 + 16 bytes.
  EXPECT_EQ(part(f, "weights"), 2 * stage0);
  EXPECT_EQ(part(f, "gradients"), 2 * stage0);
  EXPECT_EQ(part(f, "optimizer state"), 16 * stage0);
  // About the whole model's parameters / 64 model-parallel GPUs, x 2 bytes.
  const double params = static_cast<double>(transformer_parameters(TransformerConfig(c)));
  EXPECT_NEAR(static_cast<double>(part(f, "weights")), params / 64 * 2, 0.05 * params / 64 * 2);

  // Activations: full recompute keeps 2 s b h per layer (no sequence parallel), 12 layers x 8
  // micro-batches in flight on stage 0 (1F1B), plus one rematerialised layer (Korthikanti Table
  // 2, tensor parallel, flash: s b h (10 + 24/8) plus the fp32 log-sum-exp) and the embedding's
  // dropout mask s b h x 8.
  const int64_t sbh = 2048 * h;
  const int64_t remat = 13 * sbh + 4 * (96 / 8) * 2048;
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 0), 8.0);
  EXPECT_EQ(part(f, "activations"), 2 * sbh * 12 * 8 + remat + sbh * 8);
  EXPECT_LT(f.total_bytes(), k80GB);
  const MemoryFootprint peak = transformer_peak_memory(c);
  print("GPT-3 175B peak", peak);
  EXPECT_LT(peak.total_bytes(), k80GB);

  const MemoryFootprint last = transformer_memory(c, 7);
  print("GPT-3 175B last stage", last);
  EXPECT_EQ(part(last, "output logits"), 4 * 2048 * (51200 / 8));
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 7), 1.0);
}

TEST(TransformerMemory, KorthikantiTable2PerLayerActivations) {
  // fp16, dropout, unfused attention: the paper's accounting, exactly.
  TransformerConfig c = gpt3_175b();
  c.attention = AttentionImpl::kUnfused;
  c.recompute = Recompute::kNone;
  const int64_t s = c.seq;
  const int64_t h = c.hidden;
  const int64_t a = c.heads;
  const int64_t sbh = s * h;
  const int64_t t = 8;
  // Tensor parallel: s b h (10 + 24/t) + 5 a s^2 b / t.
  EXPECT_EQ(transformer_layer_activation_bytes(c, false),
            sbh * 10 + sbh * 24 / t + 5 * a * s * s / t);
  // Tensor + sequence parallel: s b h / t (34 + 5 a s / h).
  c.parallelism.sequence = true;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false), (34 * sbh + 5 * a * s * s) / t);
  // Selective recompute drops the 5 a s / h term: 34 s b h / t.
  c.recompute = Recompute::kSelective;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false), 34 * sbh / t);
  // Full recompute keeps the layer input: 2 s b h / t.
  c.recompute = Recompute::kFull;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false), 2 * sbh / t);
  // No parallelism: s b h (34 + 5 a s / h).
  c.recompute = Recompute::kNone;
  c.parallelism.sequence = false;
  c.parallelism.tensor = 1;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false), 34 * sbh + 5 * a * s * s);
  // Context parallel 2 halves every sequence-proportional term (the core: local queries x all
  // keys).
  c.parallelism.context = 2;
  EXPECT_EQ(transformer_layer_activation_bytes(c, false), (34 * sbh + 5 * a * s * s) / 2);
}

TEST(TransformerMemory, RecomputeOrdersActivations) {
  for (const AttentionImpl attention : {AttentionImpl::kUnfused, AttentionImpl::kFlash}) {
    TransformerConfig c = gpt3_175b();
    c.attention = attention;
    c.parallelism.sequence = true;
    c.recompute = Recompute::kFull;
    const int64_t full = part(transformer_memory(c, 0), "activations");
    c.recompute = Recompute::kSelective;
    const int64_t selective = part(transformer_memory(c, 0), "activations");
    c.recompute = Recompute::kNone;
    const int64_t none = part(transformer_memory(c, 0), "activations");
    std::printf(
        "GPT-3 175B TP8 SP PP8 stage 0 activations (%s): full %.2f GB, selective %.2f "
        "GB, none %.2f GB\n",
        attention == AttentionImpl::kFlash ? "flash" : "unfused", static_cast<double>(full) / kGB,
        static_cast<double>(selective) / kGB, static_cast<double>(none) / kGB);
    EXPECT_LT(full, selective);
    EXPECT_LT(selective, none);
  }
}

TEST(TransformerMemory, ZeroStagesShrinkTheFootprint) {
  TransformerConfig c = llama_7b_dp8();
  const int64_t params = transformer_stage_parameters(c, 0).total();
  std::printf("Llama-style 7B parameters: %.3fe9\n", static_cast<double>(params) / 1e9);
  const MemoryFootprint ddp = transformer_memory(c, 0);
  // bf16 params, fp32 main grads, 12 bytes of Adam state (Megatron-LM: 18 bytes / param).
  EXPECT_EQ(part(ddp, "weights"), 2 * params);
  EXPECT_EQ(part(ddp, "gradients"), 4 * params);
  EXPECT_EQ(part(ddp, "optimizer state"), 12 * params);
  c.parallelism.zero = 1;
  const MemoryFootprint zero1 = transformer_memory(c, 0);
  EXPECT_EQ(part(zero1, "optimizer state"), 12 * ((params + 7) / 8));
  c.parallelism.zero = 2;
  const MemoryFootprint zero2 = transformer_memory(c, 0);
  EXPECT_EQ(part(zero2, "gradients"), 4 * ((params + 7) / 8));
  c.parallelism.zero = 3;
  const MemoryFootprint zero3 = transformer_memory(c, 0);
  EXPECT_EQ(part(zero3, "weights"), 2 * ((params + 7) / 8));
  c.parallelism.zero = 0;
  c.parallelism.fsdp = FsdpMode::kFullShard;
  const MemoryFootprint fsdp = transformer_memory(c, 0);
  print("7B DDP", ddp);
  print("7B ZeRO-1", zero1);
  print("7B ZeRO-2", zero2);
  print("7B ZeRO-3", zero3);
  print("7B FSDP full_shard", fsdp);
  EXPECT_LT(zero3.total_bytes(), zero2.total_bytes());
  EXPECT_LT(zero2.total_bytes(), zero1.total_bytes());
  EXPECT_LT(zero1.total_bytes(), ddp.total_bytes());
  EXPECT_EQ(fsdp.total_bytes(), zero3.total_bytes());
  EXPECT_GT(ddp.total_bytes(), k80GB);  // 18 bytes x 6.7e9: plain DDP does not fit
  EXPECT_LT(zero3.total_bytes(), k80GB);
}

TEST(TransformerMemory, MegatronSc21OneTrillionRowFitsWithRecompute) {
  // Narayanan et al. SC21 (arXiv 2104.04473) Table 1: 1008B parameters, 160 heads, hidden
  // 25600, 128 layers, TP 8, PP 64, 3072 GPUs (DP 6), batch 3072; fp16 with activation
  // recomputation; micro-batch 1, seq 2048, vocab 51200 as for the other rows.
  TransformerConfig c = gpt3_175b();
  c.layers = 128;
  c.hidden = 25600;
  c.heads = 160;
  c.kv_heads = 160;
  c.ffn = 4 * 25600;
  c.global_batch = 3072;
  c.parallelism.pipeline = 64;
  c.parallelism.data = 6;
  const double params = static_cast<double>(transformer_parameters(c));
  std::printf("1T row parameters: %.1fe9\n", params / 1e9);
  EXPECT_NEAR(params, 1008e9, 5e9);
  const MemoryFootprint peak = transformer_peak_memory(c);
  print("SC21 1T TP8 PP64 full recompute", peak);
  EXPECT_LT(peak.total_bytes(), k80GB);
  c.recompute = Recompute::kNone;
  const MemoryFootprint without = transformer_peak_memory(c);
  print("SC21 1T without recompute", without);
  EXPECT_GT(without.total_bytes(), k80GB);
}

TEST(TransformerMemory, MicroBatchesInFlightPerSchedule) {
  TransformerConfig c = gpt3_175b();  // P = 8, M = 96
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 0), 8.0);
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 5), 3.0);
  c.parallelism.schedule = PipelineSchedule::kGpipe;
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 5), 96.0);
  // Interleaved, v = 2: the first stage holds P (1 + (P - 1) / (P v)) = 11.5 (Korthikanti et
  // al. 2022, section 4.2.3).
  c.parallelism.schedule = PipelineSchedule::kInterleaved1F1B;
  c.parallelism.virtual_stages = 2;
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 0), 8.0 * (1.0 + 7.0 / 16.0));
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 7), 9.0 / 2.0);
  // Interleaved stage 0 holds layers 0-5 and 48-53.
  c.parallelism.pipeline = 8;
  const StageParameters interleaved = transformer_stage_parameters(c, 0);
  c.parallelism.schedule = PipelineSchedule::k1F1B;
  c.parallelism.virtual_stages = 1;
  EXPECT_EQ(interleaved.total(), transformer_stage_parameters(c, 0).total());
  c.parallelism.pipeline = 1;
  c.parallelism.data = 128;
  c.global_batch = 1536;
  EXPECT_DOUBLE_EQ(transformer_micro_batches_in_flight(c, 0), 1.0);
}

TEST(TransformerMemory, StagesAddUpToTheModel) {
  TransformerConfig c = llama_7b_dp8();
  c.parallelism.pipeline = 4;
  c.parallelism.data = 2;
  int64_t sum = 0;
  for (int64_t stage = 0; stage < 4; ++stage)
    sum += transformer_stage_parameters(c, stage).total();
  EXPECT_EQ(sum, transformer_parameters(c));  // tensor 1, untied: every parameter once
}

TEST(TransformerMemory, MixtureOfExpertsSplitsExperts) {
  // Mixtral 8x7B shape (Jiang et al. 2024, arXiv 2401.04088): 32 layers, hidden 4096, 32
  // heads, 8 kv heads, expert ffn 14336, 8 experts top 2, vocab 32000; TP 2, EP 8, DP 32.
  TransformerConfig c = llama_7b_dp8();
  c.kv_heads = 8;
  c.ffn = 14336;
  c.moe.experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 14336;
  c.moe.capacity_factor = 0.0;
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  c.parallelism.data = 32;
  c.parallelism.expert = 8;
  c.parallelism.zero = 1;
  c.global_batch = 256;
  const double total = static_cast<double>(transformer_parameters(c));
  std::printf("Mixtral-shaped parameters: %.2fe9\n", total / 1e9);
  EXPECT_NEAR(total, 46.7e9, 0.2e9);
  const StageParameters p = transformer_stage_parameters(c, 0);
  // One expert per expert rank, each split over tensor 2: 3 x 4096 x 7168 per layer.
  EXPECT_EQ(p.expert, int64_t{32} * 3 * 4096 * 7168);
  const MemoryFootprint f = transformer_memory(c, 0);
  print("Mixtral-shaped TP2 EP8 DP32 ZeRO-1", f);
  // Expert optimizer state shards over the expert data-parallel ranks: 64 / (2 x 8) = 4.
  const int64_t dense_state = 12 * ((p.dense + 31) / 32);
  EXPECT_EQ(part(f, "optimizer state"), dense_state + 12 * ((p.expert + 3) / 4));
  c.recompute = Recompute::kNone;
  EXPECT_GT(transformer_layer_activation_bytes(c, true),
            transformer_layer_activation_bytes(c, false));
  EXPECT_LT(f.total_bytes(), k80GB);
}

// The experts' activations follow the load the timing gives the busiest expert-parallel rank
// (moe_busiest_rank_load): an imbalance beyond what its EP group routes, or a capacity factor
// above the balanced load, adds no tokens, so it adds no memory (before, memory grew with
// 1 + imbalance without bound and with the capacity factor: a spurious "does not fit").
TEST(TransformerMemory, MoeActivationsUseTheTimingsCappedLoad) {
  TransformerConfig c = llama_7b_dp8();
  c.kv_heads = 8;
  c.ffn = 14336;
  c.moe.experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 14336;
  c.moe.capacity_factor = 0.0;
  c.parallelism.expert = 2;
  c.recompute = Recompute::kNone;
  const auto bytes_at = [&](double imbalance, double capacity_factor) {
    TransformerConfig v = c;
    v.moe.imbalance = imbalance;
    v.moe.capacity_factor = capacity_factor;
    return transformer_layer_activation_bytes(v, true);
  };
  const int64_t balanced = bytes_at(0.0, 0.0);
  const int64_t whole_group = bytes_at(1.0, 0.0);  // 1 + 1 = expert 2: every token of the group
  EXPECT_GT(whole_group, balanced);
  EXPECT_EQ(bytes_at(4.0, 0.0), whole_group);
  EXPECT_EQ(bytes_at(1000.0, 0.0), whole_group);
  EXPECT_EQ(bytes_at(0.0, 1.25), balanced);  // balanced routing fills 1 / 1.25 of the capacity
  EXPECT_LT(bytes_at(0.0, 0.5), balanced);   // half the tokens dropped

  c.moe.imbalance = 1000.0;
  TransformerConfig capped = c;
  capped.moe.imbalance = 1.0;
  EXPECT_EQ(transformer_peak_memory(c).total_bytes(),
            transformer_peak_memory(capped).total_bytes());

  EXPECT_DOUBLE_EQ(moe_busiest_rank_load(c), 2.0);
  c.moe.imbalance = 0.5;
  EXPECT_DOUBLE_EQ(moe_busiest_rank_load(c), 1.5);
  c.moe.capacity_factor = 1.25;
  EXPECT_DOUBLE_EQ(moe_busiest_rank_load(c), 1.25);  // the imbalance, capped at the capacity
  c.moe.imbalance = 0.1;
  EXPECT_DOUBLE_EQ(moe_busiest_rank_load(c), 1.1);
  c.moe.imbalance = 0.0;
  EXPECT_DOUBLE_EQ(moe_busiest_rank_load(c), 1.0);
  c.moe.capacity_factor = 0.5;
  EXPECT_DOUBLE_EQ(moe_busiest_rank_load(c), 0.5);
}

// The experts' gradients have a communicator of their own when their expert data-parallel
// group has more than one rank (EP 2 out of DP 8: 4 ranks), none when it is one rank (EP 8).
TEST(TransformerMemory, ExpertDataParallelGroupHasItsNcclBuffers) {
  TransformerConfig c = llama_7b_dp8();
  c.moe.experts = 8;
  c.moe.expert_ffn = 14336;
  c.parallelism.expert = 8;
  const int64_t one_rank = part(transformer_memory(c, 0), "buffers");
  c.parallelism.expert = 2;
  const int64_t four_ranks = part(transformer_memory(c, 0), "buffers");
  EXPECT_EQ(four_ranks - one_rank, int64_t{8} * 2 * (4 << 20));  // one communicator more
}

// With a capacity factor the imbalance still counts, up to the capacity.
TEST(TransformerMemory, MoeImbalanceCountsUpToTheCapacity) {
  TransformerConfig c = llama_7b_dp8();
  c.moe.experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 14336;
  c.moe.capacity_factor = 1.25;
  c.parallelism.expert = 8;
  c.recompute = Recompute::kNone;
  const int64_t balanced = transformer_layer_activation_bytes(c, true);
  c.moe.imbalance = 0.2;
  const int64_t skewed = transformer_layer_activation_bytes(c, true);
  c.moe.imbalance = 3.0;
  const int64_t capped = transformer_layer_activation_bytes(c, true);
  c.moe.imbalance = 0.25;
  EXPECT_LT(balanced, skewed);
  EXPECT_LT(skewed, capped);
  EXPECT_EQ(capped, transformer_layer_activation_bytes(c, true));
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

int64_t footprint_part(const MemoryFootprint& f, const std::string& name) {
  for (const MemoryFootprint::Part& p : f.parts)
    if (p.name == name) return p.bytes;
  return -1;
}

TEST(TransformerMemory, TheDefaultAllocatorReservesAShareAboveTheShortLivedPeak) {
  TransformerConfig c = test_configs::small_gpt(4);
  const MemoryFootprint caching = transformer_memory(c, 0);
  const int64_t short_lived = footprint_part(caching, "activations") +
                              std::max<int64_t>(0, footprint_part(caching, "output logits"));
  const double f = kCachingAllocatorFragmentation;
  EXPECT_EQ(footprint_part(caching, "allocator reserve"),
            std::llround(static_cast<double>(short_lived) * f / (1.0 - f)));
  c.allocator = CudaAllocator::kExpandableSegments;
  const MemoryFootprint expandable = transformer_memory(c, 0);
  EXPECT_EQ(footprint_part(expandable, "allocator reserve"), -1);
  EXPECT_EQ(caching.total_bytes() - expandable.total_bytes(),
            footprint_part(caching, "allocator reserve"));
}

}  // namespace
}  // namespace upsim
