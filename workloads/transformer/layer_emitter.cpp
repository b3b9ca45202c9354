#include "workloads/transformer/layer_emitter.h"

#include "workloads/pytorch/kernels.h"

namespace upsim::transformer_emit {

LayerEmitter::LayerEmitter(const TransformerConfig& config, const LayerSizes& sizes,
                           const LayerKernels& kernels, OpEmitter& ops)
    : config_(config),
      sizes_(sizes),
      kernels_(kernels),
      ops_(ops),
      gemm_dt_(config.dtype),
      act_dt_(config.activation_dtype()),
      linear_dt_(config.dtype == DType::kFp8 ? act_dt_ : config.dtype),
      act_elem_bytes_(dtype_bytes(act_dt_)) {}

void LayerEmitter::begin_rank(const LayerGroups& groups) {
  groups_ = groups;
  flex_ = flex_routes();
}

void LayerEmitter::fp8_cast(const Fp8Cast& cast, bool backward) {
  if (!cast.present) return;
  if (cast.amax_pass) ops_.op("te::compute_amax", "fp8_amax", cast.amax);
  ops_.op(backward ? "te::quantize_grad_output" : "te::quantize_input", "fp8_cast_transpose",
          cast.cast);
}

void LayerEmitter::tp_collective(CollectiveKind kind, int64_t bytes, std::string_view op_name) {
  ops_.blocking(groups_.tensor, kind, bytes, collective_kind_name(kind), op_name);
}

void LayerEmitter::column_parallel_backward(std::string_view name, KernelDescId dgrad,
                                            KernelDescId weight_grad, std::optional<DType> dtype,
                                            std::optional<int64_t> rows) {
  const DType gemm_dt = dtype.value_or(gemm_dt_);
  HostOp h = ops_.host_op(name);
  const bool tp = sizes_.t > 1;
  const bool sp = config_.parallelism.sequence;
  const int64_t full = rows.value_or(sizes_.tokens) * sizes_.h * act_elem_bytes_;
  // Transformer Engine's bulk overlap runs these two on its userbuffers kernels.
  const int32_t sms = config_.parallelism.tp_comm_overlap ? kUserbuffersSms : -1;
  // A frozen base (LoRA) runs no weight gradient, and so needs no re-gathered input for one.
  const bool wgrad = !frozen_base();
  // The stream the layer's kernels run on (the shared experts' side stream under
  // moe.shared_expert_overlap).
  const uint16_t compute = ops_.stream();
  TaskId gathered = kNoTask;
  if (tp && sp && wgrad) {
    const TaskId ready = h.record(compute);
    h.wait(kTpComm, ready);
    h.collective_on(kTpComm,
                    ops_.call(groups_.tensor, CollectiveKind::kAllGather, full / sizes_.t,
                              "all_gather", {}, sms),
                    "c10d::_allgather_base");
    gathered = h.record(kTpComm);
  }
  h.kernel_on(compute, pytorch::gemm_kernel_name(gemm_dt, "dgrad"), name, dgrad);
  TaskId reduced = kNoTask;
  if (tp) {
    if (gathered != kNoTask) h.wait(compute, gathered);
    const TaskId ready = h.record(compute);
    h.wait(kTpComm, ready);
    const CollectiveId c =
        sp ? ops_.call(groups_.tensor, CollectiveKind::kReduceScatter, full, "reduce_scatter", {},
                       sms)
           : ops_.call(groups_.tensor, CollectiveKind::kAllReduce, full, "all_reduce");
    h.collective_on(kTpComm, c, sp ? "c10d::_reduce_scatter_base" : "c10d::all_reduce");
    reduced = h.record(kTpComm);
  }
  // Deferred inside a deferring node (moe.delay_wgrad), under tensor parallel too: Transformer
  // Engine's Linear keeps the re-gathered input for its deferred weight gradient
  // (module/linear.py, wgrad_store.put([inputmat_total, grad_output], ...)), so the all-gather
  // stays here.
  const std::string wgrad_name = pytorch::gemm_kernel_name(gemm_dt, "wgrad");
  if (wgrad && !defer_weight_gradient(wgrad_name, weight_grad)) {
    h.kernel_on(compute, wgrad_name, name, weight_grad);
  }
  if (reduced != kNoTask) h.wait(compute, reduced);
  h.end();
}

void LayerEmitter::tp_enter_forward() {
  if (sizes_.t > 1 && config_.parallelism.sequence) {
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h * act_elem_bytes_,
                  "c10d::_allgather_base");
  }
}

