// Megatron-Core's MoE token movement (workload.moe.dispatcher; workloads/transformer/
// moe_emitter.cpp): the all-gather dispatcher's collectives and their sizes, its host sync on
// every MoE layer, what it does without expert parallel, its memory buffer, that moving more
// bytes than the all-to-all on the same fabric is never faster; the flex dispatcher's DeepEP
// kernels, their sizes across nodes, SMs, host wait, buffers and a faster step across nodes;
// under tensor parallel the experts' tensor ranks gathering their tokens (expert tensor
// parallel = tensor) and the shared experts as a tensor-parallel MLP; and what the config
// refuses.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "calibration/hardware_profile.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/all_to_all_sizes.h"
#include "sim/config/config_node.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "test/unit/transformer/workload_yaml.h"
#include "topology/fabric_loader.h"
#include "workloads/transformer/deepep.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/op_emitter.h"
#include "workloads/transformer/parallel_layout.h"
#include "workloads/transformer/transformer_memory.h"
#include "workloads/transformer/transformer_workload.h"

namespace upsim {
namespace {

const std::filesystem::path kConfigs = UPSIM_CONFIGS_DIR;

/// small_gpt() (8 layers, hidden 1024, bf16) with MoE layers of 8 experts, top 2, over expert
/// parallel `ep` of data parallel 8, two micro-batches per replica.
TransformerConfig small_moe(MoeDispatcher dispatcher, int64_t ep, double capacity_factor) {
  TransformerConfig c = test_configs::small_gpt();
  c.moe.experts = 8;
  c.moe.top_k = 2;
  c.moe.expert_ffn = 2048;
  c.moe.capacity_factor = capacity_factor;
  c.moe.dispatcher = dispatcher;
  c.parallelism.data = 8;
  c.parallelism.expert = ep;
  c.global_batch = c.micro_batch * 8 * 2;
  return c;
}

/// The iteration time of `c` (two iterations, the second measured) with the roofline kernel model
/// of configs/hardware/<hardware>.yaml over configs/topologies/<topology>.yaml's flow network,
/// each GPU on its node there.
Duration roofline_step(const TransformerConfig& c, const std::string& topology,
                       const std::string& hardware) {
  ConfigDocument fabric_doc =
      ConfigDocument::load_file(kConfigs / "topologies" / (topology + ".yaml"));
  ConfigDocument gpu = ConfigDocument::load_file(kConfigs / "hardware" / (hardware + ".yaml"));
  const Fabric fabric = load_fabric(fabric_doc.root());
  const HardwareProfile hw = load_hardware_profile(gpu.root());
  RooflineParams params;
  params.compute_fraction = hw.achievable.compute;
  params.memory_fraction = hw.achievable.memory;
  const RooflineKernelCost kernels(params);
  TaskGraph g;
  const auto gpus = static_cast<size_t>(ParallelLayout(c.parallelism).gpus());
  generate_transformer(c, TransformerGraphInputs(2, fabric.gpu_nodes(gpus)), g);
  g.seal();
  return test_configs::run_step(g, kernels, fabric, hw, 2).predicted_iteration_time;
}

/// Rank 0's collective tasks in one generated step, by op name: their count and each one's
/// CollectiveDesc bytes (all equal per name here).
struct Collectives {
  std::map<std::string, int> count;
  std::map<std::string, int64_t> bytes;
  std::map<std::string, CollectiveKind> kind;
};

Collectives rank0_collectives(const TransformerConfig& c) {
  TaskGraph g;
  generate_transformer(c, {1}, g);
  Collectives out;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.rank != 0 || task.kind != TaskKind::kCollective) continue;
    const std::string name(g.name(task.op_name));
    const CollectiveDesc& d = g.collective(g.collective_of(t));
    ++out.count[name];
    out.bytes[name] = d.bytes;
    out.kind[name] = d.kind;
  }
  return out;
}

int host_syncs(const TransformerConfig& c) {
  return test_configs::task_count(c, TaskKind::kHostSync, "cudaStreamSynchronize");
}

