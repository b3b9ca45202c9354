// Multi-token prediction (mtp_layers; mtp_emitter.cpp): the MTP layer's kernels and its own
// output layer in the step, its parameters in the optimizer, the gradient sync and the memory
// model, its model FLOPs as Megatron-LM counts them, the embedding copy's gradient all-reduce
// across the pipeline, and what the config refuses.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {
namespace {

/// A 4-layer grouped-query Llama (hidden 1024, 16 heads, 4 key/value heads, seq 512), 2
/// micro-batches of one sequence.
TransformerConfig small_llama(int64_t mtp_layers) {
  TransformerConfig c = test_configs::llama(4, 1024, 16, 4, 2816, 512);
  c.global_batch = 2;
  c.mtp_layers = mtp_layers;
  return c;
}

/// The elements the optimizer of `rank` steps in one generated step.
int64_t optimizer_elements(const TransformerConfig& c, RankId rank = 0) {
  for (const KernelDesc& k : test_configs::step_kernels(c, rank)) {
    if (k.memory_op == MemoryOp::kOptimizer && k.cls == KernelClass::kMemoryBound) {
      const std::vector<int64_t>& n = k.optimizer.tensor_elements;
      return std::accumulate(n.begin(), n.end(), int64_t{0});
    }
  }
  return 0;
}

// One MTP layer: per micro-batch one more layer's kernels, one more embedding lookup, eh_proj,
// one more output layer and loss; its parameters stepped by the optimizer and counted by the
// config and the memory model alike.
TEST(MultiTokenPrediction, RunsOneMoreLayerAndOutputLayerPerMicroBatch) {
  const TransformerConfig plain = small_llama(0);
  const TransformerConfig mtp = small_llama(1);
  const auto before = test_configs::kernel_counts(plain);
  const auto after = test_configs::kernel_counts(mtp);
  const int micro_batches = static_cast<int>(plain.micro_batches());
  const auto more = [&](const std::string& name) {
    const auto count = [&](const std::map<std::string, int>& m) {
      const auto it = m.find(name);
      return it == m.end() ? 0 : it->second;
    };
    return count(after) - count(before);
  };
  EXPECT_EQ(more("flash_fwd_kernel"), micro_batches);
  EXPECT_EQ(more("embedding_fwd"), micro_batches);
  EXPECT_EQ(more("bf16gemm/mtp_proj"), micro_batches);
  EXPECT_EQ(more("bf16gemm/logits"), micro_batches);
  EXPECT_EQ(more("cross_entropy_fwd"), micro_batches);

  // Under full recomputation the MTP layer reruns its forward too.
  TransformerConfig full = mtp;
  full.recompute = Recompute::kFull;
  TransformerConfig full_plain = plain;
  full_plain.recompute = Recompute::kFull;
  EXPECT_EQ(test_configs::kernel_counts(full)["flash_fwd_kernel"] -
                test_configs::kernel_counts(full_plain)["flash_fwd_kernel"],
            2 * micro_batches);

  EXPECT_EQ(optimizer_elements(mtp), transformer_parameters(mtp));
  EXPECT_EQ(transformer_stage_parameters(mtp, 0).total(), transformer_parameters(mtp));
  // A layer, three norms (RMSNorm: one gain each) and eh_proj more.
  TransformerConfig five = small_llama(0);
  five.layers = 5;
  EXPECT_EQ(
      transformer_parameters(mtp) - transformer_parameters(plain),
      transformer_parameters(five) - transformer_parameters(plain) + 3 * 1024 + 2 * 1024 * 1024);
}

// Megatron-LM's num_floating_point_operations: an MTP layer counts as a layer of the last
// layer's kind, plus 6 x (3 h + 2 h^2) per token for its norms and eh_proj, and the logits once
// more.
TEST(MultiTokenPrediction, ModelFlopsCountTheLayerTheProjectionAndTheLogitsAgain) {
  const TransformerConfig plain = small_llama(0);
  TransformerConfig five = small_llama(0);
  five.layers = 5;
  const double tokens = static_cast<double>(plain.micro_batch_tokens()) *
                        static_cast<double>(plain.global_batch / plain.micro_batch);
  const double h = 1024.0;
  const double logits = 6.0 * h * static_cast<double>(plain.padded_vocab()) * tokens;
  EXPECT_DOUBLE_EQ(transformer_model_flops(small_llama(1)) - transformer_model_flops(plain),
                   transformer_model_flops(five) - transformer_model_flops(plain) +
                       6.0 * (3.0 * h + 2.0 * h * h) * tokens + logits);
}

// Over two pipeline stages with untied embeddings the last stage holds the MTP layer and a copy
// of the word embedding, whose gradient it all-reduces with the first stage's; its logits are
// held twice.
TEST(MultiTokenPrediction, TheLastStageHoldsTheEmbeddingCopyAndSumsItsGradient) {
  TransformerConfig c = small_llama(1);
  c.tied_embeddings = false;
  c.parallelism.pipeline = 2;
  TransformerConfig plain = c;
  plain.mtp_layers = 0;
  const int64_t word_embedding = c.padded_vocab() * c.hidden;
  EXPECT_EQ(transformer_stage_parameters(c, 0).total() + transformer_stage_parameters(c, 1).total(),
            transformer_parameters(c) + word_embedding);
  EXPECT_EQ(optimizer_elements(c, 1), transformer_stage_parameters(c, 1).total());
  for (const RankId rank : {RankId{0}, RankId{1}}) {
    EXPECT_EQ(test_configs::collective_count(c, "_allreduce_word_embedding_grads", rank), 1)
        << rank;
    EXPECT_EQ(test_configs::collective_count(plain, "_allreduce_word_embedding_grads", rank), 0)
        << rank;
  }
  const auto logits = [](const TransformerConfig& config) {
    for (const MemoryFootprint::Part& part : transformer_memory(config, 1).parts)
      if (part.name == "output logits") return part.bytes;
    return int64_t{0};
  };
  EXPECT_EQ(logits(c), 2 * logits(plain));
}

// Under the combined 1F1B schedule (moe.a2a_overlap) the MTP layer is one more layer of the
// last chunk's schedule plan (model_chunk_schedule_plan.py): its prologue in the pre-dispatch
// node, its dispatch and combine on the EP stream, its output layer and loss in its
// post-process node. The step runs the same kernels and collectives as without the overlap.
TEST(MultiTokenPrediction, RunsAsOneMoreLayerOfTheCombinedSchedule) {
  const auto counts = [](bool overlap, int64_t mtp) {
    TransformerConfig c = test_configs::fine_moe(MoeDispatcher::kAllToAll, 3);
    c.moe.a2a_overlap = overlap;
    c.mtp_layers = mtp;
    TaskGraph g;
    generate_transformer(c, TransformerGraphInputs(1, test_configs::dgx_nodes(16)), g);
    std::map<std::string, int> n;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != 0) continue;
      if (task.kind == TaskKind::kKernel) ++n[std::string(g.name(task.name))];
      if (task.kind == TaskKind::kCollective) {
        ++n["collective " + std::string(g.name(task.op_name))];
        if (task.resource == 7) ++n["on the EP stream"];  // kEpComm
      }
    }
    return n;
  };
  const auto eager = counts(false, 1);
  const auto combined = counts(true, 1);
  const auto combined_plain = counts(true, 0);
  for (const auto& [name, count] : eager) {
    if (name == "on the EP stream") continue;
    const auto it = combined.find(name);
    EXPECT_EQ(it == combined.end() ? 0 : it->second, count) << name;
  }
  EXPECT_EQ(combined.size(), eager.size() + 1);  // + "on the EP stream"
  // 3 micro-batches: the MTP layer's output layer and eh_proj once per forward.
  EXPECT_EQ(combined.at("bf16gemm/logits") - combined_plain.at("bf16gemm/logits"), 3);
  EXPECT_EQ(combined.at("bf16gemm/mtp_proj"), 3);
  // Its dispatch and combine, forward and backward, on the EP stream for the paired steps.
  EXPECT_GT(combined.at("on the EP stream"), combined_plain.at("on the EP stream"));

  TransformerConfig c = test_configs::fine_moe(MoeDispatcher::kAllToAll, 3);
  c.mtp_layers = 1;
  const test_configs::CalibratedGpu gpu =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const Duration off = test_configs::fabric_step(c, gpu, "dgx_h100_cluster_2").ranks.front().window;
  c.moe.a2a_overlap = true;
  const Duration on = test_configs::fabric_step(c, gpu, "dgx_h100_cluster_2").ranks.front().window;
  std::printf("MoE (EP 16) with one MTP layer: %.3f ms, %.3f ms under the combined schedule\n",
              off.seconds() * 1e3, on.seconds() * 1e3);
  EXPECT_GT(on, Duration::zero());
}

