#include "workloads/transformer/transformer_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/config/config_enum.h"
#include "workloads/transformer/deepep.h"
#include "workloads/transformer/encoder_decoder.h"
#include "workloads/transformer/pipeline_split.h"

namespace upsim {

namespace {

// The documented ranges of the schema (transformer_config.h): beyond the largest models trained
// (Llama 3 405B: 126 layers, hidden 16384, ffn 53248, 128 heads, vocab 128256; contexts of 1 M
// tokens), so that any what-if fits and a typo or overflow does not.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxHeads = int64_t{1} << 16;
constexpr int64_t kMaxFfn = int64_t{1} << 22;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxSeq = int64_t{1} << 24;
constexpr int64_t kMaxMicroBatch = int64_t{1} << 20;
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 31;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxParallel = int64_t{1} << 24;  ///< GPUs of one parallel layout
constexpr int64_t kMaxTokensPerMicroBatch = int64_t{1} << 32;
/// Most multi-token prediction layers (DeepSeek-V3 has 1; Megatron-Core sets no bound).
constexpr int64_t kMaxMtpLayers = 64;
constexpr int64_t kMaxElements = int64_t{1} << 56;  ///< of one tensor or kernel (x 8 B < 2^63)
constexpr int64_t kMaxParameters = int64_t{1} << 50;

/// What `architecture:` sets before explicit keys override it.
struct ArchitecturePreset {
  std::string_view name;
  TransformerNorm norm;
  TransformerActivation activation;
  TransformerPosition position;
  bool bias;
  bool tied_embeddings;
  bool causal;
  double dropout;
};

// gpt: GPT-2 / GPT-3 as Megatron-LM trains them (Radford et al. 2019; Brown et al. 2020,
//   arXiv 2005.14165): pre-LayerNorm with bias, GELU MLP of 4h, learned positions, biased
//   linears, output layer tied to the input embedding, causal mask; Megatron's default
//   hidden/attention dropout 0.1.
// llama: Touvron et al. 2023 (arXiv 2302.13971, 2307.09288): RMSNorm, SwiGLU, rotary positions,
//   no biases, untied output layer, causal, no dropout.
// bert: Devlin et al. 2018 (arXiv 1810.04805): encoder (bidirectional mask), LayerNorm, GELU,
//   learned positions, biases, tied output layer, dropout 0.1.
// mpt: MosaicML MPT-7B/30B (llm-foundry configs): low_precision_layernorm with no_bias: true
//   (LayerNorm without bias, linears without bias), GELU MLP of 4h (expansion_ratio 4), ALiBi
//   positions (Press et al. 2021, arXiv 2108.12409), tied embeddings, causal, no dropout.
constexpr std::array<ArchitecturePreset, 4> kPresets = {{
    {"gpt", TransformerNorm::kLayerNorm, TransformerActivation::kGelu,
     TransformerPosition::kLearned, true, true, true, 0.1},
    {"llama", TransformerNorm::kRmsNorm, TransformerActivation::kSwiglu,
     TransformerPosition::kRotary, false, false, true, 0.0},
    {"bert", TransformerNorm::kLayerNorm, TransformerActivation::kGelu,
     TransformerPosition::kLearned, true, true, false, 0.1},
    {"mpt", TransformerNorm::kLayerNorm, TransformerActivation::kGelu, TransformerPosition::kAlibi,
     false, true, true, 0.0},
}};

/// Llama's MLP width: 2/3 of 4 x hidden, rounded up to a multiple of 256 (the reference
/// implementation's FeedForward, multiple_of = 256; 4096 -> 11008 for Llama 7B).
int64_t llama_ffn(int64_t hidden) {
  constexpr int64_t kMultipleOf = 256;
  const int64_t width = 2 * (4 * hidden) / 3;
  return (width + kMultipleOf - 1) / kMultipleOf * kMultipleOf;
}

double read_fraction(const ConfigNode& node, std::string_view key, double default_value,
                     double upper_exclusive, std::string_view what) {
  const double v = node.get_double_or(key, default_value);
  if (!std::isfinite(v) || v < 0.0 || v >= upper_exclusive) {
    node.child(key).fail(fmt::format("must be in [0, {}) ({}), got {}", upper_exclusive, what, v));
  }
  return v;
}

DType read_dtype(const ConfigNode& workload) {
  constexpr std::array<std::string_view, 5> kNames = {"fp32", "tf32", "fp16", "bf16", "fp8"};
  constexpr std::array<DType, 5> kTypes = {DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16,
                                           DType::kFp8};
  return read_enum(workload, "dtype", kNames, kTypes, DType::kBf16);
}

std::array<ParallelDim, kLayoutDimCount> read_order(const ConfigNode& par) {
  constexpr std::array<ParallelDim, kLayoutDimCount> kAll = {
      ParallelDim::kTensor, ParallelDim::kContext, ParallelDim::kExpert, ParallelDim::kData,
      ParallelDim::kPipeline};
  const std::string text = par.get_string_or("order", "tp-cp-ep-dp-pp");
  const auto bad = [&]() {
    par.child("order").fail(fmt::format(
        "`{}` is not a permutation of tp, cp, ep, dp, pp (rank order, innermost first, joined "
        "by '-', e.g. tp-cp-ep-dp-pp)",
        text));
  };
  std::array<ParallelDim, kLayoutDimCount> order{};
  std::array<bool, kLayoutDimCount> seen{};
  size_t count = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('-', start), text.size());
    const std::string_view name = std::string_view(text).substr(start, end - start);
    const auto it = std::find_if(kAll.begin(), kAll.end(),
                                 [&](ParallelDim d) { return parallel_dim_name(d) == name; });
    if (it == kAll.end() || count == kLayoutDimCount) bad();
    const auto index = static_cast<size_t>(it - kAll.begin());
    if (seen[index]) bad();
    seen[index] = true;
    order[count++] = *it;
    start = end + 1;
  }
  if (count != kLayoutDimCount) bad();
  return order;
}

/// The uneven-split keys of `parallelism` (pipeline_split.h), and the model chunks per rank a
/// stated layout holds (1 without one). A layout's syntax is checked here; what needs the
/// model's layers in parse_transformer_config (apply_pipeline_split).
struct ReadSplit {
  PipelineSplit split;
  int64_t layout_chunks = 1;
};
ReadSplit read_pipeline_split(const ConfigNode& par, int64_t pipeline) {
  ReadSplit read;
  PipelineSplit& split = read.split;
  if (par.has("pipeline_layout")) {
    split.layout = par.get_string("pipeline_layout");
    if (split.layout.empty()) {
      par.child("pipeline_layout")
          .fail(
              "is empty: give Megatron-Core's layout string, or leave the key out for the even "
              "split");
    }
    size_t stages = 0;
    try {
      stages = expand_pipeline_layout(split.layout).size();
    } catch (const std::invalid_argument& e) {
      par.child("pipeline_layout")
          .fail(fmt::format("`{}` is not a Megatron-Core pipeline layout: {}", split.layout,
                            e.what()));
    }
    if (static_cast<int64_t>(stages) % pipeline != 0) {
      par.child("pipeline_layout")
          .fail(fmt::format("has {} stages, not a multiple of pipeline {} (each rank holds "
                            "stages / pipeline model chunks)",
                            stages, pipeline));
    }
    read.layout_chunks = static_cast<int64_t>(stages) / pipeline;
  }
  split.account_for_embedding = par.get_bool_or("account_for_embedding", false);
  split.account_for_loss = par.get_bool_or("account_for_loss", false);
  if (par.has("first_stage_layers")) {
    split.first_stage_layers = par.get_int_in("first_stage_layers", 0, kMaxLayers);
  }
  if (par.has("last_stage_layers")) {
    split.last_stage_layers = par.get_int_in("last_stage_layers", 0, kMaxLayers);
  }
  if (split.stated() && pipeline == 1) {
    par.child(split.stated_key())
        .fail("splits the layers over pipeline stages: needs parallelism.pipeline > 1");
  }
  return read;
}

