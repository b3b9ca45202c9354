// Megatron-Core's MoE layer (megatron/core/transformer/moe/moe_layer.py), as LayerEmitter emits
// it: the router and its top-k, the token dispatcher of workload.moe.dispatcher
// (token_dispatcher.py: MoEAlltoAllTokenDispatcher, MoEAllGatherTokenDispatcher, or
// MoEFlexTokenDispatcher on DeepEP), the local
// experts' grouped GEMMs (experts.py, GroupedMLP / TEGroupedMLP) and the shared experts, forward
// and backward.
#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/deepep.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

std::vector<double> LayerEmitter::dispatch_shares() const {
  const int64_t ep = config_.parallelism.expert;
  const auto n = static_cast<size_t>(ep);
  const double capacity =
      config_.moe.capacity_factor > 0.0 ? config_.moe.capacity_factor : as_double(ep);
  std::vector<double> share(n);
  share[0] = moe_busiest_rank_load(config_) / as_double(ep);
  for (size_t j = 1; j < n; ++j) {
    // Padded to capacity, every rank receives its experts' capacity from every rank.
    share[j] = config_.moe.pad_to_capacity
                   ? share[0]
                   : std::min((1.0 - share[0]) / as_double(ep - 1), capacity / as_double(ep));
  }
  return share;
}

std::vector<int64_t> LayerEmitter::dispatch_matrix(bool combine, int64_t row_bytes) const {
  const auto n = static_cast<size_t>(config_.parallelism.expert);
  const double tokens = as_double(sizes_.moe_tokens * config_.moe.top_k);
  const std::vector<double> share = dispatch_shares();
  std::vector<int64_t> send(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const auto bytes = static_cast<int64_t>(tokens * share[j] * as_double(row_bytes) + 0.5);
      send[combine ? j * n + i : i * n + j] = bytes;
    }
  }
  return send;
}

void LayerEmitter::expert_all_to_all(bool combine) {
  if (config_.parallelism.expert <= 1) return;
  ops_.blocking(groups_.expert, CollectiveKind::kAllToAll, 0, "all_to_all",
                "c10d::all_to_all_single", dispatch_matrix(combine, sizes_.h * act_elem_bytes_));
}

void LayerEmitter::expert_probs_all_to_all(bool backward) {
  if (config_.parallelism.expert <= 1) return;
  ops_.blocking(groups_.expert, CollectiveKind::kAllToAll, 0, "all_to_all", "moe::all_to_all_probs",
                dispatch_matrix(backward, kRouterProbBytes));
}

FlexRoutes LayerEmitter::flex_routes() const {
  FlexRoutes flex;
  const int64_t ep = config_.parallelism.expert;
  if (config_.moe.dispatcher != MoeDispatcher::kFlex || ep <= 1) return flex;
  const bool hybrid = config_.moe.flex_backend == FlexBackend::kHybridEp;
  const auto n = static_cast<size_t>(ep);
  const std::vector<uint32_t> nodes =
      groups_.expert_nodes.size() == n ? groups_.expert_nodes : default_member_nodes(n);
  const auto node_count = std::set<uint32_t>(nodes.begin(), nodes.end()).size();
  flex.sms = flex_dispatch_sms(hybrid, config_.moe.flex_sms, node_count > 1);
  std::vector<double> weight = dispatch_shares();  // in experts' worth of the routing
  for (double& w : weight)
    w *= as_double(config_.moe.experts);
  const int64_t experts = config_.moe.experts;
  const int64_t k = config_.moe.top_k;
  const int64_t tokens = sizes_.moe_tokens;
  const int64_t row = sizes_.h * act_elem_bytes_;
  // What travels with a token's row, forward (and the probabilities' gradient back):
  //  - DeepEP (deep_ep.cpp): its top-k int64 indices and fp32 weights; the gradient, the
  //    weights' fp32 gradients;
  //  - HybridEP (hybrid_ep_backend.cuh): the fp32 probabilities of every expert of the
  //    destination node (experts per rank x ranks per node), the same for the gradient.
  const int64_t ranks_per_node = ep / static_cast<int64_t>(node_count);
  const int64_t node_experts = experts / ep * ranks_per_node;
  const int64_t routing =
      hybrid ? node_experts * kRouterProbBytes : k * (kDeepEpTopkIdxBytes + kRouterProbBytes);
  const int64_t routing_grad = hybrid ? node_experts * kRouterProbBytes : k * kRouterProbBytes;
  flex.dispatch = deepep_send_matrix(nodes, weight, experts, k, tokens, row + routing, false);
  flex.combine = deepep_send_matrix(nodes, weight, experts, k, tokens, row, true);
  flex.combine_grad = deepep_send_matrix(nodes, weight, experts, k, tokens, row, false);
  flex.dispatch_grad =
      deepep_send_matrix(nodes, weight, experts, k, tokens, row + routing_grad, true);
  if (!hybrid) {
    // notify_dispatch: each rank tells every other its token count and per-expert counts
    // (int32).
    const int64_t counts = (1 + experts / ep) * 4;
    flex.notify.assign(n * n, counts);
    for (size_t i = 0; i < n; ++i)
      flex.notify[i * n + i] = 0;
  }
  return flex;
}

