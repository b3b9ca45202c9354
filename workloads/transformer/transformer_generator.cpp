#include "workloads/transformer/transformer_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "workloads/pytorch/ddp_buckets.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/pipeline_exchanges.h"
#include "workloads/transformer/transformer_emitter.h"

namespace upsim {

namespace transformer_emit {

TransformerEmitter::TransformerEmitter(const TransformerConfig& c, const TransformerGraphInputs& in,
                                       TaskGraph& g)
    : config_(c),
      inputs_(in),
      graph_(g),
      layout_(c.parallelism),
      sizes_(layer_sizes(c)),
      layer_kernels_(add_layer_kernels(c, sizes_, g)),
      act_dt_(c.activation_dtype()),
      act_elem_bytes_(dtype_bytes(act_dt_)),
      micro_batches_(c.micro_batches()),
      chunks_(c.parallelism.virtual_stages),
      mirror_(c.mirror_data_parallel && c.parallelism.data > 1),
      groups_(g, [this](int64_t rank) { return !mirror_ || layout_.coords(rank).dp == 0; }),
      params_(config_, sizes_),
      ops_(graph_, groups_, threads_),
      layers_(config_, sizes_, layer_kernels_, ops_),
      decoder_config_(c.encoder_decoder() ? decoder_stack_config(c) : c),
      decoder_sizes_(c.encoder_decoder() ? layer_sizes(decoder_config_) : sizes_),
      decoder_kernels_(c.encoder_decoder() ? add_layer_kernels(decoder_config_, decoder_sizes_, g)
                                           : LayerKernels{}),
      cross_kernels_(c.encoder_decoder()
                         ? add_cross_attention_kernels(decoder_config_, decoder_sizes_, c.seq, g)
                         : CrossAttentionKernels{}),
      decoder_layers_(decoder_config_, decoder_sizes_, decoder_kernels_, ops_),
      p2p_(config_, sizes_, groups_, ops_) {
  GradSyncRank sync{graph_, threads_, groups_, grad_buffers_, act_elem_bytes_, grad_bytes()};
  if (config_.fp8_fsdp_all_gather) {
    sync.layer_param_elem_bytes = 1;
    sync.layer_gather_cast = layer_kernels_.float8.fsdp_shard_cast;
  }
  grad_sync_ = make_gradient_sync(config_.parallelism, sync);
}

TransformerGraph TransformerEmitter::run() {
  TransformerGraph out;
  out.gpus = layout_.gpus();
  out.micro_batches = micro_batches_;
  for (int64_t g = 0; g < layout_.gpus(); ++g) {
    if (mirror_ && layout_.coords(g).dp != 0) continue;
    out.simulated.push_back(g);
  }
  std::vector<RankId> graph_rank;
  for (int64_t g : out.simulated) {
    RankInfo info;
    info.name = fmt::format("rank {} (stage {})", g, layout_.coords(g).pp);
    info.cpu_threads = 1;
    info.stream_names = {"compute",     "dp comm",     "tp comm",    "pp recv fwd",
                         "pp send fwd", "pp recv bwd", "pp send bwd"};
    if (config_.moe.shared_expert_overlap) info.stream_names.emplace_back("moe shared experts");
    if (config_.moe.a2a_overlap) {
      info.stream_names.emplace_back("moe ep comm");
      info.stream_names.emplace_back("moe dtoh");
    }
    info.device = static_cast<uint32_t>(g);
    graph_rank.push_back(graph_.add_rank(std::move(info)));
  }
  for (size_t i = 0; i < out.simulated.size(); ++i) {
    begin_rank(out.simulated[i], graph_rank[i]);
    for (uint32_t it = 0; it < inputs_.iterations; ++it)
      iteration(it);
    // Ranks differ little in size (the first and last stages hold embedding and head): the
    // first one's tasks times the ranks estimate the graph; room for it and an eighth more, so
    // that a graph of millions of tasks is not copied as it grows (untouched room costs no
    // memory).
    if (i == 0) {
      const size_t estimate = graph_.task_count() * out.simulated.size();
      graph_.expect_tasks(estimate);
      graph_.reserve_tasks(estimate * 9 / 8);
    }
  }
  out.collectives = graph_.collective_count();
  p2p_.check_order();
  return out;
}

void TransformerEmitter::begin_rank(int64_t global, RankId graph_rank) {
  rank_ = global;
  threads_ = RankThreads{graph_rank, kCpuThread, kCompute, kDpComm};
  coords_ = layout_.coords(global);
  const ParallelismConfig& p = config_.parallelism;
  groups_.begin_rank();
  LayerGroups layer_groups;
  layer_groups.tensor =
      groups_.group(ParallelDim::kTensor, layout_.group(ParallelDim::kTensor, global));
  layer_groups.context =
      groups_.group(ParallelDim::kContext, layout_.group(ParallelDim::kContext, global));
  layer_groups.context_index = coords_.cp;
  const std::vector<int64_t> replica = layout_.replica_group(global);
  const auto shard = static_cast<size_t>(p.shard_ranks());
  if (shard < replica.size()) {
    // HSDP: consecutive groups of `shard` data-parallel ranks shard; the ranks at the same
    // place in every group replicate.
    const auto at =
        static_cast<size_t>(std::find(replica.begin(), replica.end(), global) - replica.begin());
    const std::vector<int64_t> sharded(
        replica.begin() + static_cast<std::ptrdiff_t>(at / shard * shard),
        replica.begin() + static_cast<std::ptrdiff_t>(at / shard * shard + shard));
    std::vector<int64_t> replicated;
    for (size_t i = at % shard; i < replica.size(); i += shard)
      replicated.push_back(replica[i]);
    dp_pg_ = groups_.group(ParallelDim::kData, sharded, "shard");
    grad_buffers_[kDenseBuffer].replicate_pg =
        groups_.group(ParallelDim::kData, replicated, "replicate");
    grad_buffers_[kDenseBuffer].shard_replicas = static_cast<int64_t>(replicated.size());
  } else {
    dp_pg_ = groups_.group(ParallelDim::kData, replica);
  }
  grad_buffers_[kDenseBuffer].pg = dp_pg_;
  grad_buffers_[kDenseBuffer].replicas = static_cast<int64_t>(std::min(shard, replica.size()));
  // Without expert parallel the experts are dense parameters (ModelParameters::layer): no expert
  // buffer.
  grad_buffers_[kExpertBuffer].replicas = p.expert > 1 ? p.expert_data() : 1;
  if (p.expert > 1) {
    grad_buffers_[kExpertBuffer].pg =
        groups_.group(ParallelDim::kData, layout_.expert_replica_group(global), "expert");
  }
  const std::vector<int64_t> expert_members = layout_.group(ParallelDim::kExpert, global);
  layer_groups.expert = groups_.group(ParallelDim::kExpert, expert_members);
  if (!inputs_.node_of_gpu.empty()) {
    for (const int64_t member : expert_members) {
      const auto gpu = static_cast<size_t>(member);
      layer_groups.expert_nodes.push_back(
          gpu < inputs_.node_of_gpu.size() ? inputs_.node_of_gpu[gpu] : 0);
    }
  }
  layers_.begin_rank(layer_groups);
  decoder_layers_.begin_rank(layer_groups);
  // Model-parallel group of the gradient norm: every rank holding a different part of the
  // model (all ranks when the optimizer state is sharded over data parallel too).
  std::vector<int64_t> mp;
  for (int64_t r = 0; r < layout_.gpus(); ++r) {
    const ParallelCoords c = layout_.coords(r);
    if (sharded_optimizer() || c.dp == coords_.dp) mp.push_back(r);
  }
  mp_pg_ = groups_.group(ParallelDim::kOther, mp, {}, "mp");
  const int64_t stages = p.pipeline;
  if (stages > 1) {
    ParallelCoords prev = coords_;
    ParallelCoords next = coords_;
    prev.pp = (coords_.pp + stages - 1) % stages;
    next.pp = (coords_.pp + 1) % stages;
    p2p_.begin_rank(
        rank_, coords_.pp, layout_.rank(prev), layout_.rank(next), layer_groups.tensor,
        grad_buffers_[kDenseBuffer].replicas > 1 || grad_buffers_[kExpertBuffer].replicas > 1);
    ParallelCoords first = coords_;
    ParallelCoords last = coords_;
    first.pp = 0;
    last.pp = stages - 1;
    std::vector<int64_t> embedding_stages = {layout_.rank(first)};
    // An encoder-decoder model's first decoder stage holds a copy too (encoder_decoder.h).
    if (embedding_copy_stage(first_decoder_stage(config_))) {
      ParallelCoords split = coords_;
      split.pp = first_decoder_stage(config_);
      embedding_stages.push_back(layout_.rank(split));
    }
    embedding_stages.push_back(layout_.rank(last));
    emb_pg_ = groups_.group(ParallelDim::kPipeline, embedding_stages);
  }
}

LayerParams TransformerEmitter::mtp_params(int64_t k) const {
  // The first MTP layer's unit holds the last stage's copy of the word embedding, which the
  // output layer does not already hold (untied) when the stage is not the first.
  return params_.mtp(k == 0 && config_.parallelism.pipeline > 1 && !config_.tied_embeddings);
}

bool TransformerEmitter::embedding_copy_stage(int64_t stage) const {
  return config_.encoder_decoder() && config_.parallelism.pipeline > 1 &&
         stage == first_decoder_stage(config_) && stage != 0 &&
         stage != config_.parallelism.pipeline - 1;
}

bool TransformerEmitter::sharded_optimizer() const {
  return config_.parallelism.zero >= 1 || config_.parallelism.fsdp != FsdpMode::kNone;
}

int64_t TransformerEmitter::virtual_stage(int64_t chunk) const {
  return virtual_stage_of(chunk, config_.parallelism.pipeline, coords_.pp);
}

void TransformerEmitter::forward_layer(int64_t layer, int64_t last_layer) {
  const bool decoder = config_.encoder_decoder() && layer >= config_.layers;
  // The decoder's input embedding, on the first decoder stage (after the encoder's final norm,
  // which ends the encoder's last layer).
  if (decoder && layer == config_.layers) decoder_layers_.embedding_forward();
  std::optional<std::pair<int64_t, PerBuffer>> next;
  if (layer < last_layer) next = std::make_pair(layer + 1, params_.layer(layer + 1).elements);
  grad_sync_->before_forward(layer, params_.layer(layer).elements, next);
  // T5's relative bias, once per stack and micro-batch, from the table its first layer's unit
  // holds (one stage: check_relative_bias).
  if (layer == 0) layers_.relative_bias_forward();
  if (decoder && layer == config_.layers) decoder_layers_.relative_bias_forward();
  if (decoder) {
    // (An encoder-decoder model runs without CUDA graphs: check_encoder_decoder.)
    const int64_t in_decoder = layer - config_.layers;
    decoder_layers_.attention_forward(in_decoder);
    decoder_layers_.cross_attention_forward(cross_kernels_);
    decoder_layers_.mlp_forward(in_decoder);
  } else {
    // CUDA graphs (cuda_graph_scope.h): the attention and the MLP block each in or out of the
    // layer's graph; a moe_router graph ends inside moe_forward, before the dispatch.
    graph_scope_begin(config_.cuda_graphs && config_.cuda_graph_scope.captures_attention());
    layers_.attention_forward(layer);
    graph_scope_begin(mlp_block_graphed(layer));
    layers_.mlp_forward(layer);
  }
  graph_scope_begin(false);
  // The encoder's output: its final norm, on the last encoder stage.
  if (config_.encoder_decoder() && layer == config_.layers - 1) layers_.final_norm_forward();
}

void TransformerEmitter::mtp_layer_forward() {
  const int64_t layer = config_.layers - 1;
  layers_.mtp_prologue_forward();
  // Its transformer layer is graphed as the decoder's are (Megatron-Core's TE graph helper
  // takes each MTP layer's mtp_model_layer among the callables: cuda_graphs.py).
  graph_scope_begin(config_.cuda_graphs && config_.cuda_graph_scope.captures_attention());
  layers_.attention_forward(layer);
  graph_scope_begin(mlp_block_graphed(layer));
  layers_.mlp_forward(layer);
  graph_scope_begin(false);
  layers_.mtp_final_norm_forward();
}

void TransformerEmitter::mtp_layer_backward() {
  const int64_t layer = config_.layers - 1;
  layers_.mtp_final_norm_backward();
  graph_scope_begin(mlp_block_graphed(layer) &&
                    !(config_.is_moe_layer(layer) && config_.cuda_graph_scope.moe_router));
  // Under full recomputation the MTP layer is checkpointed too (MultiTokenPredictionLayer's
  // _checkpointed_forward when recompute_granularity is full).
  if (config_.recompute == Recompute::kFull) {
    layers_.attention_forward(layer);
    layers_.mlp_forward(layer);
  }
  layers_.mlp_backward(layer);
  graph_scope_begin(config_.cuda_graphs && config_.cuda_graph_scope.captures_attention());
  layers_.attention_backward(layer);
  graph_scope_begin(false);
  layers_.mtp_prologue_backward();
}

bool TransformerEmitter::mlp_block_graphed(int64_t layer) const {
  if (!config_.cuda_graphs) return false;
  const CudaGraphScope& scope = config_.cuda_graph_scope;
  return config_.is_moe_layer(layer) ? scope.captures_whole_moe() || scope.moe_router
                                     : scope.captures_dense_mlp();
}

void TransformerEmitter::graph_scope_begin(bool captured) {
  if (ops_.capturing() && !captured) ops_.end_capture(kGraphReplay);
  if (!ops_.capturing() && captured) ops_.begin_capture();
}

void TransformerEmitter::backward_decoder_layer(int64_t layer) {
  const int64_t in_decoder = layer - config_.layers;
  if (decoder_config_.recomputes_layer(in_decoder)) {
    decoder_layers_.attention_forward(in_decoder);
    decoder_layers_.cross_attention_forward(cross_kernels_);
    decoder_layers_.mlp_forward(in_decoder);
  }
  decoder_layers_.mlp_backward(in_decoder);
  // The decoder's last layer runs its backward first: the encoder output's gradient starts
  // there, and every other layer's adds to it.
  decoder_layers_.cross_attention_backward(cross_kernels_,
                                           in_decoder != config_.decoder_layers - 1);
  decoder_layers_.attention_backward(in_decoder);
}

void TransformerEmitter::backward_layer(int64_t layer, int64_t first_layer_of_chunk,
                                        bool last_micro_batch, int64_t forward_index) {
  const LayerParams params = params_.layer(layer);
  // The encoder's final norm first (its output ended the encoder's last layer).
  if (config_.encoder_decoder() && layer == config_.layers - 1) layers_.final_norm_backward();
  if (grad_sync_->gathers_for_backward()) {
    std::optional<UnitElements> next;
    if (layer > first_layer_of_chunk) {
      next = std::make_pair(layer - 1, params_.layer(layer - 1).elements);
    }
    grad_sync_->before_backward(layer, params.elements, next);
  }
  // The backward graph holds the recomputation too (a whole-layer graph: full recomputation
  // with partial scopes is refused). Selective recomputation reruns its modules inside the
  // backward (LayerEmitter). Partial scopes capture the backward of what their forward
  // captured: a moe_router graph begins inside moe_backward, after the dispatch's backward.
  const bool decoder = config_.encoder_decoder() && layer >= config_.layers;
  if (decoder) {
    backward_decoder_layer(layer);
  } else {
    graph_scope_begin(mlp_block_graphed(layer) &&
                      !(config_.is_moe_layer(layer) && config_.cuda_graph_scope.moe_router));
    if (config_.recomputes_layer(layer)) {
      layers_.attention_forward(layer);
      layers_.mlp_forward(layer);
    } else if (config_.recompute == Recompute::kOp) {
      layers_.op_recompute(forward_index);
    }
    layers_.mlp_backward(layer);
    graph_scope_begin(config_.cuda_graphs && config_.cuda_graph_scope.captures_attention());
    layers_.attention_backward(layer);
  }
  graph_scope_begin(false);
  // T5's relative bias table's gradient, before the unit that holds it is reduced.
  if (layer == 0) layers_.relative_bias_backward();
  if (decoder && layer == config_.layers) decoder_layers_.relative_bias_backward();
  grad_sync_->after_backward(layer, params, last_micro_batch);
  if (decoder && layer == config_.layers) decoder_layers_.embedding_backward();
}

void TransformerEmitter::iteration(uint32_t it) {
  graph_.add_iteration_mark(threads_.rank, kCpuThread, it);
  pytorch::body(graph_, threads_, "Optimizer.zero_grad#Adam.zero_grad");
  grad_sync_->begin_iteration();
  const ParallelismConfig& p = config_.parallelism;
  // Megatron-Core's combined 1F1B schedule: one extra warm-up forward, then each steady
  // forward with its backward; without a pipeline whatever the schedule key says
  // (forward_backward_no_pipelining takes it under the overlap).
  const bool combined = config_.moe.a2a_overlap;
  const PipelineSchedule schedule =
      combined && p.pipeline == 1 ? PipelineSchedule::k1F1B : p.schedule;
  const std::vector<PipelineStep> steps = pipeline_schedule(
      schedule, p.pipeline, chunks_, micro_batches_, coords_.pp, combined ? 1 : 0);
  assign_gradient_buckets(steps);
  // Megatron's interleaved schedule with aligned parameter gathers dispatches the first two
  // model chunks' all-gathers before its first forward (schedules.py).
  forward_steps_ = 0;
  if (p.align_param_gather) {
    grad_sync_->dispatch_param_gather(forward_elements_through(std::min<int64_t>(1, chunks_ - 1)));
  }
  if (p.pipeline > 1 && p.p2p_synchronous && !combined && schedule != PipelineSchedule::kGpipe) {
    synchronous_schedule(steps, schedule, it);
  } else {
    for (size_t i = 0; i < steps.size(); ++i) {
      // The combined 1F1B schedule runs each steady-state forward with the backward after it.
      if (combined && steps[i].steady) {
        combined_step(steps[i], steps[i + 1]);
        ++i;
        continue;
      }
      schedule_step(steps[i], it);
    }
  }
  finish_gradients();
  optimizer_step();
  graph_.add_host_sync(threads_.rank, kCpuThread, kAllStreams, "aten::_local_scalar_dense");
}

void TransformerEmitter::schedule_step(const PipelineStep& step, uint32_t it) {
  const int64_t last_vs = virtual_stages() - 1;
  const int64_t vs = virtual_stage(step.chunk);
  step_marker(step);
  p2p_.receive(step.forward, step.micro_batch, vs, last_vs);
  step_compute(step, it);
  p2p_.send(step.forward, step.micro_batch, vs, last_vs);
}

void TransformerEmitter::synchronous_schedule(const std::vector<PipelineStep>& steps,
                                              PipelineSchedule schedule, uint32_t it) {
  const ParallelismConfig& p = config_.parallelism;
  for (const PipelineAction& action : synchronous_pipeline_plan(
           steps, schedule, p.pipeline, chunks_, micro_batches_, coords_.pp)) {
    if (action.step < 0) {
      p2p_.exchange(action.exchange, steps);
      continue;
    }
    const PipelineStep& step = steps[static_cast<size_t>(action.step)];
    step_marker(step);
    step_compute(step, it);
  }
}

void TransformerEmitter::step_marker(const PipelineStep& step) {
  ops_.marker(fmt::format("{} mb {} chunk {}", step.forward ? "forward" : "backward",
                          step.micro_batch, step.chunk));
}

void TransformerEmitter::step_compute(const PipelineStep& step, uint32_t it) {
  const int64_t last_vs = virtual_stages() - 1;
  const int64_t vs = virtual_stage(step.chunk);
  const int64_t first = first_layer(step.chunk);
  if (step.forward) {
    begin_forward_step();
    if (vs == 0) {
      grad_sync_->before_forward(-1, params_.embedding().elements, std::nullopt);
      layers_.embedding_forward();
    }
    const int64_t count = chunk_layer_count(step.chunk);
    for (int64_t l = 0; l < count; ++l)
      forward_layer(first + l, first + count - 1);
    if (vs == last_vs) {
      for (int64_t k = 0; k < config_.mtp_layers; ++k) {
        grad_sync_->before_forward(mtp_unit(k), mtp_params(k).elements, std::nullopt);
        mtp_layer_forward();
      }
      grad_sync_->before_forward(-2, params_.head().elements, std::nullopt);
      head_layers().head_forward();
      for (int64_t k = 0; k < config_.mtp_layers; ++k)
        layers_.vocabulary_output_forward();
    }
  } else {
    const bool last_mb = step.micro_batch == micro_batches_ - 1;
    if (vs == last_vs) {
      for (int64_t k = 0; k < config_.mtp_layers; ++k)
        layers_.vocabulary_output_backward();
      head_layers().head_backward();
      grad_sync_->after_backward(-2, params_.head(), last_mb);
      for (int64_t k = config_.mtp_layers - 1; k >= 0; --k) {
        if (grad_sync_->gathers_for_backward()) {
          // The unit the backward visits next: the MTP layer below, or the chunk's top layer.
          std::optional<UnitElements> next;
          if (k > 0) {
            next = std::make_pair(mtp_unit(k - 1), mtp_params(k - 1).elements);
          } else if (chunk_layer_count(step.chunk) > 0) {
            const int64_t top = first + chunk_layer_count(step.chunk) - 1;
            next = std::make_pair(top, params_.layer(top).elements);
          }
          grad_sync_->before_backward(mtp_unit(k), mtp_params(k).elements, next);
        }
        mtp_layer_backward();
        grad_sync_->after_backward(mtp_unit(k), mtp_params(k), last_mb);
      }
    }
    for (int64_t l = chunk_layer_count(step.chunk) - 1; l >= 0; --l)
      backward_layer(first + l, first, last_mb,
                     static_cast<int64_t>(it) * micro_batches_ + step.micro_batch);
    if (vs == 0) {
      layers_.embedding_backward();
      grad_sync_->after_backward(-1, params_.embedding(), last_mb);
    }
  }
}

std::vector<int64_t> TransformerEmitter::gradient_ready_bytes(
    const std::vector<PipelineStep>& steps, GradBufferIndex buffer) const {
  std::vector<int64_t> bytes;
  auto add = [&](const LayerParams& lp) {
    const std::vector<int64_t>& tensors = lp.tensors[buffer];
    for (auto t = tensors.rbegin(); t != tensors.rend(); ++t)
      bytes.push_back(*t * grad_bytes());
  };
  for (const PipelineStep& step : steps) {
    if (step.forward || step.micro_batch != micro_batches_ - 1) continue;
    const int64_t vs = virtual_stage(step.chunk);
    const int64_t first = first_layer(step.chunk);
    if (vs == virtual_stages() - 1) {
      add(params_.head());
      for (int64_t k = config_.mtp_layers - 1; k >= 0; --k)
        add(mtp_params(k));
    }
    for (int64_t l = chunk_layer_count(step.chunk) - 1; l >= 0; --l)
      add(params_.layer(first + l));
    if (vs == 0) add(params_.embedding());
  }
  return bytes;
}

void TransformerEmitter::assign_gradient_buckets(const std::vector<PipelineStep>& steps) {
  for (size_t b = 0; b < kGradBuffers; ++b) {
    GradBuffer& buffer = grad_buffers_[b];
    buffer.buckets = pytorch::assign_ddp_buckets(
        gradient_ready_bytes(steps, static_cast<GradBufferIndex>(b)),
        pytorch::kDefaultDdpFirstBucketBytes, config_.parallelism.ddp_bucket_bytes);
    buffer.bucket_end.clear();
    size_t end = 0;
    for (const pytorch::DdpBucket& bucket : buffer.buckets) {
      end += bucket.params.size();
      buffer.bucket_end.push_back(end);
    }
    buffer.next_bucket = 0;
    buffer.tensors_ready = 0;
  }
}

void TransformerEmitter::for_each_chunk_unit(
    int64_t chunk, const std::function<void(const LayerParams&)>& visit) const {
  if (virtual_stage(chunk) == 0) visit(params_.embedding());
  for (int64_t l = 0; l < chunk_layer_count(chunk); ++l)
    visit(params_.layer(first_layer(chunk) + l));
  if (virtual_stage(chunk) == virtual_stages() - 1) {
    for (int64_t k = 0; k < config_.mtp_layers; ++k)
      visit(mtp_params(k));
    visit(params_.head());
  }
}

PerBuffer TransformerEmitter::forward_elements_through(int64_t chunk) const {
  PerBuffer elements{};
  for (int64_t c = 0; c <= chunk; ++c) {
    for_each_chunk_unit(c, [&](const LayerParams& lp) {
      for (size_t b = 0; b < kGradBuffers; ++b)
        elements[b] += lp.elements[b];
    });
  }
  return elements;
}

void TransformerEmitter::begin_forward_step() {
  const int64_t step = forward_steps_++;
  if (!config_.parallelism.align_param_gather) return;
  // The first micro-batch of chunk c at virtual micro-batch step + stage launches chunk c + 1
  // (c + 1 >= 2: chunks 0 and 1 went before the first forward).
  const int64_t pipeline = config_.parallelism.pipeline;
  const int64_t shifted = step + coords_.pp;
  if (shifted % pipeline != 0) return;
  const int64_t chunk = shifted / pipeline;
  if (chunk >= 1 && chunk + 1 < chunks_) {
    grad_sync_->dispatch_param_gather(forward_elements_through(chunk + 1));
  }
}

void TransformerEmitter::finish_gradients() {
  const ParallelismConfig& p = config_.parallelism;
  grad_sync_->finish_backward();
  // Tied embeddings across the pipeline: the first and last stages (and an encoder-decoder
  // model's first decoder stage) sum their copies' grads.
  // So do the first stage and the MTP layers' (the last), whose embedding is a copy too.
  if (p.pipeline > 1 && (config_.tied_embeddings || config_.mtp_layers > 0) &&
      !config_.lora.enabled() &&
      (coords_.pp == 0 || coords_.pp == p.pipeline - 1 || embedding_copy_stage(coords_.pp))) {
    ops_.blocking(emb_pg_, CollectiveKind::kAllReduce, sizes_.vocab * sizes_.h * grad_bytes(),
                  "all_reduce", "_allreduce_word_embedding_grads");
  }
}

void TransformerEmitter::optimizer_step() {
  OptimizerShape shape;
  switch (config_.optimizer) {
    case TransformerOptimizer::kSgd:
      shape.kind = OptimizerKind::kSgd;
      break;
    case TransformerOptimizer::kAdamW:
      shape.kind = OptimizerKind::kAdamW;
      break;
    case TransformerOptimizer::kLamb:
      shape.kind = OptimizerKind::kLamb;
      break;
    case TransformerOptimizer::kAdam:
      shape.kind = OptimizerKind::kAdam;
      break;
  }
  shape.impl = config_.optimizer_impl;
  shape.large_kernel_args = true;
  int64_t elements = 0;
  auto add_tensors = [&](const LayerParams& lp) {
    for (size_t b = 0; b < kGradBuffers; ++b) {
      const int64_t shard = sharded_optimizer() ? grad_buffers_[b].replicas : 1;
      for (int64_t n : lp.tensors[b]) {
        const int64_t local = (n + shard - 1) / shard;
        shape.tensor_elements.push_back(local);
        elements += local;
      }
    }
  };
  for (int64_t chunk = 0; chunk < chunks_; ++chunk)
    for_each_chunk_unit(chunk, add_tensors);
  const DType opt_dt = config_.master_weights ? DType::kFp32 : act_dt_;
  const auto n = as_double(elements);
  // Gradient clipping (Megatron's clip_grad_norm_fp32): multi_tensor_l2norm over the local
  // gradients, an all-reduce of the norm over the model-parallel group, then scaling. Stages
  // differ in their parameters (embedding, output layer), so the descriptions are per count.
  auto found = step_descs_.find(elements);
  if (found == step_descs_.end()) {
    StepDescs sd;
    sd.norm = graph_.add_kernel_desc(pytorch::pointwise(MemoryOp::kSum, opt_dt, n, 2, 1, 0));
    sd.scale = graph_.add_kernel_desc(pytorch::pointwise(MemoryOp::kBinary, opt_dt, n, 1, 1, 1));
    // Per element: Adam reads w, g, m, v and writes w, m, v; FusedLAMB's five passes read
    // 9 lists and write 4 (optimizer_passes in calibration/).
    const bool lamb = shape.kind == OptimizerKind::kLamb;
    KernelDesc update = pytorch::pointwise(MemoryOp::kOptimizer, opt_dt, n, lamb ? 16 : 10,
                                           lamb ? 9 : 4, lamb ? 4 : 3);
    update.optimizer = shape;
    sd.update = graph_.add_kernel_desc(update);
    sd.copy = graph_.add_kernel_desc(pytorch::pointwise(MemoryOp::kCopy, act_dt_, n, 0, 2, 1));
    found = step_descs_.emplace(elements, sd).first;
  }
  const StepDescs& sd = found->second;
  if (act_dt_ == DType::kFp16) {
    ops_.op("_unscale_main_grads_and_check_for_nan", "multi_tensor_scale", sd.scale);
    ops_.blocking(mp_pg_, CollectiveKind::kAllReduce, kFp32Bytes, "all_reduce", "c10d::all_reduce");
  }
  const bool lamb = config_.optimizer == TransformerOptimizer::kLamb;
  // FusedLAMB clips inside its update: its first pass is the global gradient norm, and stage 1
  // divides by the clipped norm (optimizer_passes in calibration/), so no separate norm and
  // scale kernels run; the norm is still all-reduced over the model-parallel ranks.
  if (!lamb) ops_.op("clip_grad_norm_fp32", "multi_tensor_l2norm", sd.norm);
  ops_.blocking(mp_pg_, CollectiveKind::kAllReduce, kFp32Bytes, "all_reduce", "c10d::all_reduce");
  if (!lamb) ops_.op("clip_grad_norm_fp32", "multi_tensor_scale", sd.scale);
  if (config_.layer_kernels == LayerKernelSet::kTorchtitan && config_.moe.experts > 0) {
    expert_bias_update();
  }
  const std::string_view step_name = lamb ? "Optimizer.step#FusedLAMB.step"
                                     : config_.optimizer == TransformerOptimizer::kSgd
                                         ? "Optimizer.step#SGD.step"
                                         : "Optimizer.step#Adam.step";
  ops_.op(step_name, "multi_tensor_apply_kernel", sd.update);
  if (config_.master_weights && act_dt_ != DType::kFp32) {
    ops_.op("_copy_main_params_to_model_params", "multi_tensor_scale", sd.copy);
  }
  if (config_.fp8_fsdp_all_gather) {
    // torchao's precompute_float8_dynamic_scale_for_fsdp: the amax of every local weight shard
    // (one foreach norm), all-reduced over the shard group in one call, one fp32 per weight.
    ops_.op("precompute_float8_dynamic_scale_for_fsdp", "float8_amax_foreach_norm",
            layer_kernels_.float8.fsdp_amax_precompute);
    int64_t stage_layers = 0;
    for (int64_t chunk = 0; chunk < chunks_; ++chunk)
      stage_layers += chunk_layer_count(chunk);
    ops_.blocking(grad_buffers_[kDenseBuffer].pg, CollectiveKind::kAllReduce,
                  kFp32Bytes * kFloat8LinearsPerLayer * stage_layers, "all_reduce",
                  "c10d::all_reduce");
  }
  grad_sync_->after_optimizer_step();
}

void TransformerEmitter::expert_bias_update() {
  int64_t moe_layers = 0;
  for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
    for (int64_t l = 0; l < chunk_layer_count(chunk); ++l) {
      if (config_.is_moe_layer(first_layer(chunk) + l)) ++moe_layers;
    }
  }
  if (moe_layers == 0) return;
  const int64_t experts = config_.moe.experts;
  const KernelDescId stack = graph_.add_kernel_desc(
      pytorch::pointwise(MemoryOp::kCat, DType::kFp32, as_double(moe_layers * experts), 0, 1, 1));
  ops_.op("aten::vstack", "tokens_per_expert_stack", stack);
  // Over the data-parallel group (the shard group under HSDP, whose replicas' counts are left
  // out of the sum: the cost of one small all-reduce either way).
  ops_.blocking(grad_buffers_[kDenseBuffer].pg, CollectiveKind::kAllReduce,
                kFp32Bytes * moe_layers * experts, "all_reduce", "c10d::all_reduce");
  // Per layer: .float(), mean, mean - counts, sign, x coeff, its mean, the subtraction, the
  // bias's add_ and the counts' zero_, each over the layer's experts.
  const KernelDescId small = graph_.add_kernel_desc(
      pytorch::pointwise(MemoryOp::kBinary, DType::kFp32, as_double(experts), 1, 1, 1));
  constexpr std::array<std::string_view, 9> kOps = {"aten::_to_copy", "aten::mean", "aten::sub",
                                                    "aten::sign",     "aten::mul",  "aten::mean",
                                                    "aten::sub",      "aten::add_", "aten::zero_"};
  for (int64_t l = 0; l < moe_layers; ++l) {
    for (std::string_view op : kOps)
      ops_.op(op, "expert_bias_update", small);
  }
}

}  // namespace transformer_emit

TransformerGraph generate_transformer(const TransformerConfig& config,
                                      const TransformerGraphInputs& inputs, TaskGraph& graph) {
  transformer_emit::TransformerEmitter emitter(config, inputs, graph);
  return emitter.run();
}

}  // namespace upsim