// MoEAllGatherTokenDispatcher: per MoE layer forward, the routing map (a byte per token and
// expert), the fp32 probabilities and the hidden states are all-gathered over the EP group and
// the output comes back by a reduce-scatter of the EP group's tokens in fp32; the backward
// all-gathers the output gradient (fp32) and reduce-scatters the hidden states' and the
// probabilities' gradients. No all-to-all.
TEST(MoeDispatcher, AllGatherMovesTheGroupsTokensWithTheSizesMegatronCoreUses) {
  const TransformerConfig c = small_moe(MoeDispatcher::kAllGather, 8, 1.25);
  const LayerSizes z = layer_sizes(c);
  const int64_t tokens = z.moe_tokens;
  const int64_t h = c.hidden;
  const Collectives got = rank0_collectives(c);
  const int per_step = static_cast<int>(c.layers * 2);  // every layer, 2 micro-batches
  const std::map<std::string, std::pair<CollectiveKind, int64_t>> expected = {
      {"moe::gather_routing_map", {CollectiveKind::kAllGather, tokens * 8}},
      {"moe::gather_probs", {CollectiveKind::kAllGather, tokens * 8 * 4}},
      {"moe::gather_hidden_states", {CollectiveKind::kAllGather, tokens * h * 2}},
      {"moe::reduce_scatter_output", {CollectiveKind::kReduceScatter, 8 * tokens * h * 4}},
      {"moe::gather_output_grad", {CollectiveKind::kAllGather, tokens * h * 4}},
      {"moe::reduce_scatter_hidden_grad", {CollectiveKind::kReduceScatter, 8 * tokens * h * 2}},
      {"moe::reduce_scatter_probs_grad", {CollectiveKind::kReduceScatter, 8 * tokens * 8 * 4}},
  };
  for (const auto& [name, kind_bytes] : expected) {
    EXPECT_EQ(got.count.count(name) ? got.count.at(name) : 0, per_step) << name;
    if (!got.kind.count(name)) continue;
    EXPECT_EQ(got.kind.at(name), kind_bytes.first) << name;
    EXPECT_EQ(got.bytes.at(name), kind_bytes.second) << name;
  }
  EXPECT_EQ(got.count.count("c10d::all_to_all_single"), 0u);
  // The all-to-all dispatcher of the same layer: dispatch and combine, forward and backward.
  const Collectives a2a = rank0_collectives(small_moe(MoeDispatcher::kAllToAll, 8, 1.25));
  EXPECT_EQ(a2a.count.at("c10d::all_to_all_single"), 4 * per_step);
  // And each routed row's fp32 probability with it, forward and backward.
  EXPECT_EQ(a2a.count.at("moe::all_to_all_probs"), 2 * per_step);
  EXPECT_EQ(a2a.count.count("moe::gather_hidden_states"), 0u);
}

// The local experts' token counts go to the host every MoE layer (tokens_per_expert .cpu()),
// with a capacity factor too, as the all-to-all dispatcher's do after its own all-gather of
// the counts, which the all-gather dispatcher does not need.
TEST(MoeDispatcher, AllGatherSyncsTheHostOnEveryMoeLayerWithOrWithoutCapacity) {
  const int per_step = 8 * 2;
  for (const double capacity : {1.25, 0.0}) {
    const TransformerConfig c = small_moe(MoeDispatcher::kAllGather, 8, capacity);
    EXPECT_EQ(host_syncs(c), per_step) << capacity;
    EXPECT_EQ(rank0_collectives(c).count.count("moe::gather_tokens_per_expert"), 0u);
  }
  for (const double capacity : {1.25, 0.0})
    EXPECT_EQ(host_syncs(small_moe(MoeDispatcher::kAllToAll, 8, capacity)), per_step);
}

// Without expert parallel (and tensor 1, which allgather needs) the group is one rank: nothing
// moves, the layer launches the all-to-all dispatcher's kernels, and the count still goes to
// the host.
TEST(MoeDispatcher, WithoutExpertParallelTheAllGatherMovesNothingButStillSyncs) {
  const TransformerConfig gather = small_moe(MoeDispatcher::kAllGather, 1, 1.25);
  const TransformerConfig a2a = small_moe(MoeDispatcher::kAllToAll, 1, 1.25);
  for (const auto& [name, n] : rank0_collectives(gather).count)
    EXPECT_EQ(name.rfind("moe::", 0), std::string::npos) << name;
  EXPECT_EQ(test_configs::kernel_counts(gather), test_configs::kernel_counts(a2a));
  EXPECT_EQ(host_syncs(gather), 8 * 2);
}

// The gathered hidden states live in Megatron-Core's global memory buffer: expert x the rank's
// tokens x hidden x 2 bytes more buffers; without expert parallel, none.
TEST(MoeDispatcher, TheGatherBufferIsCountedInTheMemoryModel) {
  const auto buffers = [](const TransformerConfig& c) {
    for (const MemoryFootprint::Part& p : transformer_memory(c, 0).parts)
      if (p.name == "buffers") return p.bytes;
    return int64_t{0};
  };
  const TransformerConfig gather = small_moe(MoeDispatcher::kAllGather, 8, 1.25);
  const int64_t tokens = layer_sizes(gather).moe_tokens;
  EXPECT_EQ(buffers(gather) - buffers(small_moe(MoeDispatcher::kAllToAll, 8, 1.25)),
            8 * tokens * gather.hidden * 2);
  EXPECT_EQ(buffers(small_moe(MoeDispatcher::kAllGather, 1, 1.25)),
            buffers(small_moe(MoeDispatcher::kAllToAll, 1, 1.25)));
}

// With top 2 of 8 experts over 8 ranks the all-gather moves 7 of 8 ranks' whole tokens where the
// all-to-all sends each token's 2 copies: more bytes over the same fabric, never a faster step.
TEST(MoeDispatcher, AllGatherOfMoreBytesIsNotFasterThanTheAllToAll) {
  const auto step = [](MoeDispatcher dispatcher) {
    return roofline_step(small_moe(dispatcher, 8, 1.25), "dgx_a100", "a100_sxm4_80gb");
  };
  const Duration a2a = step(MoeDispatcher::kAllToAll);
  const Duration gather = step(MoeDispatcher::kAllGather);
  std::printf("MoE EP8 top 2 of 8: alltoall %.3f ms, allgather %.3f ms\n", a2a.seconds() * 1e3,
              gather.seconds() * 1e3);
  EXPECT_GT(gather, a2a);
}