std::string_view LayerEmitter::flex_op(std::string_view deepep, std::string_view hybridep) const {
  return config_.moe.flex_backend == FlexBackend::kHybridEp ? hybridep : deepep;
}

void LayerEmitter::flex_collective(std::string_view name, std::string_view op_name,
                                   const std::vector<int64_t>& send_bytes) {
  ops_.blocking(groups_.expert, CollectiveKind::kAllToAll, 0, name, op_name, send_bytes, flex_.sms);
}

void LayerEmitter::flex_dispatch(bool with_metadata) {
  const LayerKernels& d = kernels_;
  if (config_.moe.flex_backend == FlexBackend::kHybridEp) {
    // metadata_preprocessing: the [tokens, experts] bool routing map all-gathered (NCCL), the
    // scan kernel's layout, then the per-expert counts copied to the host, which synchronises
    // (Megatron-Core: non_blocking False without moe_expert_rank_capacity_factor).
    ops_.blocking(groups_.expert, CollectiveKind::kAllGather,
                  sizes_.moe_tokens * config_.moe.experts, "all_gather",
                  "hybrid_ep::allgather_routing_map");
    ops_.op("hybrid_ep::metadata_preprocessing", "scan", d.flex_layout);
    host_waits_for_expert_counts(config_.moe.experts / config_.parallelism.expert *
                                 kExpertCountBytes);
  } else {
    if (with_metadata) ops_.op("aten::topk", "flex_topk", d.topk);
    ops_.op("deep_ep::get_dispatch_layout", "get_dispatch_layout", d.flex_layout);
    flex_collective("notify_dispatch", "deep_ep::notify_dispatch", flex_.notify);
    if (ops_.capturing()) {
      throw std::logic_error("transformer generator: DeepEP's receive-count wait in a CUDA graph");
    }
    // The host spins on the counts notify_dispatch writes to pinned memory (deep_ep.cpp,
    // Buffer::intranode_dispatch / internode_dispatch) before it launches the dispatch.
    ops_.graph().add_host_sync(ops_.threads().rank, kCpuThread, ops_.stream(),
                               "deep_ep::dispatch (receive counts)");
  }
  if (config_.moe.shared_expert_overlap) {
    ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::wait_current_stream");
  }
  flex_collective("dispatch", flex_op("deep_ep::dispatch", "hybrid_ep::dispatch"), flex_.dispatch);
}

void LayerEmitter::flex_combine() {
  ops_.op("moe_unpermute", "unpermute", kernels_.unpermute);
  flex_collective("combine", flex_op("deep_ep::combine", "hybrid_ep::combine"), flex_.combine);
}

