#include "workloads/transformer/transformer_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "workloads/pytorch/ddp_buckets.h"
#include "workloads/pytorch/host_op.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/gradient_sync.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/process_groups.h"

namespace upsim {

namespace {

using pytorch::HostOp;
using pytorch::RankThreads;

constexpr uint16_t kCpuThread = 0;
constexpr uint16_t kCompute = 0;
constexpr uint16_t kDpComm = 1;
constexpr uint16_t kTpComm = 2;
constexpr uint16_t kActIn = 3;
constexpr uint16_t kActOut = 4;
constexpr uint16_t kGradIn = 5;
constexpr uint16_t kGradOut = 6;
constexpr int64_t kFp32Bytes = 4;

double as_double(int64_t v) {
  return static_cast<double>(v);
}

class Generator {
 public:
  Generator(const TransformerConfig& c, const TransformerGraphInputs& in, TaskGraph& g)
      : config_(c),
        inputs_(in),
        graph_(g),
        layout_(c.parallelism),
        groups_(g, [this](int64_t rank) { return !mirror_ || layout_.coords(rank).dp == 0; }) {
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
    layer_descs_ = add_layer_kernels(config_, sizes_, graph_);
  }

  TransformerGraph run() {
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

 private:
  KernelDescId add(const KernelDesc& d) { return graph_.add_kernel_desc(d); }

  // ---- parameters ---------------------------------------------------------------------------
  /// A norm's tensors: the gain, and the bias of a LayerNorm with biases
  /// (transformer_norm_parameters()).
  void add_norm(LayerParams& p) const {
    p.add(sizes_.h);
    if (transformer_norm_parameters(config_) > sizes_.h) p.add(sizes_.h);
  }

  /// The parameter tensors of `layer` on one GPU, as transformer_memory.h counts them: column-
  /// and row-parallel weights split over tensor (row-parallel biases and norms replicated),
  /// routed experts split over expert and tensor parallel (Megatron's expert tensor parallel =
  /// tensor). The expert GEMMs run unsplit on tokens / tensor instead: the same flops.
  LayerParams layer_params(int64_t layer) const {
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
      const int64_t e_fc1 =
          config_.activation == TransformerActivation::kSwiglu ? 2 * e_ffn : e_ffn;
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

  LayerParams embedding_params() const {
    LayerParams p;
    p.add(sizes_.vocab * sizes_.h);
    if (config_.position == TransformerPosition::kLearned) p.add(config_.seq * sizes_.h);
    return p;
  }

  LayerParams head_params() const {
    LayerParams p;
    add_norm(p);  // final norm
    if (!config_.tied_embeddings || config_.parallelism.pipeline > 1)
      p.add(sizes_.vocab * sizes_.h);
    return p;
  }

  // ---- process groups -----------------------------------------------------------------------
  uint32_t process_group(ParallelDim dim, const std::vector<int64_t>& members,
                         std::string_view channel = {}, std::string_view name = {}) {
    return groups_.group(dim, members, channel, name);
  }
  CollectiveId call(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                    std::vector<int64_t> send_bytes = {}) {
    return groups_.call(pg, kind, bytes, name, std::move(send_bytes));
  }

  // ---- per rank -----------------------------------------------------------------------------
  void begin_rank(int64_t global, RankId graph_rank) {
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

  bool sharded_optimizer() const {
    return config_.parallelism.zero >= 1 || config_.parallelism.fsdp != FsdpMode::kNone;
  }
  /// Ranks that hold the same parameters (ParallelLayout::replica_group): the gradient
  /// reduction's group size and the ZeRO / FSDP shard count.
  int64_t replicas() const { return config_.parallelism.data * config_.parallelism.context; }
  int64_t virtual_stage(int64_t chunk) const {
    return chunk * config_.parallelism.pipeline + coords_.pp;
  }
  int64_t virtual_stages() const { return config_.parallelism.pipeline * chunks_; }
  int64_t first_layer(int64_t chunk) const { return virtual_stage(chunk) * layers_per_chunk_; }

  // ---- emission helpers ---------------------------------------------------------------------
  void marker(std::string_view name) {
    graph_.add_cpu_op(threads_.rank, kCpuThread, name, HostPhase::kMarker);
  }
  void op(std::string_view name, std::string_view kernel_name, KernelDescId k) {
    HostOp h(graph_, threads_, name);
    h.kernel(kernel_name, name, k);
    h.end();
  }
  void op2(std::string_view name, std::string_view k1, KernelDescId d1, std::string_view k2,
           KernelDescId d2) {
    HostOp h(graph_, threads_, name);
    h.kernel(k1, name, d1);
    h.kernel(k2, name, d2);
    h.end();
  }
  /// A collective that blocks the compute stream (torch.distributed on the current stream).
  void blocking(uint32_t pg, CollectiveKind kind, int64_t bytes, std::string_view name,
                std::string_view op_name, std::vector<int64_t> send_bytes = {}) {
    if (groups_.size(pg) < 2) return;
    const CollectiveId c = call(pg, kind, bytes, name, std::move(send_bytes));
    HostOp h(graph_, threads_, op_name);
    h.collective_on(kCompute, c, op_name);
    h.end();
  }
  void tp_collective(CollectiveKind kind, int64_t bytes, std::string_view op_name) {
    blocking(tp_pg_, kind, bytes, collective_kind_name(kind), op_name);
  }

  /// Column-parallel linear backward (Megatron's LinearWithGradAccumulationAndAsyncCommunication):
  /// with SP the input is all-gathered again while the input gradient is computed, and the input
  /// gradient is reduce-scattered while the weight gradient is computed; without SP the input
  /// gradient is all-reduced while the weight gradient is computed.
  void column_parallel_backward(std::string_view name, KernelDescId dgrad, KernelDescId wgrad) {
    HostOp h(graph_, threads_, name);
    const bool tp = sizes_.t > 1;
    const bool sp = config_.parallelism.sequence;
    const int64_t full = sizes_.tokens * sizes_.h * act_elem_bytes_;
    TaskId gathered = kNoTask;
    if (tp && sp) {
      const TaskId ready = h.record(kCompute);
      h.wait(kTpComm, ready);
      h.collective_on(kTpComm,
                      call(tp_pg_, CollectiveKind::kAllGather, full / sizes_.t, "all_gather"),
                      "c10d::_allgather_base");
      gathered = h.record(kTpComm);
    }
    h.kernel(pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), name, dgrad);
    TaskId reduced = kNoTask;
    if (tp) {
      if (gathered != kNoTask) h.wait(kCompute, gathered);
      const TaskId ready = h.record(kCompute);
      h.wait(kTpComm, ready);
      const CollectiveId c =
          sp ? call(tp_pg_, CollectiveKind::kReduceScatter, full, "reduce_scatter")
             : call(tp_pg_, CollectiveKind::kAllReduce, full, "all_reduce");
      h.collective_on(kTpComm, c, sp ? "c10d::_reduce_scatter_base" : "c10d::all_reduce");
      reduced = h.record(kTpComm);
    }
    h.kernel(pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), name, wgrad);
    if (reduced != kNoTask) h.wait(kCompute, reduced);
    h.end();
  }

  /// Entering a tensor-parallel region (before a column-parallel linear): SP all-gather.
  void tp_enter_forward() {
    if (sizes_.t > 1 && config_.parallelism.sequence) {
      tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h * act_elem_bytes_,
                    "c10d::_allgather_base");
    }
  }
  /// Leaving it (after a row-parallel linear): SP reduce-scatter or all-reduce.
  void tp_exit_forward() {
    if (sizes_.t == 1) return;
    const int64_t full = sizes_.tokens * sizes_.h * act_elem_bytes_;
    if (config_.parallelism.sequence) {
      tp_collective(CollectiveKind::kReduceScatter, full, "c10d::_reduce_scatter_base");
    } else {
      tp_collective(CollectiveKind::kAllReduce, full, "c10d::all_reduce");
    }
  }
  /// The backward of tp_exit_forward: SP all-gathers the output gradient; an all-reduce's
  /// backward is the identity.
  void tp_exit_backward() {
    if (sizes_.t > 1 && config_.parallelism.sequence) {
      tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h * act_elem_bytes_,
                    "c10d::_allgather_base");
    }
  }