/// Reads `parallelism:` (every key has a default; an absent section takes them all). Checks
/// that need the model shape happen in validate().
/// `megatron_p2p`: the pipeline's sends and receives are Megatron-Core's p2p_communication
/// (false: torchtitan's torch.distributed.pipelining), which sets p2p_synchronous's default.
ParallelismConfig read_parallelism(const std::optional<ConfigNode>& section, uint32_t gpus,
                                   bool megatron_p2p) {
  ParallelismConfig p;
  if (!section) {
    p.data = gpus > 0 ? gpus : 1;
    return p;
  }
  const ConfigNode& par = *section;
  p.tensor = par.get_int_in_or("tensor", 1, kMaxParallel, 1);
  p.expert_tensor = par.get_int_in_or("expert_tensor", 1, kMaxParallel, p.tensor);
  if (p.expert_tensor != 1 && p.expert_tensor != p.tensor) {
    par.child("expert_tensor")
        .fail(fmt::format("is {}: the routed experts' tensor parallel is modelled as 1 (each "
                          "expert whole on a rank) or tensor {} (Megatron-Core's default)",
                          p.expert_tensor, p.tensor));
  }
  p.sequence = par.get_bool_or("sequence", false);
  if (p.sequence && p.tensor == 1) {
    par.child("sequence")
        .fail(
            "sequence parallel splits norms and dropout over the tensor-parallel ranks and needs "
            "parallelism.tensor > 1, got tensor 1");
  }
  p.pipeline = par.get_int_in_or("pipeline", 1, kMaxParallel, 1);
  const ReadSplit read_split = read_pipeline_split(par, p.pipeline);
  p.split = read_split.split;
  // A layout states its model chunks: stages / pipeline (Megatron-Core derives the virtual
  // pipeline size from it the same way).
  const int64_t layout_chunks = read_split.layout_chunks;
  if (!p.split.layout.empty() && par.states("virtual_stages") &&
      par.get_int_in("virtual_stages", 1, kMaxLayers) != layout_chunks) {
    par.child("virtual_stages")
        .fail(fmt::format("is {}, but pipeline_layout `{}` holds {} model chunks per rank of "
                          "pipeline {}",
                          par.get_int("virtual_stages"), p.split.layout, layout_chunks,
                          p.pipeline));
  }
  p.virtual_stages = par.get_int_in_or("virtual_stages", 1, kMaxLayers, layout_chunks);
  // 0: the even split's (check_encoder_decoder).
  p.encoder_stages = par.get_int_in_or("encoder_stages", 0, kMaxParallel, 0);
  if (p.virtual_stages > 1 && p.pipeline == 1) {
    par.child("virtual_stages")
        .fail(fmt::format("{} virtual stages (interleaved 1F1B) need parallelism.pipeline > 1, "
                          "got pipeline 1",
                          p.virtual_stages));
  }
  const std::string schedule = par.get_choice_or("schedule", {"gpipe", "1f1b"}, "1f1b");
  if (schedule == "gpipe") {
    p.schedule = PipelineSchedule::kGpipe;
    if (p.virtual_stages > 1) {
      par.child("schedule")
          .fail("gpipe has no interleaved form; virtual_stages > 1 needs schedule 1f1b");
    }
  } else {
    p.schedule =
        p.virtual_stages > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B;
  }
  p.context = par.get_int_in_or("context", 1, kMaxParallel, 1);
  p.expert = par.get_int_in_or("expert", 1, kMaxParallel, 1);
  if (p.tensor * p.pipeline > kMaxParallel || p.tensor * p.pipeline * p.context > kMaxParallel) {
    par.fail(fmt::format("tensor {} x pipeline {} x context {} is above {} GPUs", p.tensor,
                         p.pipeline, p.context, kMaxParallel));
  }

  const int64_t model_parallel = p.model_parallel();
  if (par.has("data")) {
    p.data = par.get_int_in("data", 1, kMaxParallel);
    if (gpus > 0 && p.gpus() != static_cast<int64_t>(gpus)) {
      par.child("data").fail(fmt::format(
          "tensor {} x pipeline {} x context {} x data {} = {} GPUs, but the platform has {} "
          "GPUs",
          p.tensor, p.pipeline, p.context, p.data, p.gpus(), gpus));
    }
  } else if (gpus > 0) {
    if (gpus % model_parallel != 0) {
      par.fail(fmt::format(
          "the platform's {} GPUs are not divisible by tensor {} x pipeline {} x context {} = {} "
          "(parallelism.data defaults to GPUs / (tensor x pipeline x context))",
          gpus, p.tensor, p.pipeline, p.context, model_parallel));
    }
    p.data = static_cast<int64_t>(gpus) / model_parallel;
  } else {
    p.data = 1;
  }

  const int64_t zero = par.get_int_or("zero", 0);
  if (zero < 0 || zero > 3) {
    par.child("zero").fail(
        fmt::format("must be 0 (DDP), 1 (optimizer state sharded), 2 (+ gradients) or 3 (+ "
                    "weights), got {}",
                    zero));
  }
  p.zero = static_cast<int>(zero);
  constexpr std::array<std::string_view, 3> kCpNames = {"p2p", "all_gather", "a2a"};
  constexpr std::array<ContextComm, 3> kCpComms = {ContextComm::kP2p, ContextComm::kAllGather,
                                                   ContextComm::kAllToAll};
  p.context_comm = read_enum(par, "context_comm", kCpNames, kCpComms, ContextComm::kP2p);
  constexpr std::array<std::string_view, 3> kFsdpNames = {"none", "full_shard", "shard_grad_op"};
  constexpr std::array<FsdpMode, 3> kFsdpModes = {FsdpMode::kNone, FsdpMode::kFullShard,
                                                  FsdpMode::kShardGradOp};
  p.fsdp = read_enum(par, "fsdp", kFsdpNames, kFsdpModes, FsdpMode::kNone);
  if (p.fsdp != FsdpMode::kNone && p.zero != 0) {
    par.child("fsdp").fail(fmt::format(
        "PyTorch FSDP and ZeRO (parallelism.zero {}) both shard the same state; set one of them",
        p.zero));
  }
  constexpr std::array<std::string_view, 2> kSyncNames = {"every_micro_batch", "last_micro_batch"};
  constexpr std::array<ShardedGradientSync, 2> kSyncModes = {ShardedGradientSync::kEveryMicroBatch,
                                                             ShardedGradientSync::kLastMicroBatch};
  p.gradient_sync = read_enum(par, "gradient_sync", kSyncNames, kSyncModes,
                              ShardedGradientSync::kEveryMicroBatch);
  if (p.gradient_sync != ShardedGradientSync::kEveryMicroBatch && p.fsdp == FsdpMode::kNone &&
      p.zero < 3) {
    par.child("gradient_sync")
        .fail(
            "applies to sharded parameters only (parallelism.fsdp, or zero: 3); DDP and ZeRO-1/2 "
            "reduce once per step already (overlap_grad_reduce)");
  }
  p.shard_group = par.get_int_in_or("shard_group", 0, kMaxParallel, 0);
  if (p.shard_group > 0) {
    if (p.fsdp == FsdpMode::kNone && p.zero < 3) {
      par.child("shard_group")
          .fail(
              "shards parameters within groups of data-parallel ranks (HSDP): needs fsdp or "
              "zero: 3");
    }
    if ((p.data * p.context) % p.shard_group != 0) {
      par.child("shard_group")
          .fail(fmt::format("{} does not divide the {} data-parallel ranks (data x context)",
                            p.shard_group, p.data * p.context));
    }
  }
  p.order = read_order(par);
  p.ddp_bucket_bytes = par.get_bytes_or("ddp_bucket", 25LL << 20);
  if (p.ddp_bucket_bytes <= 0) par.child("ddp_bucket").fail("must be positive");
  p.overlap_grad_reduce = par.get_bool_or("overlap_grad_reduce", true);
  p.overlap_param_gather = par.get_bool_or("overlap_param_gather", false);
  if (p.overlap_param_gather && !(p.zero >= 1 && p.zero <= 2 && p.fsdp == FsdpMode::kNone)) {
    par.child("overlap_param_gather")
        .fail(
            "overlaps the distributed optimizer's parameter all-gather: needs zero 1 or 2 "
            "(FSDP and zero 3 gather every unit before use already)");
  }
  if (p.overlap_param_gather && !p.overlap_grad_reduce) {
    par.child("overlap_param_gather")
        .fail("needs overlap_grad_reduce: true (Megatron-Core asserts the same)");
  }
  p.p2p_scatter_gather = par.get_bool_or("p2p_scatter_gather", true);
  // Megatron-Core's default (megatron/training/arguments.py and Megatron-Bridge's
  // comm_overlap.py): the interleaved schedule overlaps its sends and receives with compute
  // (overlap_p2p_comm); without it overlap_p2p_comm is forced off, so batch_p2p_comm is on, and
  // with batch_p2p_sync (default true) each batched exchange ends in torch.cuda.synchronize()
  // (p2p_communication.py, _communicate).
  p.p2p_synchronous = par.get_bool_or(
      "p2p_synchronous", megatron_p2p && p.pipeline > 1 && p.schedule == PipelineSchedule::k1F1B);
  // Megatron-LM's --align-param-gather (default on; turned off without the interleaved
  // schedule): the schedule, not each bucket's forward pre-hook, dispatches a model chunk's
  // parameter all-gathers (schedules.py: chunks 0 and 1 before the first forward, chunk c + 1
  // when the forward of virtual micro-batch c x pipeline - stage begins), so that every stage
  // starts them together. NeMo's Apex distributed optimizer does the same through
  // param_sync_func.
  const bool interleaved = p.schedule == PipelineSchedule::kInterleaved1F1B;
  p.align_param_gather =
      par.get_bool_or("align_param_gather", interleaved && p.overlap_param_gather);
  if (p.align_param_gather && !(interleaved && p.overlap_param_gather)) {
    par.child("align_param_gather")
        .fail(
            "aligns the overlapped parameter all-gathers of an interleaved schedule's model "
            "chunks: needs overlap_param_gather: true and virtual_stages > 1 (Megatron-LM turns "
            "it off without them)");
  }
  p.tp_comm_overlap = par.get_bool_or("tp_comm_overlap", false);
  p.async_tp = par.get_bool_or("async_tp", false);
  if (p.tp_comm_overlap && !(p.tensor > 1 && p.sequence)) {
    par.child("tp_comm_overlap")
        .fail(
            "overlaps the sequence-parallel all-gathers and reduce-scatters with the GEMMs: "
            "needs tensor > 1 and sequence: true (Megatron-Core refuses --tp-comm-overlap "
            "without sequence parallel)");
  }
  return p;
}

/// `moe` of a model with `layer_kernels`: both route dropless unless a capacity factor is given
/// (Megatron-Core's moe_expert_capacity_factor defaults to None, "no token will be dropped";
/// torchtitan's MoE has no capacity); torchtitan applies the scores before the experts
/// (MoEArgs' default), Megatron-Core after.
MoeConfig read_moe(const ConfigNode& moe, int64_t ffn, int64_t layers,
                   LayerKernelSet layer_kernels) {
  const bool torchtitan = layer_kernels == LayerKernelSet::kTorchtitan;
  MoeConfig m;
  m.experts = moe.get_int_in("experts", 1, kMaxExperts);
  m.top_k = moe.get_int_in_or("top_k", 1, kMaxExperts, 2);
  if (m.top_k > m.experts) {
    moe.child("top_k").fail(fmt::format(
        "each token is routed to top_k {} experts, but moe.experts is {}", m.top_k, m.experts));
  }
  // 0 = dropless; a factor above the experts' count holds every token anyway.
  m.capacity_factor = moe.get_double_in_or("capacity_factor", 0.0, kMaxExperts, 0.0);
  m.shared_experts = moe.get_int_in_or("shared_experts", 0, kMaxExperts, 0);
  m.expert_ffn = moe.get_int_in_or("expert_ffn", 1, kMaxFfn, ffn);
  m.every = moe.get_int_in_or("every", 1, kMaxLayers, 1);
  m.first_dense = moe.get_int_in_or("first_dense", 0, layers - 1, 0);
  m.imbalance = moe.get_double_in_or("imbalance", 0.0, kMaxExperts, 0.0);
  m.score_before_experts = moe.get_bool_or("score_before_experts", torchtitan);
  // Megatron-Core's TransformerConfig defaults to allgather, but the MoE model providers that
  // run it set alltoall (Megatron-Bridge's Qwen3-MoE and OLMoE providers:
  // moe_token_dispatcher_type "alltoall"), as the shipped MoE scenarios model it.
  const std::string dispatcher =
      moe.get_choice_or("dispatcher", {"alltoall", "allgather", "flex"}, "alltoall");
  if (dispatcher == "allgather") m.dispatcher = MoeDispatcher::kAllGather;
  if (dispatcher == "flex") m.dispatcher = MoeDispatcher::kFlex;
  for (const char* key : {"flex_sms", "flex_backend"}) {
    if (moe.has(key) && m.dispatcher != MoeDispatcher::kFlex) {
      moe.child(key).fail("belongs to the flex dispatcher: needs moe.dispatcher flex");
    }
  }
  if (m.dispatcher == MoeDispatcher::kFlex) {
    if (moe.get_choice_or("flex_backend", {"deepep", "hybridep"}, "deepep") == "hybridep") {
      m.flex_backend = FlexBackend::kHybridEp;
    }
    if (moe.has("flex_sms")) m.flex_sms = static_cast<int32_t>(moe.get_int_in("flex_sms", 1, 1024));
  }
  if (m.flex_backend == FlexBackend::kDeepEp && m.flex_sms % 2 != 0) {
    moe.child("flex_sms")
        .fail(fmt::format("DeepEP takes an even SM count (Buffer.set_num_sms asserts it), not {}",
                          m.flex_sms));
  }
  m.pad_to_capacity = moe.get_bool_or("pad_to_capacity", false);
  m.shared_expert_overlap = moe.get_bool_or("shared_expert_overlap", false);
  if (m.shared_expert_overlap && m.shared_experts == 0) {
    moe.child("shared_expert_overlap")
        .fail("overlaps the shared experts with the dispatch: needs moe.shared_experts > 0");
  }
  if (m.shared_expert_overlap && m.dispatcher == MoeDispatcher::kAllGather) {
    moe.child("shared_expert_overlap")
        .fail(
            "works with the alltoall or flex dispatcher only (Megatron-Core's TransformerConfig "
            "refuses it otherwise): moe.dispatcher alltoall or flex");
  }
  if (m.shared_expert_overlap && torchtitan) {
    moe.child("shared_expert_overlap")
        .fail(
            "is Megatron-Core's (layer_kernels fused); torchtitan runs its shared experts in turn");
  }
  m.a2a_overlap = moe.get_bool_or("a2a_overlap", false);
  if (m.a2a_overlap && m.dispatcher == MoeDispatcher::kAllGather) {
    moe.child("a2a_overlap")
        .fail(
            "overlaps the all-to-all dispatcher's communication (Megatron-Core asserts "
            "\"overlap_moe_expert_parallel_comm is supported with alltoall/flex token "
            "dispatcher\"): moe.dispatcher alltoall or flex");
  }
  if (m.a2a_overlap && m.shared_expert_overlap) {
    moe.child("a2a_overlap")
        .fail(
            "Megatron-Core refuses it beside moe_shared_expert_overlap (\"disable "
            "moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm\"): "
            "shared_expert_overlap false");
  }
  if (m.a2a_overlap && torchtitan) {
    moe.child("a2a_overlap")
        .fail("is Megatron-Core's combined 1F1B schedule (layer_kernels fused), not torchtitan's");
  }
  m.delay_wgrad = moe.get_bool_or("delay_wgrad", false);
  if (m.delay_wgrad && !m.a2a_overlap) {
    moe.child("delay_wgrad")
        .fail(
            "defers the experts' weight gradients within the combined 1F1B schedule (Megatron-Core "
            "asserts \"overlap_moe_expert_parallel_comm must be enabled when enabling "
            "delay_wgrad_compute\"): needs moe.a2a_overlap true");
  }
  if (m.pad_to_capacity && m.capacity_factor == 0.0) {
    moe.child("pad_to_capacity")
        .fail("pads each expert's input to its capacity: needs moe.capacity_factor > 0");
  }
  if (m.pad_to_capacity && m.dispatcher != MoeDispatcher::kAllToAll) {
    moe.child("pad_to_capacity")
        .fail(m.dispatcher == MoeDispatcher::kFlex
                  ? "DeepEP does not pad expert inputs to capacity (Megatron-Core refuses "
                    "moe_pad_expert_input_to_capacity with the flex dispatcher): moe.dispatcher "
                    "alltoall"
                  : "is the all-to-all dispatcher's (drop_and_pad): needs moe.dispatcher alltoall");
  }
  if (torchtitan && m.dispatcher != MoeDispatcher::kAllToAll) {
    moe.child("dispatcher")
        .fail(
            "layer_kernels torchtitan dispatches with its own all-to-all (ExpertParallel): "
            "alltoall");
  }
  if (torchtitan && m.capacity_factor > 0.0) {
    moe.child("capacity_factor")
        .fail("layer_kernels torchtitan routes dropless (its MoE has no capacity): 0");
  }
  if (!torchtitan && m.score_before_experts) {
    moe.child("score_before_experts")
        .fail(
            "Megatron-Core's MoE layers (layer_kernels fused) apply the scores after the experts "
            "here (moe_apply_probs_on_input is not modelled): false");
  }
  return m;
}