bool LayerEmitter::moe_router_graph_end() {
  bool preprocessed = false;
  if (config_.cuda_graph_scope.moe_preprocess) {
    const bool alltoall = config_.moe.dispatcher == MoeDispatcher::kAllToAll;
    if (alltoall && !config_.moe.pad_to_capacity) gather_expert_counts();
    if (alltoall) ops_.op("moe_permute", "permute", kernels_.permute);
    if (config_.moe.dispatcher == MoeDispatcher::kFlex &&
        config_.moe.flex_backend == FlexBackend::kDeepEp) {
      ops_.op("aten::topk", "flex_topk", kernels_.topk);  // setup_metadata
    }
    preprocessed = alltoall || config_.moe.dispatcher == MoeDispatcher::kFlex;
  }
  ops_.end_capture(kGraphReplay);
  return preprocessed;
}

void LayerEmitter::moe_forward() {
  const LayerKernels& d = kernels_;
  const bool gather = config_.moe.dispatcher == MoeDispatcher::kAllGather;
  const bool flex = config_.moe.dispatcher == MoeDispatcher::kFlex;
  const bool overlap = config_.moe.shared_expert_overlap;
  // cuda_graph_scope moe_router: the graph holds the shared experts (computed first, as
  // Megatron-Core's graphed path does) and the router, and ends before the dispatch.
  const bool router_graph = ops_.capturing() && config_.cuda_graph_scope.moe_router;
  const bool shared_in_graph = router_graph && config_.moe.shared_experts > 0 && !overlap;
  if (shared_in_graph) shared_experts_forward();
  router_forward();
  const bool preprocessed = router_graph && moe_router_graph_end();
  if (flex) {
    flex_dispatch(!preprocessed);
  } else if (gather) {
    allgather_dispatch();
  } else if (!config_.moe.pad_to_capacity) {
    if (preprocessed) {
      // The counts were gathered in the graph; copied and waited for after it
      // (cuda_dtoh_point before_ep_alltoall).
      host_waits_for_expert_counts(config_.moe.experts * kExpertCountBytes *
                                   config_.parallelism.expert);
    } else {
      expert_count_sync();
    }
  }
  if (overlap && !flex) {
    ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::pre_forward_comm");
    shared_experts_on_side(SharedExpertPart::kEnter);
  }
  if (overlap && flex) {
    // The flex dispatcher launches the shared experts' input gather and fc1 right after the
    // dispatch (the side stream waited before it), then the receiver permutes.
    shared_experts_on_side(SharedExpertPart::kEnter);
    shared_experts_on_side(SharedExpertPart::kFc1);
  }
  if (!(preprocessed && !flex)) ops_.op("moe_permute", "permute", d.permute);
  if (!gather && !flex) {
    if (overlap) ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::wait_current_stream");
    expert_all_to_all(false);
    if (overlap) shared_experts_on_side(SharedExpertPart::kFc1);
    expert_probs_all_to_all(false);
    expert_tp_all_gather(false);
  }
  // The routed experts start when the side stream's fc1 is done: they take the same SMs (the
  // executor runs kernels of two streams side by side at full speed), so this keeps the overlap
  // to what the dispatch's communication hides.
  if (overlap) ops_.wait_stream(kCompute, kSharedExperts, "shared_experts::fc1_done");
  routed_experts_forward();
  if (overlap) ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::wait_current_stream");
  if (flex) {
    flex_combine();
  } else if (gather) {
    allgather_combine(false);
  } else {
    expert_tp_reduce_scatter(false);
    expert_all_to_all(true);
  }
  if (overlap) {
    // fc2 and the output's reduce-scatter beside the combine's communication; the output is
    // added once the side stream is done.
    shared_experts_on_side(SharedExpertPart::kFc2Exit);
    if (!gather && !flex) ops_.op("moe_unpermute", "unpermute", d.unpermute);
    ops_.wait_stream(kCompute, kSharedExperts, "shared_experts::get_output");
    return;
  }
  if (!gather && !flex) ops_.op("moe_unpermute", "unpermute", d.unpermute);
  if (config_.moe.shared_experts > 0 && !shared_in_graph) shared_experts_forward();
}