// A last model chunk that holds only the MTP layer (a layout "Ettt|ttt|tt|mL" over pipeline 2 x
// virtual 2), under ZeRO 3 (each unit's gradients reduce-scattered on their own): under the
// combined schedule the MTP layer is the chunk's only layer, and its gradients are reduced as
// its own unit's, as without the overlap.
TEST(MultiTokenPrediction, AChunkOfOnlyTheMtpLayerReducesItsOwnGradients) {
  const auto reductions = [](bool overlap) {
    TransformerConfig c = test_configs::fine_moe(MoeDispatcher::kAllToAll, 4);
    c.mtp_layers = 1;
    c.parallelism.pipeline = 2;
    c.parallelism.virtual_stages = 2;
    c.parallelism.schedule = PipelineSchedule::kInterleaved1F1B;
    c.parallelism.chunk_layer_offsets = {0, 3, 6, 8, 8};
    c.parallelism.zero = 3;
    c.moe.a2a_overlap = overlap;
    TaskGraph g;
    const TransformerGraph built =
        generate_transformer(c, TransformerGraphInputs(1, test_configs::dgx_nodes(32)), g);
    // The last stage's first simulated rank.
    RankId last = 0;
    for (RankId r = 0; r < built.simulated.size(); ++r) {
      if (ParallelLayout(c.parallelism).coords(built.simulated[r]).pp == 1) {
        last = r;
        break;
      }
    }
    std::multiset<std::pair<std::string, int64_t>> out;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != last || task.kind != TaskKind::kCollective) continue;
      const std::string op(g.name(task.op_name));
      if (op.starts_with("nccl:")) out.insert({op, g.collective(g.collective_of(t)).bytes});
    }
    return out;
  };
  const auto eager = reductions(false);
  EXPECT_FALSE(eager.empty());
  EXPECT_EQ(reductions(true), eager);
}