/// What FlashAttention v1 and flash-attn's Triton FlashAttention cannot run (flash-attn v1.0.9):
/// head dims above 128 (fmha_api.cpp: `head_size % 8 == 0 && head_size <= 128`;
/// flash_attn_triton.py: `assert d <= 128`), a sliding window (neither takes one), context
/// parallel (Megatron-Core / Transformer Engine ring attention runs FlashAttention-2 or cuDNN),
/// latent attention; the Triton kernel takes no variable-length batch (its docstring: "doesn't
/// support different sequence lengths in a batch"; v1's flash_attn_unpadded_func does).
void check_v1_attention(const ConfigNode& workload, const TransformerConfig& c) {
  const ConfigNode attention = workload.child("attention");
  const std::string_view name = attention_kernel_name(c.attention_kernel);
  if (c.head_dim() > 128) {
    attention.fail(
        fmt::format("{} takes head dims up to 128, the model's is {}: use flash2, flash3 or cudnn",
                    name, c.head_dim()));
  }
  if (c.sliding_window > 0) {
    attention.fail(fmt::format("{} takes no sliding window: use flash2, flash3 or cudnn", name));
  }
  if (c.parallelism.context > 1) {
    attention.fail(fmt::format(
        "{} with context parallel {}: the ring attention runs FlashAttention-2 or cuDNN "
        "(attention: flash2 or cudnn)",
        name, c.parallelism.context));
  }
  if (c.mla.enabled()) attention.fail(fmt::format("{} with mla: not modelled", name));
  if (c.attention_kernel == AttentionKernel::kTriton &&
      c.sequences.layout != SequenceLayout::kPadded) {
    attention.fail(fmt::format(
        "triton takes padded batches only; {} sequences need flash1, flash2, flash3 or cudnn",
        sequence_layout_name(c.sequences.layout)));
  }
}

/// The sizes the generator multiplies stay far inside int64 (bytes of a tensor, FLOPs of a
/// kernel): each product below, computed exactly, must be at most its bound.
void check_products(const ConfigNode& workload, const TransformerConfig& c) {
  __extension__ typedef __int128 Wide;  // exact: every product below stays under 2^80
  const Wide tokens = Wide{c.micro_batch} * c.seq;
  if (tokens > kMaxTokensPerMicroBatch) {
    workload.child("seq").fail(
        fmt::format("micro_batch {} x seq {} is above {} tokens per micro-batch", c.micro_batch,
                    c.seq, kMaxTokensPerMicroBatch));
  }
  // Attention: micro_batch x heads x seq^2 scores, micro_batch x seq^2 x hidden FLOPs.
  if (tokens * c.seq * std::max(c.heads, c.hidden) > kMaxElements) {
    workload.child("seq").fail(fmt::format(
        "micro_batch {} x seq {}^2 x hidden {} is above 2^56: the attention of one micro-batch "
        "is too large to price",
        c.micro_batch, c.seq, c.hidden));
  }
  const int64_t widest = std::max({c.hidden, c.ffn, c.vocab, c.moe.expert_ffn});
  if (tokens * widest * std::max<int64_t>(1, c.moe.top_k) > kMaxElements) {
    workload.child("seq").fail(
        fmt::format("micro_batch {} x seq {} tokens x width {} is above 2^56 activation elements",
                    c.micro_batch, c.seq, widest));
  }
  const Wide experts = std::max<int64_t>(1, c.moe.experts + c.moe.shared_experts);
  const Wide per_layer = Wide{4} * c.hidden * c.hidden +
                         Wide{3} * c.hidden * std::max(c.ffn, c.moe.expert_ffn) * experts;
  if (Wide{c.layers} * per_layer + Wide{c.vocab} * c.hidden > kMaxParameters) {
    workload.child("layers").fail(fmt::format(
        "{} layers of hidden {}, ffn {}{} are above 2^50 parameters", c.layers, c.hidden,
        std::max(c.ffn, c.moe.expert_ffn),
        c.moe.experts > 0 ? fmt::format(" and {} experts", static_cast<int64_t>(experts)) : ""));
  }
}

/// "tp 2 x cp 2": the axes before pp in `layout` with their sizes there ("no axis" if none).
std::string axes_before_pipeline(const ParallelismConfig& p, RankLayout layout) {
  std::string text;
  for (ParallelDim d : p.order) {
    if (d == ParallelDim::kPipeline) break;
    const bool expert = layout == RankLayout::kExpert;
    if (d == (expert ? ParallelDim::kContext : ParallelDim::kExpert)) continue;
    int64_t degree = p.tensor;
    if (d == ParallelDim::kContext) degree = p.context;
    if (d == ParallelDim::kExpert) degree = p.expert;
    if (d == ParallelDim::kData) degree = expert ? p.expert_data() : p.data;
    text += fmt::format("{}{} {}", text.empty() ? "" : " x ", parallel_dim_name(d), degree);
  }
  return text.empty() ? "no axis" : text;
}

/// The expert-parallel groups of Megatron-Core's expert rank layout stay inside a pipeline stage
/// when the pipeline axis has the same stride in both layouts (RankLayout; Megatron-Core asserts
/// that the two layouts' pipeline groups are equal). With pp last in the order it always has.
void check_expert_layout(const ConfigNode& par, const ParallelismConfig& p) {
  if (p.expert == 1) return;
  const int64_t dense = rank_stride(p, RankLayout::kDense, ParallelDim::kPipeline);
  const int64_t expert = rank_stride(p, RankLayout::kExpert, ParallelDim::kPipeline);
  if (dense == expert) return;
  std::string order;
  for (ParallelDim d : p.order)
    order += fmt::format("{}{}", order.empty() ? "" : "-", parallel_dim_name(d));
  par.child("order").fail(fmt::format(
      "`{}` puts pipeline stages {} rank(s) apart in the dense layers ({} before pp) but {} apart "
      "in the expert layers ({} before pp; expert data parallel = data x context / expert), so "
      "the expert-parallel groups would span pipeline stages (Megatron-Core refuses this too: its "
      "dense and expert pipeline groups must be equal); put pp last (tp-cp-ep-dp-pp), or choose "
      "parallelism.expert and parallelism.context so that both products agree (with "
      "tp-cp-ep-pp-dp: expert = context)",
      order, dense, axes_before_pipeline(p, RankLayout::kDense), expert,
      axes_before_pipeline(p, RankLayout::kExpert)));
}

/// The checks that tie the model shape to the parallel layout.
void validate(const ConfigNode& workload, const std::optional<ConfigNode>& par_node,
              const std::optional<ConfigNode>& moe_node, const TransformerConfig& c) {
  check_products(workload, c);
  const ParallelismConfig& p = c.parallelism;
  if (c.heads % p.tensor != 0) {
    workload.child("heads").fail(
        fmt::format("{} heads are not divisible by tensor parallel {} (parallelism.tensor; each "
                    "tensor-parallel rank computes whole heads)",
                    c.heads, p.tensor));
  }
  if (c.explicit_head_dim == 0 && !c.mla.enabled() && c.hidden % c.heads != 0) {
    workload.child("hidden").fail(fmt::format(
        "{} is not divisible by heads {} (head dimension = hidden / heads; or give head_dim)",
        c.hidden, c.heads));
  }
  if (c.heads % c.kv_heads != 0) {
    workload.child("kv_heads")
        .fail(fmt::format("{} kv_heads do not divide heads {} (each key/value head serves "
                          "heads / kv_heads query heads)",
                          c.kv_heads, c.heads));
  }
  if (c.kv_heads >= p.tensor && c.kv_heads % p.tensor != 0) {
    workload.child("kv_heads")
        .fail(fmt::format("{} kv_heads are not divisible by tensor parallel {} (Megatron splits "
                          "key/value heads over tensor ranks, replicating them only when "
                          "kv_heads < tensor)",
                          c.kv_heads, p.tensor));
  }
  if (c.kv_heads < p.tensor && p.tensor % c.kv_heads != 0) {
    workload.child("kv_heads")
        .fail(fmt::format("{} kv_heads do not divide tensor parallel {} (with fewer key/value "
                          "heads than tensor ranks each head is replicated tensor / kv_heads "
                          "times)",
                          c.kv_heads, p.tensor));
  }
  if (c.ffn % p.tensor != 0) {
    workload.child("ffn").fail(
        fmt::format("{} is not divisible by tensor parallel {} (the MLP is split column-wise)",
                    c.ffn, p.tensor));
  }
  const int64_t chunks = p.pipeline * p.virtual_stages;
  if (c.encoder_decoder()) {
    // The stacks' split over the stages: check_encoder_decoder.
  } else if (p.chunk_layer_offsets.empty() && c.layers % chunks != 0) {
    workload.child("layers").fail(
        fmt::format("{} layers are not divisible by pipeline {} x virtual_stages {} = {} "
                    "(every model chunk holds the same number of layers; or split them "
                    "unevenly: parallelism.pipeline_layout, account_for_embedding / _loss, "
                    "first / last_stage_layers)",
                    c.layers, p.pipeline, p.virtual_stages, chunks));
  }
  if (c.recompute_layers > c.layers_per_chunk()) {
    workload.child("recompute_layers")
        .fail(fmt::format(
            "{} layers, but {} model chunk holds {} (layers / (pipeline x "
            "virtual_stages){})",
            c.recompute_layers, p.chunk_layer_offsets.empty() ? "each" : "the largest",
            c.layers_per_chunk(), p.chunk_layer_offsets.empty() ? "" : ", or the uneven split's"));
  }
  const int64_t per_step = c.micro_batch * p.data;
  if (c.global_batch % per_step != 0) {
    workload.child("global_batch")
        .fail(fmt::format("{} sequences are not divisible by micro_batch {} x data {} = {} "
                          "(micro-batches per iteration = global_batch / (micro_batch x data))",
                          c.global_batch, c.micro_batch, p.data, per_step));
  }
  if (p.schedule == PipelineSchedule::kInterleaved1F1B && c.micro_batches() % p.pipeline != 0) {
    // Megatron-LM (schedules.py, forward_backward_pipelining_with_interleaving) requires the
    // number of micro-batches to be a multiple of the pipeline size.
    workload.child("global_batch")
        .fail(fmt::format("gives {} micro-batches per iteration, but interleaved 1F1B "
                          "(parallelism.virtual_stages {}) needs a multiple of pipeline {}",
                          c.micro_batches(), p.virtual_stages, p.pipeline));
  }
  if (p.context > 1 && c.seq % (2 * p.context) != 0) {
    // Ring attention splits the sequence into 2 x context chunks and gives rank i chunks i and
    // 2 x context - 1 - i, balancing the causal mask's work (Megatron-LM context parallel).
    workload.child("seq").fail(fmt::format(
        "{} is not divisible by 2 x context parallel {} = {} (load-balanced ring attention)", c.seq,
        p.context, 2 * p.context));
  }
  if (c.sliding_window > 0 && (c.attention == AttentionImpl::kUnfused || p.context > 1)) {
    // The window is priced in the fused kernel's blocks; ring attention's steps would skip
    // whole blocks outside it, which the ring's pricing does not do.
    workload.child("sliding_window")
        .fail(
            "needs the fused attention (attention: flash, flash3 or cudnn) and no context "
            "parallel");
  }
  if (c.attention_sinks && c.attention == AttentionImpl::kFlash &&
      c.attention_kernel != AttentionKernel::kCudnn) {
    // Transformer Engine runs a non-vanilla softmax_type on cuDNN's fused attention only
    // (its FlashAttention backends take the vanilla softmax); flash-attn's releases have no
    // learnable sinks.
    workload.child("attention_sinks")
        .fail(
            "needs attention: cudnn (Transformer Engine's fused attention with softmax_type "
            "learnable) or unfused: FlashAttention-2 / -3 take no sinks");
  }
  if (c.attention_sinks && c.mla.enabled()) {
    workload.child("attention_sinks")
        .fail("is modelled for multi-head / grouped attention, not mla");
  }
  if (c.attention == AttentionImpl::kFlash && dtype_bytes(c.activation_dtype()) == 4) {
    // FlashAttention-2 / -3 and cuDNN's fused attention take fp16 and bf16 (fp8) inputs only;
    // PyTorch's SDPA falls back to its memory-efficient kernel for fp32, which is not priced.
    // (`attention` is always present here: reading it wrote its default.)
    workload.child("attention")
        .fail(fmt::format(
            "the fused attention kernels (flash, flash3, cudnn, flash1, triton; flash is the "
            "default) take 16-bit inputs, not {}; a {} model's SDPA runs its memory-efficient "
            "kernel, which upsim does not price: use attention: unfused or a 16-bit dtype",
            dtype_name(c.dtype), dtype_name(c.dtype)));
  }
  if (c.attention == AttentionImpl::kFlash && (c.attention_kernel == AttentionKernel::kFlash1 ||
                                               c.attention_kernel == AttentionKernel::kTriton)) {
    check_v1_attention(workload, c);
  }
  if (c.sequences.layout != SequenceLayout::kPadded) {
    const ConfigNode layout = workload.child("sequences").child("layout");
    if (c.attention == AttentionImpl::kUnfused) {
      // A variable-length attention needs the fused kernels' cumulative-length interface
      // (flash_attn_varlen_func, cuDNN's THD layout); bmm + softmax + bmm computes each padded
      // square.
      layout.fail(
          fmt::format("{} sequences need a fused attention (attention: flash, flash3 or "
                      "cudnn): the unfused one computes every padded seq x seq square",
                      sequence_layout_name(c.sequences.layout)));
    }
    // Transformer Engine runs context parallel on variable-length (THD) batches with the K/V
    // ring only: AttnFuncWithCPAndKVP2P splits every sample into 2 cp load-balanced chunks, as
    // the ring does whole sequences; its K/V all-gather and QKVO all-to-all take no THD input
    // (TE's context-parallel tests skip "KV all-gather does not support THD format" and "QKVO
    // A2A does not support THD format").
    if (p.context > 1 && p.context_comm != ContextComm::kP2p) {
      layout.fail(
          fmt::format("{} sequences with context parallel {} need parallelism.context_comm: p2p: "
                      "Transformer Engine's {} exchange takes no variable-length (THD) batch",
                      sequence_layout_name(c.sequences.layout), p.context,
                      p.context_comm == ContextComm::kAllGather ? "K/V all-gather" : "all-to-all"));
    }
  }
  if (c.mla.enabled()) {
    // The latent projections replace the fused QKV GEMM that TE's overlap, the per-op policy's
    // matmul count and the unfused core are built around.
    const ConfigNode mla = workload.child("mla");
    if (p.tp_comm_overlap) mla.fail("is not modelled with parallelism.tp_comm_overlap");
    if (c.recompute == Recompute::kOp) mla.fail("is not modelled with recompute: op");
    if (c.attention == AttentionImpl::kUnfused) {
      mla.fail("needs a fused attention (attention: flash, flash3 or cudnn)");
    }
  }
  if (p.context_comm != ContextComm::kP2p) {
    const ConfigNode comm = par_node->child("context_comm");
    if (p.context == 1) {
      comm.fail("chooses how context-parallel ranks exchange the sequence: needs context > 1");
    }
    const int64_t heads = c.heads / p.tensor;
    const int64_t kv_heads = std::max<int64_t>(1, c.kv_heads / p.tensor);
    if (p.context_comm == ContextComm::kAllToAll &&
        (heads % p.context != 0 || kv_heads % p.context != 0)) {
      // Transformer Engine's AttnFuncWithCPAndQKVOA2A splits the heads over the CP ranks.
      comm.fail(
          fmt::format("a2a splits the heads over context parallel {}: the {} query and {} "
                      "key/value heads per tensor rank must be divisible by it",
                      p.context, heads, kv_heads));
    }
  }
  if (p.context > 1 && c.attention == AttentionImpl::kUnfused) {
    // Ring attention exchanges keys and values around the CP group inside the fused kernel's
    // loop (core_attention_flash in the generator); the unfused bmm / softmax / bmm has no such
    // exchange. Megatron-Core refuses it too (megatron/core/transformer/
    // dot_product_attention.py: "Context parallelism is only supported by
    // TEDotProductAttention!").
    workload.child("attention")
        .fail(fmt::format("context parallel {} (parallelism.context) needs the fused attention "
                          "(flash): the unfused one has no ring exchange of keys and values",
                          p.context));
  }
  if (c.moe.experts == 0) {
    if (p.expert > 1) {
      par_node->child("expert").fail(
          fmt::format("expert parallel {} needs a mixture of experts (workload.moe)", p.expert));
    }
    if (p.expert_tensor_parallel() != p.tensor) {
      par_node->child("expert_tensor")
          .fail(
              "is the routed experts' tensor parallel: needs a mixture of experts (workload.moe)");
    }
    return;
  }
  if (c.moe.experts % p.expert != 0) {
    par_node->child("expert").fail(fmt::format(
        "moe.experts {} are not divisible by expert parallel {}", c.moe.experts, p.expert));
  }
  const int64_t etp = p.expert_tensor_parallel();
  if ((p.tensor / etp * p.data * p.context) % p.expert != 0) {
    par_node->child("expert").fail(
        etp == p.tensor
            ? fmt::format("expert parallel {} does not divide data {} x context {} = {} (expert "
                          "parallel ranks are carved out of the data x context ranks)",
                          p.expert, p.data, p.context, p.data * p.context)
            : fmt::format("expert parallel {} does not divide tensor {} / expert_tensor {} x "
                          "data {} x context {} = {} (expert parallel ranks are carved out of "
                          "the tensor, data and context ranks)",
                          p.expert, p.tensor, etp, p.data, p.context,
                          p.tensor / etp * p.data * p.context));
  }
  check_expert_layout(*par_node, p);
  if (c.moe.expert_ffn % p.tensor != 0) {
    moe_node->child("expert_ffn")
        .fail(fmt::format("{} is not divisible by tensor parallel {}", c.moe.expert_ffn, p.tensor));
  }
  if (p.tensor > 1 && !p.sequence) {
    // Megatron-Core's TransformerConfig: "When using MoE and tensor parallelism, sequence
    // parallelism must be used." The experts' tensor ranks gather their sequence shards.
    par_node->child("sequence")
        .fail(fmt::format(
            "MoE layers with tensor parallel {} need sequence parallel (Megatron-Core requires it: "
            "the experts' tensor ranks all-gather their sequence shards): sequence: true",
            p.tensor));
  }
  if (c.moe.shared_experts > 0 && p.tp_comm_overlap) {
    par_node->child("tp_comm_overlap")
        .fail(
            "the shared experts' tensor-parallel linears under Transformer Engine's userbuffers "
            "are not modelled: tp_comm_overlap false, or no moe.shared_experts");
  }
  if (c.moe.dispatcher == MoeDispatcher::kFlex && etp > 1) {
    // MoEFlexTokenDispatcher's DeepEP group is the expert tensor x expert ranks (tp_ep), each
    // token routed to every expert tensor rank of its experts; not modelled.
    moe_node->child("dispatcher")
        .fail(fmt::format(
            "flex dispatches over the expert tensor x expert ranks, which expert tensor parallel "
            "{} would need and is not modelled: alltoall, or parallelism.expert_tensor 1",
            etp));
  }
  if (c.moe.dispatcher == MoeDispatcher::kFlex && p.expert == 1) {
    moe_node->child("dispatcher")
        .fail(
            "flex dispatches over expert-parallel ranks (Megatron-Core asserts tensor x expert > "
            "1): parallelism.expert > 1, or alltoall");
  }
  if (c.moe.dispatcher == MoeDispatcher::kFlex && c.moe.flex_backend == FlexBackend::kDeepEp &&
      p.expert > 1 && !deepep_supports_ranks(p.expert)) {
    par_node->child("expert").fail(
        *deepep_layout_unsupported(std::vector<uint32_t>(static_cast<size_t>(p.expert), 0)));
  }
  if (c.moe.dispatcher == MoeDispatcher::kAllGather && etp > 1) {
    // Its gathers span the expert tensor x expert ranks (tp_ep_group); not modelled.
    moe_node->child("dispatcher")
        .fail(fmt::format(
            "allgather gathers over the expert tensor x expert ranks, which expert tensor "
            "parallel {} would need and is not modelled: alltoall, or parallelism.expert_tensor 1",
            etp));
  }
}

}  // namespace

