#include "workloads/transformer/transformer_workload.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/config/quantity_parse.h"
#include "workloads/transformer/deepep.h"
#include "workloads/transformer/model_flops.h"
#include "workloads/transformer/op_recompute.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/sequence_lengths.h"
#include "workloads/transformer/transformer_generator.h"
#include "workloads/transformer/transformer_memory.h"

namespace upsim {

namespace {

std::string_view schedule_name(const ParallelismConfig& p) {
  if (p.pipeline == 1) return "no pipeline";
  switch (p.schedule) {
    case PipelineSchedule::kGpipe:
      return "GPipe";
    case PipelineSchedule::k1F1B:
      return "1F1B";
    case PipelineSchedule::kInterleaved1F1B:
      return "interleaved 1F1B";
  }
  return "?";
}

std::string data_parallel_text(const ParallelismConfig& p) {
  if (p.fsdp == FsdpMode::kFullShard) return fmt::format("FSDP full_shard {}", p.data);
  if (p.fsdp == FsdpMode::kShardGradOp) return fmt::format("FSDP shard_grad_op {}", p.data);
  if (p.zero > 0) return fmt::format("ZeRO-{} {}", p.zero, p.data);
  return fmt::format("DP {}", p.data);
}

std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
    case Recompute::kOp:
      return "op (torchtitan's per-op selective checkpointing)";
  }
  return "?";
}

/// How the MoE layers move tokens, for the workload line: ", <dispatcher>" and whether the
/// shared experts overlap it (torchtitan's MoE: its own all-to-all).
std::string moe_dispatch_text(const TransformerConfig& c) {
  if (c.layer_kernels == LayerKernelSet::kTorchtitan) return ", torchtitan's all-to-all";
  std::string text;
  switch (c.moe.dispatcher) {
    case MoeDispatcher::kAllToAll:
      text = ", alltoall dispatcher";
      break;
    case MoeDispatcher::kAllGather:
      text = ", allgather dispatcher";
      break;
    case MoeDispatcher::kFlex:
      text = c.moe.flex_backend == FlexBackend::kHybridEp ? ", flex dispatcher on HybridEP"
                                                          : ", flex dispatcher on DeepEP";
      break;
  }
  if (c.moe.pad_to_capacity) text += " (padded to capacity)";
  if (c.moe.shared_expert_overlap) text += ", shared experts overlapped";
  if (c.moe.a2a_overlap) text += ", EP all-to-all overlapped (combined 1F1B)";
  return text;
}

std::string parallel_order_text(const ParallelismConfig& p) {
  std::string text;
  for (ParallelDim d : p.order) {
    if (!text.empty()) text += "-";
    text += parallel_dim_name(d);
  }
  return text;
}

/// moe.dispatcher flex: the backend's SMs must leave the GPU some, and every expert-parallel
/// group must sit on the nodes as the backend's kernels need (deepep_layout_unsupported,
/// hybridep_layout_unsupported; without node facts, default_member_nodes). Fails at the key.
void check_flex_layout(const TransformerConfig& c, const WorkloadPlatform& platform,
                       const ConfigNode& workload) {
  const ConfigNode moe = workload.child("moe");
  const bool hybrid = c.moe.flex_backend == FlexBackend::kHybridEp;
  const std::string_view backend = hybrid ? "HybridEP" : "DeepEP";
  const int32_t sms = flex_dispatch_sms(hybrid, c.moe.flex_sms, false);
  if (sms >= platform.device.sm_count) {
    const std::string why =
        fmt::format("{}'s kernels would take {} SMs of the {} of the {}", backend, sms,
                    platform.device.sm_count, platform.device.name);
    if (moe.has("flex_sms")) moe.child("flex_sms").fail(why);
    moe.child("dispatcher").fail(why + " (moe.flex_sms)");
  }
  if (c.parallelism.expert <= 1) return;
  const ParallelLayout layout(c.parallelism);
  for (int64_t rank = 0; rank < layout.gpus(); ++rank) {
    const std::vector<int64_t> members = layout.group(ParallelDim::kExpert, rank);
    if (members.front() != rank) continue;  // each group once, at its first member
    std::vector<uint32_t> nodes = default_member_nodes(members.size());
    if (!platform.node_of_gpu.empty()) {
      for (size_t i = 0; i < members.size(); ++i) {
        const auto gpu = static_cast<size_t>(members[i]);
        nodes[i] = gpu < platform.node_of_gpu.size() ? platform.node_of_gpu[gpu] : 0;
      }
    }
    if (const std::optional<std::string> why =
            hybrid ? hybridep_layout_unsupported(nodes) : deepep_layout_unsupported(nodes)) {
      moe.child("dispatcher")
          .fail(fmt::format("{} (the expert-parallel group of rank {}; parallelism.order places "
                            "the groups): alltoall",
                            *why, rank));
    }
  }
}

}  // namespace

