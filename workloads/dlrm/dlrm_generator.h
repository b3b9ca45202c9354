// DLRM training step -> task graph: the CPU ops, launches and GPU work that the seed paper's
// DLRM_open_source training script issues on each rank (Lin et al., TPDS 2024): table-wise
// model-parallel embeddings (FBGEMM table-batched embedding with fused SGD)
// exchanged by all-to-all forward and backward, with TorchRec's other sharding types per table
// (row-wise, column-wise, data-parallel; see "Sharding types" below), data-parallel bottom and
// top MLPs under two
// DistributedDataParallel wrappers (dlrm_s_pytorch.py wraps bot_l and top_l separately) with
// bucketed all-reduce overlapping the backward, dot interaction (or DCNv2's low-rank cross
// network, whose parameters join the top MLP's DDP module), BCE loss, dense SGD step.
//
// Contract:
//  - generate_dlrm adds `ranks` ranks to the graph, named "rank <r>", each with one CPU thread
//    and the streams {"compute", "comm"} (and "data" with input: prefetch); DLRM rank r is
//    graph rank DlrmGraph::ranks[r].
//  - The graph is a pure function of its inputs (same inputs -> identical graph).
//  - Every GPU task (kernels, copies, collectives, event records and stream waits) is enqueued
//    by exactly one Launch inside a PyTorch-like host op (kOpBegin, launches with launch_index
//    0, 1, ..., kOpEnd); ops that launch nothing are one kOpBody task.
//  - Every rank issues the same collectives in the same order; collective group members are
//    all ranks in rank order (under embeddings.two_d, see "2D parallel" below, the embedding
//    exchange's are the rank's sharding group and the replica sync's its replica group, each
//    by position). With one rank there is no collective (the script then runs
//    without all-to-all and without DDP): every sharding type's lookups are local.
//  - Each iteration ends with a device-wide HostSync on every rank (the script's time_wrap calls
//    torch.cuda.synchronize()), so the last iteration's end is the run's end.
//  - The graph is not sealed; the caller seals it after adding anything else.
//
// Per iteration and rank, in issue order (T = all tables, P_r = table-wise tables and
// column-wise shards on rank r, V_r = their dims summed (D per table-wise table, D / k per
// shard), T_rw / T_dp = row-wise / data-parallel tables, B = global batch, b = B / ranks,
// D = dim; activations in `dtype`, embeddings in embeddings.dtype, payloads in
// all_to_all_dtype; casts (aten::to) only where two of them differ):
//   data      aten::to x3 (dense b x in x 4 B; offsets (sum over the rank's lookups of their batch
//             + 1) x index_bytes; indices sum over the lookups of round(batch L) x index_bytes),
//             each followed by a HostSync on the compute stream (Lin et al., TPDS 2024 step 5:
//             aten::to is blocking); no sparse copies on a rank without lookups
//   forward   embedding lookup (the P_r pieces, batch B); aten::cat packing the send buffer;
//             all-to-all (send_bytes(i, j) = b V_i x payload bytes; only when some table is
//             table-wise or column-wise, or hybrid parallel); row-wise lookup (each rank's row
//             block of every row-wise table, batch B, pooling L x block rows / rows);
//             nccl:reduce_scatter (input B T_rw D); data-parallel lookup
//             (fbgemm::dense_embedding_codegen_lookup_function, the T_dp whole tables, batch b);
//             bottom MLP (aten::linear, aten::relu) overlapping the collectives;
//             All2All_Pooled_Wait; ReduceScatterBase_Wait; casts of the received and the local
//             pooled embeddings to the MLPs' dtype;
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
//             nccl:all_gather of the row-wise gradients (input b T_rw D); bottom MLP backward
//             with its buckets (the first layer computes no input gradient); All2All_ReqBackward
//             (wait); embedding backward of the pieces with the fused optimizer;
//             ReduceScatterBase_ReqBackward (wait); the row-wise blocks' fused backward;
//             data-parallel backward (CppNode<SplitLookupFunction_Dense_Op>: zero_ of the dense
//             gradient, rows x D per table, and the scatter of the local batch's bag gradients),
//             then its DDP all-reduce (pre-scale mul, all-reduce of sum rows x D x embedding
//             bytes); one ddp.reducer::finalize_backward op per DDP module waiting for its
//             all-reduces (the data-parallel tables' too)
//   step      Optimizer.step#SGD.step: one multi-tensor SGD kernel over every dense parameter
//             (torch._foreach_add_, the PyTorch 2.x default for CUDA parameters), the
//             data-parallel tables' weights first (their own launch when their dtype differs)
//   end       HostSync on all streams
// The training loop's variants (dlrm_config.h): the data phase starts with the DataLoader's
// fetch (a launch-free op priced by the host model); input: prefetch moves it and the copies
// (targets included) to after the step, on the "data" stream with a HostSync on it per copy
// (pageable sources), and starts each iteration with a wait_stream; loss_to_host: false drops
// the loss copy; grad_scaler adds a mul of the loss before backward, and before the step an
// unscale kernel over the dense gradients, a 4-byte device-to-host copy of found_inf and a
// HostSync on compute, then after it _amp_update_scale_; embeddings.update sparse replaces the
// fused embedding backward by the gradient's cast (and index_select for bags of more than one
// row) and adds, after the dense step, the values' unscale (with grad_scaler) and one
// Optimizer.step#SGD.step op with an index_add_ per lookup group; mlp_kernels apex_fused and
// interaction_kernel fused replace the per-layer ops and the interaction's aten ops by one op
// each (MlpFunction / MlpFunctionBackward, DotBasedInteract / DotBasedInteractBackward).
// mode: inference is the data phase without the fetch, the forward up to the sigmoid, and the
// final HostSync.
// Comm-stream order: all-to-all, reduce-scatter, table-row-wise reduce-scatter and all-to-all,
// top buckets, all-to-all, all-gather, table-row-wise all-to-all and all-gather, bottom
// buckets, data-parallel all-reduce (each only when the run has it).
//
// Sharding types (TorchRec, https://pytorch.org/torchrec/ and
// torchrec/distributed/sharding/{tw,rw,cw,dp,twrw}_sharding.py):
//   table_wise     the whole table on the rank the sharder picks; its pooled output (b x D per
//                  destination) travels in the all-to-all.
//   column_wise    k shards of D / k columns, each placed like a table; each shard's output
//                  (b x D / k) travels in the same all-to-all, and the shards sit side by side
//                  in the receive buffer that the interaction's cat reads (TorchRec may permute
//                  them, PermutePooledEmbeddings: not modelled).
//   row_wise       every rank holds a block of ceil(rows / n) rows and looks it up for the global
//                  batch; a reduce-scatter of the partial sums gives each rank its samples;
//                  backward all-gathers the gradients to the global batch for each block's fused
//                  backward.
//   table_row_wise the table lives on one node: each of its L ranks holds a block of
//                  ceil(rows / L) rows and looks it up for the global batch; a reduce-scatter
//                  within the node leaves local rank j the samples of every node's local rank j,
//                  and an all-to-all among those ranks (one per local rank, across nodes) gives
//                  each its own (twrw_sharding.py TwRwPooledEmbeddingDist); backward runs the
//                  transpose all-to-all, then the node's all-gather. On one node it is row_wise.
//   data_parallel  every rank holds the whole table and looks up its local batch; no exchange;
//                  backward makes a dense rows x D gradient, all-reduced under DDP, and the
//                  dense optimizer updates all rows x D (why it suits small tables only).
// Simplifications: TorchRec runs one lookup and one output collective per sharding type; here
// table-wise tables and column-wise shards share one lookup and one all-to-all. TorchRec
// moves the sparse features by an input all-to-all; here, as in the seed's script, each rank
// copies the indices of its lookups from the host. The reduce-scatter's and all-to-all's
// gradient division by the world size is not emitted.
// 2D parallel (embeddings.two_d, TorchRec's DMPCollection; two_d_parallel.h): the placement is
// made for S ranks and each of the W / S sharding groups holds it, rank at position p holding
// what rank p of a plain S-rank run would; everything above that spans "every rank" for the
// embeddings (all-to-alls, row-wise blocks, the input distribution, B) spans the rank's sharding
// group, B being the group's samples, b x S. The MLPs' and the data-parallel tables' DDP
// all-reduces stay over all W ranks. Training iterations i with i % sync_interval == 0 add,
// after the backward (DDP's finalize) and before the optimizer step, "## 2d_weight_sync ##" (an
// all-reduce over the rank's replica group of the weights it holds: its table-wise tables,
// column-wise shards and row-wise blocks) and "## 2d_optimizer_sync ##" (their fused
// optimizer's state["sum"]; none for sgd), each launched after the compute stream's work and
// waited for by the compute stream (ProcessGroupNCCL's work.wait()). With S = W there is one
// replica per shard and no sync: the graph is the plain run's. Collectives of one sharding or
// replica group among several carry "sharding group g" / "replica group p" in their names.
//
// A DDP bucket's all-reduce is one `nccl:all_reduce` op after the backward op that completed
// it: the gradient pre-scale `mul` over the bucket on compute (Lin et al., TPDS 2024), an
// EventRecord on compute, a StreamWait on comm, the all-reduce on comm, an EventRecord on comm.
// Simplifications (documented, not hidden): PyTorch's per-parameter `mul_out` into the bucket is
// emitted as one mul per bucket; AccumulateGrad steals the gradient (no kernel) and no
// copy_bucket_to_grad copy follows the all-reduce; the interaction's index tensors (li, lj) are
// not re-uploaded per iteration; indices and offsets of all local lookups travel as one copy each.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/dlrm/dlrm_config.h"
#include "workloads/dlrm/sharders.h"
#include "workloads/dlrm/two_d_parallel.h"
#include "workloads/pytorch/ddp_buckets.h"

namespace upsim {

/// What the scenario decides about the run, outside the workload description.
struct DlrmPlacementInputs {
  uint32_t ranks = 1;
  /// Bytes of embedding-table memory rank r may use; one entry per rank.
  std::vector<int64_t> memory_capacity_bytes;
  uint32_t iterations = 1;
  /// Ranks per node, nodes being consecutive rank blocks (0: all ranks one node); only
  /// table-row-wise tables depend on it.
  uint32_t ranks_per_node = 0;
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
  /// The sharding and replica groups (embeddings.two_d; without it one sharding group of every
  /// rank). `placement` spans one sharding group's ranks, by position, and every group holds
  /// it.
  ShardingGroups sharding_groups;
  /// Samples one sharding group's lookups cover: local_batch x its ranks (the global batch
  /// without two_d).
  int64_t group_batch = 0;
};

/// FBGEMM's name of a fused optimizer in its op and kernel names
/// (split_embedding_codegen_lookup_<name>_function, ..._backward_codegen_<name>_...).
std::string_view fbgemm_optimizer_name(EmbeddingOptimizer optimizer);

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