double moe_busiest_rank_load(const TransformerConfig& c) {
  const MoeConfig& m = c.moe;
  // Padded to capacity, every rank's experts compute their capacity, whatever the router did.
  if (m.pad_to_capacity) return m.capacity_factor;
  const double load = std::min(static_cast<double>(c.parallelism.expert), 1.0 + m.imbalance);
  return m.capacity_factor > 0.0 ? std::min(load, m.capacity_factor) : load;
}

int64_t rank_stride(const ParallelismConfig& p, RankLayout layout, ParallelDim axis) {
  const bool expert = layout == RankLayout::kExpert;
  int64_t stride = 1;
  for (ParallelDim d : p.order) {
    if (d == axis) return stride;
    switch (d) {
      case ParallelDim::kTensor:
        stride *= expert ? p.expert_tensor_parallel() : p.tensor;
        break;
      case ParallelDim::kContext:
        stride *= expert ? 1 : p.context;
        break;
      case ParallelDim::kExpert:
        stride *= expert ? p.expert : 1;
        break;
      case ParallelDim::kData:
        stride *= expert ? p.expert_data() : p.data;
        break;
      case ParallelDim::kPipeline:
        stride *= p.pipeline;
        break;
      case ParallelDim::kOther:  // never in an order (read_order)
        break;
    }
  }
  return stride;
}

namespace {

/// `autocast: true` (TransformerConfig::autocast) with what it is modelled for: a 16-bit
/// compute dtype over an fp32 model run eagerly, as HuggingFace's Trainer and NVIDIA's
/// DeepLearningExamples run it. Transformer Engine (TP overlap), torch.compile, torchtitan's
/// per-op checkpointing, MoE and latent attention keep their own precision handling: refused.
/// Fails at the stated value `key_path` below `workload` ("parallelism.fsdp") with `feature`
/// and what it needs: the refusals of the feature checks below.
[[noreturn]] void refuse_at(const ConfigNode& workload, std::string_view key_path,
                            std::string_view feature, std::string_view what) {
  ConfigNode node = workload;
  for (size_t begin = 0; begin <= key_path.size();) {
    const size_t end = std::min(key_path.find('.', begin), key_path.size());
    node = node.child(key_path.substr(begin, end - begin));
    begin = end + 1;
  }
  node.fail(fmt::format("{} {}", feature, what));
}

/// Under a stated uneven split (ParallelismConfig::split), each model chunk's layers
/// (chunk_layer_offsets), with Megatron-Core's checks (split_chunk_layers), each refusal at its
/// key.
void apply_pipeline_split(const ConfigNode& workload, TransformerConfig& c) {
  ParallelismConfig& p = c.parallelism;
  if (!p.split.stated()) return;
  const ConfigNode par = workload.child("parallelism");

  if (c.encoder_decoder()) {
    par.child(p.split.stated_key())
        .fail(
            "splits a decoder-only model's layers; an encoder-decoder model splits at "
            "parallelism.encoder_stages");
  }
  const ChunkLayerSplit split = split_chunk_layers(p.split, c.layers, p.pipeline, p.virtual_stages);
  if (!split.error.empty()) par.child(split.key).fail(split.error);
  int64_t mtp = 0;
  for (const int64_t m : split.mtp_counts)
    mtp += m;
  if (mtp != c.mtp_layers) {
    par.child("pipeline_layout")
        .fail(fmt::format("holds {} multi-token prediction layers (m), but workload.mtp_layers is "
                          "{} (Megatron-Core asserts they match)",
                          mtp, c.mtp_layers));
  }
  if (mtp > 0 && split.mtp_counts.back() != mtp) {
    par.child("pipeline_layout")
        .fail(
            "places its MTP layers (m) on a stage before the loss's (a standalone MTP stage, "
            "which is not modelled here): put them in the last stage, before L");
  }
  p.chunk_layer_offsets.assign(1, 0);
  for (const int64_t count : split.counts)
    p.chunk_layer_offsets.push_back(p.chunk_layer_offsets.back() + count);
}

/// What multi-token prediction (the `mtp_layers` key; mtp_emitter.cpp) runs with here, each
/// refusal at its key: GPTModel's language-model head on a decoder-only model, Megatron-Core's
/// own layers, without LoRA. Under FSDP / ZeRO 3 each MTP layer is one unit here, its
/// transformer layer, norms, eh_proj and embedding copy together (Megatron-FSDP's units are
/// the TransformerLayer modules, mcore_fsdp_adapter.py: the MTP layer's transformer layer is
/// one, its other parameters are gathered with the model's root ones).
void check_mtp(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "multi-token prediction (mtp_layers)", what);
  };
  if (c.encoder_decoder()) refuse("decoder", "is GPTModel's: decoder-only models");
  if (c.head.kind != TaskHeadKind::kLanguageModel) refuse("head", "needs the language-model head");
  if (c.layer_kernels == LayerKernelSet::kTorchtitan) {
    refuse("layer_kernels", "is Megatron-Core's module: layer_kernels fused");
  }
  if (c.lora.enabled()) refuse("lora", "trains the whole model here");
}