/// small_moe's all-to-all layer with tensor parallel 2 (sequence parallel) and one shared
/// expert: 16 GPUs.
TransformerConfig small_moe_tp2() {
  TransformerConfig c = small_moe(MoeDispatcher::kAllToAll, 8, 0.0);
  c.moe.shared_experts = 1;
  c.parallelism.tensor = 2;
  c.parallelism.sequence = true;
  return c;
}

// Expert tensor parallel = tensor (Megatron-Core's default): each expert runs the two tensor
// ranks' rows (2 x the rank's own) on half its width, the same flops as the rank's rows on the
// whole width; the shared expert runs the layer's tokens on half its width.
TEST(MoeDispatcher, UnderTensorParallelEachExpertRunsItsTensorRanksRowsOnItsWidthShare) {
  const TransformerConfig c = small_moe_tp2();
  const LayerSizes z = layer_sizes(c);
  TaskGraph g;
  const LayerKernels k = add_layer_kernels(c, z, g);
  const int64_t per_expert = tokens_per_local_expert(c, z);
  const KernelDesc& fc1 = g.kernel_desc(k.expert_fc1_fwd);
  EXPECT_EQ(fc1.m, 2 * per_expert);
  EXPECT_EQ(fc1.k, c.hidden);
  EXPECT_EQ(fc1.n, c.moe.expert_ffn / 2);  // small_gpt's MLP is not gated
  // One local expert (8 over expert parallel 8): the same multiply-adds as its rank's rows on
  // the whole width.
  EXPECT_EQ(fc1.batch * fc1.m * fc1.n * fc1.k, per_expert * c.moe.expert_ffn * c.hidden);
  const KernelDesc& shared = g.kernel_desc(k.shared_fc1_fwd);
  EXPECT_EQ(shared.m, z.tokens);
  EXPECT_EQ(shared.n, c.moe.expert_ffn / 2);
}

// The tensor ranks all-gather the rows their all-to-all brought (and their probabilities) and
// reduce-scatter the experts' outputs back in fp32 (the routing probabilities' dtype), and the
// reverse in the backward; the shared expert's input is gathered and its output reduce-scattered
// over the sequence-parallel ranks. Nothing of the kind with tensor 1.
TEST(MoeDispatcher, UnderTensorParallelTheTensorRanksGatherAndScatterTheExpertsRows) {
  const TransformerConfig c = small_moe_tp2();
  const int64_t rows = moe_rank_rows(c, layer_sizes(c));
  const int64_t h = c.hidden;
  const Collectives got = rank0_collectives(c);
  const int per_step = static_cast<int>(c.layers * 2);
  const std::map<std::string, std::pair<CollectiveKind, int64_t>> expected = {
      {"moe::gather_from_sequence_parallel_region", {CollectiveKind::kAllGather, rows * h * 2}},
      {"moe::reduce_scatter_to_sequence_parallel_region",
       {CollectiveKind::kReduceScatter, 2 * rows * h * 4}},
      {"moe::gather_output_grad", {CollectiveKind::kAllGather, rows * h * 4}},
      {"moe::reduce_scatter_input_grad", {CollectiveKind::kReduceScatter, 2 * rows * h * 2}},
      {"moe::gather_probs_from_sequence_parallel_region", {CollectiveKind::kAllGather, rows * 4}},
      {"moe::reduce_scatter_probs_grad", {CollectiveKind::kReduceScatter, 2 * rows * 4}},
  };
  for (const auto& [name, kind_bytes] : expected) {
    EXPECT_EQ(got.count.count(name) ? got.count.at(name) : 0, per_step) << name;
    if (!got.kind.count(name)) continue;
    EXPECT_EQ(got.kind.at(name), kind_bytes.first) << name;
    EXPECT_EQ(got.bytes.at(name), kind_bytes.second) << name;
  }
  // The shared expert adds a forward all-gather and reduce-scatter and their backward's
  // all-gather, re-gather and reduce-scatter per MoE layer and micro-batch to the dense
  // layers' sequence-parallel collectives.
  TransformerConfig no_shared = small_moe_tp2();
  no_shared.moe.shared_experts = 0;
  const Collectives without = rank0_collectives(no_shared);
  EXPECT_EQ(got.count.at("c10d::_allgather_base") - without.count.at("c10d::_allgather_base"),
            3 * per_step);
  EXPECT_EQ(
      got.count.at("c10d::_reduce_scatter_base") - without.count.at("c10d::_reduce_scatter_base"),
      2 * per_step);
  const Collectives tp1 = rank0_collectives(small_moe(MoeDispatcher::kAllToAll, 8, 0.0));
  EXPECT_EQ(tp1.count.count("moe::gather_from_sequence_parallel_region"), 0u);
}