void LayerEmitter::shared_experts_part(SharedExpertPart part) {
  const LayerKernels& d = kernels_;
  switch (part) {
    case SharedExpertPart::kEnter:
      tp_enter_forward();
      return;
    case SharedExpertPart::kFc1:
      fp8_cast(d.shared_fc1_in, false);
      ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_fc1"), d.shared_fc1_fwd);
      ops_.op(act_op(false), "activation_fwd", d.shared_act_fwd);
      return;
    case SharedExpertPart::kFc2Exit:
      fp8_cast(d.shared_fc2_in, false);
      ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_fc2"), d.shared_fc2_fwd);
      tp_exit_forward();
      return;
    case SharedExpertPart::kFc2Backward: {
      tp_exit_backward();
      fp8_cast(d.shared_fc2_dy, true);
      const std::string dgrad = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
      const std::string wgrad = pytorch::gemm_kernel_name(gemm_dt_, "wgrad");
      if (defer_weight_gradient(wgrad, d.shared_fc2_wgrad)) {
        ops_.op("MmBackward0", dgrad, d.shared_fc2_dgrad);
      } else {
        ops_.op2("MmBackward0", dgrad, d.shared_fc2_dgrad, wgrad, d.shared_fc2_wgrad);
      }
      ops_.op(act_op(true), "activation_bwd", d.shared_act_bwd);
      return;
    }
    case SharedExpertPart::kFc1Backward:
      fp8_cast(d.shared_fc1_dy, true);
      column_parallel_backward("MmBackward0", d.shared_fc1_dgrad, d.shared_fc1_wgrad);
      return;
  }
}

void LayerEmitter::shared_experts_on_side(SharedExpertPart part) {
  const OpEmitter::StreamScope side(ops_, kSharedExperts);
  shared_experts_part(part);
}

void LayerEmitter::expert_tp_all_gather(bool backward) {
  if (sizes_.et == 1) return;
  const int64_t rows = moe_rank_rows(config_, sizes_);
  if (backward) {
    reduce_scatter_in_prob_dtype(groups_.tensor, sizes_.t, rows, kernels_.moe_tp_combine_casts,
                                 true, "moe::reduce_scatter_to_sequence_parallel_region");
    return;
  }
  ops_.blocking(groups_.tensor, CollectiveKind::kAllGather, rows * sizes_.h * act_elem_bytes_,
                "all_gather", "moe::gather_from_sequence_parallel_region");
  ops_.blocking(groups_.tensor, CollectiveKind::kAllGather, rows * kRouterProbBytes, "all_gather",
                "moe::gather_probs_from_sequence_parallel_region");
}

void LayerEmitter::expert_tp_reduce_scatter(bool backward) {
  if (sizes_.et == 1) return;
  const int64_t rows = moe_rank_rows(config_, sizes_);
  if (!backward) {
    reduce_scatter_in_prob_dtype(groups_.tensor, sizes_.t, rows, kernels_.moe_tp_combine_casts,
                                 false, "moe::reduce_scatter_to_sequence_parallel_region");
    return;
  }
  // The gradients of the dispatch's all-gathers: the rows' and their probabilities'.
  const int64_t gathered_rows = sizes_.t * rows;
  ops_.blocking(groups_.tensor, CollectiveKind::kReduceScatter,
                gathered_rows * sizes_.h * act_elem_bytes_, "reduce_scatter",
                "moe::reduce_scatter_input_grad");
  ops_.blocking(groups_.tensor, CollectiveKind::kReduceScatter, gathered_rows * kRouterProbBytes,
                "reduce_scatter", "moe::reduce_scatter_probs_grad");
}

void LayerEmitter::reduce_scatter_in_prob_dtype(uint32_t group, int64_t members, int64_t rows,
                                                const ProbDtypeCasts& casts, bool backward,
                                                std::string_view forward_op) {
  const int64_t rank_bytes = rows * sizes_.h * kRouterProbBytes;
  // fp32 activations need no cast to the probabilities' dtype.
  const bool cast = act_elem_bytes_ != kRouterProbBytes;
  if (!backward) {
    if (cast) ops_.op("aten::to", "cast", casts.group_rows);
    ops_.blocking(group, CollectiveKind::kReduceScatter, members * rank_bytes, "reduce_scatter",
                  forward_op);
    if (cast) ops_.op("aten::to", "cast", casts.rank_rows);
    return;
  }
  if (cast) ops_.op("ToCopyBackward0", "cast", casts.rank_rows);
  ops_.blocking(group, CollectiveKind::kAllGather, rank_bytes, "all_gather",
                "moe::gather_output_grad");
  if (cast) ops_.op("ToCopyBackward0", "cast", casts.group_rows);
}

