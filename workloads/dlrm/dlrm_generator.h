// DLRM training step -> task graph: the CPU ops, launches and GPU work that the seed paper's
// DLRM_open_source training script issues on each rank (Lin et al., TPDS 2024): table-wise
// model-parallel embeddings (FBGEMM table-batched embedding with fused SGD)
// exchanged by all-to-all forward and backward, data-parallel bottom and top MLPs under two
// DistributedDataParallel wrappers (dlrm_s_pytorch.py wraps bot_l and top_l separately) with
// bucketed all-reduce overlapping the backward, dot interaction (or DCNv2's low-rank cross
// network, whose parameters join the top MLP's DDP module), BCE loss, dense SGD step.
//
// Contract:
//  - generate_dlrm adds `ranks` ranks to the graph, named "rank <r>", each with one CPU thread
//    and the streams {"compute", "comm"}; DLRM rank r is graph rank DlrmGraph::ranks[r].
//  - The graph is a pure function of its inputs (same inputs -> identical graph).
//  - Every GPU task (kernels, copies, collectives, event records and stream waits) is enqueued
//    by exactly one Launch inside a PyTorch-like host op (kOpBegin, launches with launch_index
//    0, 1, ..., kOpEnd); ops that launch nothing are one kOpBody task.
//  - Every rank issues the same collectives in the same order; collective group members are
//    all ranks in rank order. With one rank there is no collective (the script then runs
//    without all-to-all and without DDP).
//  - Each iteration ends with a device-wide HostSync on every rank (the script's time_wrap calls
//    torch.cuda.synchronize()), so the last iteration's end is the run's end.
//  - The graph is not sealed; the caller seals it after adding anything else.
//
// Per iteration and rank, in issue order (T = all tables, T_r = tables on rank r, B = global
// batch, b = B / ranks, D = dim; activations in `dtype`, embeddings and all-to-all in fp32):
//   data      aten::to x3 (dense b x in x 4 B; offsets (T_r B + 1) x index_bytes; indices
//             sum over local tables of round(B L) x index_bytes), each followed by a HostSync on
//             the compute stream (Lin et al., TPDS 2024 step 5: aten::to is blocking); no sparse
//             copies on a rank without tables
//   forward   embedding lookup (T_r tables, batch B); aten::cat packing the send buffer; all-to-all
//             (send_bytes(i, j) = b T_i D 4); bottom MLP (aten::linear, aten::relu) overlapping
//             it; All2All_Pooled_Wait; aten::to where the payload's dtype is not the MLPs';
//             interaction (dot: aten::cat, aten::bmm, aten::index, aten::cat; dcnv2: aten::cat,
//             then per cross layer two aten::mm and add / mul / add);
//             top MLP (aten::linear, aten::relu, last aten::sigmoid); aten::to for the targets
//             (b x 4 B), aten::binary_cross_entropy, aten::to copying the loss to the host
//             (`L = E.detach().cpu()`, 4 B device-to-host, then a HostSync)
//   backward  Optimizer.zero_grad (set_to_none: no kernel); ones_like; BCE, sigmoid backward; per
//             top layer AddmmBackward0 (grad input, grad weight GEMMs, bias sum), TBackward0,
//             AccumulateGrad x2, the DDP buckets that became complete, ReluBackward0; interaction
//             backward (CatBackward0, IndexBackward0 = zero_ + index_put, BmmBackward0 = 2 GEMMs,
//             TransposeBackward0, aten::add accumulating the two gradients of the stacked
//             features, ViewBackward0, CatBackward0, aten::add accumulating the dense output's two
//             gradients); aten::cat + backward all-to-all (the transpose of the forward sizes);
//             bottom MLP backward with its buckets (the first layer computes no input gradient);
//             All2All_ReqBackward (wait); embedding backward with fused SGD; one
//             ddp.reducer::finalize_backward op per DDP module waiting for its all-reduces
//   step      Optimizer.step#SGD.step: one multi-tensor SGD kernel over every dense parameter
//             (torch._foreach_add_, the PyTorch 2.x default for CUDA parameters)
//   end       HostSync on all streams
// A DDP bucket's all-reduce is one `nccl:all_reduce` op after the backward op that completed
// it: the gradient pre-scale `mul` over the bucket on compute (Lin et al., TPDS 2024), an
// EventRecord on compute, a StreamWait on comm, the all-reduce on comm, an EventRecord on comm.
// Simplifications (documented, not hidden): PyTorch's per-parameter `mul_out` into the bucket is
// emitted as one mul per bucket; AccumulateGrad steals the gradient (no kernel) and no
// copy_bucket_to_grad copy follows the all-reduce; the interaction's index tensors (li, lj) are
// not re-uploaded per iteration; indices and offsets of all local tables travel as one copy each.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/sharders.h"
#include "workloads/pytorch/ddp_buckets.h"

namespace upsim {

/// What the scenario decides about the run, outside the workload description.
struct DlrmPlacementInputs {
  uint32_t ranks = 1;
  /// Bytes of embedding-table memory rank r may use; one entry per rank.
  std::vector<int64_t> memory_capacity_bytes;
  uint32_t iterations = 1;
};

/// What generate_dlrm built, for the run summary and for tests.
struct DlrmGraph {
  /// Graph rank id of each DLRM rank.
  std::vector<RankId> ranks;
  TablePlacement placement;
  /// DDP buckets of the top and bottom MLP modules; their `params` index the module's
  /// parameters in gradient-ready order (last layer's bias, last layer's weight, ...).
  std::vector<pytorch::DdpBucket> top_buckets;
  std::vector<pytorch::DdpBucket> bottom_buckets;
  int64_t local_batch = 0;
};

/// Elements of the DCNv2 cross network's parameters in registration order (per layer V_l
/// r x N, W_l N x r, bias_l N); empty for the dot interaction.
std::vector<int64_t> cross_param_elements(const DlrmConfig& config);

/// Gradient bytes of an MLP's parameters in gradient-ready order (reverse registration:
/// last layer bias, last layer weight, ..., first layer bias, first layer weight).
/// `widths` = input width followed by the layer widths.
std::vector<int64_t> mlp_param_bytes_ready_order(const std::vector<int64_t>& widths, DType dtype);

/// Emits `inputs.iterations` training steps. Throws ShardingError when the tables do not fit,
/// std::invalid_argument when the inputs disagree (ranks vs capacities, batch vs ranks).
DlrmGraph generate_dlrm(const DlrmConfig& config, const DlrmPlacementInputs& inputs,
                        TaskGraph& graph);

}  // namespace upsim