// Under CUDA graphs the MTP layer's transformer layer is graphed as the decoder's are
// (Megatron-Core's TE graph helper takes each MTP layer's mtp_model_layer among its callables):
// a whole-layer graph forward and backward per micro-batch, its prologue and output layer
// eager.
TEST(MultiTokenPrediction, ItsTransformerLayerIsGraphedAsTheDecoders) {
  TransformerConfig plain = small_llama(0);
  plain.cuda_graphs = true;
  TransformerConfig mtp = small_llama(1);
  mtp.cuda_graphs = true;
  const int micro_batches = static_cast<int>(plain.micro_batches());
  EXPECT_EQ(test_configs::task_count(mtp, TaskKind::kLaunch, "cudaGraphLaunch") -
                test_configs::task_count(plain, TaskKind::kLaunch, "cudaGraphLaunch"),
            2 * micro_batches);
  TransformerConfig eager = small_llama(1);
  EXPECT_EQ(test_configs::kernel_counts(mtp), test_configs::kernel_counts(eager));
}

// Under FSDP (full shard) and ZeRO 3 each MTP layer is a unit of its own: gathered before its
// forward and again before its backward, its gradients reduce-scattered after it.
TEST(MultiTokenPrediction, UnderShardedParametersEachMtpLayerIsAUnit) {
  const auto collectives = [](const TransformerConfig& c, std::string_view op) {
    return test_configs::collective_count(c, op);
  };
  for (const bool zero3 : {false, true}) {
    TransformerConfig plain = small_llama(0);
    plain.parallelism.data = 2;
    plain.global_batch = 4;
    if (zero3) {
      plain.parallelism.zero = 3;
    } else {
      plain.parallelism.fsdp = FsdpMode::kFullShard;
    }
    TransformerConfig mtp = plain;
    mtp.mtp_layers = 1;
    const int micro_batches = static_cast<int>(plain.micro_batches());
    EXPECT_EQ(collectives(mtp, "FullyShardedDataParallel._pre_forward_unshard") -
                  collectives(plain, "FullyShardedDataParallel._pre_forward_unshard"),
              micro_batches)
        << zero3;
    EXPECT_EQ(collectives(mtp, "FullyShardedDataParallel._pre_backward_unshard") -
                  collectives(plain, "FullyShardedDataParallel._pre_backward_unshard"),
              micro_batches)
        << zero3;
    EXPECT_EQ(collectives(mtp, "nccl:reduce_scatter") - collectives(plain, "nccl:reduce_scatter"),
              micro_batches)
        << zero3;
    EXPECT_GT(transformer_peak_memory(mtp).total_bytes(),
              transformer_peak_memory(plain).total_bytes());
    EXPECT_GT(
        test_configs::step_window(mtp, test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla")),
        Duration::zero());
  }
}

TEST(MultiTokenPrediction, IsRefusedWhereItIsNotModelledAtTheKey) {
  const auto error = [](const std::string& extra, const std::string& parallelism,
                        uint32_t gpus = 8) {
    return test_configs::small_llama_error(extra, parallelism, gpus);
  };
  EXPECT_EQ(error("  mtp_layers: 1\n", "{data: 8}"), "");
  EXPECT_EQ(error("  mtp_layers: 1\n", "{data: 8, fsdp: full_shard}"), "");
  EXPECT_NE(error("  mtp_layers: 1\n  lora: {rank: 16}\n", "{data: 8}").find("workload.lora"),
            std::string::npos);
  // Beside Megatron-Core's combined 1F1B schedule (EP all-to-all overlap) it runs.
  EXPECT_EQ(
      error("  mtp_layers: 1\n  moe: {experts: 8, a2a_overlap: true}\n", "{data: 8, expert: 8}"),
      "");
  // The layout's m's: as many as mtp_layers, in the last stage.
  EXPECT_EQ(error("  mtp_layers: 1\n", "{data: 4, pipeline: 2, pipeline_layout: Et|tmL}"), "");
  EXPECT_NE(error("  mtp_layers: 1\n", "{data: 4, pipeline: 2, pipeline_layout: Et|tL}")
                .find("holds 0 multi-token"),
            std::string::npos);
  EXPECT_NE(error("  mtp_layers: 1\n", "{data: 2, pipeline: 4, pipeline_layout: Et|t|m|L}")
                .find("standalone MTP stage"),
            std::string::npos);
}

}  // namespace
}  // namespace upsim