void LayerEmitter::tp_exit_forward() {
  if (sizes_.t == 1) return;
  const int64_t full = sizes_.tokens * sizes_.h * act_elem_bytes_;
  if (config_.parallelism.sequence) {
    tp_collective(CollectiveKind::kReduceScatter, full, "c10d::_reduce_scatter_base");
  } else {
    tp_collective(CollectiveKind::kAllReduce, full, "c10d::all_reduce");
  }
}

void LayerEmitter::tp_exit_backward() {
  if (sizes_.t > 1 && config_.parallelism.sequence) {
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h * act_elem_bytes_,
                  "c10d::_allgather_base");
  }
}

void LayerEmitter::column_parallel_forward(std::string_view gemm, const Fp8Cast& cast,
                                           KernelDescId full, KernelDescId chunk) {
  if (config_.parallelism.tp_comm_overlap) {
    fp8_cast(cast, false);
    ring_exchange_gemm("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, gemm), chunk);
    return;
  }
  tp_enter_forward();
  fp8_cast(cast, false);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, gemm), full);
}

void LayerEmitter::row_parallel_forward(std::string_view gemm, const Fp8Cast& cast,
                                        KernelDescId full, KernelDescId split) {
  fp8_cast(cast, false);
  if (config_.parallelism.tp_comm_overlap) {
    gemm_reduce_scatter_pipelined(pytorch::gemm_kernel_name(gemm_dt_, gemm), split);
    return;
  }
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, gemm), full);
  tp_exit_forward();
}

void LayerEmitter::row_parallel_backward(const Fp8Cast& dy, KernelDescId dgrad,
                                         KernelDescId dgrad_chunk, KernelDescId wgrad) {
  const std::string dgrad_name = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad_name = pytorch::gemm_kernel_name(gemm_dt_, "wgrad");
  if (config_.parallelism.tp_comm_overlap) {
    fp8_cast(dy, true);
    ring_exchange_gemm("MmBackward0", dgrad_name, dgrad_chunk,
                       std::make_pair(std::string_view(wgrad_name), wgrad));
    return;
  }
  tp_exit_backward();
  fp8_cast(dy, true);
  if (frozen_base() || defer_weight_gradient(wgrad_name, wgrad)) {
    ops_.op("MmBackward0", dgrad_name, dgrad);
  } else {
    ops_.op2("MmBackward0", dgrad_name, dgrad, wgrad_name, wgrad);
  }
}

void LayerEmitter::autocast_forward(const AutocastCasts& casts) {
  if (!casts.present) return;
  ops_.op("aten::_to_copy", "cast_weight", casts.weight);
  if (!casts.casts_input) return;
  for (int64_t i = 0; i < casts.input_casts; ++i)
    ops_.op("aten::_to_copy", "cast_input", casts.input);
}

void LayerEmitter::autocast_backward(const AutocastCasts& casts) {
  if (!casts.present) return;
  for (int64_t i = 0; casts.casts_input && i < casts.input_casts; ++i)
    ops_.op("ToCopyBackward0", "cast_input_grad", casts.input_grad);
  ops_.op("ToCopyBackward0", "cast_weight_grad", casts.weight_grad);
}

std::string_view LayerEmitter::norm_op(bool backward) const {
  if (config_.norm == TransformerNorm::kRmsNorm) {
    return backward ? "RmsNormBackward" : "aten::rms_norm";
  }
  return backward ? "NativeLayerNormBackward0" : "aten::layer_norm";
}