/// What an encoder-decoder model (the `decoder` key) runs with here, each refusal at its key:
/// pipeline stages split where the encoder's layers end (Megatron-LM's
/// --pipeline-model-parallel-split-rank), no interleaving, no context, sequence or expert
/// parallel, dense layers with plain attention, padded samples of seq and decoder seq tokens,
/// the language-model head on the decoder, and no FSDP / ZeRO-3 (whose per-layer gathers would
/// need the shared embedding gathered for the decoder as well).
void check_encoder_decoder(const ConfigNode& workload, const TransformerConfig& c,
                           bool encoder_stages_stated) {
  // `key` names a stated value (a dotted path below workload).
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "an encoder-decoder model (workload.decoder)", what);
  };
  const ParallelismConfig& p = c.parallelism;
  if (c.causal) refuse("causal", "has a bidirectional encoder: causal must be false");
  if (p.virtual_stages > 1) {
    refuse("parallelism.virtual_stages",
           "runs without interleaving (Megatron-LM's encoder-decoder pipeline has none)");
  }
  if (p.pipeline > 1) {
    // The encoder on the first encoder_stages, the decoder on the rest (encoder_decoder.h),
    // each stack's layers split evenly over its stages.
    const int64_t es = p.encoder_stages;
    const std::string_view key =
        encoder_stages_stated ? "parallelism.encoder_stages" : "parallelism.pipeline";
    if (es < 1 || es >= p.pipeline) {
      refuse(key, fmt::format("puts its encoder on the first pipeline stages and its decoder on "
                              "the rest (Megatron-LM's split rank): parallelism.encoder_stages "
                              "must be 1 .. {} (by default the stages that an even split of {} "
                              "encoder and {} decoder layers gives the encoder)",
                              p.pipeline - 1, c.layers, c.decoder_layers));
    }
    if (c.layers % es != 0 || c.decoder_layers % (p.pipeline - es) != 0) {
      refuse(key, fmt::format("puts its encoder on the first {} of {} pipeline stages and its "
                              "decoder on the rest (Megatron-LM's split rank): {} encoder layers "
                              "over {} stages and {} decoder layers over {} do not split evenly",
                              es, p.pipeline, c.layers, es, c.decoder_layers, p.pipeline - es));
    }
  }
  if (p.context > 1) refuse("parallelism.context", "runs without context parallel here");
  if (p.sequence) refuse("parallelism.sequence", "runs without sequence parallel here");
  if (p.tp_comm_overlap) refuse("parallelism.tp_comm_overlap", "runs without TP overlap here");
  if (p.fsdp != FsdpMode::kNone) refuse("parallelism.fsdp", "runs without FSDP here");
  if (p.zero >= 3) refuse("parallelism.zero", "runs with ZeRO 0, 1 or 2 here");
  if (c.moe.experts > 0) refuse("moe", "has dense layers here");
  if (c.mla.enabled()) refuse("mla", "has multi-head attention here");
  if (c.sliding_window > 0) refuse("sliding_window", "attends fully here");
  if (c.attention_sinks) refuse("attention_sinks", "has no attention sinks here");
  if (c.sequences.layout != SequenceLayout::kPadded) {
    refuse("sequences.layout", "runs padded samples here");
  }
  if (c.head.kind != TaskHeadKind::kLanguageModel) {
    refuse("head", "ends in the language-model head on the decoder");
  }
  if (c.recompute == Recompute::kSelective || c.recompute == Recompute::kOp) {
    refuse("recompute", "recomputes none or full layers here");
  }
  if (c.compile) refuse("compile", "runs eager here");
  if (c.cuda_graphs) refuse("cuda_graphs", "runs without CUDA graphs here");
  if (c.autocast) refuse("autocast", "runs without autocast here");
  if (c.dtype == DType::kFp8) refuse("dtype", "runs 16- or 32-bit GEMMs here");
  // The decoder's tokens within check_products' limits, its cross-attention's scores too
  // (decoder queries x encoder keys).
  __extension__ typedef __int128 Wide;
  const Wide tokens = Wide{c.micro_batch} * c.decoder_seq;
  const int64_t widest = std::max({c.hidden, c.ffn, c.vocab});
  if (tokens > kMaxTokensPerMicroBatch ||
      tokens * std::max(c.seq, c.decoder_seq) * std::max(c.heads, c.hidden) > kMaxElements ||
      tokens * widest > kMaxElements) {
    workload.child("decoder").child("seq").fail(fmt::format(
        "micro_batch {} x decoder seq {} tokens are too many to price (above 2^32 tokens, or "
        "2^56 elements of a score or activation tensor)",
        c.micro_batch, c.decoder_seq));
  }
}

/// What torchtitan's async TP runs with (ParallelismConfig::async_tp), each refusal at its key:
/// torchtitan's modules, torch.compile (torchtitan: "Async TP requires torch.compile",
/// torchtitan/models/llama3/infra/parallelize.py), tensor parallel with sequence parallel (its
/// plan shards the norms over the sequence), and no per-op recomputation.
void check_async_tp(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "async tensor parallel (parallelism.async_tp)", what);
  };
  if (c.layer_kernels != LayerKernelSet::kTorchtitan) {
    refuse("layer_kernels",
           "is torchtitan's (Inductor's micro-pipeline TP over its modules): layer_kernels "
           "torchtitan; Megatron-Core's overlap is parallelism.tp_comm_overlap");
  }
  if (!c.compile) refuse("compile", "needs torch.compile, as torchtitan does: compile: true");
  if (c.parallelism.tensor < 2) refuse("parallelism.tensor", "needs tensor parallel > 1");
  if (!c.parallelism.sequence) {
    refuse("parallelism.sequence",
           "fuses the sequence-parallel all-gathers and reduce-scatters: sequence: true");
  }
  if (c.recompute == Recompute::kOp) {
    refuse("recompute",
           "recomputes none or full layers here (which fused ops torchtitan's per-op policy "
           "saves under Inductor's rewrite is not modelled)");
  }
  if (c.dtype == DType::kFp8) {
    refuse("dtype",
           "runs bf16 matmuls here (symmetric memory's fused float8 scaled matmuls are not "
           "modelled)");
  }
}

/// What Megatron-Core's EP all-to-all overlap (moe.a2a_overlap) runs with, each refusal at its
/// key: TransformerConfig.__post_init__ at Megatron-LM d98e8a6 asserts expert parallel > 1, bf16
/// or fp16, no full recomputation and no moe in recompute_modules, and virtual pipeline stages
/// with pipeline parallel (the interleaved 1F1B schedule). CUDA graphs of the whole layer or
/// of the moe and mlp scopes (Megatron refuses those) and encoder-decoder models (Megatron's
/// combined schedule is GPTModel's) are refused too.
void check_a2a_overlap(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "the EP all-to-all overlap (moe.a2a_overlap)", what);
  };
  if (c.parallelism.expert < 2) {
    refuse("moe.a2a_overlap",
           "overlaps the expert-parallel all-to-alls (Megatron-Core asserts "
           "expert_model_parallel_size > 1): needs parallelism.expert > 1");
  }
  if (dtype_bytes(c.activation_dtype()) >= 4) {
    refuse("dtype", "runs bf16 or fp16 models only (Megatron-Core asserts it): bf16, fp16 or fp8");
  }
  if (c.recompute == Recompute::kFull) {
    refuse("recompute",
           "runs without full recomputation (Megatron-Core asserts recompute_granularity != "
           "full): none or selective");
  }
  if (c.recompute == Recompute::kSelective && c.selective_modules().moe) {
    refuse("recompute_modules",
           "runs without the moe module recomputed (Megatron-Core asserts it): take moe out");
  }
  if (c.parallelism.pipeline > 1 && c.parallelism.virtual_stages == 1) {
    refuse("parallelism.pipeline",
           "needs virtual pipeline stages with pipeline parallel (Megatron-Core asserts it): "
           "virtual_stages > 1, or pipeline 1");
  }
  // Megatron-Core's TE graphs beside it (cuda_graph_impl transformer_engine): the attn,
  // moe_router and moe_preprocess scopes, which the pre-dispatch node replays; it refuses
  // graphing the moe and mlp scopes with the overlap, and the whole layer would hold the
  // dispatch and combine that the schedule runs apart.
  if (c.cuda_graphs) {
    const CudaGraphScope& scope = c.cuda_graph_scope;
    if (scope.whole_layer()) {
      refuse("cuda_graphs",
             "graphs each layer's dispatch and combine, which the combined schedule runs as "
             "their own nodes: state cuda_graph_scope [attn, moe_router, moe_preprocess] "
             "(Transformer Engine's partial graphs), or cuda_graphs false");
    }
    if (scope.moe || scope.mlp) {
      refuse("cuda_graph_scope",
             "may not hold moe or mlp beside it (Megatron-Core refuses them with "
             "overlap_moe_expert_parallel_comm): attn, moe_router, moe_preprocess");
    }
  }
  if (c.encoder_decoder()) refuse("decoder", "is GPTModel's schedule: decoder-only models");
  if (c.moe.delay_wgrad && c.parallelism.tp_comm_overlap) {
    refuse_at(workload, "moe.delay_wgrad", "deferred weight gradients (moe.delay_wgrad)",
              "run without Transformer Engine's userbuffers (its Linear raises \"Delayed weight "
              "grad computation is not supported with Userbuffers\"): parallelism.tp_comm_overlap "
              "false");
  }
}

/// What T5's relative attention bias (position relative; relative_bias.h) runs with here, each
/// refusal at its key: the unfused attention whose scores it is added to (FlashAttention takes
/// no additive bias), Megatron-Core's modules, dense layers with multi-head attention, padded
/// samples, one pipeline stage (which stages compute the bias is not modelled), no context
/// parallel, no recomputation of the attention alone.
void check_relative_bias(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "T5's relative attention bias (position relative)", what);
  };
  if (c.attention != AttentionImpl::kUnfused) {
    refuse("attention",
           "is added to the attention's scores, which a fused attention kernel does not take "
           "(FlashAttention has no additive bias): attention unfused");
  }
  if (c.layer_kernels != LayerKernelSet::kFused) {
    refuse("layer_kernels", "runs in Megatron-Core's attention here");
  }
  if (c.parallelism.pipeline > 1) {
    refuse("parallelism.pipeline",
           "runs on one pipeline stage here (which stages compute the bias is not modelled)");
  }
  if (c.parallelism.context > 1) refuse("parallelism.context", "runs without context parallel");
  if (c.moe.experts > 0) refuse("moe", "has dense layers here");
  if (c.mla.enabled()) refuse("mla", "has multi-head attention here");
  if (c.sequences.layout != SequenceLayout::kPadded) {
    refuse("sequences.layout", "runs padded samples here");
  }
  if (c.recompute == Recompute::kSelective || c.recompute == Recompute::kOp) {
    refuse("recompute", "recomputes none or full layers here");
  }
}

/// The `fp8_recipe` of dtype fp8 (after layer_kernels): Transformer Engine's recipes with its
/// modules (default delayed), torchao's with torchtitan's (default tensorwise, torchtitan's
/// when quantize.linear.float8.recipe_name is unset); `fp8_fsdp_all_gather` (torchao
/// tensorwise under FSDP2 only).
void read_fp8_recipe(const ConfigNode& workload, TransformerConfig& c) {
  constexpr std::array<std::string_view, 6> kRecipeNames = {
      "delayed", "current", "block", "tensorwise", "rowwise", "rowwise_with_gw_hp"};
  constexpr std::array<Fp8Recipe, 6> kRecipes = {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent,
                                                 Fp8Recipe::kBlock,   Fp8Recipe::kTensorwise,
                                                 Fp8Recipe::kRowwise, Fp8Recipe::kRowwiseWithGwHp};
  const bool torchao = c.layer_kernels == LayerKernelSet::kTorchtitan;
  c.fp8_recipe = read_enum(workload, "fp8_recipe", kRecipeNames, kRecipes,
                           torchao ? Fp8Recipe::kTensorwise : Fp8Recipe::kDelayed);
  const bool torchao_recipe = c.fp8_recipe == Fp8Recipe::kTensorwise ||
                              c.fp8_recipe == Fp8Recipe::kRowwise ||
                              c.fp8_recipe == Fp8Recipe::kRowwiseWithGwHp;
  if (torchao && !torchao_recipe) {
    workload.child("fp8_recipe")
        .fail(
            "layer_kernels torchtitan trains fp8 with torchao's Float8Linear: tensorwise, "
            "rowwise or rowwise_with_gw_hp (delayed, current and block are Transformer "
            "Engine's)");
  }
  if (!torchao && torchao_recipe) {
    workload.child("fp8_recipe")
        .fail(
            "tensorwise, rowwise and rowwise_with_gw_hp are torchao's recipes, which torchtitan's "
            "modules run (layer_kernels: torchtitan); Transformer Engine's modules take delayed, "
            "current or block");
  }
  c.fp8_fsdp_all_gather = workload.get_bool_or("fp8_fsdp_all_gather", false);
  if (c.fp8_fsdp_all_gather) {
    const ConfigNode key = workload.child("fp8_fsdp_all_gather");
    if (c.fp8_recipe != Fp8Recipe::kTensorwise) {
      key.fail(
          "float8 all-gather under FSDP is torchao's tensorwise recipe's (torchtitan refuses it "
          "with a recipe_name): fp8_recipe tensorwise");
    }
    if (c.parallelism.fsdp == FsdpMode::kNone) {
      key.fail("casts FSDP2's weight all-gathers to float8: it needs parallelism.fsdp");
    }
  }
}