// moe.pad_to_capacity (Megatron-Core's moe_pad_expert_input_to_capacity): every expert runs
// its capacity, every rank sends every other the same rows however the router spread them,
// and nothing waits for the token counts.
TEST(MoeDispatcher, PaddedToCapacityEveryExpertRunsItsCapacityAndNothingWaits) {
  TransformerConfig padded = small_moe(MoeDispatcher::kAllToAll, 8, 1.25);
  padded.moe.pad_to_capacity = true;
  padded.moe.imbalance = 0.5;  // the router's spread changes nothing once padded
  EXPECT_EQ(host_syncs(padded), 0);
  EXPECT_EQ(rank0_collectives(padded).count.count("moe::gather_tokens_per_expert"), 0u);
  const LayerSizes z = layer_sizes(padded);
  const TransformerConfig routed = small_moe(MoeDispatcher::kAllToAll, 8, 1.25);
  // 8 experts over 8 ranks, top 2: the rank's 2 x tokens rows, x 1.25 padded.
  EXPECT_EQ(tokens_per_local_expert(padded, z), z.moe_tokens * 2 * 5 / 4);
  EXPECT_EQ(tokens_per_local_expert(routed, z), z.moe_tokens * 2);
  TaskGraph g;
  generate_transformer(padded, {1}, g);
  bool checked = false;
  for (TaskId t = 0; t < g.task_count() && !checked; ++t) {
    if (g.task(t).kind != TaskKind::kCollective) continue;
    if (g.name(g.task(t).op_name) != "c10d::all_to_all_single") continue;
    const AllToAllSizes& sizes = g.collective(g.collective_of(t)).send_bytes;
    ASSERT_EQ(sizes.members(), 8u);
    for (size_t i = 0; i < 8; ++i)
      for (size_t j = 0; j < 8; ++j)
        EXPECT_EQ(sizes.at(i, j), sizes.at(0, 0)) << i << " -> " << j;
    checked = true;
  }
  EXPECT_TRUE(checked);
}

std::string error_of(const std::string& extra, const std::string& kernels = "fused") {
  return test_configs::workload_error(
      test_configs::small_llama_workload_yaml() + "  layer_kernels: " + kernels + "\n" + extra, 1);
}