void LayerEmitter::norm(bool backward) {
  const std::vector<NamedKernel>& composite =
      backward ? kernels_.torchtitan.rms_norm_bwd : kernels_.torchtitan.rms_norm_fwd;
  if (composite.empty()) {
    ops_.op(norm_op(backward), backward ? "layer_norm_bwd" : "layer_norm_fwd",
            backward ? kernels_.norm_bwd : kernels_.norm_fwd);
    return;
  }
  for (const NamedKernel& k : composite)
    ops_.op(k.op, k.kernel, k.desc);
}

void LayerEmitter::norm_forward() {
  norm(false);
}

void LayerEmitter::norm_backward() {
  norm(true);
}

void LayerEmitter::qk_norm_forward() {
  if (!config_.qk_norm) return;
  ops_.op(norm_op(false), "q_norm_fwd", kernels_.q_norm_head_fwd);
  ops_.op(norm_op(false), "k_norm_fwd", kernels_.k_norm_head_fwd);
}

void LayerEmitter::qk_norm_backward() {
  if (!config_.qk_norm) return;
  ops_.op(norm_op(true), "k_norm_bwd", kernels_.k_norm_head_bwd);
  ops_.op(norm_op(true), "q_norm_bwd", kernels_.q_norm_head_bwd);
}

std::string_view LayerEmitter::act_op(bool backward) const {
  if (config_.activation == TransformerActivation::kSwiglu) {
    return backward ? "SwiGLUBackward" : "swiglu";
  }
  if (config_.activation == TransformerActivation::kGeglu) {
    return backward ? "GeGLUBackward" : "geglu";
  }
  if (config_.activation == TransformerActivation::kSquaredRelu) {
    return backward ? "SquaredReLUBackward" : "squared_relu";
  }
  return backward ? "GeluBackward0" : "aten::gelu";
}

void LayerEmitter::core_attention_forward(int64_t layer) {
  if (config_.attention == AttentionImpl::kFlash) {
    core_attention_flash(false, config_.windowed_layer(layer));
    return;
  }
  unfused_attention(unfused_self_attention(), false);
}

UnfusedAttentionKernels LayerEmitter::unfused_self_attention() const {
  const LayerKernels& d = kernels_;
  return {d.score_fwd,     d.softmax_fwd,   d.attn_dropout_fwd,  d.av_fwd,
          d.av_dgrad_p,    d.av_dgrad_v,    d.attn_dropout_bwd,  d.softmax_bwd,
          d.score_dgrad_q, d.score_dgrad_k, d.relative_bias.add, d.relative_bias.grad_sum};
}

void LayerEmitter::relative_bias_forward() {
  const RelativeBiasKernels& k = kernels_.relative_bias;
  if (k.gather == 0) return;
  ops_.op("_relative_position_bucket", "relative_bucket", k.bucket);
  ops_.op("aten::embedding", "relative_bias_gather", k.gather);
}

void LayerEmitter::relative_bias_backward() {
  const RelativeBiasKernels& k = kernels_.relative_bias;
  if (k.scatter == 0) return;
  ops_.op("EmbeddingBackward0", "relative_bias_scatter", k.scatter);
}

