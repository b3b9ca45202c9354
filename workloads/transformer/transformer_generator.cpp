#include "workloads/transformer/transformer_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "workloads/pytorch/ddp_buckets.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/transformer_emitter.h"

namespace upsim {

namespace transformer_emit {

TransformerEmitter::TransformerEmitter(const TransformerConfig& c, const TransformerGraphInputs& in,
                                       TaskGraph& g)
    : config_(c), inputs_(in), graph_(g), layout_(c.parallelism), groups_(g, [this](int64_t rank) {
        return !mirror_ || layout_.coords(rank).dp == 0;
      }) {
  const ParallelismConfig& p = config_.parallelism;
  sizes_ = layer_sizes(config_);
  gemm_dt_ = config_.dtype;
  act_dt_ = config_.activation_dtype();
  act_elem_bytes_ = dtype_bytes(act_dt_);
  micro_batches_ = config_.micro_batches();
  chunks_ = p.virtual_stages;
  layers_per_chunk_ = config_.layers / (p.pipeline * chunks_);
  mirror_ = config_.mirror_data_parallel && p.data > 1;
  grad_sync_ = make_gradient_sync(
      p, GradSyncRank{graph_, threads_, groups_, grad_buffers_, act_elem_bytes_, grad_bytes()});
  layer_kernels_ = add_layer_kernels(config_, sizes_, graph_);
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
    info.device = static_cast<uint32_t>(g);
    graph_rank.push_back(graph_.add_rank(std::move(info)));
  }
  for (size_t i = 0; i < out.simulated.size(); ++i) {
    begin_rank(out.simulated[i], graph_rank[i]);
    for (uint32_t it = 0; it < inputs_.iterations; ++it)
      iteration(it);
    // Ranks differ little in size (the first and last stages hold embedding and head): room
    // for all of them and an eighth more, so a graph of millions of tasks is not copied as it
    // grows (untouched room costs no memory).
    if (i == 0) graph_.reserve_tasks(graph_.task_count() * out.simulated.size() * 9 / 8);
  }
  out.collectives = graph_.collective_count();
  check_p2p_order();
  return out;
}

void TransformerEmitter::add_norm(LayerParams& p) const {
  p.add(sizes_.h);
  if (transformer_norm_parameters(config_) > sizes_.h) p.add(sizes_.h);
}

LayerParams TransformerEmitter::layer_params(int64_t layer) const {
  LayerParams p;
  const bool bias = config_.bias;
  add_norm(p);
  p.add(sizes_.qkv_out * sizes_.h);
  if (bias) p.add(sizes_.qkv_out);
  p.add(sizes_.h * sizes_.heads * sizes_.head_dim);
  if (bias) p.add(sizes_.h);
  add_norm(p);
  if (config_.is_moe_layer(layer)) {
    const MoeConfig& m = config_.moe;
    const int64_t local = m.experts / config_.parallelism.expert;
    const int64_t e_ffn = m.expert_ffn / sizes_.t;
    const int64_t e_fc1 = config_.activation == TransformerActivation::kSwiglu ? 2 * e_ffn : e_ffn;
    p.add(m.experts * sizes_.h);
    for (int64_t e = 0; e < local + m.shared_experts; ++e) {
      // Routed experts are expert-parallel parameters when expert > 1 (Megatron-Core sets
      // allreduce = not (is_expert and expert_parallel)); shared experts are dense.
      const GradBufferIndex b =
          e < local && config_.parallelism.expert > 1 ? kExpertBuffer : kDenseBuffer;
      p.add(e_fc1 * sizes_.h, b);
      if (bias) p.add(e_fc1, b);
      p.add(sizes_.h * e_ffn, b);
      if (bias) p.add(sizes_.h, b);
    }
  } else {
    p.add(sizes_.fc1_out * sizes_.h);
    if (bias) p.add(sizes_.fc1_out);
    p.add(sizes_.h * sizes_.ffn);
    if (bias) p.add(sizes_.h);
  }
  return p;
}

LayerParams TransformerEmitter::embedding_params() const {
  LayerParams p;
  p.add(sizes_.vocab * sizes_.h);
  if (config_.position == TransformerPosition::kLearned) p.add(config_.seq * sizes_.h);
  return p;
}

LayerParams TransformerEmitter::head_params() const {
  LayerParams p;
  add_norm(p);  // final norm
  if (!config_.tied_embeddings || config_.parallelism.pipeline > 1) p.add(sizes_.vocab * sizes_.h);
  return p;
}

uint32_t TransformerEmitter::process_group(ParallelDim dim, const std::vector<int64_t>& members,
                                           std::string_view channel, std::string_view name) {
  return groups_.group(dim, members, channel, name);
}

CollectiveId TransformerEmitter::call(uint32_t pg, CollectiveKind kind, int64_t bytes,
                                      std::string_view name, std::vector<int64_t> send_bytes) {
  return groups_.call(pg, kind, bytes, name, std::move(send_bytes));
}

void TransformerEmitter::begin_rank(int64_t global, RankId graph_rank) {
  rank_ = global;
  threads_ = RankThreads{graph_rank, kCpuThread, kCompute, kDpComm};
  coords_ = layout_.coords(global);
  const ParallelismConfig& p = config_.parallelism;
  groups_.begin_rank();
  tp_pg_ = process_group(ParallelDim::kTensor, layout_.group(ParallelDim::kTensor, global));
  cp_pg_ = process_group(ParallelDim::kContext, layout_.group(ParallelDim::kContext, global));
  dp_pg_ = process_group(ParallelDim::kData, layout_.replica_group(global));
  grad_buffers_[kDenseBuffer].pg = dp_pg_;
  grad_buffers_[kDenseBuffer].replicas = replicas();
  // Without expert parallel the experts are dense parameters (layer_params): no expert buffer.
  grad_buffers_[kExpertBuffer].replicas = p.expert > 1 ? p.expert_data() : 1;
  if (p.expert > 1) {
    grad_buffers_[kExpertBuffer].pg =
        process_group(ParallelDim::kData, layout_.expert_replica_group(global), "expert");
  }
  ep_pg_ = process_group(ParallelDim::kExpert, layout_.group(ParallelDim::kExpert, global));
  // Model-parallel group of the gradient norm: every rank holding a different part of the
  // model (all ranks when the optimizer state is sharded over data parallel too).
  std::vector<int64_t> mp;
  for (int64_t r = 0; r < layout_.gpus(); ++r) {
    const ParallelCoords c = layout_.coords(r);
    if (sharded_optimizer() || c.dp == coords_.dp) mp.push_back(r);
  }
  mp_pg_ = process_group(ParallelDim::kOther, mp, {}, "mp");
  const int64_t stages = p.pipeline;
  if (stages > 1) {
    ParallelCoords prev = coords_;
    ParallelCoords next = coords_;
    prev.pp = (coords_.pp + stages - 1) % stages;
    next.pp = (coords_.pp + 1) % stages;
    prev_ = layout_.rank(prev);
    next_ = layout_.rank(next);
    to_next_ = process_group(ParallelDim::kPipeline, {rank_, next_}, "activations");
    from_prev_ = process_group(ParallelDim::kPipeline, {prev_, rank_}, "activations");
    to_prev_ = process_group(ParallelDim::kPipeline, {rank_, prev_}, "gradients");
    from_next_ = process_group(ParallelDim::kPipeline, {next_, rank_}, "gradients");
    ParallelCoords first = coords_;
    ParallelCoords last = coords_;
    first.pp = 0;
    last.pp = stages - 1;
    emb_pg_ = process_group(ParallelDim::kPipeline, {layout_.rank(first), layout_.rank(last)});
  }
}

bool TransformerEmitter::sharded_optimizer() const {
  return config_.parallelism.zero >= 1 || config_.parallelism.fsdp != FsdpMode::kNone;
}

int64_t TransformerEmitter::virtual_stage(int64_t chunk) const {
  return chunk * config_.parallelism.pipeline + coords_.pp;
}

void TransformerEmitter::forward_layer(int64_t layer, int64_t last_layer) {
  std::optional<std::pair<int64_t, PerBuffer>> next;
  if (layer < last_layer) next = std::make_pair(layer + 1, layer_params(layer + 1).elements);
  grad_sync_->before_forward(layer, layer_params(layer).elements, next);
  attention_forward(false);
  mlp_forward(layer);
}

void TransformerEmitter::backward_layer(int64_t layer, int64_t first_layer_of_chunk,
                                        bool last_micro_batch) {
  const LayerParams params = layer_params(layer);
  if (grad_sync_->gathers_for_backward()) {
    std::optional<UnitElements> next;
    if (layer > first_layer_of_chunk) {
      next = std::make_pair(layer - 1, layer_params(layer - 1).elements);
    }
    grad_sync_->before_backward(layer, params.elements, next);
  }
  if (config_.recompute == Recompute::kFull) {
    attention_forward(false);
    mlp_forward(layer);
  } else if (config_.recompute == Recompute::kSelective &&
             config_.attention == AttentionImpl::kUnfused) {
    attention_forward(true);
  }
  mlp_backward(layer);
  attention_backward();
  grad_sync_->after_backward(params, last_micro_batch);
}

void TransformerEmitter::iteration(uint32_t it) {
  graph_.add_iteration_mark(threads_.rank, kCpuThread, it);
  pytorch::body(graph_, threads_, "Optimizer.zero_grad#Adam.zero_grad");
  grad_sync_->begin_iteration();
  const ParallelismConfig& p = config_.parallelism;
  const std::vector<PipelineStep> steps =
      pipeline_schedule(p.schedule, p.pipeline, chunks_, micro_batches_, coords_.pp);
  assign_gradient_buckets(steps);
  const int64_t last_vs = virtual_stages() - 1;
  for (const PipelineStep& step : steps) {
    const int64_t vs = virtual_stage(step.chunk);
    const int64_t first = first_layer(step.chunk);
    marker(fmt::format("{} mb {} chunk {}", step.forward ? "forward" : "backward", step.micro_batch,
                       step.chunk));
    receive(step.forward, step.micro_batch, step.chunk);
    if (step.forward) {
      if (vs == 0) {
        grad_sync_->before_forward(-1, embedding_params().elements, std::nullopt);
        embedding_forward();
      }
      for (int64_t l = 0; l < layers_per_chunk_; ++l)
        forward_layer(first + l, first + layers_per_chunk_ - 1);
      if (vs == last_vs) {
        grad_sync_->before_forward(-2, head_params().elements, std::nullopt);
        head_forward();
      }
    } else {
      const bool last_mb = step.micro_batch == micro_batches_ - 1;
      if (vs == last_vs) {
        head_backward();
        grad_sync_->after_backward(head_params(), last_mb);
      }
      for (int64_t l = layers_per_chunk_ - 1; l >= 0; --l)
        backward_layer(first + l, first, last_mb);
      if (vs == 0) {
        embedding_backward();
        grad_sync_->after_backward(embedding_params(), last_mb);
      }
    }
    send(step.forward, step.micro_batch, step.chunk);
  }
  finish_gradients();
  optimizer_step();
  graph_.add_host_sync(threads_.rank, kCpuThread, kAllStreams, "aten::_local_scalar_dense");
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

void TransformerEmitter::finish_gradients() {
  const ParallelismConfig& p = config_.parallelism;
  grad_sync_->finish_backward();
  // Tied embeddings across the pipeline: the first and last stages sum their copies' grads.
  if (p.pipeline > 1 && config_.tied_embeddings &&
      (coords_.pp == 0 || coords_.pp == p.pipeline - 1)) {
    blocking(emb_pg_, CollectiveKind::kAllReduce, sizes_.vocab * sizes_.h * grad_bytes(),
             "all_reduce", "_allreduce_word_embedding_grads");
  }
}

void TransformerEmitter::optimizer_step() {
  OptimizerShape shape;
  shape.kind = config_.optimizer == TransformerOptimizer::kSgd     ? OptimizerKind::kSgd
               : config_.optimizer == TransformerOptimizer::kAdamW ? OptimizerKind::kAdamW
                                                                   : OptimizerKind::kAdam;
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
  for (int64_t chunk = 0; chunk < chunks_; ++chunk) {
    if (virtual_stage(chunk) == 0) add_tensors(embedding_params());
    for (int64_t l = 0; l < layers_per_chunk_; ++l)
      add_tensors(layer_params(first_layer(chunk) + l));
    if (virtual_stage(chunk) == virtual_stages() - 1) add_tensors(head_params());
  }
  const DType opt_dt = config_.master_weights ? DType::kFp32 : act_dt_;
  const auto n = as_double(elements);
  // Gradient clipping (Megatron's clip_grad_norm_fp32): multi_tensor_l2norm over the local
  // gradients, an all-reduce of the norm over the model-parallel group, then scaling. Stages
  // differ in their parameters (embedding, output layer), so the descriptions are per count.
  auto found = step_descs_.find(elements);
  if (found == step_descs_.end()) {
    StepDescs sd;
    sd.norm = add(pytorch::pointwise(MemoryOp::kSum, opt_dt, n, 2, 1, 0));
    sd.scale = add(pytorch::pointwise(MemoryOp::kBinary, opt_dt, n, 1, 1, 1));
    KernelDesc update = pytorch::pointwise(MemoryOp::kOptimizer, opt_dt, n, 10, 4, 3);
    update.optimizer = shape;
    sd.update = add(update);
    sd.copy = add(pytorch::pointwise(MemoryOp::kCopy, act_dt_, n, 0, 2, 1));
    found = step_descs_.emplace(elements, sd).first;
  }
  const StepDescs& sd = found->second;
  if (act_dt_ == DType::kFp16) {
    op("_unscale_main_grads_and_check_for_nan", "multi_tensor_scale", sd.scale);
    blocking(mp_pg_, CollectiveKind::kAllReduce, kFp32Bytes, "all_reduce", "c10d::all_reduce");
  }
  op("clip_grad_norm_fp32", "multi_tensor_l2norm", sd.norm);
  blocking(mp_pg_, CollectiveKind::kAllReduce, kFp32Bytes, "all_reduce", "c10d::all_reduce");
  op("clip_grad_norm_fp32", "multi_tensor_scale", sd.scale);
  op(config_.optimizer == TransformerOptimizer::kSgd ? "Optimizer.step#SGD.step"
                                                     : "Optimizer.step#Adam.step",
     "multi_tensor_apply_kernel", sd.update);
  if (config_.master_weights && act_dt_ != DType::kFp32) {
    op("_copy_main_params_to_model_params", "multi_tensor_scale", sd.copy);
  }
  grad_sync_->after_optimizer_step();
}

}  // namespace transformer_emit

TransformerGraph generate_transformer(const TransformerConfig& config,
                                      const TransformerGraphInputs& inputs, TaskGraph& graph) {
  transformer_emit::TransformerEmitter emitter(config, inputs, graph);
  return emitter.run();
}

}  // namespace upsim