  std::string_view norm_op(bool backward) const {
    if (config_.norm == TransformerNorm::kRmsNorm) {
      return backward ? "RmsNormBackward" : "aten::rms_norm";
    }
    return backward ? "NativeLayerNormBackward0" : "aten::layer_norm";
  }
  std::string_view act_op(bool backward) const {
    if (config_.activation == TransformerActivation::kSwiglu) {
      return backward ? "SwiGLUBackward" : "swiglu";
    }
    return backward ? "GeluBackward0" : "aten::gelu";
  }

  // ---- layer forward / backward -------------------------------------------------------------
  void attention_forward(bool recompute_core_only) {
    const LayerKernels& d = layer_descs_;
    if (!recompute_core_only) {
      op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
      tp_enter_forward();
      op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "qkv"), d.qkv_fwd);
      if (config_.position == TransformerPosition::kRotary) {
        op("apply_rotary_pos_emb", "rotary_fwd", d.rotary_fwd);
      }
    }
    if (config_.attention == AttentionImpl::kFlash) {
      if (!recompute_core_only) core_attention_flash(false);
    } else {
      op("aten::baddbmm", pytorch::gemm_kernel_name(act_dt_, "qk"), d.score_fwd);
      op("scaled_masked_softmax", "softmax_fwd", d.softmax_fwd);
      if (config_.dropout > 0) op("aten::dropout", "dropout_fwd", d.attn_dropout_fwd);
      op("aten::bmm", pytorch::gemm_kernel_name(act_dt_, "pv"), d.av_fwd);
    }
    if (recompute_core_only) return;
    op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "proj"), d.proj_fwd);
    tp_exit_forward();
    op("bias_dropout_add", "residual_fwd", d.residual_fwd);
  }

  /// Flash attention over the local sequence, with ring attention steps over context parallel:
  /// each step's K/V exchange (a ring shift over the CP group) overlaps the previous step's
  /// attention on the TP-comm stream.
  void core_attention_flash(bool backward) {
    const LayerKernels& d = layer_descs_;
    const int64_t cp = config_.parallelism.context;
    const std::string_view name = backward ? "ScaledDotProductFlashAttentionBackward0"
                                           : "aten::_scaled_dot_product_flash_attention";
    HostOp h(graph_, threads_, name);
    const int64_t kv_bytes =
        2 * sizes_.b * sizes_.s * sizes_.kv_heads * sizes_.head_dim * act_elem_bytes_;
    TaskId exchanged = kNoTask;
    auto exchange = [&](int64_t bytes) {
      const size_t n = static_cast<size_t>(cp);
      std::vector<int64_t> send(n * n, 0);
      for (size_t i = 0; i < n; ++i)
        send[i * n + (i + 1) % n] = bytes;
      const TaskId ready = h.record(kCompute);
      h.wait(kTpComm, ready);
      h.collective_on(kTpComm, call(cp_pg_, CollectiveKind::kAllToAll, 0, "ring_exchange", send),
                      "c10d::batch_isend_irecv");
      exchanged = h.record(kTpComm);
    };
    if (cp > 1) exchange(kv_bytes);
    h.kernel(backward ? "flash_bwd_kernel" : "flash_fwd_kernel", name,
             backward ? d.attn_bwd : d.attn_fwd);
    for (int64_t step = 1; step < cp; ++step) {
      h.wait(kCompute, exchanged);
      if (step + 1 < cp) exchange(kv_bytes);
      h.kernel(backward ? "flash_bwd_kernel" : "flash_fwd_kernel", name,
               backward ? d.attn_ring_bwd[static_cast<size_t>(step - 1)]
                        : d.attn_ring_fwd[static_cast<size_t>(step - 1)]);
    }
    // The backward sends dK / dV around the ring once more to their owners.
    if (backward && cp > 1) {
      exchange(kv_bytes);
      h.wait(kCompute, exchanged);
    }
    h.end();
  }

  void attention_backward() {
    const LayerKernels& d = layer_descs_;
    op("BiasDropoutAddBackward", "residual_bwd", d.residual_bwd);
    tp_exit_backward();
    op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.proj_dgrad,
        pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.proj_wgrad);
    if (config_.attention == AttentionImpl::kFlash) {
      core_attention_flash(true);
    } else {
      op2("BmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), d.av_dgrad_p,
          pytorch::gemm_kernel_name(act_dt_, "wgrad"), d.av_dgrad_v);
      if (config_.dropout > 0) op("NativeDropoutBackward0", "dropout_bwd", d.attn_dropout_bwd);
      op("ScaledMaskedSoftmaxBackward", "softmax_bwd", d.softmax_bwd);
      op2("BaddbmmBackward0", pytorch::gemm_kernel_name(act_dt_, "dgrad"), d.score_dgrad_q,
          pytorch::gemm_kernel_name(act_dt_, "wgrad"), d.score_dgrad_k);
    }
    if (config_.position == TransformerPosition::kRotary) {
      op("RotaryBackward", "rotary_bwd", d.rotary_bwd);
    }
    column_parallel_backward("LinearBackward", d.qkv_dgrad, d.qkv_wgrad);
    op(norm_op(true), "layer_norm_bwd", d.norm_bwd);
    op("aten::add", "residual_grad_add", d.grad_add);
  }

  void mlp_forward(int64_t layer) {
    const LayerKernels& d = layer_descs_;
    op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
    if (config_.is_moe_layer(layer)) {
      moe_forward();
    } else {
      tp_enter_forward();
      op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "fc1"), d.fc1_fwd);
      op(act_op(false), "activation_fwd", d.act_fwd);
      op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "fc2"), d.fc2_fwd);
      tp_exit_forward();
    }
    op("bias_dropout_add", "residual_fwd", d.residual_fwd);
  }

  void mlp_backward(int64_t layer) {
    const LayerKernels& d = layer_descs_;
    op("BiasDropoutAddBackward", "residual_bwd", d.residual_bwd);
    if (config_.is_moe_layer(layer)) {
      moe_backward();
    } else {
      tp_exit_backward();
      op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.fc2_dgrad,
          pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.fc2_wgrad);
      op(act_op(true), "activation_bwd", d.act_bwd);
      column_parallel_backward("LinearBackward", d.fc1_dgrad, d.fc1_wgrad);
    }
    op(norm_op(true), "layer_norm_bwd", d.norm_bwd);
    op("aten::add", "residual_grad_add", d.grad_add);
  }

  /// The all-to-all of routed tokens over the EP group: EP rank i sends rank j the tokens routed
  /// to j's experts. Rank 0 of each group holds the busiest experts (moe_busiest_rank_load);
  /// the others share the rest evenly, each at most the capacity. Dropped tokens are not sent
  /// (Megatron-Core's router drops them before the dispatch).
  std::vector<int64_t> dispatch_matrix(bool combine) const {
    const int64_t ep = config_.parallelism.expert;
    const auto n = static_cast<size_t>(ep);
    const double tokens = as_double(sizes_.moe_tokens * config_.moe.top_k);
    const double capacity =
        config_.moe.capacity_factor > 0.0 ? config_.moe.capacity_factor : as_double(ep);
    std::vector<double> share(n);
    share[0] = moe_busiest_rank_load(config_) / as_double(ep);
    for (size_t j = 1; j < n; ++j)
      share[j] = std::min((1.0 - share[0]) / as_double(ep - 1), capacity / as_double(ep));
    std::vector<int64_t> send(n * n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        const auto bytes =
            static_cast<int64_t>(tokens * share[j] * as_double(sizes_.h * act_elem_bytes_) + 0.5);
        send[combine ? j * n + i : i * n + j] = bytes;
      }
    }
    return send;
  }

  void moe_forward() {
    const LayerKernels& d = layer_descs_;
    op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "router"), d.router_fwd);
    op("aten::topk", "router_topk", d.topk);
    op("moe_permute", "permute", d.permute);
    if (config_.parallelism.expert > 1) {
      blocking(ep_pg_, CollectiveKind::kAllToAll, 0, "all_to_all", "c10d::all_to_all_single",
               dispatch_matrix(false));
    }
    op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc1"), d.expert_fc1_fwd);
    op(act_op(false), "activation_fwd", d.expert_act_fwd);
    op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc2"), d.expert_fc2_fwd);
    if (config_.parallelism.expert > 1) {
      blocking(ep_pg_, CollectiveKind::kAllToAll, 0, "all_to_all", "c10d::all_to_all_single",
               dispatch_matrix(true));
    }
    op("moe_unpermute", "unpermute", d.unpermute);
    if (config_.moe.shared_experts > 0) {
      op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_fc1"), d.shared_fc1_fwd);
      op(act_op(false), "activation_fwd", d.shared_act_fwd);
      op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_fc2"), d.shared_fc2_fwd);
    }
  }

  void moe_backward() {
    const LayerKernels& d = layer_descs_;
    if (config_.moe.shared_experts > 0) {
      op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.shared_fc2_dgrad,
          pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.shared_fc2_wgrad);
      op(act_op(true), "activation_bwd", d.shared_act_bwd);
      op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.shared_fc1_dgrad,
          pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.shared_fc1_wgrad);
    }
    op("MoeUnpermuteBackward", "unpermute_bwd", d.permute);
    if (config_.parallelism.expert > 1) {
      blocking(ep_pg_, CollectiveKind::kAllToAll, 0, "all_to_all", "c10d::all_to_all_single",
               dispatch_matrix(false));
    }
    op2("GroupedGemmBackward", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.expert_fc2_dgrad,
        pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.expert_fc2_wgrad);
    op(act_op(true), "activation_bwd", d.expert_act_bwd);
    op2("GroupedGemmBackward", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.expert_fc1_dgrad,
        pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.expert_fc1_wgrad);
    if (config_.parallelism.expert > 1) {
      blocking(ep_pg_, CollectiveKind::kAllToAll, 0, "all_to_all", "c10d::all_to_all_single",
               dispatch_matrix(true));
    }
    op("MoePermuteBackward", "permute_bwd", d.unpermute);
    op("TopkBackward", "router_topk_bwd", d.topk_bwd);
    op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.router_dgrad,
        pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.router_wgrad);
  }

  void embedding_forward() {
    const LayerKernels& d = layer_descs_;
    op("aten::embedding", "embedding_fwd", d.embed_fwd);
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
      op("aten::add", "position_add", d.pos_add);
  }

  void embedding_backward() {
    tp_exit_backward();
    op("EmbeddingBackward0", "embedding_dense_backward", layer_descs_.embed_bwd);
  }

  void head_forward() {
    const LayerKernels& d = layer_descs_;
    op(norm_op(false), "layer_norm_fwd", d.norm_fwd);
    tp_enter_forward();
    op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "logits"), d.head_fwd);
    // Vocab-parallel cross-entropy (Megatron's _VocabParallelCrossEntropy): all-reduce of the
    // row maxima, of the target logits and of the exp sums over TP (fp32, one value per token).
    HostOp h(graph_, threads_, "vocab_parallel_cross_entropy");
    h.kernel("cross_entropy_fwd", "vocab_parallel_cross_entropy", d.xent_fwd);
    h.end();
    if (sizes_.t > 1) {
      for (int i = 0; i < 3; ++i)
        tp_collective(CollectiveKind::kAllReduce, sizes_.tokens * kFp32Bytes, "c10d::all_reduce");
    }
  }

  void head_backward() {
    const LayerKernels& d = layer_descs_;
    op("VocabParallelCrossEntropyBackward", "cross_entropy_bwd", d.xent_bwd);
    column_parallel_backward("LinearBackward", d.head_dgrad, d.head_wgrad);
    op(norm_op(true), "layer_norm_bwd", d.norm_bwd);
  }

  // ---- data-parallel gradient and parameter traffic -------------------------------------------
  /// Bytes per gradient element in the data-parallel reduction (TransformerConfig::
  /// gradient_dtype()).
  int64_t grad_bytes() const { return dtype_bytes(config_.gradient_dtype()); }

  /// The parameter tensors of `buffer` on this rank in the order their gradients become ready:
  /// the backward visits the virtual stages' last micro-batch from the output layer down to the
  /// embedding, each layer's tensors last-first (PyTorch DDP's rebuilt bucket order).
  std::vector<int64_t> gradient_ready_bytes(const std::vector<PipelineStep>& steps,
                                            GradBufferIndex buffer) const {
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
      if (vs == virtual_stages() - 1) add(head_params());
      for (int64_t l = layers_per_chunk_ - 1; l >= 0; --l)
        add(layer_params(first + l));
      if (vs == 0) add(embedding_params());
    }
    return bytes;
  }

  // ---- one iteration --------------------------------------------------------------------------
  void forward_layer(int64_t layer, int64_t last_layer) {
    std::optional<std::pair<int64_t, PerBuffer>> next;
    if (layer < last_layer) next = std::make_pair(layer + 1, layer_params(layer + 1).elements);
    grad_sync_->before_forward(layer, layer_params(layer).elements, next);
    attention_forward(false);
    mlp_forward(layer);
  }

  void backward_layer(int64_t layer, int64_t first_layer_of_chunk, bool last_micro_batch) {
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

  /// Pipeline p2p: posts the receive of this step's input on its stream and makes the compute
  /// stream wait for it.
  /// Bytes of one pipeline message on the network: the activation (or its gradient) of one
  /// micro-batch, split over the TP ranks with the scatter/gather optimisation.
  int64_t p2p_bytes() const {
    const int64_t full = sizes_.sp_tokens * sizes_.h * act_elem_bytes_;
    return scatter_gather() ? full / sizes_.t : full;
  }
  bool scatter_gather() const {
    return config_.parallelism.p2p_scatter_gather && sizes_.t > 1 && !config_.parallelism.sequence;
  }

  void receive(bool forward, int64_t micro_batch, int64_t chunk) {
    const int64_t vs = virtual_stage(chunk);
    if (forward ? vs == 0 : vs == virtual_stages() - 1) return;
    const uint32_t pg = forward ? from_prev_ : from_next_;
    HostOp h(graph_, threads_, forward ? "recv_forward" : "recv_backward");
    const uint16_t stream = forward ? kActIn : kGradIn;
    h.collective_on(stream, call(pg, CollectiveKind::kSendRecv, p2p_bytes(), "send_recv"),
                    "c10d::batch_isend_irecv");
    const TaskId done = h.record(stream);
    h.wait(kCompute, done);
    h.end();
    // Synchronous p2p: the host blocks until the message is in (req.wait() and
    // torch.cuda.synchronize()), so it cannot run ahead launching the next kernels. Sends stay
    // asynchronous here: Megatron posts them in the same batch as the next receive, which this
    // per-direction stream model has no single call for.
    if (config_.parallelism.p2p_synchronous) {
      graph_.add_host_sync(threads_.rank, kCpuThread, stream, "torch.cuda.synchronize");
    }
    // Scatter/gather: the TP ranks' slices are gathered over NVLink into the full tensor.
    if (scatter_gather()) {
      tp_collective(CollectiveKind::kAllGather, p2p_bytes(), "gather_split_1d_tensor");
    }
    received_.push_back({forward ? prev_ : next_, rank_, forward, micro_batch, vs});
  }

  void send(bool forward, int64_t micro_batch, int64_t chunk) {
    const int64_t vs = virtual_stage(chunk);
    if (forward ? vs == virtual_stages() - 1 : vs == 0) return;
    const uint32_t pg = forward ? to_next_ : to_prev_;
    HostOp h(graph_, threads_, forward ? "send_forward" : "send_backward");
    const uint16_t stream = forward ? kActOut : kGradOut;
    const TaskId ready = h.record(kCompute);
    h.wait(stream, ready);
    h.collective_on(stream, call(pg, CollectiveKind::kSendRecv, p2p_bytes(), "send_recv"),
                    "c10d::batch_isend_irecv");
    h.end();
    sent_.push_back(
        {rank_, forward ? next_ : prev_, forward, micro_batch, forward ? vs + 1 : vs - 1});
  }

  void iteration(uint32_t it) {
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
      marker(fmt::format("{} mb {} chunk {}", step.forward ? "forward" : "backward",
                         step.micro_batch, step.chunk));
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

  /// PyTorch DDP's buckets over each gradient buffer's tensors in ready order
  /// (workloads/pytorch/ddp_buckets.h): 1 MiB first, then ddp_bucket each.
  void assign_gradient_buckets(const std::vector<PipelineStep>& steps) {
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

  void finish_gradients() {
    const ParallelismConfig& p = config_.parallelism;
    grad_sync_->finish_backward();
    // Tied embeddings across the pipeline: the first and last stages sum their copies' grads.
    if (p.pipeline > 1 && config_.tied_embeddings &&
        (coords_.pp == 0 || coords_.pp == p.pipeline - 1)) {
      blocking(emb_pg_, CollectiveKind::kAllReduce, sizes_.vocab * sizes_.h * grad_bytes(),
               "all_reduce", "_allreduce_word_embedding_grads");
    }
  }

  void optimizer_step() {
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

  // ---- checks ---------------------------------------------------------------------------------
  struct Message {
    int64_t from = 0;
    int64_t to = 0;
    bool forward = true;
    int64_t micro_batch = 0;
    int64_t virtual_stage = 0;  ///< the receiver's
  };

  /// Every pipeline message must be received in the order it was sent (messages on a directed
  /// pair are matched by order); a schedule that breaks this would pair the wrong messages.
  void check_p2p_order() const {
    std::map<std::tuple<int64_t, int64_t, bool>, std::vector<std::pair<int64_t, int64_t>>> sent;
    std::map<std::tuple<int64_t, int64_t, bool>, std::vector<std::pair<int64_t, int64_t>>> recv;
    for (const Message& m : sent_)
      sent[{m.from, m.to, m.forward}].emplace_back(m.micro_batch, m.virtual_stage);
    for (const Message& m : received_)
      recv[{m.from, m.to, m.forward}].emplace_back(m.micro_batch, m.virtual_stage);
    for (const auto& [key, order] : sent) {
      auto it = recv.find(key);
      if (it != recv.end() && it->second != order) {
        throw std::logic_error(fmt::format(
            "transformer generator: pipeline messages from rank {} to rank {} are received in "
            "another order than sent",
            std::get<0>(key), std::get<1>(key)));
      }
    }
  }

  const TransformerConfig& config_;
  TransformerGraphInputs inputs_;
  TaskGraph& graph_;
  ParallelLayout layout_;
  LayerSizes sizes_;
  LayerKernels layer_descs_{};
  DType gemm_dt_ = DType::kBf16;
  DType act_dt_ = DType::kBf16;
  int64_t act_elem_bytes_ = 2;
  int64_t micro_batches_ = 1;
  int64_t chunks_ = 1;
  int64_t layers_per_chunk_ = 1;
  bool mirror_ = false;

  ProcessGroups groups_;

  // The rank being emitted.
  int64_t rank_ = 0;
  RankThreads threads_;
  ParallelCoords coords_;
  uint32_t tp_pg_ = 0, cp_pg_ = 0, dp_pg_ = 0, ep_pg_ = 0, mp_pg_ = 0, emb_pg_ = 0;
  uint32_t to_next_ = 0, from_prev_ = 0, to_prev_ = 0, from_next_ = 0;
  int64_t prev_ = 0, next_ = 0;
  std::array<GradBuffer, kGradBuffers> grad_buffers_;
  std::unique_ptr<GradientSync> grad_sync_;
  struct StepDescs {
    KernelDescId norm = 0, scale = 0, update = 0, copy = 0;
  };
  /// Optimizer-step kernels by the number of local parameter elements.
  std::map<int64_t, StepDescs> step_descs_;
  std::vector<Message> sent_;
  std::vector<Message> received_;
};

}  // namespace

TransformerGraph generate_transformer(const TransformerConfig& config,
                                      const TransformerGraphInputs& inputs, TaskGraph& graph) {
  Generator generator(config, inputs, graph);
  return generator.run();
}

}  // namespace upsim