/// What layer_kernels torchtitan models (torchtitan_layer.h, torchtitan_moe.h), each refusal at
/// its key: the Llama model's modules (SwiGLU, RMSNorm, SDPA's fused attention), dense or with
/// its MoE module (without tensor parallel, in bf16), without TP overlap (its async TP is
/// parallelism.async_tp), fp8, autocast, CUDA graphs, an encoder-decoder, and recomputing none,
/// full layers or per op.
void check_torchtitan_layers(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "layer_kernels torchtitan (its Llama model's modules)", what);
  };
  if (c.activation != TransformerActivation::kSwiglu) {
    refuse("activation", "has a SwiGLU MLP (w1, w3, w2): activation swiglu");
  }
  if (c.norm != TransformerNorm::kRmsNorm) {
    refuse("norm", "has RMSNorm: norm rms_norm");
  }
  if (c.attention != AttentionImpl::kFlash) {
    refuse("attention", "runs SDPA's fused attention: flash, flash3 or cudnn");
  }
  if (c.moe.experts > 0 && c.parallelism.tensor > 1) {
    refuse("parallelism.tensor",
           "runs its MoE layers without tensor parallel here (ExpertTensorParallel is not "
           "modelled): tensor 1, with expert parallel over the data ranks");
  }
  if (c.moe.experts > 0 && c.dtype == DType::kFp8) {
    refuse("dtype",
           "runs its MoE layers' grouped GEMMs in bf16 here (float8 grouped GEMMs are "
           "not modelled): bf16");
  }
  if (c.mla.enabled()) refuse("mla", "has multi-head attention here");
  if (c.encoder_decoder()) refuse("decoder", "is decoder-only");
  if (c.parallelism.tp_comm_overlap) {
    refuse("parallelism.tp_comm_overlap", "has no Transformer Engine TP overlap");
  }
  if (c.dtype == DType::kFp8 && !c.compile) {
    refuse("compile",
           "trains fp8 with torchao's Float8Linear, whose casts torch.compile fuses (torchtitan: "
           "\"required for competitive performance\"); eager casts are not modelled: compile: "
           "true");
  }
  if (c.dtype == DType::kFp8 && c.parallelism.tensor > 1 && !c.parallelism.sequence) {
    refuse("parallelism.sequence",
           "shards the sequence under tensor parallel (its TP plan, and torchao's float8 "
           "all-gathers with it): sequence true");
  }
  if (c.autocast) refuse("autocast", "runs without autocast here");
  if (c.cuda_graphs) refuse("cuda_graphs", "runs without CUDA graphs");
  if (c.rms_norm_composite && c.norm != TransformerNorm::kRmsNorm) {
    refuse("rms_norm_kernel", "decomposes nn.RMSNorm only: norm rms_norm");
  }
  if (c.rms_norm_composite && c.compile) {
    refuse("rms_norm_kernel",
           "runs the composite RMSNorm eager only: torch.compile fuses the decomposition into "
           "one kernel each way (compile: false, or rms_norm_kernel: fused)");
  }
  if (c.recompute == Recompute::kSelective) {
    refuse("recompute",
           "recomputes none, full layers or torchtitan's per-op policy (op): selective names "
           "Megatron-Core's modules");
  }
}

/// What the per-head query and key norms (qk_norm) run with here, each refusal at its key:
/// multi-head attention of a decoder-only model, recompute none, selective or full, and the
/// fused RMSNorm kernel.
void check_qk_norm(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "qk_norm (per-head query and key norms)", what);
  };
  if (c.mla.enabled()) refuse("mla", "is for multi-head attention (latent attention has its own)");
  if (c.encoder_decoder()) refuse("decoder", "is modelled for decoder-only models");
  if (c.recompute == Recompute::kOp) {
    refuse("recompute",
           "is not in the per-op checkpointing policy modelled here: none, "
           "selective or full");
  }
  if (c.rms_norm_composite) {
    refuse("rms_norm_kernel", "runs the fused norm kernel here: fused");
  }
}

/// What LoRA fine-tuning (lora.h) runs with here, each refusal at its key: dense layers with
/// multi-head attention and the fused layer kernels of Megatron-Core, the language-model head,
/// no TP overlap (its userbuffers path for the adapters is not modelled), autocast, FSDP or
/// ZeRO-3, torchtitan's per-op recomputation, or an encoder-decoder; a rank that tensor
/// parallel divides (A of a column-parallel target is split over it).
void check_lora(const ConfigNode& workload, const TransformerConfig& c) {
  const auto refuse = [&](std::string_view key, std::string_view what) {
    refuse_at(workload, key, "LoRA fine-tuning (workload.lora)", what);
  };
  const ParallelismConfig& p = c.parallelism;
  if (c.lora.rank % p.tensor != 0) {
    refuse("lora.rank",
           fmt::format("splits a column-parallel target's A over tensor parallel {}: a rank "
                       "of {} is not a multiple of it",
                       p.tensor, c.lora.rank));
  }
  if (c.moe.experts > 0) refuse("moe", "adapts dense layers here");
  if (c.mla.enabled()) refuse("mla", "adapts multi-head attention here");
  if (c.encoder_decoder()) refuse("decoder", "adapts decoder-only models here");
  if (c.layer_kernels != LayerKernelSet::kFused) {
    refuse("layer_kernels", "adapts Megatron-Core's fused modules here");
  }
  if (c.head.kind != TaskHeadKind::kLanguageModel) {
    refuse("head", "ends in the frozen language-model head here");
  }
  if (p.tp_comm_overlap) {
    refuse("parallelism.tp_comm_overlap", "runs without TP overlap here");
  }
  if (p.fsdp != FsdpMode::kNone) refuse("parallelism.fsdp", "runs without FSDP here");
  if (p.zero >= 3) refuse("parallelism.zero", "runs with ZeRO 0, 1 or 2 here");
  if (c.autocast) refuse("autocast", "runs without autocast here");
  if (c.recompute == Recompute::kOp) {
    refuse("recompute", "recomputes none, selective or full layers here");
  }
}

void check_autocast(const ConfigNode& workload, const TransformerConfig& c) {
  const ConfigNode key = workload.child("autocast");
  if (c.dtype != DType::kFp16 && c.dtype != DType::kBf16) {
    key.fail(
        fmt::format("autocast runs the matmuls in fp16 or bf16 over fp32 parameters: "
                    "workload.dtype must be fp16 or bf16, got {}",
                    dtype_name(c.dtype)));
  }
  const char* other = nullptr;
  if (c.compile) other = "compile (Inductor fuses the casts)";
  if (c.parallelism.tp_comm_overlap) other = "parallelism.tp_comm_overlap (Transformer Engine)";
  if (c.recompute == Recompute::kOp) other = "recompute: op (torchtitan's FSDP mixed precision)";
  if (c.moe.experts > 0) other = "moe";
  if (c.mla.enabled()) other = "mla";
  if (other != nullptr) {
    key.fail(
        fmt::format("torch.autocast is modelled for eager dense models only, not with {}", other));
  }
}

}  // namespace