TEST(MoeDispatcher, TheConfigTakesBothDispatchersAndRefusesTheRestAtTheKey) {
  const std::string moe = "  moe: {experts: 8, dispatcher: allgather}\n";
  EXPECT_EQ(error_of(moe), "");
  EXPECT_EQ(test_configs::parse_workload(test_configs::small_llama_workload_yaml() + moe, 1)
                .moe.dispatcher,
            MoeDispatcher::kAllGather);
  EXPECT_EQ(test_configs::parse_workload(
                test_configs::small_llama_workload_yaml() + "  moe: {experts: 8}\n", 1)
                .moe.dispatcher,
            MoeDispatcher::kAllToAll);
  const std::string unknown = error_of("  moe: {experts: 8, dispatcher: deepep}\n");
  EXPECT_NE(unknown.find("workload.moe.dispatcher"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("allgather"), std::string::npos) << unknown;
  const std::string torchtitan =
      error_of("  moe: {experts: 8, capacity_factor: 0, dispatcher: allgather}\n", "torchtitan");
  EXPECT_NE(torchtitan.find("workload.moe.dispatcher"), std::string::npos) << torchtitan;
  const std::string tensor =
      test_configs::workload_error(test_configs::small_llama_workload_yaml() + moe +
                                       "  parallelism: {tensor: 2, sequence: true}\n",
                                   2);
  EXPECT_NE(tensor.find("workload.moe.dispatcher"), std::string::npos) << tensor;
  EXPECT_NE(tensor.find("tensor x expert"), std::string::npos) << tensor;
  const std::string no_sp =
      test_configs::workload_error(test_configs::small_llama_workload_yaml() +
                                       "  moe: {experts: 8}\n" + "  parallelism: {tensor: 2}\n",
                                   2);
  EXPECT_NE(no_sp.find("workload.parallelism.sequence"), std::string::npos) << no_sp;
  const std::string overlap = test_configs::workload_error(
      test_configs::small_llama_workload_yaml() + "  moe: {experts: 8, shared_experts: 1}\n" +
          "  parallelism: {tensor: 2, sequence: true, tp_comm_overlap: true}\n",
      2);
  EXPECT_NE(overlap.find("workload.parallelism.tp_comm_overlap"), std::string::npos) << overlap;
  const std::string pad_dropless =
      error_of("  moe: {experts: 8, capacity_factor: 0, pad_to_capacity: true}\n");
  EXPECT_NE(pad_dropless.find("workload.moe.pad_to_capacity"), std::string::npos) << pad_dropless;
  const std::string pad_gather = error_of(
      "  moe: {experts: 8, capacity_factor: 1.25, pad_to_capacity: true, dispatcher: "
      "allgather}\n");
  EXPECT_NE(pad_gather.find("workload.moe.pad_to_capacity"), std::string::npos) << pad_gather;
  // Padded layers have fixed sizes: CUDA graphs capture them.
  EXPECT_EQ(error_of("  moe: {experts: 8, capacity_factor: 1.25, pad_to_capacity: true}\n"
                     "  cuda_graphs: true\n"),
            "");
  const std::string graphs = error_of(moe + "  cuda_graphs: true\n");
  EXPECT_NE(graphs.find("workload.cuda_graphs"), std::string::npos) << graphs;
  EXPECT_NE(graphs.find("every moe.dispatcher"), std::string::npos) << graphs;
}

/// A fine-grained MoE layer (small_gpt's with 32 experts, top 8) over expert parallel 16 =
/// data 16 on two nodes of 8 GPUs, dispatched by `dispatcher`.
using test_configs::fine_moe;

std::vector<uint32_t> two_nodes() {
  return test_configs::dgx_nodes(16);
}

// moe.dispatcher flex (MoEFlexTokenDispatcher on DeepEP): per MoE layer and micro-batch the
// count exchange, the dispatch (hidden rows with 8 int64 indices and 8 fp32 weights a token),
// the combine, and their gradients, each one DeepEP kernel holding 20 SMs with the sizes of
// deepep_send_matrix on the group's nodes; no NCCL all-to-all, no probabilities' all-to-all,
// no count all-gather; the host waits for the receive counts once per forward dispatch.
TEST(MoeDispatcher, FlexRunsDeepEpKernelsWithItsSizesAcrossNodes) {
  const TransformerConfig c = fine_moe(MoeDispatcher::kFlex);
  TaskGraph g;
  generate_transformer(c, TransformerGraphInputs(1, two_nodes()), g);
  const LayerSizes z = layer_sizes(c);
  const std::vector<double> weight(16, 2.0);
  const int64_t row = c.hidden * 2;
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"deep_ep::dispatch",
       deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row + 8 * (8 + 4), false)},
      {"deep_ep::combine", deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row, true)},
      {"FusedCombineBackward",
       deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row, false)},
      {"FusedDispatchBackward",
       deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row + 8 * 4, true)},
  };
  std::map<std::string, int> count;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.rank != 0 || task.kind != TaskKind::kCollective) continue;
    const std::string name(g.name(task.op_name));
    ++count[name];
    const CollectiveDesc& d = g.collective(g.collective_of(t));
    if (name.rfind("deep_ep::", 0) == 0 || name.rfind("Fused", 0) == 0) {
      EXPECT_EQ(d.sms, kDeepEpDefaultSms) << name;
      EXPECT_EQ(d.kind, CollectiveKind::kAllToAll) << name;
    }
    if (!expected.count(name)) continue;
    const AllToAllSizes& sizes = d.send_bytes;
    ASSERT_EQ(sizes.members(), 16u) << name;
    for (size_t i = 0; i < 16; ++i)
      for (size_t j = 0; j < 16; ++j)
        ASSERT_EQ(sizes.at(i, j), expected.at(name)[i * 16 + j]) << name << " " << i << " " << j;
  }
  const int per_step = static_cast<int>(c.layers * 2);
  for (const char* name : {"deep_ep::notify_dispatch", "deep_ep::dispatch", "deep_ep::combine",
                           "FusedCombineBackward", "FusedDispatchBackward"}) {
    EXPECT_EQ(count[name], per_step) << name;
  }
  for (const char* name :
       {"c10d::all_to_all_single", "moe::all_to_all_probs", "moe::gather_tokens_per_expert"}) {
    EXPECT_EQ(count.count(name), 0u) << name;
  }
  EXPECT_EQ(test_configs::task_count(c, TaskKind::kHostSync, "deep_ep::dispatch (receive counts)"),
            per_step);
  EXPECT_EQ(host_syncs(c), 0);
}

// Where the platform does not say where nodes end, DeepEP's own numbering holds: 8 consecutive
// members a node, as on two DGX nodes.
TEST(MoeDispatcher, FlexWithoutNodesTakesEightRanksANode) {
  const TransformerConfig c = fine_moe(MoeDispatcher::kFlex);
  const auto dispatch = [&](const TransformerGraphInputs& inputs) {
    TaskGraph g;
    generate_transformer(c, inputs, g);
    for (TaskId t = 0; t < g.task_count(); ++t) {
      if (g.task(t).kind == TaskKind::kCollective &&
          g.name(g.task(t).op_name) == "deep_ep::dispatch")
        return g.collective(g.collective_of(t)).send_bytes;
    }
    return AllToAllSizes{};
  };
  const AllToAllSizes unknown = dispatch(TransformerGraphInputs(1));
  const AllToAllSizes known = dispatch(TransformerGraphInputs(1, two_nodes()));
  ASSERT_EQ(unknown.members(), 16u);
  for (size_t i = 0; i < 16; ++i)
    for (size_t j = 0; j < 16; ++j)
      EXPECT_EQ(unknown.at(i, j), known.at(i, j)) << i << " -> " << j;
}

