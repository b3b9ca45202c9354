// LoRA's adapters around a layer's target linears (lora.h): A, B, the scale and the add in the
// forward; the scale's, B's and A's backward, their tensor-parallel reductions, and the add of the
// adapter's input gradient to the base's in the backward. Megatron-Bridge's ParallelLinearAdapter
// runs A and B as Megatron's ColumnParallelLinear / RowParallelLinear with sequence parallel off:
// their collectives block the compute stream.
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_emitter.h"

namespace upsim::transformer_emit {

namespace {

bool column_target(LoraTarget t) {
  return t == LoraTarget::kQkv || t == LoraTarget::kFc1;
}

}  // namespace

void LayerEmitter::lora_forward(LoraTarget target) {
  if (!config_.lora.adapts(target)) return;
  const LoraTargetKernels& k = kernels_.lora[static_cast<size_t>(target)];
  const bool tp = sizes_.t > 1;
  const int64_t rank_bytes = sizes_.tokens * config_.lora.rank * act_elem_bytes_;
  ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "lora_a"), k.in_fwd);
  // Column: A's rank / tensor outputs all-gathered (gather_output); row: A's partial sums
  // all-reduced.
  if (tp && column_target(target)) {
    tp_collective(CollectiveKind::kAllGather, rank_bytes / sizes_.t, "c10d::_allgather_base");
  } else if (tp) {
    tp_collective(CollectiveKind::kAllReduce, rank_bytes, "c10d::all_reduce");
  }
  ops_.op("aten::linear", pytorch::gemm_kernel_name(linear_dt_, "lora_b"), k.out_fwd);
  // Row: B's hidden / tensor outputs all-gathered to hidden (then split to the sequence shard
  // under SP, locally).
  if (tp && !column_target(target)) {
    tp_collective(CollectiveKind::kAllGather, sizes_.tokens * sizes_.h * act_elem_bytes_ / sizes_.t,
                  "c10d::_allgather_base");
  }
  ops_.op("aten::mul", "lora_scale", k.scale);
  ops_.op("aten::add", "lora_add", k.output_add);
}

void LayerEmitter::lora_backward(LoraTarget target) {
  if (!config_.lora.adapts(target)) return;
  const LoraTargetKernels& k = kernels_.lora[static_cast<size_t>(target)];
  const bool tp = sizes_.t > 1;
  const bool sp = config_.parallelism.sequence;
  const int64_t rank_bytes = sizes_.tokens * config_.lora.rank * act_elem_bytes_;
  const std::string dgrad = pytorch::gemm_kernel_name(linear_dt_, "dgrad");
  const std::string wgrad = pytorch::gemm_kernel_name(linear_dt_, "wgrad");
  ops_.op("MulBackward0", "lora_scale", k.scale);
  // Row under SP: the split's backward all-gathers the output gradient.
  if (tp && sp && !column_target(target)) {
    tp_collective(CollectiveKind::kAllGather, sizes_.sp_tokens * sizes_.h * act_elem_bytes_,
                  "c10d::_allgather_base");
  }
  ops_.op2("MmBackward0", dgrad, k.out_dgrad, wgrad, k.out_wgrad);
  // B is column parallel: its rank-wide input gradient is all-reduced.
  if (tp) tp_collective(CollectiveKind::kAllReduce, rank_bytes, "c10d::all_reduce");
  ops_.op2("MmBackward0", dgrad, k.in_dgrad, wgrad, k.in_wgrad);
  // Column without SP: A's hidden-wide input gradient is all-reduced (with SP it joins the
  // base's reduce-scatter: disable_grad_reduce).
  if (tp && !sp && column_target(target)) {
    tp_collective(CollectiveKind::kAllReduce, sizes_.tokens * sizes_.h * act_elem_bytes_,
                  "c10d::all_reduce");
  }
  ops_.op("aten::add", "lora_input_grad_add", k.input_grad_add);
}

}  // namespace upsim::transformer_emit