void LayerEmitter::allgather_dispatch() {
  const int64_t ep = config_.parallelism.expert;
  const int64_t tokens = sizes_.moe_tokens;
  if (ep > 1) {
    // [tokens, experts] of bools, of the router's fp32 probabilities, then [tokens, h].
    ops_.blocking(groups_.expert, CollectiveKind::kAllGather, tokens * config_.moe.experts,
                  "all_gather", "moe::gather_routing_map");
    ops_.blocking(groups_.expert, CollectiveKind::kAllGather,
                  tokens * config_.moe.experts * kRouterProbBytes, "all_gather",
                  "moe::gather_probs");
    ops_.blocking(groups_.expert, CollectiveKind::kAllGather, tokens * sizes_.h * act_elem_bytes_,
                  "all_gather", "moe::gather_hidden_states");
  }
  // tokens_per_expert = local_map.sum(dim=0).long().cpu(): one int64 per local expert.
  host_waits_for_expert_counts(config_.moe.experts / ep * kExpertCountBytes);
}

void LayerEmitter::allgather_combine(bool backward) {
  const LayerKernels& d = kernels_;
  const int64_t ep = config_.parallelism.expert;
  if (ep <= 1) {
    ops_.op(backward ? "MoeUnpermuteBackward" : "moe_unpermute",
            backward ? "unpermute_bwd" : "unpermute", backward ? d.permute : d.unpermute);
    return;
  }
  if (!backward) {
    // unpermute restores the gathered shape: zeros, then the local experts' rows added in; the
    // sum goes back to each rank in the probabilities' dtype.
    ops_.op("aten::zeros", "fill", d.moe_gathered_fill);
    ops_.op("moe_unpermute", "unpermute", d.unpermute);
    reduce_scatter_in_prob_dtype(groups_.expert, ep, sizes_.moe_tokens, d.moe_ep_combine_casts,
                                 false, "moe::reduce_scatter_output");
    return;
  }
  // Backward: the reduce-scatter's gradient, then unpermute's gradient gathers the local
  // experts' rows.
  reduce_scatter_in_prob_dtype(groups_.expert, ep, sizes_.moe_tokens, d.moe_ep_combine_casts, true,
                               "moe::reduce_scatter_output");
  ops_.op("MoeUnpermuteBackward", "unpermute_bwd", d.permute);
}

void LayerEmitter::allgather_dispatch_backward() {
  const LayerKernels& d = kernels_;
  const int64_t ep = config_.parallelism.expert;
  if (ep <= 1) {
    ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
    return;
  }
  // permute's gradient scatters the rows into zeros of the gathered shape, which the gathers'
  // gradients reduce-scatter back: the hidden states' and the probabilities'.
  ops_.op("aten::zeros", "fill", d.moe_gathered_fill);
  ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
  ops_.blocking(groups_.expert, CollectiveKind::kReduceScatter,
                ep * sizes_.moe_tokens * sizes_.h * act_elem_bytes_, "reduce_scatter",
                "moe::reduce_scatter_hidden_grad");
  ops_.blocking(groups_.expert, CollectiveKind::kReduceScatter,
                ep * sizes_.moe_tokens * config_.moe.experts * kRouterProbBytes, "reduce_scatter",
                "moe::reduce_scatter_probs_grad");
}

void LayerEmitter::shared_experts_forward() {
  // A tensor-parallel MLP: its input all-gathered over the sequence-parallel ranks, its output
  // reduce-scattered back (SharedExpertMLP's column- and row-parallel linears).
  for (const SharedExpertPart part :
       {SharedExpertPart::kEnter, SharedExpertPart::kFc1, SharedExpertPart::kFc2Exit})
    shared_experts_part(part);
}