// The same layer's step on two DGX H100 nodes: DeepEP's dispatch crosses the network once per
// node and token where the all-to-all sends every routed copy, so the step is faster; the
// DeepEP buffers count in the memory model.
TEST(MoeDispatcher, FlexCrossesNodesOncePerTokenAndIsFasterThanTheAllToAll) {
  const auto step = [](MoeDispatcher dispatcher) {
    return roofline_step(fine_moe(dispatcher), "dgx_h100_cluster_2", "h100_sxm5_80gb");
  };
  const Duration a2a = step(MoeDispatcher::kAllToAll);
  const Duration flex = step(MoeDispatcher::kFlex);
  std::printf("MoE EP16 over 2 nodes, top 8 of 32: alltoall %.3f ms, flex %.3f ms\n",
              a2a.seconds() * 1e3, flex.seconds() * 1e3);
  EXPECT_LT(flex, a2a);
  const auto buffers = [](const TransformerConfig& c) {
    for (const MemoryFootprint::Part& p : transformer_memory(c, 0).parts)
      if (p.name == "buffers") return p.bytes;
    return int64_t{0};
  };
  const TransformerConfig flex_config = fine_moe(MoeDispatcher::kFlex);
  EXPECT_EQ(buffers(flex_config) - buffers(fine_moe(MoeDispatcher::kAllToAll)),
            deepep_buffer_bytes(16, flex_config.hidden * 2, kDeepEpDefaultSms));
}

// moe.flex_backend hybridep: per MoE forward the routing map (a byte per token and expert) is
// all-gathered over the group and scanned, and the host synchronises on the counts; no count
// exchange. Each token's row carries the fp32 probabilities of its destination node's 16
// experts; its kernels hold 8 SMs across nodes, 24 within one.
TEST(MoeDispatcher, HybridEpGathersTheRoutingMapAndCarriesTheNodesProbabilities) {
  TransformerConfig c = fine_moe(MoeDispatcher::kFlex);
  c.moe.flex_backend = FlexBackend::kHybridEp;
  const LayerSizes z = layer_sizes(c);
  const auto collectives = [&](const std::vector<uint32_t>& nodes) {
    TaskGraph g;
    generate_transformer(c, TransformerGraphInputs(1, nodes), g);
    std::map<std::string, std::vector<CollectiveDesc>> out;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != 0 || task.kind != TaskKind::kCollective) continue;
      out[std::string(g.name(task.op_name))].push_back(g.collective(g.collective_of(t)));
    }
    return out;
  };
  const auto across = collectives(two_nodes());
  const int per_step = static_cast<int>(c.layers * 2);
  ASSERT_EQ(across.count("hybrid_ep::allgather_routing_map"), 1u);
  EXPECT_EQ(static_cast<int>(across.at("hybrid_ep::allgather_routing_map").size()), per_step);
  EXPECT_EQ(across.at("hybrid_ep::allgather_routing_map").front().bytes, z.moe_tokens * 32);
  EXPECT_EQ(across.count("deep_ep::notify_dispatch"), 0u);
  const std::vector<double> weight(16, 2.0);
  const int64_t row = c.hidden * 2;
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"hybrid_ep::dispatch",
       deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row + 16 * 4, false)},
      {"HybridEPCombineBackward",
       deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row, false)},
      {"HybridEPDispatchBackward",
       deepep_send_matrix(two_nodes(), weight, 32, 8, z.moe_tokens, row + 16 * 4, true)},
  };
  for (const auto& [name, sizes] : expected) {
    ASSERT_EQ(across.count(name), 1u) << name;
    EXPECT_EQ(static_cast<int>(across.at(name).size()), per_step) << name;
    const CollectiveDesc& d = across.at(name).front();
    EXPECT_EQ(d.sms, kHybridEpInternodeSms) << name;
    for (size_t i = 0; i < 16; ++i)
      for (size_t j = 0; j < 16; ++j)
        ASSERT_EQ(d.send_bytes.at(i, j), sizes[i * 16 + j]) << name << " " << i << " " << j;
  }
  EXPECT_EQ(collectives(std::vector<uint32_t>(16, 0)).at("hybrid_ep::dispatch").front().sms,
            kHybridEpIntranodeSms);
  EXPECT_EQ(host_syncs(c), per_step);
  EXPECT_EQ(test_configs::task_count(c, TaskKind::kHostSync, "deep_ep::dispatch (receive counts)"),
            0);
}