TransformerConfig parse_transformer_config(const ConfigNode& workload, uint32_t gpus) {
  TransformerConfig c;
  workload.get_choice("model", {"transformer"});
  std::array<std::string_view, kPresets.size()> preset_names{};
  for (size_t i = 0; i < kPresets.size(); ++i)
    preset_names[i] = kPresets[i].name;
  c.architecture = workload.get_choice_or("architecture", preset_names, "gpt");
  const ArchitecturePreset& preset = *std::find_if(
      kPresets.begin(), kPresets.end(), [&](const auto& p) { return p.name == c.architecture; });

  c.layers = workload.get_int_in("layers", 1, kMaxLayers);
  c.hidden = workload.get_int_in("hidden", 1, kMaxHidden);
  c.heads = workload.get_int_in("heads", 1, kMaxHeads);
  c.kv_heads = workload.get_int_in_or("kv_heads", 1, kMaxHeads, c.heads);
  if (workload.has("head_dim"))
    c.explicit_head_dim = workload.get_int_in("head_dim", 1, kMaxHidden);
  if (const std::optional<ConfigNode> mla = workload.optional_child("mla")) {
    c.mla = read_latent_attention(*mla);
    if (c.kv_heads != c.heads) {
      workload.child("kv_heads")
          .fail(
              "latent attention up-projects keys and values for every head: kv_heads must equal "
              "heads (or be left out)");
    }
    if (workload.has("head_dim")) {
      workload.child("head_dim")
          .fail(
              "latent attention gives the heads' widths (mla.qk_nope_head_dim, qk_rope_head_dim, "
              "v_head_dim)");
    }
  }
  c.sliding_window = workload.get_int_in_or("sliding_window", 0, kMaxSeq, 0);
  c.full_attention_every = workload.get_int_in_or("full_attention_every", 0, kMaxLayers, 0);
  c.attention_sinks = workload.get_bool_or("attention_sinks", false);
  if (c.full_attention_every > 0 && c.sliding_window == 0) {
    workload.child("full_attention_every")
        .fail("says which layers attend fully among sliding-window ones: needs sliding_window");
  }

  constexpr std::array<std::string_view, 2> kNormNames = {"layernorm", "rms_norm"};
  constexpr std::array<TransformerNorm, 2> kNorms = {TransformerNorm::kLayerNorm,
                                                     TransformerNorm::kRmsNorm};
  constexpr std::array<std::string_view, 4> kActNames = {"gelu", "swiglu", "geglu", "squared_relu"};
  constexpr std::array<TransformerActivation, 4> kActs = {
      TransformerActivation::kGelu, TransformerActivation::kSwiglu, TransformerActivation::kGeglu,
      TransformerActivation::kSquaredRelu};
  constexpr std::array<std::string_view, 5> kPosNames = {"learned", "rotary", "alibi", "none",
                                                         "relative"};
  constexpr std::array<TransformerPosition, 5> kPositions = {
      TransformerPosition::kLearned, TransformerPosition::kRotary, TransformerPosition::kAlibi,
      TransformerPosition::kNone, TransformerPosition::kRelative};
  c.activation = read_enum(workload, "activation", kActNames, kActs, preset.activation);
  c.ffn = workload.get_int_in_or(
      "ffn", 1, kMaxFfn, gated_activation(c.activation) ? llama_ffn(c.hidden) : 4 * c.hidden);
  c.vocab = workload.get_int_in("vocab", 1, kMaxVocab);
  c.seq = workload.get_int_in("seq", 1, kMaxSeq);
  c.micro_batch = workload.get_int_in_or("micro_batch", 1, kMaxMicroBatch, 1);
  if (const std::optional<ConfigNode> sequences = workload.optional_child("sequences")) {
    c.sequences = read_sequence_lengths(*sequences, c.seq);
  }
  c.dtype = read_dtype(workload);
  if (workload.has("fp8_recipe") && c.dtype != DType::kFp8) {
    workload.child("fp8_recipe")
        .fail(fmt::format("applies to dtype fp8 only (the GEMMs here run in {})",
                          dtype_name(c.dtype)));
  }
  if (workload.has("fp8_fsdp_all_gather") && c.dtype != DType::kFp8) {
    workload.child("fp8_fsdp_all_gather")
        .fail(fmt::format("applies to dtype fp8 only (the GEMMs here run in {})",
                          dtype_name(c.dtype)));
  }
  if (const std::optional<ConfigNode> decoder = workload.optional_child("decoder")) {
    c.decoder_layers = decoder->get_int_in("layers", 1, kMaxLayers);
    c.decoder_seq = decoder->get_int_in("seq", 1, kMaxSeq);
  }
  c.causal = workload.get_bool_or("causal", c.encoder_decoder() ? false : preset.causal);
  c.norm = read_enum(workload, "norm", kNormNames, kNorms, preset.norm);
  c.position = read_enum(workload, "position", kPosNames, kPositions, preset.position);
  constexpr std::array<std::string_view, 7> kAttnNames = {"flash",  "flash2", "flash3", "cudnn",
                                                          "flash1", "triton", "unfused"};
  constexpr std::array<int, 7> kAttns = {0, 0, 1, 2, 3, 4, -1};  // AttentionKernel, -1: unfused
  const int attention = read_enum(workload, "attention", kAttnNames, kAttns, 0);
  c.attention = attention < 0 ? AttentionImpl::kUnfused : AttentionImpl::kFlash;
  if (attention >= 0) c.attention_kernel = static_cast<AttentionKernel>(attention);
  c.bias = workload.get_bool_or("bias", preset.bias);
  c.tied_embeddings = workload.get_bool_or("tied_embeddings", preset.tied_embeddings);
  c.dropout = read_fraction(workload, "dropout", preset.dropout, 1.0, "a probability");
  c.head = read_task_head(workload, c.seq);
  c.mtp_layers = workload.get_int_in_or("mtp_layers", 0, kMaxMtpLayers, 0);

  constexpr std::array<std::string_view, 2> kLayerKernelNames = {"fused", "torchtitan"};
  constexpr std::array<LayerKernelSet, 2> kLayerKernelSets = {LayerKernelSet::kFused,
                                                              LayerKernelSet::kTorchtitan};
  c.layer_kernels = read_enum(workload, "layer_kernels", kLayerKernelNames, kLayerKernelSets,
                              LayerKernelSet::kFused);
  c.qk_norm = workload.get_bool_or("qk_norm", false);
  constexpr std::array<std::string_view, 2> kRmsNormKernelNames = {"fused", "composite"};
  constexpr std::array<bool, 2> kRmsNormComposite = {false, true};
  c.rms_norm_composite =
      read_enum(workload, "rms_norm_kernel", kRmsNormKernelNames, kRmsNormComposite, false);
  if (c.rms_norm_composite && c.layer_kernels != LayerKernelSet::kTorchtitan) {
    workload.child("rms_norm_kernel")
        .fail(
            "composite is eager PyTorch's nn.RMSNorm (layer_kernels torchtitan); Transformer "
            "Engine's RMSNorm is one fused kernel: fused");
  }
  const std::optional<ConfigNode> moe_node = workload.optional_child("moe");
  if (moe_node) c.moe = read_moe(*moe_node, c.ffn, c.layers, c.layer_kernels);

  const std::optional<ConfigNode> par_node = workload.optional_child("parallelism");
  c.parallelism = read_parallelism(par_node, gpus, c.layer_kernels != LayerKernelSet::kTorchtitan);

  // Default: one micro-batch per pipeline stage per data-parallel rank (the fewest that fill
  // the pipeline).
  c.global_batch = workload.get_int_in_or(
      "global_batch", 1, kMaxGlobalBatch,
      std::min(kMaxGlobalBatch, c.micro_batch * c.parallelism.data * c.parallelism.pipeline));

  constexpr std::array<std::string_view, 4> kRecomputeNames = {"none", "selective", "full", "op"};
  constexpr std::array<Recompute, 4> kRecomputes = {Recompute::kNone, Recompute::kSelective,
                                                    Recompute::kFull, Recompute::kOp};
  c.recompute = read_enum(workload, "recompute", kRecomputeNames, kRecomputes, Recompute::kNone);
  if (c.recompute == Recompute::kOp &&
      (c.attention == AttentionImpl::kUnfused || c.moe.experts > 0)) {
    // torchtitan's policy saves scaled-dot-product attention's outputs and counts aten.mm; the
    // unfused bmm / softmax path and MoE's grouped GEMMs and router are outside what is
    // modelled here.
    workload.child("recompute")
        .fail(
            "op (per-op selective checkpointing) is modelled for fused attention and dense layers "
            "only");
  }
  {
    RecomputeModulesScope scope;
    scope.has_moe_layers = c.moe.experts > 0;
    scope.has_dense_layers = c.moe.experts == 0 || c.moe.first_dense > 0 || c.moe.every > 1;
    scope.has_shared_experts = c.moe.experts > 0 && c.moe.shared_experts > 0;
    scope.latent_attention = c.mla.enabled();
    c.recompute_modules =
        read_recompute_modules(workload, c.recompute == Recompute::kSelective, scope);
  }
  if (c.moe.shared_expert_overlap && c.selective_modules().shared_experts) {
    workload.child("moe")
        .child("shared_expert_overlap")
        .fail(
            "Megatron-Core refuses it with the shared experts recomputed (\"shared_experts "
            "recompute cannot work with --moe-shared-expert-overlap\"): take shared_experts out "
            "of recompute_modules, or false");
  }
  if (workload.has("recompute_layers")) {
    c.recompute_layers = workload.get_int_in("recompute_layers", 1, kMaxLayers);
    if (c.recompute != Recompute::kFull) {
      workload.child("recompute_layers")
          .fail("counts fully recomputed layers: needs `recompute: full`");
    }
  }
  constexpr std::array<std::string_view, 4> kOptNames = {"adam", "adamw", "sgd", "lamb"};
  constexpr std::array<TransformerOptimizer, 4> kOpts = {
      TransformerOptimizer::kAdam, TransformerOptimizer::kAdamW, TransformerOptimizer::kSgd,
      TransformerOptimizer::kLamb};
  c.optimizer = read_enum(workload, "optimizer", kOptNames, kOpts, TransformerOptimizer::kAdam);
  constexpr std::array<std::string_view, 2> kImplNames = {"fused", "foreach"};
  constexpr std::array<OptimizerImpl, 2> kImpls = {OptimizerImpl::kFused, OptimizerImpl::kForeach};
  c.optimizer_impl =
      read_enum(workload, "optimizer_impl", kImplNames, kImpls, OptimizerImpl::kFused);
  if (c.optimizer == TransformerOptimizer::kLamb && c.optimizer_impl != OptimizerImpl::kFused) {
    // torch.optim has no LAMB; Apex's FusedLAMB is the implementation NVIDIA's BERT runs.
    workload.child("optimizer_impl")
        .fail("lamb runs as Apex's FusedLAMB only: optimizer_impl must be fused");
  }
  const bool low_precision = dtype_bytes(c.activation_dtype()) < 4;
  c.autocast = workload.get_bool_or("autocast", false);
  // Under autocast F.cross_entropy runs in fp32 (log_softmax is on its fp32 list): the eager
  // loss, unless the scenario names its loss.
  if (c.autocast && !workload.has("loss") && c.has_output_layer()) c.head.eager_loss = true;
  // Under autocast the fp32 parameters are the optimizer's: no master copy.
  c.master_weights = workload.get_bool_or("master_weights", low_precision && !c.autocast);
  if (c.autocast && c.master_weights) {
    workload.child("master_weights")
        .fail(
            "autocast trains fp32 parameters, which the optimizer steps directly: no master copy "
            "(leave master_weights out or false)");
  }
  c.mirror_data_parallel = workload.get_bool_or("mirror_data_parallel", true);
  c.compile = workload.get_bool_or("compile", false);
  if (const std::optional<ConfigNode> lora = workload.optional_child("lora")) {
    c.lora = read_lora(*lora);
  }
  if (c.dtype == DType::kFp8) read_fp8_recipe(workload, c);
  c.cuda_graphs = workload.get_bool_or("cuda_graphs", false);
  {
    const bool has_moe = c.moe.experts > 0;
    const bool has_dense = !has_moe || c.moe.first_dense > 0 || c.moe.every > 1;
    c.cuda_graph_scope = read_cuda_graph_scope(workload, c.cuda_graphs, has_dense, has_moe);
  }
  if (c.cuda_graphs && c.moe.experts > 0 && !c.moe.pad_to_capacity &&
      c.cuda_graph_scope.captures_whole_moe()) {
    workload.child(c.cuda_graph_scope.whole_layer() ? "cuda_graphs" : "cuda_graph_scope")
        .fail(
            "a Megatron-Core MoE layer copies its token counts to the host and waits for them "
            "inside the layer (dropless, dropping to moe.capacity_factor, and with every "
            "moe.dispatcher), which a CUDA graph capture cannot; Megatron-Core graphs MoE layers "
            "whose inputs are padded to the capacity (moe.pad_to_capacity true), or the part "
            "before the dispatch (cuda_graph_scope: [attn, moe_router, moe_preprocess])");
  }
  if (c.cuda_graph_scope.moe_preprocess && c.moe.dispatcher == MoeDispatcher::kAllToAll &&
      c.moe.capacity_factor > 0.0 && !c.moe.pad_to_capacity) {
    workload.child("cuda_graph_scope")
        .fail(
            "moe_preprocess graphs the first permutation, which dropping to moe.capacity_factor "
            "needs the token counts on the host for (Megatron-Core's cuda_sync_point "
            "before_permutation_1 before its cuda_dtoh_point): capacity_factor 0, "
            "pad_to_capacity, or no moe_preprocess");
  }
  if (!c.cuda_graph_scope.whole_layer() && c.recompute == Recompute::kFull) {
    workload.child("cuda_graph_scope")
        .fail(
            "Transformer Engine's per-module graphs do not take full recomputation "
            "(Megatron-Bridge: only full-iteration graphs do): recompute none or selective, or "
            "no cuda_graph_scope");
  }
  if (c.autocast) check_autocast(workload, c);
  constexpr std::array<std::string_view, 2> kAllocNames = {"caching", "expandable_segments"};
  constexpr std::array<CudaAllocator, 2> kAllocs = {CudaAllocator::kCaching,
                                                    CudaAllocator::kExpandableSegments};
  c.allocator = read_enum(workload, "allocator", kAllocNames, kAllocs, CudaAllocator::kCaching);
  if (workload.has("grad_reduce_dtype")) {
    constexpr std::array<std::string_view, 3> kGradNames = {"fp32", "bf16", "fp16"};
    constexpr std::array<DType, 3> kGradTypes = {DType::kFp32, DType::kBf16, DType::kFp16};
    c.grad_reduce_dtype =
        read_enum(workload, "grad_reduce_dtype", kGradNames, kGradTypes, DType::kFp32);
  }

  // 0 is the default every resolved scenario writes (the even split's); any other split needs
  // an encoder-decoder model over stages.
  const bool encoder_stages_stated = c.parallelism.encoder_stages > 0;
  if (encoder_stages_stated && (!c.encoder_decoder() || c.parallelism.pipeline == 1)) {
    par_node->child("encoder_stages")
        .fail(
            "splits an encoder-decoder model (workload.decoder) over pipeline stages: it needs "
            "one and parallelism.pipeline > 1");
  }
  if (c.encoder_decoder() && c.parallelism.pipeline > 1 && c.parallelism.encoder_stages == 0) {
    // Default: the stages an even split of all the layers gives the encoder.
    const int64_t per_stage = (c.layers + c.decoder_layers) / c.parallelism.pipeline;
    if (per_stage > 0 && c.layers % per_stage == 0) {
      c.parallelism.encoder_stages = c.layers / per_stage;
    }
  }
  apply_pipeline_split(workload, c);
  validate(workload, par_node, moe_node, c);
  if (c.encoder_decoder()) check_encoder_decoder(workload, c, encoder_stages_stated);
  if (c.moe.a2a_overlap) check_a2a_overlap(workload, c);
  if (c.layer_kernels == LayerKernelSet::kTorchtitan) check_torchtitan_layers(workload, c);
  if (c.position == TransformerPosition::kRelative) check_relative_bias(workload, c);
  if (c.parallelism.async_tp) check_async_tp(workload, c);
  if (c.lora.enabled()) check_lora(workload, c);
  if (c.qk_norm) check_qk_norm(workload, c);
  if (c.mtp_layers > 0) check_mtp(workload, c);
  return c;
}

namespace {

int64_t mlp_parameters(const TransformerConfig& c, int64_t ffn) {
  // gelu: fc1 h x ffn, fc2 ffn x h; swiglu, geglu: gate and up h x ffn each, down ffn x h.
  const int64_t in_projections = gated_activation(c.activation) ? 2 : 1;
  int64_t params = (in_projections + 1) * c.hidden * ffn;
  if (c.bias) params += in_projections * ffn + c.hidden;
  return params;
}

}  // namespace

int64_t transformer_norm_parameters(const TransformerConfig& c) {
  // LayerNorm: gain and bias (MPT's no_bias LayerNorm: gain only); RMSNorm: gain only.
  return c.norm == TransformerNorm::kLayerNorm && c.bias ? 2 * c.hidden : c.hidden;
}

int64_t transformer_parameters(const TransformerConfig& c) {
  const int64_t h = c.hidden;
  const int64_t q_width = c.heads * c.head_dim();
  const int64_t kv_width = c.kv_heads * c.head_dim();
  // Attention: fused QKV projection h x (q_width + 2 kv_width), output projection q_width x h;
  // or the latent attention's projections and norms (no biases).
  int64_t attention = h * (q_width + 2 * kv_width) + q_width * h;
  if (c.bias) attention += (q_width + 2 * kv_width) + h;
  if (c.mla.enabled()) attention = latent_attention_parameters(c.mla, h, c.heads, 1);
  if (c.attention_sinks) attention += c.heads;  // one sink logit per head
  if (c.qk_norm) attention += 2 * transformer_norm_parameters(c) / h * c.head_dim();
  const int64_t norms = 2 * transformer_norm_parameters(c);
  const int64_t dense_mlp = mlp_parameters(c, c.ffn);
  int64_t moe_mlp = 0;
  if (c.moe.experts > 0) {
    // Router h x experts (no bias, Megatron's TopKRouter), routed and shared experts.
    moe_mlp = h * c.moe.experts +
              (c.moe.experts + c.moe.shared_experts) * mlp_parameters(c, c.moe.expert_ffn);
  }
  int64_t total = 0;
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    total += attention + norms + (c.is_moe_layer(layer) ? moe_mlp : dense_mlp);
  }
  // Word embedding as allocated (padded vocabulary), learned positions, final norm, and the
  // output layer when not tied (Megatron's output layer has no bias; a classifier has none).
  // BERT's pooler and masked-LM head transform are counted by task_head_parameters.
  total += c.padded_vocab() * h + transformer_norm_parameters(c);
  if (c.position == TransformerPosition::kLearned) total += c.seq * h;
  // T5's relative attention bias: one table per stack (relative_bias.h).
  const int64_t stacks = c.encoder_decoder() ? 2 : 1;
  if (c.position == TransformerPosition::kRelative) {
    total += stacks * kRelativeBiasBuckets * c.heads;
  }
  if (c.encoder_decoder()) {
    // The decoder's layers, each with a cross-attention block, the encoder's final norm and
    // the decoder's own learned positions; the word embedding is shared (encoder_decoder.h).
    total += c.decoder_layers *
                 (attention + norms + dense_mlp + cross_attention_parameters(c, /*tensor=*/1)) +
             transformer_norm_parameters(c);
    if (c.position == TransformerPosition::kLearned) total += c.seq * h;
  }
  if (!c.tied_embeddings && c.has_output_layer()) total += c.padded_vocab() * h;
  // Multi-token prediction (mtp_emitter.cpp): a layer of the last layer's kind, its enorm,
  // hnorm and final norm, and the 2h x h projection; the embedding and output layer shared.
  if (c.mtp_layers > 0) {
    const int64_t mlp = c.is_moe_layer(c.layers - 1) ? moe_mlp : dense_mlp;
    total +=
        c.mtp_layers * (attention + norms + mlp + 3 * transformer_norm_parameters(c) + 2 * h * h);
  }
  // LoRA's adapters (lora.h), beside the frozen base.
  if (c.lora.enabled()) total += c.layers * lora_layer_parameters(c, 1);
  return total + task_head_parameters(c);
}

std::vector<int64_t> task_head_tensors(const TransformerConfig& c, int64_t tensor) {
  const int64_t h = c.hidden;
  switch (c.head.kind) {
    case TaskHeadKind::kLanguageModel:
      return {};
    case TaskHeadKind::kMaskedLm:
      return {h * h, h, h, h, c.padded_vocab() / tensor, h * h, h, 2 * h, 2};
    case TaskHeadKind::kClassification:
      return {h * h, h, h * c.head.labels, c.head.labels};
  }
  return {};
}