int64_t LayerEmitter::gather_expert_counts() {
  const int64_t local_counts = config_.moe.experts * kExpertCountBytes;
  ops_.blocking(groups_.expert, CollectiveKind::kAllGather, local_counts, "all_gather",
                "moe::gather_tokens_per_expert");
  return local_counts * config_.parallelism.expert;
}

void LayerEmitter::expert_count_sync() {
  host_waits_for_expert_counts(gather_expert_counts());
}

void LayerEmitter::host_waits_for_expert_counts(int64_t bytes) {
  HostOp h = ops_.host_op("aten::to");
  h.copy_on(ops_.stream(), "Memcpy DtoH (Device -> Pinned)", TransferKind::kDeviceToHost, bytes);
  h.end();
  if (ops_.capturing()) {
    throw std::logic_error(
        "transformer generator: the MoE token-count sync inside a CUDA graph capture");
  }
  ops_.graph().add_host_sync(ops_.threads().rank, kCpuThread, ops_.stream(),
                             "cudaStreamSynchronize");
}

void LayerEmitter::expert_counts_to_host(bool gathered) {
  const int64_t bytes = gathered
                            ? config_.moe.experts * kExpertCountBytes * config_.parallelism.expert
                            : gather_expert_counts();
  HostOp h = ops_.host_op("aten::to");
  h.wait(kEpDtoH, h.record(ops_.stream()));
  h.copy_on(kEpDtoH, "Memcpy DtoH (Device -> Pinned)", TransferKind::kDeviceToHost, bytes);
  h.end();
}

void LayerEmitter::host_waits_for_counts_copy() {
  if (ops_.capturing()) {
    throw std::logic_error(
        "transformer generator: the MoE token-count sync inside a CUDA graph capture");
  }
  ops_.graph().add_host_sync(ops_.threads().rank, kCpuThread, kEpDtoH, "cudaEventSynchronize");
}

void LayerEmitter::moe_backward() {
  const LayerKernels& d = kernels_;
  const RecomputeModules rerun = config_.selective_modules();
  const bool overlap = config_.moe.shared_expert_overlap;
  // cuda_graph_scope moe_router: the backward of the router's graph (and of the shared experts
  // it held) begins after the dispatch's backward.
  const bool router_graph = config_.cuda_graphs && config_.cuda_graph_scope.moe_router;
  const bool shared_in_graph = router_graph && config_.moe.shared_experts > 0 && !overlap;
  bool side_joined = false;  // the compute stream waited for the side stream's fc1 backward
  const auto shared_experts_backward = [&] {
    if (rerun.shared_experts) shared_experts_forward();
    shared_experts_part(SharedExpertPart::kFc2Backward);
    shared_experts_part(SharedExpertPart::kFc1Backward);
  };
  if (config_.moe.shared_experts > 0 && !overlap && !shared_in_graph) shared_experts_backward();
  // Under moe.shared_expert_overlap autograd runs the shared experts' backward on the side
  // stream their forward ran on, ordered to follow each all-to-all's backward (Megatron-Core's
  // set_tensor_grad_fn_sequence_sr): fc2's beside the combine's, fc1's beside the dispatch's.
  const bool gather = config_.moe.dispatcher == MoeDispatcher::kAllGather;
  const bool flex = config_.moe.dispatcher == MoeDispatcher::kFlex;
  if (flex) {
    if (overlap) ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::backward");
    flex_collective("dispatch", flex_op("FusedCombineBackward", "HybridEPCombineBackward"),
                    flex_.combine_grad);
    if (overlap) shared_experts_on_side(SharedExpertPart::kFc2Backward);
    ops_.op("MoeUnpermuteBackward", "unpermute_bwd", kernels_.permute);
  } else if (gather) {
    allgather_combine(true);
  } else {
    ops_.op("MoeUnpermuteBackward", "unpermute_bwd", d.permute);
    if (overlap) ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::backward");
    expert_all_to_all(false);
    if (overlap) shared_experts_on_side(SharedExpertPart::kFc2Backward);
    expert_tp_all_gather(true);
  }
  if (overlap) ops_.wait_stream(kCompute, kSharedExperts, "shared_experts::fc2_backward_done");
  routed_experts_backward();
  if (overlap) ops_.wait_stream(kSharedExperts, kCompute, "shared_experts::backward");
  if (flex) {
    ops_.op("MoePermuteBackward", "permute_bwd", kernels_.unpermute);
    flex_collective("combine", flex_op("FusedDispatchBackward", "HybridEPDispatchBackward"),
                    flex_.dispatch_grad);
    if (overlap) shared_experts_on_side(SharedExpertPart::kFc1Backward);
  } else if (gather) {
    allgather_dispatch_backward();
  } else {
    expert_tp_reduce_scatter(true);
    expert_all_to_all(true);
    if (overlap) shared_experts_on_side(SharedExpertPart::kFc1Backward);
    expert_probs_all_to_all(true);
    // moe_preprocess graphed the first permutation: its backward is the graph's, which the
    // side stream's wait precedes (a capture waits on no event recorded outside it).
    if (router_graph && config_.cuda_graph_scope.moe_preprocess) {
      if (overlap) {
        ops_.wait_stream(kCompute, kSharedExperts, "shared_experts::fc1_backward_done");
        side_joined = true;
      }
      ops_.begin_capture();
    }
    ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
  }
  if (overlap && !side_joined) {
    ops_.wait_stream(kCompute, kSharedExperts, "shared_experts::fc1_backward_done");
  }
  if (router_graph && !ops_.capturing()) ops_.begin_capture();
  router_backward();
  if (shared_in_graph) shared_experts_backward();
}

