// Megatron-Core's MoE layer (megatron/core/transformer/moe/moe_layer.py), as LayerEmitter emits
// it: the router and its top-k, the token dispatcher of workload.moe.dispatcher
// (token_dispatcher.py: MoEAlltoAllTokenDispatcher, or MoEAllGatherTokenDispatcher), the local
// experts' grouped GEMMs (experts.py, GroupedMLP / TEGroupedMLP) and the shared experts, forward
// and backward.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

std::vector<int64_t> LayerEmitter::dispatch_matrix(bool combine) const {
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

void LayerEmitter::expert_all_to_all(bool combine) {
  if (config_.parallelism.expert <= 1) return;
  ops_.blocking(groups_.expert, CollectiveKind::kAllToAll, 0, "all_to_all",
                "c10d::all_to_all_single", dispatch_matrix(combine));
}

void LayerEmitter::moe_forward() {
  const LayerKernels& d = kernels_;
  ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "router"), d.router_fwd);
  ops_.op("aten::topk", "router_topk", d.topk);
  if (config_.moe.capacity_factor == 0.0) dropless_count_sync();
  ops_.op("moe_permute", "permute", d.permute);
  expert_all_to_all(false);
  fp8_cast(d.expert_fc1_in, false);
  ops_.op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc1"), d.expert_fc1_fwd);
  ops_.op(act_op(false), "activation_fwd", d.expert_act_fwd);
  fp8_cast(d.expert_fc2_in, false);
  ops_.op("grouped_gemm", pytorch::gemm_kernel_name(gemm_dt_, "expert_fc2"), d.expert_fc2_fwd);
  expert_all_to_all(true);
  ops_.op("moe_unpermute", "unpermute", d.unpermute);
  if (config_.moe.shared_experts > 0) shared_experts_forward();
}

void LayerEmitter::shared_experts_forward() {
  const LayerKernels& d = kernels_;
  fp8_cast(d.shared_fc1_in, false);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_fc1"), d.shared_fc1_fwd);
  ops_.op(act_op(false), "activation_fwd", d.shared_act_fwd);
  fp8_cast(d.shared_fc2_in, false);
  ops_.op("aten::linear", pytorch::gemm_kernel_name(gemm_dt_, "shared_fc2"), d.shared_fc2_fwd);
}

void LayerEmitter::dropless_count_sync() {
  constexpr int64_t kCountBytes = 8;  // one int64 token count per expert
  const int64_t local_counts = config_.moe.experts * kCountBytes;
  const int64_t ep = config_.parallelism.expert;
  if (ep > 1) {
    ops_.blocking(groups_.expert, CollectiveKind::kAllGather, local_counts, "all_gather",
                  "moe::gather_tokens_per_expert");
  }
  HostOp h = ops_.host_op("aten::to");
  h.copy("Memcpy DtoH (Device -> Pinned)", TransferKind::kDeviceToHost, local_counts * ep);
  h.end();
  if (ops_.capturing()) {
    throw std::logic_error(
        "transformer generator: the dropless MoE count sync inside a CUDA graph capture");
  }
  ops_.graph().add_host_sync(ops_.threads().rank, kCpuThread, kCompute, "cudaStreamSynchronize");
}

void LayerEmitter::moe_backward() {
  const LayerKernels& d = kernels_;
  const RecomputeModules rerun = config_.selective_modules();
  if (config_.moe.shared_experts > 0) {
    if (rerun.shared_experts) shared_experts_forward();
    fp8_cast(d.shared_fc2_dy, true);
    ops_.op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.shared_fc2_dgrad,
             pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.shared_fc2_wgrad);
    ops_.op(act_op(true), "activation_bwd", d.shared_act_bwd);
    fp8_cast(d.shared_fc1_dy, true);
    ops_.op2("MmBackward0", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.shared_fc1_dgrad,
             pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.shared_fc1_wgrad);
  }
  ops_.op("MoeUnpermuteBackward", "unpermute_bwd", d.permute);
  expert_all_to_all(false);
  fp8_cast(d.expert_fc2_dy, true);
  ops_.op2("GroupedGemmBackward", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.expert_fc2_dgrad,
           pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.expert_fc2_wgrad);
  if (rerun.moe_act) ops_.op(act_op(false), "activation_fwd", d.expert_act_fwd);
  ops_.op(act_op(true), "activation_bwd", d.expert_act_bwd);
  fp8_cast(d.expert_fc1_dy, true);
  ops_.op2("GroupedGemmBackward", pytorch::gemm_kernel_name(gemm_dt_, "dgrad"), d.expert_fc1_dgrad,
           pytorch::gemm_kernel_name(gemm_dt_, "wgrad"), d.expert_fc1_wgrad);
  expert_all_to_all(true);
  ops_.op("MoePermuteBackward", "permute_bwd", d.unpermute);
  ops_.op("TopkBackward", "router_topk_bwd", d.topk_bwd);
  ops_.op2("MmBackward0", pytorch::gemm_kernel_name(linear_dt_, "dgrad"), d.router_dgrad,
           pytorch::gemm_kernel_name(linear_dt_, "wgrad"), d.router_wgrad);
}

}  // namespace upsim::transformer_emit