void LayerEmitter::unfused_attention(const UnfusedAttentionKernels& k, bool backward) {
  const std::string dgrad = pytorch::gemm_kernel_name(act_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(act_dt_, "wgrad");
  if (!backward) {
    ops_.op("aten::baddbmm", pytorch::gemm_kernel_name(act_dt_, "qk"), k.score_fwd);
    if (k.bias_add != 0) ops_.op("aten::add", "relative_bias_add", k.bias_add);
    ops_.op("scaled_masked_softmax", "softmax_fwd", k.softmax_fwd);
    if (config_.dropout > 0) ops_.op("aten::dropout", "dropout_fwd", k.dropout_fwd);
    ops_.op("aten::bmm", pytorch::gemm_kernel_name(act_dt_, "pv"), k.av_fwd);
    return;
  }
  ops_.op2("BmmBackward0", dgrad, k.av_dgrad_p, wgrad, k.av_dgrad_v);
  if (config_.dropout > 0) ops_.op("NativeDropoutBackward0", "dropout_bwd", k.dropout_bwd);
  ops_.op("ScaledMaskedSoftmaxBackward", "softmax_bwd", k.softmax_bwd);
  if (k.bias_grad_sum != 0) ops_.op("AddBackward0", "relative_bias_grad_sum", k.bias_grad_sum);
  ops_.op2("BaddbmmBackward0", dgrad, k.score_dgrad_q, wgrad, k.score_dgrad_k);
}

void LayerEmitter::attention_forward(int64_t layer) {
  if (config_.layer_kernels == LayerKernelSet::kTorchtitan) {
    torchtitan_attention_forward(layer);
    return;
  }
  const LayerKernels& d = kernels_;
  norm_forward();
  if (config_.mla.enabled()) {
    latent_projections_forward();
  } else {
    autocast_forward(d.qkv_cast);
    column_parallel_forward("qkv", d.qkv_in, d.qkv_fwd, d.qkv_fwd_chunk);
    lora_forward(LoraTarget::kQkv);
  }
  qk_norm_forward();
  if (config_.position == TransformerPosition::kRotary) {
    ops_.op("apply_rotary_pos_emb", "rotary_fwd", d.rotary_fwd);
  }
  core_attention_forward(layer);
  autocast_forward(d.proj_cast);
  row_parallel_forward("proj", d.proj_in, d.proj_fwd, d.proj_fwd_split);
  lora_forward(LoraTarget::kProj);
  // Compiled, the residual add runs fused with the MLP's norm (mlp_forward).
  if (!config_.compile) ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
}

void LayerEmitter::residual_backward() {
  // Compiled, the gradient of a residual add without dropout is its input: no kernel.
  if (config_.compile && config_.dropout <= 0) return;
  ops_.op("BiasDropoutAddBackward", "residual_bwd", kernels_.residual_bwd);
}

void LayerEmitter::norm_backward_and_residual_gradient() {
  const LayerKernels& d = kernels_;
  if (config_.compile) {
    ops_.op("CompiledFunctionBackward", "triton_fused_norm_backward_add", d.norm_bwd_add);
    return;
  }
  norm_backward();
  ops_.op("aten::add", "residual_grad_add", d.grad_add);
}

std::vector<int64_t> ring_shift_sizes(int64_t members, int64_t bytes) {
  const auto n = static_cast<size_t>(members);
  std::vector<int64_t> send(n * n, 0);
  for (size_t i = 0; i < n; ++i)
    send[i * n + (i + 1) % n] = bytes;
  return send;
}

void LayerEmitter::core_attention_flash(bool backward, bool windowed) {
  const LayerKernels& d = kernels_;
  const int64_t cp = config_.parallelism.context;
  if (cp > 1 && config_.parallelism.context_comm == ContextComm::kAllGather) {
    gathered_context_attention(backward);
    return;
  }
  if (cp > 1 && config_.parallelism.context_comm == ContextComm::kAllToAll) {
    all_to_all_context_attention(backward);
    return;
  }
  const std::string_view name = backward ? "ScaledDotProductFlashAttentionBackward0"
                                         : "aten::_scaled_dot_product_flash_attention";
  HostOp h = ops_.host_op(name);
  const int64_t kv_bytes =
      2 * sizes_.b * sizes_.s * sizes_.kv_heads * sizes_.head_dim * act_elem_bytes_;
  TaskId exchanged = kNoTask;
  auto exchange = [&](int64_t bytes) {
    const std::vector<int64_t> send = ring_shift_sizes(cp, bytes);
    const TaskId ready = h.record(kCompute);
    h.wait(kTpComm, ready);
    h.collective_on(kTpComm,
                    ops_.call(groups_.context, CollectiveKind::kAllToAll, 0, "ring_exchange", send),
                    "c10d::batch_isend_irecv");
    exchanged = h.record(kTpComm);
  };
  // Transformer Engine's AttnFuncWithCPAndKVP2P (transformer_engine/pytorch/attention.py): step
  // i's send and receive are issued before step i's attention and waited for before step i + 1.
  // The forward sends K / V on every step but the last. The backward's buffers hold K / V and
  // the dK / dV accumulated so far: step 0 sends K / V, the middle steps both, the last step
  // dK / dV alone, which the rank waits for after its last step's attention.
  const auto step_bytes = [&](int64_t step) -> int64_t {
    if (!backward) return step + 1 < cp ? kv_bytes : 0;
    return step == 0 || step + 1 == cp ? kv_bytes : 2 * kv_bytes;
  };
  for (int64_t step = 0; step < cp; ++step) {
    if (step > 0) h.wait(kCompute, exchanged);
    if (cp > 1 && step_bytes(step) > 0) exchange(step_bytes(step));
    KernelDescId kernel = 0;
    if (step == 0) {
      kernel = backward ? (windowed ? d.attn_window_bwd : d.attn_bwd)
                        : (windowed ? d.attn_window_fwd : d.attn_fwd);
    } else {
      const auto ring = static_cast<size_t>(step - 1);
      kernel = backward ? d.attn_ring_bwd[ring] : d.attn_ring_fwd[ring];
    }
    h.kernel(backward ? "flash_bwd_kernel" : "flash_fwd_kernel", name, kernel);
  }
  if (backward && cp > 1) h.wait(kCompute, exchanged);
  h.end();
}

void LayerEmitter::attention_backward(int64_t layer) {
  if (config_.layer_kernels == LayerKernelSet::kTorchtitan) {
    torchtitan_attention_backward(layer);
    return;
  }
  const LayerKernels& d = kernels_;
  residual_backward();
  lora_backward(LoraTarget::kProj);
  row_parallel_backward(d.proj_dy, d.proj_dgrad, d.proj_dgrad_chunk, d.proj_wgrad);
  autocast_backward(d.proj_cast);
  const RecomputeModules rerun = config_.selective_modules();
  // mla_up_proj: the up projections and rotary whose outputs the core attention read, freed
  // after it, run again before its backward (Megatron-Core registers their recompute on the
  // core attention output's gradient).
  if (rerun.mla_up_proj && config_.mla.enabled()) latent_up_projections_forward();
  if (rerun.core_attn) core_attention_forward(layer);
  if (config_.attention == AttentionImpl::kFlash) {
    core_attention_flash(true, config_.windowed_layer(layer));
  } else {
    unfused_attention(unfused_self_attention(), true);
  }
  if (config_.position == TransformerPosition::kRotary) {
    ops_.op("RotaryBackward", "rotary_bwd", d.rotary_bwd);
  }
  qk_norm_backward();
  fp8_cast(d.qkv_dy, true);
  if (config_.mla.enabled()) {
    // Latent attention's input norm is a module of its own (TENorm), rerun under layernorm.
    if (rerun.layernorm) norm_forward();
    latent_projections_backward();
  } else {
    lora_backward(LoraTarget::kQkv);
    column_parallel_backward("LinearBackward", d.qkv_dgrad, d.qkv_wgrad);
    autocast_backward(d.qkv_cast);
  }
  norm_backward_and_residual_gradient();
}

void LayerEmitter::pre_mlp_norm_forward() {
  if (config_.compile) {
    ops_.op("CompiledFunction", "triton_fused_add_norm", kernels_.add_norm_fwd);
  } else {
    norm_forward();
  }
}

void LayerEmitter::mlp_forward(int64_t layer) {
  const LayerKernels& d = kernels_;
  pre_mlp_norm_forward();
  if (!config_.is_moe_layer(layer)) {
    dense_mlp_forward();
  } else if (config_.layer_kernels == LayerKernelSet::kTorchtitan) {
    torchtitan_moe_forward();
  } else {
    moe_forward();
  }
  ops_.op("bias_dropout_add", "residual_fwd", d.residual_fwd);
}

void LayerEmitter::dense_mlp_forward() {
  if (config_.layer_kernels == LayerKernelSet::kTorchtitan) {
    torchtitan_mlp_forward();
    return;
  }
  const LayerKernels& d = kernels_;
  autocast_forward(d.fc1_cast);
  column_parallel_forward("fc1", d.fc1_in, d.fc1_fwd, d.fc1_fwd_chunk);
  lora_forward(LoraTarget::kFc1);
  ops_.op(act_op(false), "activation_fwd", d.act_fwd);
  autocast_forward(d.fc2_cast);
  row_parallel_forward("fc2", d.fc2_in, d.fc2_fwd, d.fc2_fwd_split);
  lora_forward(LoraTarget::kFc2);
}

void LayerEmitter::mlp_backward(int64_t layer) {
  const LayerKernels& d = kernels_;
  residual_backward();
  const RecomputeModules rerun = config_.selective_modules();
  if (config_.is_moe_layer(layer) && config_.layer_kernels == LayerKernelSet::kTorchtitan) {
    torchtitan_moe_backward();
  } else if (config_.is_moe_layer(layer)) {
    // A MoE layer's pre-MLP norm is a module of its own (TENorm), rerun under layernorm; the
    // moe checkpoint reruns the layer after it.
    if (rerun.layernorm) norm_forward();
    if (rerun.moe) moe_forward();
    moe_backward();
  } else {
    // Transformer Engine's fc1 holds the pre-MLP norm: the mlp checkpoint reruns both.
    if (rerun.mlp) {
      norm_forward();
      dense_mlp_forward();
    }
    if (config_.layer_kernels == LayerKernelSet::kTorchtitan) {
      torchtitan_mlp_backward();
    } else {
      lora_backward(LoraTarget::kFc2);
      row_parallel_backward(d.fc2_dy, d.fc2_dgrad, d.fc2_dgrad_chunk, d.fc2_wgrad);
      autocast_backward(d.fc2_cast);
      ops_.op(act_op(true), "activation_bwd", d.act_bwd);
      fp8_cast(d.fc1_dy, true);
      lora_backward(LoraTarget::kFc1);
      column_parallel_backward("LinearBackward", d.fc1_dgrad, d.fc1_wgrad);
      autocast_backward(d.fc1_cast);
    }
  }
  norm_backward_and_residual_gradient();
}

void LayerEmitter::embedding_forward() {
  const LayerKernels& d = kernels_;
  ops_.op("aten::embedding", "embedding_fwd", d.embed_fwd);
  // Vocab-parallel embedding: each TP rank looks up its vocabulary slice, then all-reduce
  // (reduce-scatter into the sequence-parallel region).
  if (sizes_.t > 1) {
    const int64_t full = sizes_.tokens * sizes_.h * act_elem_bytes_;
    if (config_.parallelism.sequence) {
      tp_collective(CollectiveKind::kReduceScatter, full, "c10d::_reduce_scatter_base");
    } else {
      tp_collective(CollectiveKind::kAllReduce, full, "c10d::all_reduce");
    }
  }
  if (config_.position == TransformerPosition::kLearned)
    ops_.op("aten::add", "position_add", d.pos_add);
}

void LayerEmitter::embedding_backward() {
  // A frozen embedding (LoRA) has no weight gradient to compute, and nothing before it needs
  // an input gradient.
  if (frozen_base()) return;
  tp_exit_backward();
  ops_.op("EmbeddingBackward0", "embedding_dense_backward", kernels_.embed_bwd);
}

}  // namespace upsim::transformer_emit