TEST(MoeDispatcher, TheConfigTakesFlexWhereDeepEpRunsAndRefusesTheRestAtTheKey) {
  const std::string ep8 = "  parallelism: {data: 8, expert: 8}\n";
  const auto flex_error = [&](const std::string& moe, const std::string& parallelism,
                              uint32_t gpus = 8, const std::string& kernels = "fused") {
    return test_configs::workload_error(test_configs::small_llama_workload_yaml() +
                                            "  layer_kernels: " + kernels + "\n" + moe +
                                            parallelism,
                                        gpus);
  };
  EXPECT_EQ(flex_error("  moe: {experts: 8, dispatcher: flex, flex_sms: 24}\n", ep8), "");
  const MoeConfig flex =
      test_configs::parse_workload(test_configs::small_llama_workload_yaml() +
                                       "  moe: {experts: 8, dispatcher: flex}\n" + ep8,
                                   8)
          .moe;
  EXPECT_EQ(flex.flex_sms, 0) << "the backend's default";
  EXPECT_EQ(flex.flex_backend, FlexBackend::kDeepEp);
  const MoeConfig hybrid =
      test_configs::parse_workload(test_configs::small_llama_workload_yaml() +
                                       "  moe: {experts: 12, dispatcher: flex, flex_backend: "
                                       "hybridep, flex_sms: 9}\n" +
                                       "  parallelism: {data: 12, expert: 12}\n",
                                   12)
          .moe;
  EXPECT_EQ(hybrid.flex_backend, FlexBackend::kHybridEp) << "no DeepEP size table, odd SMs";
  EXPECT_EQ(hybrid.flex_sms, 9);
  const std::map<std::string, std::pair<std::string, std::string>> refused = {
      {"workload.moe.flex_sms", {"  moe: {experts: 8, dispatcher: flex, flex_sms: 21}\n", ep8}},
      {"workload.moe.flex_sms", {"  moe: {experts: 8, flex_sms: 20}\n", ep8}},
      {"workload.moe.flex_backend", {"  moe: {experts: 8, flex_backend: hybridep}\n", ep8}},
      {"workload.moe.pad_to_capacity",
       {"  moe: {experts: 8, dispatcher: flex, capacity_factor: 1, pad_to_capacity: true}\n", ep8}},
      {"workload.moe.dispatcher", {"  moe: {experts: 8, dispatcher: flex}\n", ""}},
  };
  for (const auto& [key, yaml] : refused) {
    const std::string error = flex_error(yaml.first, yaml.second);
    EXPECT_NE(error.find(key), std::string::npos) << key << ": " << error;
  }
  const std::string odd = flex_error("  moe: {experts: 8, dispatcher: flex, flex_sms: 21}\n", ep8);
  EXPECT_NE(odd.find("even"), std::string::npos) << odd;
  const std::string tensor = flex_error("  moe: {experts: 8, dispatcher: flex}\n",
                                        "  parallelism: {tensor: 2, sequence: true, data: 8, "
                                        "expert: 8}\n",
                                        16);
  EXPECT_NE(tensor.find("workload.moe.dispatcher"), std::string::npos) << tensor;
  EXPECT_NE(tensor.find("tensor x expert"), std::string::npos) << tensor;
  const std::string size = flex_error("  moe: {experts: 12, dispatcher: flex}\n",
                                      "  parallelism: {data: 12, expert: 12}\n", 12);
  EXPECT_NE(size.find("workload.parallelism.expert"), std::string::npos) << size;
  EXPECT_NE(size.find("not 12"), std::string::npos) << size;
  const std::string torchtitan = flex_error(
      "  moe: {experts: 8, capacity_factor: 0, dispatcher: flex}\n", ep8, 8, "torchtitan");
  EXPECT_NE(torchtitan.find("workload.moe.dispatcher"), std::string::npos) << torchtitan;
  const std::string graphs =
      flex_error("  moe: {experts: 8, dispatcher: flex}\n  cuda_graphs: true\n", ep8);
  EXPECT_NE(graphs.find("workload.cuda_graphs"), std::string::npos) << graphs;
}