void LayerEmitter::router_forward() {
  ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "router"), kernels_.router_fwd);
  ops_.op("aten::topk", "router_topk", kernels_.topk);
}

void LayerEmitter::router_backward() {
  ops_.op("TopkBackward", "router_topk_bwd", kernels_.topk_bwd);
  ops_.op2("MmBackward0", pytorch::gemm_kernel_name(linear_dt_, "dgrad"), kernels_.router_dgrad,
           pytorch::gemm_kernel_name(linear_dt_, "wgrad"), kernels_.router_wgrad);
}

void LayerEmitter::routed_experts_forward() {
  const LayerKernels& d = kernels_;
  fp8_cast(d.expert_fc1_in, false);
  ops_.op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc1"), d.expert_fc1_fwd);
  ops_.op(act_op(false), "activation_fwd", d.expert_act_fwd);
  fp8_cast(d.expert_fc2_in, false);
  ops_.op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc2"), d.expert_fc2_fwd);
}

void LayerEmitter::routed_experts_backward() {
  const LayerKernels& d = kernels_;
  fp8_cast(d.expert_fc2_dy, true);
  grouped_gemm_backward(d.expert_fc2_dgrad, d.expert_fc2_wgrad);
  if (config_.selective_modules().moe_act) {
    ops_.op(act_op(false), "activation_fwd", d.expert_act_fwd);
  }
  ops_.op(act_op(true), "activation_bwd", d.expert_act_bwd);
  fp8_cast(d.expert_fc1_dy, true);
  grouped_gemm_backward(d.expert_fc1_dgrad, d.expert_fc1_wgrad);
}

void LayerEmitter::grouped_gemm_backward(KernelDescId dgrad, KernelDescId wgrad) {
  const std::string dgrad_name = pytorch::gemm_kernel_name(gemm_dt_, "dgrad");
  const std::string wgrad_name = pytorch::gemm_kernel_name(gemm_dt_, "wgrad");
  if (defer_weight_gradient(wgrad_name, wgrad)) {
    ops_.op("GroupedGemmBackward", dgrad_name, dgrad);
    return;
  }
  ops_.op2("GroupedGemmBackward", dgrad_name, dgrad, wgrad_name, wgrad);
}

}  // namespace upsim::transformer_emit
