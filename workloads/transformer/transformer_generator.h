// Transformer training step -> task graph: the host ops, launches, kernels and collectives that a
// Megatron-LM / PyTorch FSDP training iteration issues on every GPU, for any composition of
// tensor (TP), sequence (SP), pipeline (PP, GPipe / 1F1B / interleaved 1F1B), context (CP, ring
// attention), expert (EP) and data parallelism (DDP buckets, ZeRO-1/2/3, FSDP full / grad-op
// sharding), with activation recompute and gradient accumulation.
//
// Contract:
//  - Global rank g has coordinates (tp, cp, dp, pp) in the order of `parallelism.order`
//    (innermost first; Megatron's default tp-cp-ep-dp-pp puts a TP group inside a node). Expert
//    parallel groups are those of Megatron-Core's expert rank layout (RankLayout in
//    transformer_config.h): with the default order, `expert` consecutive ranks of a stage's
//    (cp, dp) block at the same tp index, so they span context- as well as data-parallel ranks.
//    Global rank g runs on GPU g (RankInfo::device = g), so collective members are global ranks.
//  - With mirror_data_parallel (and data > 1) only the ranks of data-parallel replica 0 are in
//    the graph; collectives that span replicas (DP, EP) list every member and set
//    CollectiveDesc::simulated_members, so the network still moves every replica's bytes. The
//    replicas do identical work, so the predicted time equals the full simulation's where the
//    replicas' own (TP, CP, PP) traffic shares no link with replica 0's (tested on a DGX A100
//    node: transformer_generator_test). On a cluster whose leaf and spine links carry several
//    replicas' pipeline traffic, that contention is missing: GPT-3 175B on 1024 A100s predicts
//    0.4% faster mirrored than in the full simulation (bench/transformer_bench.cpp).
//  - Gradients are reduced (DDP, ZeRO, FSDP) over the ranks that hold the same parameters, as
//    Megatron-Core's DistributedDataParallel does: dense ones over data x context
//    (ParallelLayout::replica_group; context-parallel ranks process different tokens with the
//    same weights), routed experts' with expert > 1 in a buffer of their own over the expert
//    data-parallel ranks (expert_replica_group: data x context / expert).
//  - Streams per rank: 0 compute (kernels; TP, CP and EP collectives, which block compute as
//    torch.distributed calls on the current stream do), 1 data-parallel communication (DDP /
//    ZeRO / FSDP collectives, overlapped through events), 2 tensor-parallel backward overlap
//    (Megatron's async input-gradient all-reduce / reduce-scatter and SP all-gather), 3-6
//    pipeline p2p: activations from the previous stage, to the next, gradients from the next, to
//    the previous. Each p2p message is a two-member send/recv group (sender, receiver) matched
//    by order per direction; the compute stream waits on a received message's event, so a stage
//    waiting for its neighbour is a rendezvous wait on a pipeline collective (the bubble).
//  - Collective groups state their ParallelDim (CollectiveDesc::parallel_dim: tensor, context,
//    expert, data, pipeline; the model-parallel gradient-norm all-reduce is kOther) and are
//    named "<dim>:<kind>" with dim tp, cp, ep, dp, pp or mp; the summary groups exposed
//    communication by the dimension.
//  - Micro-batches are marked by zero-cost CPU markers "forward mb <i> chunk <c>" /
//    "backward mb <i> chunk <c>".
//  - Each iteration ends with a device-wide HostSync (the loss is read on the host).
//  - The graph is a pure function of its inputs; it is not sealed.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/task_graph.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/pipeline_schedule.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

struct TransformerGraphInputs {
  // NOLINTNEXTLINE(google-explicit-constructor): brace-initialised as {iterations}.
  TransformerGraphInputs(uint32_t iterations_in = 1, std::vector<uint32_t> nodes = {})
      : iterations(iterations_in), node_of_gpu(std::move(nodes)) {}
  uint32_t iterations = 1;
  /// The node of each GPU (WorkloadPlatform::node_of_gpu; empty: not known). DeepEP's dispatch
  /// (moe.dispatcher flex) forwards across nodes by it.
  std::vector<uint32_t> node_of_gpu;
};

/// What generate_transformer built.
struct TransformerGraph {
  /// Global rank of each graph rank.
  std::vector<int64_t> simulated;
  int64_t gpus = 0;
  int64_t micro_batches = 0;
  uint64_t collectives = 0;
};

TransformerGraph generate_transformer(const TransformerConfig& config,
                                      const TransformerGraphInputs& inputs, TaskGraph& graph);

}  // namespace upsim