/// The ConfigError of building a small Llama with `moe` (flex) over expert parallel `ep` = data
/// on `node_of_gpu` (empty: a platform without a fabric), or "" when it builds.
std::string flex_build_error(const std::string& moe, int64_t ep,
                             const std::vector<uint32_t>& node_of_gpu) {
  ConfigDocument doc = ConfigDocument::parse_string(
      test_configs::small_llama_workload_yaml() + moe +
          fmt::format("  parallelism: {{data: {}, expert: {}}}\n", ep, ep),
      "scenario.yaml");
  TransformerWorkload workload(doc.root().child("workload"));
  WorkloadPlatform platform;
  platform.gpus = static_cast<uint32_t>(ep);
  platform.device.sm_count = 108;
  platform.node_of_gpu = node_of_gpu;
  TaskGraph graph;
  try {
    workload.build(platform, graph);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// An expert-parallel group of 16 on nodes of 4 GPUs: DeepEP's internode kernels take whole
// nodes of 8. The build, which knows the nodes, refuses it at the dispatcher; on nodes of 8 it
// builds. HybridEP takes nodes of 4, but not 4 on one node and 8 on the next, nor, without node
// facts (8 ranks a node), a group of 12.
TEST(MoeDispatcher, FlexRefusesAnExpertGroupOnNodesDeepEpCannotSpan) {
  const std::string deepep = "  moe: {experts: 16, dispatcher: flex}\n";
  const std::string hybridep = "  moe: {experts: 16, dispatcher: flex, flex_backend: hybridep}\n";
  const auto nodes = [](uint32_t gpus_per_node, uint32_t first_node_gpus = 0) {
    std::vector<uint32_t> out;
    for (uint32_t g = 0; g < 16; ++g)
      out.push_back(g < first_node_gpus ? 0 : 1 + g / gpus_per_node);
    return out;
  };
  EXPECT_EQ(flex_build_error(deepep, 16, nodes(8)), "");
  const std::string four = flex_build_error(deepep, 16, nodes(4));
  EXPECT_NE(four.find("workload.moe.dispatcher"), std::string::npos) << four;
  EXPECT_NE(four.find("whole nodes of 8"), std::string::npos) << four;
  EXPECT_EQ(flex_build_error(hybridep, 16, nodes(4)), "");
  for (const std::string& uneven :
       {flex_build_error(hybridep, 16, nodes(8, 4)),
        flex_build_error("  moe: {experts: 12, dispatcher: flex, flex_backend: hybridep}\n", 12,
                         {})}) {
    EXPECT_NE(uneven.find("workload.moe.dispatcher"), std::string::npos) << uneven;
    EXPECT_NE(uneven.find("same number"), std::string::npos) << uneven;
  }
}

/// fine_moe with one shared expert, its overlap as given.
TransformerConfig shared_moe(MoeDispatcher dispatcher, bool overlap) {
  TransformerConfig c = fine_moe(dispatcher);
  c.moe.shared_experts = 1;
  c.moe.shared_expert_overlap = overlap;
  return c;
}

// moe.shared_expert_overlap: the shared experts' kernels run on their own stream (Megatron-Core's
// SharedExpertMLP.stream), the same kernels as without the overlap.
TEST(MoeDispatcher, SharedExpertOverlapRunsTheSharedExpertsOnTheirStream) {
  for (const MoeDispatcher dispatcher : {MoeDispatcher::kAllToAll, MoeDispatcher::kFlex}) {
    const TransformerConfig c = shared_moe(dispatcher, true);
    TaskGraph g;
    generate_transformer(c, TransformerGraphInputs(1, two_nodes()), g);
    std::map<uint16_t, int> shared_on;
    std::map<std::string, int> counts;
    for (TaskId t = 0; t < g.task_count(); ++t) {
      const Task& task = g.task(t);
      if (task.rank != 0 || task.kind != TaskKind::kKernel) continue;
      const std::string name(g.name(task.name));
      ++counts[name];
      if (name.find("shared_fc") != std::string::npos) ++shared_on[task.resource];
    }
    EXPECT_EQ(shared_on, (std::map<uint16_t, int>{{transformer_emit::kSharedExperts,
                                                   static_cast<int>(c.layers * 2 * 2)}}));
    EXPECT_EQ(counts, test_configs::kernel_counts(shared_moe(dispatcher, false)));
  }
}

// On two DGX H100 nodes, where the dispatch crosses the network: the overlap is never slower than
// running the shared experts in turn, and never faster than having no shared experts.
TEST(MoeDispatcher, SharedExpertOverlapHidesAtMostTheSharedExperts) {
  const test_configs::CalibratedGpu gpu =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  const auto step = [&](const TransformerConfig& c) {
    return test_configs::fabric_step(c, gpu, "dgx_h100_cluster_2").predicted_iteration_time;
  };
  for (const MoeDispatcher dispatcher : {MoeDispatcher::kAllToAll, MoeDispatcher::kFlex}) {
    const Duration in_turn = step(shared_moe(dispatcher, false));
    const Duration overlapped = step(shared_moe(dispatcher, true));
    const Duration none = step(fine_moe(dispatcher));
    std::printf("shared expert, %s: in turn %.3f ms, overlapped %.3f ms, none %.3f ms\n",
                dispatcher == MoeDispatcher::kFlex ? "flex" : "alltoall", in_turn.seconds() * 1e3,
                overlapped.seconds() * 1e3, none.seconds() * 1e3);
    EXPECT_LT(overlapped, in_turn);
    EXPECT_GE(overlapped, none);
  }
}

TEST(MoeDispatcher, SharedExpertOverlapIsRefusedWhereMegatronCoreRefusesIt) {
  const std::string ep8 = "  parallelism: {data: 8, expert: 8}\n";
  const auto error = [&](const std::string& moe, const std::string& extra = "",
                         const std::string& kernels = "fused") {
    return test_configs::workload_error(test_configs::small_llama_workload_yaml() +
                                            "  layer_kernels: " + kernels + "\n" + moe + ep8 +
                                            extra,
                                        8);
  };
  EXPECT_EQ(error("  moe: {experts: 8, shared_experts: 1, shared_expert_overlap: true}\n"), "");
  EXPECT_EQ(error("  moe: {experts: 8, shared_experts: 1, shared_expert_overlap: true, "
                  "dispatcher: flex}\n"),
            "");
  for (const auto& [moe, extra, kernels] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"  moe: {experts: 8, shared_expert_overlap: true}\n", "", "fused"},
           {"  moe: {experts: 8, shared_experts: 1, shared_expert_overlap: true, dispatcher: "
            "allgather}\n",
            "", "fused"},
           {"  moe: {experts: 8, shared_experts: 1, shared_expert_overlap: true, "
            "capacity_factor: 0}\n",
            "", "torchtitan"},
           {"  moe: {experts: 8, shared_experts: 1, shared_expert_overlap: true}\n",
            "  recompute: selective\n  recompute_modules: [shared_experts]\n", "fused"},
       }) {
    const std::string e = error(moe, extra, kernels);
    EXPECT_NE(e.find("workload.moe.shared_expert_overlap"), std::string::npos) << moe << e;
  }
}

}  // namespace
}  // namespace upsim