TransformerWorkload::TransformerWorkload(const ConfigNode& workload) : node_(workload) {}

std::optional<uint32_t> TransformerWorkload::implied_gpus() const {
  if (!node_.has("parallelism") || !node_.child("parallelism").has("data")) return std::nullopt;
  const ConfigNode p = node_.child("parallelism");
  const int64_t product = p.get_positive_int_or("tensor", 1) *
                          p.get_positive_int_or("pipeline", 1) *
                          p.get_positive_int_or("context", 1) * p.get_positive_int("data");
  if (product > 1'000'000) p.child("data").fail("implies more than 1000000 GPUs");
  return static_cast<uint32_t>(product);
}

std::string TransformerWorkload::implied_gpus_reason() const {
  return "workload.parallelism gives tensor x pipeline x context x data GPUs";
}

void TransformerWorkload::prepare(const WorkloadPlatform& platform) {
  config_ = parse_transformer_config(node_, platform.gpus);
}

WorkloadBuild TransformerWorkload::build(const WorkloadPlatform& platform, TaskGraph& graph) {
  if (!config_) prepare(platform);
  const TransformerConfig& c = *config_;
  if (c.attention == AttentionImpl::kFlash) {
    if (const auto why =
            attention_kernel_unsupported(c.attention_kernel, platform.device.compute_capability)) {
      const std::string message = fmt::format("{} ({})", *why, platform.device.name);
      if (node_.has("attention")) node_.child("attention").fail(message);
      node_.fail("attention (default: flash): " + message);
    }
  }
  const ParallelismConfig& p = c.parallelism;
  TransformerGraphInputs inputs;
  inputs.iterations = platform.iterations;
  inputs.node_of_gpu = platform.node_of_gpu;
  if (c.moe.dispatcher == MoeDispatcher::kFlex) check_flex_layout(c, platform, node_);
  const TransformerGraph built = generate_transformer(c, inputs, graph);

  WorkloadBuild out;
  if (c.cuda_graph_scope.ignored) {
    out.warnings.push_back(
        "workload.cuda_graph_scope is ignored: cuda_graphs is false, so every layer runs eagerly");
  }
  out.iterations = platform.iterations;
  out.warmup_iterations = platform.warmup_iterations;
  out.represented_gpus = static_cast<uint32_t>(built.gpus);
  const double params_b = static_cast<double>(transformer_parameters(c)) * 1e-9;
  out.description.push_back(fmt::format(
      "workload: transformer ({}), {:.2f}B parameters: {} layers, hidden {}, {} heads ({} kv), "
      "ffn {}, vocab {}, seq {}, {}{}{}{}",
      c.architecture, params_b, c.layers, c.hidden, c.heads, c.kv_heads, c.ffn, c.vocab, c.seq,
      dtype_name(c.dtype),
      c.mla.enabled()
          ? fmt::format(", latent attention (q latent {}, kv latent {}, heads {} + {} / {})",
                        c.mla.q_lora_rank, c.mla.kv_lora_rank, c.mla.qk_nope_head_dim,
                        c.mla.qk_rope_head_dim, c.mla.v_head_dim)
          : std::string(),
      c.moe.experts > 0 ? fmt::format(", MoE {} experts top-{} every {} layer(s){}{}",
                                      c.moe.experts, c.moe.top_k, c.moe.every,
                                      c.moe.first_dense > 0
                                          ? fmt::format(" after {} dense ones", c.moe.first_dense)
                                          : std::string(),
                                      moe_dispatch_text(c))
                        : std::string(),
      c.mtp_layers > 0 ? fmt::format(", {} multi-token prediction layer(s)", c.mtp_layers)
                       : std::string()));
  out.description.push_back(fmt::format(
      "parallelism: TP {}{} x PP {} ({}{}) x CP {} x {}{}, order {}; global batch {} = "
      "{} micro-batches of {} per replica; recompute {}{}{}{}; {} iterations ({} warm-up)",
      p.tensor, p.sequence ? " (SP)" : "", p.pipeline, schedule_name(p),
      fmt::format("{}{}{}",
                  p.virtual_stages > 1 ? fmt::format(", {} virtual stages", p.virtual_stages)
                                       : std::string(),
                  p.split.stated() ? ", " + describe_pipeline_split(p.split) : std::string(),
                  // ParallelismConfig::p2p_synchronous: each exchange ends in a synchronize.
                  p.pipeline > 1 && p.p2p_synchronous ? ", synchronous exchanges" : ""),
      p.context, data_parallel_text(p), p.expert > 1 ? fmt::format(", EP {}", p.expert) : "",
      parallel_order_text(p), c.global_batch, built.micro_batches, c.micro_batch,
      recompute_name(c.recompute),
      c.recompute == Recompute::kSelective
          ? fmt::format(" ({})", recompute_modules_text(c.recompute_modules))
      : c.recompute_layers > 0
          ? fmt::format(" ({} of {} layers per chunk)", c.recompute_layers, c.layers_per_chunk())
          : std::string(),
      c.compile ? "; torch.compile per block" : "",
      c.cuda_graphs
          ? fmt::format("; CUDA graphs per layer ({})", cuda_graph_scope_text(c.cuda_graph_scope))
          : std::string(),
      platform.iterations, platform.warmup_iterations));
  if (c.lora.enabled()) {
    const int64_t adapters = lora_layer_parameters(c, 1) * c.layers;
    out.description.push_back(fmt::format(
        "LoRA fine-tuning: rank {} adapters on {} ({:.1f}M trained parameters); the base model "
        "frozen (no weight gradients, reduction or optimizer state for it)",
        c.lora.rank, lora_targets_text(c.lora), static_cast<double>(adapters) * 1e-6));
  }
  if (c.encoder_decoder()) {
    out.description.push_back(fmt::format(
        "encoder-decoder: the {} layers above are the encoder's (bidirectional, seq {}), then "
        "{} decoder layers (causal self-attention on {} tokens per sample, cross-attention "
        "over the encoder's output, MLP) and the output layer on the decoder's tokens; tokens/s "
        "counts the encoder's tokens (global batch x seq)",
        c.layers, c.seq, c.decoder_layers, c.decoder_seq));
  }
  const std::string sequences = sequence_lengths_text(c.sequences, c.micro_batch, c.seq);
  if (!sequences.empty()) out.description.push_back("sequences: " + sequences);
  if (c.head.kind == TaskHeadKind::kMaskedLm) {
    out.description.push_back(fmt::format(
        "head: masked LM on {} predicted positions per sample ({} rows per micro-batch through "
        "the vocabulary projection) and next-sentence prediction",
        c.head.predictions, c.vocabulary_rows()));
  } else if (c.head.kind == TaskHeadKind::kClassification) {
    out.description.push_back(fmt::format(
        "head: sequence classification, pooler and {} labels (no vocabulary projection)",
        c.head.labels));
  }
  if (built.simulated.size() < static_cast<size_t>(built.gpus)) {
    out.description.push_back(fmt::format(
        "simulated: {} of {} GPUs (data-parallel replica 0; the other {} replicas mirror it: "
        "their DP and EP traffic crosses the fabric, their TP, CP and PP traffic does not; "
        "mirror_data_parallel: false simulates all)",
        built.simulated.size(), built.gpus, p.data - 1));
  }
  out.memory = transformer_peak_memory(c);
  // Tokens the iteration trains on (unpadded samples: their real tokens; an encoder-decoder
  // model: the encoder's, as NeMo's T5 tables count global batch x seq_length) and Megatron-LM's
  // model FLOPs. Utilisation is against the dense peak of the training dtype, fp8 against bf16
  // as torchtitan's MFU counts it (torchtitan/tools/utils.py get_peak_flops: the bf16 peak).
  IterationWork work;
  work.unit = "tokens";
  work.units = static_cast<double>(c.global_batch / c.micro_batch) *
               static_cast<double>(micro_batch_tokens(c.sequences, c.micro_batch, c.seq));
  work.model_flops = transformer_model_flops(c);
  work.peak_dtype = c.dtype == DType::kFp8 ? DType::kBf16 : c.dtype;
  out.work = work;
  // Per-op checkpointing counts a block's matmuls over every forward: with an odd count per
  // forward and an odd number of micro-batches, every second iteration saves the other ones.
  if (c.recompute == Recompute::kOp && block_matmuls(c).size() % 2 == 1 &&
      built.micro_batches % 2 == 1) {
    out.iteration_period = 2;
  }
  // A trace of one rank per pipeline stage shows the schedule, its micro-batches and the bubble;
  // tensor-, context- and data-parallel peers of a stage run the same program.
  const ParallelLayout layout(p);
  std::vector<RankId> stage_ranks;
  for (size_t r = 0; r < built.simulated.size(); ++r) {
    const ParallelCoords x = layout.coords(built.simulated[r]);
    if (x.tp == 0 && x.cp == 0 && x.dp == 0) stage_ranks.push_back(static_cast<RankId>(r));
  }
  if (stage_ranks.size() < built.simulated.size()) {
    out.trace_ranks = TraceRankSuggestion{
        std::move(stage_ranks),
        "one rank per pipeline stage (tensor, context and data-parallel index 0: the pipeline, "
        "its micro-batches and the bubble)"};
  }
  return out;
}

std::unique_ptr<Workload> make_transformer_workload(const ConfigNode& workload) {
  return std::make_unique<TransformerWorkload>(workload);
}

}  // namespace upsim