int64_t task_head_parameters(const TransformerConfig& c) {
  const std::vector<int64_t> tensors = task_head_tensors(c, 1);
  return std::accumulate(tensors.begin(), tensors.end(), int64_t{0});
}

std::optional<std::string> attention_kernel_unsupported(AttentionKernel kernel,
                                                        int32_t compute_capability) {
  if (compute_capability == 0) return std::nullopt;
  const std::string cc = fmt::format("{}.{}", compute_capability / 10, compute_capability % 10);
  if (kernel == AttentionKernel::kFlash3 && compute_capability != 90) {
    return fmt::format(
        "FlashAttention-3 (flash3) is built for compute capability 9.0 (Hopper) only, the GPU "
        "has {}: use flash2 or cudnn",
        cc);
  }
  if (kernel == AttentionKernel::kFlash1) {
    if (compute_capability >= 75) return std::nullopt;
    return fmt::format(
        "FlashAttention v1 (flash1) needs compute capability 7.5 (Turing) or later, the GPU has "
        "{}: use unfused",
        cc);
  }
  if (compute_capability < 80) {
    const char* what = kernel == AttentionKernel::kCudnn    ? "cuDNN fused attention (cudnn)"
                       : kernel == AttentionKernel::kTriton ? "Triton FlashAttention (triton)"
                                                            : "FlashAttention-2 (flash, flash2)";
    return fmt::format(
        "{} needs compute capability 8.0 (Ampere) or later, the GPU has {}: use "
        "unfused",
        what, cc);
  }
  return std::nullopt;
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> transformer_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"architecture",
       "model family whose defaults the other keys start from: gpt, llama, bert, mpt"},
      {"layers", "transformer blocks"},
      {"hidden", "model width (hidden size)"},
      {"heads", "attention (query) heads"},
      {"kv_heads", "key/value heads (grouped-query attention); default: heads"},
      {"ffn", "MLP inner width"},
      {"vocab", "vocabulary size (padded as Megatron pads it)"},
      {"seq", "sequence length in tokens"},
      {"micro_batch", "sequences per micro-batch per data-parallel rank"},
      {"global_batch", "sequences per iteration over all data-parallel ranks"},
      {"dtype", "element type of the GEMMs and activations (fp8: GEMMs in fp8, the rest bf16)"},
      {"norm", "layernorm or rms_norm"},
      {"activation", "MLP activation: gelu, swiglu, geglu or squared_relu"},
      {"position", "position encoding: learned, rotary, alibi, none or relative (T5's bias)"},
      {"bias", "linear layers carry biases"},
      {"tied_embeddings", "the output layer shares the input embedding's weights"},
      {"dropout", "dropout probability; > 0 adds dropout kernels"},
      {"causal", "decoder (causal) or encoder attention mask"},
      {"decoder.layers", "encoder-decoder model: decoder layers after the `layers` encoder ones"},
      {"decoder.seq", "encoder-decoder model: decoder (target) tokens per sample"},
      {"attention",
       "attention kernel: flash2, flash3, cudnn, flash1 or triton (fused; flash = flash2) or "
       "unfused"},
      {"sliding_window", "keys each query attends to at most; 0: full attention"},
      {"full_attention_every", "with sliding_window: every k-th layer attends fully; 0: none"},
      {"attention_sinks", "a learned logit per head in every softmax's denominator (GPT-OSS)"},
      {"recompute", "activation recomputation: none, selective, full or op (torchtitan's)"},
      {"head", "task head: lm, mlm (BERT pretraining) or classification"},
      {"labels", "classification head: classes"},
      {"loss", "vocabulary cross-entropy: Megatron's fused kernel or eager F.cross_entropy"},
      {"optimizer", "adam, adamw, sgd or lamb"},
      {"optimizer_impl", "optimizer kernels: fused or foreach"},
      {"master_weights", "an fp32 master copy of the weights for fp16 / bf16 / fp8 training"},
      {"autocast", "torch.autocast over an fp32 model (fp32 weights, matmuls in dtype)"},
      {"allocator", "PyTorch's CUDA caching allocator: caching or expandable_segments"},
      {"compile", "torch.compile per block: memory-bound chains fused into one kernel each"},
      {"lora.rank", "LoRA fine-tuning: the adapters' rank (the base model frozen)"},
      {"lora.targets[]", "LoRA fine-tuning: a linear adapted (Megatron-Core's names)"},
      {"layer_kernels",
       "the kernels a layer's modules launch: fused (Megatron-Core, TE) or torchtitan (eager "
       "PyTorch modules)"},
      {"cuda_graphs", "each layer's forward and backward replayed as captured CUDA graphs"},
      {"cuda_graph_scope[]",
       "what each layer's CUDA graphs capture: attn, mlp, moe, moe_router, moe_preprocess "
       "(Megatron-Core's cuda_graph_modules with Transformer Engine graphs); default: the "
       "whole layer"},
      {"mirror_data_parallel", "simulate one data-parallel replica and mirror the others"},
      {"moe.experts", "routed experts per MoE layer"},
      {"moe.top_k", "experts each token is routed to"},
      {"moe.capacity_factor", "most tokens per expert, in units of its mean share; 0: dropless"},
      {"qk_norm", "a norm over each query and key head after the QKV projections"},
      {"rms_norm_kernel",
       "nn.RMSNorm eager: fused (PyTorch 2.9 on) or composite (PyTorch 2.8 and before)"},
      {"moe.score_before_experts",
       "the routing scores scale the experts' inputs (torchtitan) rather than their outputs"},
      {"moe.imbalance",
       "the busiest expert-parallel rank's extra load over the mean (0: balanced)"},
      {"moe.every", "every k-th layer's MLP is a mixture of experts"},
      {"moe.shared_experts", "always-on experts per MoE layer (DeepSeek-style)"},
      {"moe.expert_ffn", "an expert's MLP inner width; default: ffn"},
      {"moe.pad_to_capacity",
       "every expert's input padded to its capacity (Megatron-Core's "
       "moe_pad_expert_input_to_capacity): fixed sizes, no host sync on the token counts"},
      {"moe.dispatcher",
       "Megatron-Core's token dispatcher: alltoall (tokens to their experts' ranks), allgather "
       "(every rank gathers the expert-parallel group's tokens) or flex (DeepEP: each token once "
       "per rank, across nodes once per node)"},
      {"moe.flex_sms",
       "SMs the flex dispatcher's kernels take (moe_flex_dispatcher_num_sms); default: DeepEP "
       "20 (even), HybridEP 24 within a node, 8 across nodes"},
      {"moe.flex_backend",
       "the flex dispatcher's library: deepep (DeepEP's normal kernels) or hybridep (HybridEP)"},
      {"moe.first_dense", "the first N layers stay dense"},
      {"moe.a2a_overlap",
       "one micro-batch's forward beside another's backward, layer by layer, the dispatch and "
       "combine beside the other's compute (Megatron-Core's overlap_moe_expert_parallel_comm)"},
      {"moe.delay_wgrad",
       "under a2a_overlap, weight gradients deferred past the next communication node (Megatron-"
       "Core's delay_wgrad_compute): the experts' past the dispatch's backward"},
      {"moe.shared_expert_overlap",
       "the shared experts on a side stream beside the dispatcher's communication (Megatron-Core's "
       "moe_shared_expert_overlap)"},
      {"parallelism.tensor", "tensor-parallel degree (Megatron column / row split in a layer)"},
      {"parallelism.sequence", "sequence parallel: norms and dropout split over tensor ranks"},
      {"parallelism.pipeline", "pipeline-parallel stages"},
      {"parallelism.virtual_stages", "model chunks per pipeline rank (interleaved 1F1B when > 1)"},
      {"mtp_layers",
       "multi-token prediction layers on the last model chunk (Megatron-Core's mtp_num_layers; "
       "DeepSeek-V3: 1): each an embedding, two norms, a 2 hidden -> hidden projection, a "
       "layer of the last layer's kind, a norm and its own output layer and loss"},
      {"parallelism.pipeline_layout",
       "Megatron-Core's --pipeline-model-parallel-layout: stages split by '|' of E (embedding), t "
       "(decoder layer), m (MTP layer, in the last stage), L (loss), x*n and (...)*n repeat; "
       "stage i is rank i mod pipeline"},
      {"parallelism.account_for_embedding",
       "the embedding counts as one layer of the even split; the first chunk holds one decoder "
       "layer fewer (Megatron-Core's --account-for-embedding-in-pipeline-split)"},
      {"parallelism.account_for_loss",
       "the loss counts as one layer of the even split; the last chunk holds one decoder layer "
       "fewer (Megatron-Core's --account-for-loss-in-pipeline-split)"},
      {"parallelism.first_stage_layers",
       "decoder layers on the first pipeline rank; the others split the rest (Megatron-Core's "
       "--decoder-first-pipeline-num-layers)"},
      {"parallelism.last_stage_layers",
       "decoder layers on the last pipeline rank; the others split the rest (Megatron-Core's "
       "--decoder-last-pipeline-num-layers)"},
      {"parallelism.encoder_stages",
       "encoder-decoder over pipeline stages: the first this many hold the encoder (Megatron's "
       "split rank); 0: those an even split of all layers gives it"},
      {"parallelism.schedule", "pipeline schedule: gpipe or 1f1b"},
      {"parallelism.data", "data-parallel degree; default: what the GPUs leave"},
      {"parallelism.context", "context-parallel degree (the sequence split over ranks)"},
      {"parallelism.context_comm",
       "context-parallel exchange: p2p (ring), all_gather or a2a (Ulysses)"},
      {"parallelism.expert", "expert-parallel degree, carved out of data x context"},
      {"parallelism.expert_tensor",
       "the routed experts' tensor parallel (Megatron-Core's expert_tensor_parallel_size): "
       "tensor (default) or 1, each expert whole and the tensor ranks expert-parallel too"},
      {"parallelism.zero", "ZeRO stage 0 .. 3 (DeepSpeed / Megatron distributed optimizer)"},
      {"parallelism.fsdp", "PyTorch FSDP: none, full_shard or shard_grad_op"},
      {"parallelism.shard_group",
       "HSDP: shard over groups of this many data-parallel ranks; 0: all"},
      {"parallelism.gradient_sync",
       "FSDP / ZeRO 3 under gradient accumulation: reduce every micro-batch or the last"},
      {"parallelism.order", "rank order of the parallel dimensions, innermost first"},
      {"parallelism.ddp_bucket", "gradient bucket size for DDP / ZeRO reduction"},
      {"parallelism.overlap_grad_reduce", "gradient buckets reduced during the last backward"},
      {"parallelism.overlap_param_gather",
       "ZeRO 1 / 2: updated parameters gathered during the next forward"},
      {"parallelism.p2p_scatter_gather",
       "pipeline sends split over tensor ranks, gathered on arrival"},
      {"parallelism.p2p_synchronous",
       "Megatron's batched pipeline exchanges, each ended by torch.cuda.synchronize(); default: "
       "1F1B without interleaving"},
      {"parallelism.align_param_gather",
       "interleaved schedule: each model chunk's parameter all-gathers dispatched by the "
       "schedule"},
      {"parallelism.tp_comm_overlap",
       "Megatron-Core's --tp-comm-overlap: TP collectives overlapped with the GEMMs"},
      {"parallelism.async_tp",
       "torchtitan's async TP: all-gather and reduce-scatter fused with the matmuls in chunks"},
      {"head_dim", "one attention head's width; default: hidden / heads"},
      {"mla.q_lora_rank",
       "latent attention: query compression rank; 0: queries projected directly"},
      {"mla.kv_lora_rank", "latent attention: key/value compression rank"},
      {"mla.qk_nope_head_dim", "latent attention: per-head query/key width without rotary"},
      {"mla.qk_rope_head_dim", "latent attention: per-head query/key width with rotary"},
      {"mla.v_head_dim", "latent attention: per-head value width"},
      {"sequences.layout", "how a micro-batch holds the samples: padded, unpadded or packed"},
      {"sequences.mean_length", "the samples' mean length in tokens; default: seq"},
      {"sequences.length_std", "standard deviation of the samples' lengths in tokens"},
      {"predictions", "mlm head: predicted positions per sample; default: 15% of seq"},
      {"fp8_recipe",
       "dtype fp8: the scaling recipe: Transformer Engine's delayed, current or block; with "
       "layer_kernels torchtitan, torchao's tensorwise, rowwise or rowwise_with_gw_hp"},
      {"fp8_fsdp_all_gather",
       "torchao tensorwise under FSDP2: weights cast to float8 before FSDP's all-gather, scales "
       "precomputed after the optimizer step"},
      {"recompute_modules[]", "selective recompute: Megatron-Core's --recompute-modules"},
      {"recompute_layers", "full recompute: the first N layers of each model chunk recompute"},
      {"grad_reduce_dtype", "element type of gradients accumulated and reduced over data parallel"},
  };
  return kMeanings;
}

}  // namespace upsim
