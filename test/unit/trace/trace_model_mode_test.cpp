// Model mode: kernels, copies and collectives priced by models from the trace's shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>

#include "sim/network_model.h"
#include "sim/observer.h"
#include "test/unit/trace/synthetic_trace.h"
#include "workloads/trace/cross_rank_collectives.h"
#include "workloads/trace/trace_graph.h"
#include "workloads/trace/trace_kernel_desc.h"
#include "workloads/trace/trace_replay.h"

namespace upsim {
namespace {

using namespace upsim::test;

/// A toy roofline for the tests (not a calibrated model): GEMMs at `flops` per second, other
/// kernels at `bandwidth` bytes per second, 2 us minimum per kernel.
class ToyKernels final : public KernelCostModel {
 public:
  ToyKernels(double flops, double bandwidth) : flops_(flops), bandwidth_(bandwidth) {}
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    double s = 0.0;
    if (k.cls == KernelClass::kGemm) {
      s = 2.0 * static_cast<double>(k.batch * k.m * k.n * k.k) / flops_;
    } else {
      s = (k.bytes_read + k.bytes_written) / bandwidth_;
    }
    return Duration::from_seconds_f(std::max(s, 2e-6));
  }

 private:
  double flops_;
  double bandwidth_;
};

class ToyCollectives final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc& c) const override {
    int64_t bytes = c.bytes;
    const size_t n = c.send_bytes.members();
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j)
        bytes = std::max(bytes, c.send_bytes.at(i, j));
    }
    return Duration::from_us(10) + Duration::from_seconds_f(static_cast<double>(bytes) / 50e9);
  }
  Duration transfer_duration(const TransferDesc& t) const override {
    return Duration::from_us(2) + Duration::from_seconds_f(static_cast<double>(t.bytes) / 10e9);
  }
};

class NoCpu final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc&) const override {
    ADD_FAILURE() << "model mode keeps the measured host time";
    return Duration::zero();
  }
};

std::vector<RankTrace> one(const std::string& json) {
  std::vector<RankTrace> v(1);
  v[0].kineto = parse_kineto_trace(json, "model.json");
  return v;
}

std::vector<TaskId> tasks_of(const TaskGraph& g, TaskKind kind) {
  std::vector<TaskId> out;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    if (g.task(t).kind == kind) out.push_back(t);
  }
  return out;
}

const std::string kTrace = kineto_json({
    annotation("ProfilerStep#1", kMainTid, "0", "200"),
    cpu_op("aten::addmm", kMainTid, "10", "20",
           R"({"Input Dims": [[512], [64, 128], [128, 512], [], []],)"
           R"( "Input type": ["float", "float", "float", "Scalar", "Scalar"]})"),
    runtime("cudaLaunchKernel", kMainTid, "12", "4", 1),
    gpu("kernel", "volta_sgemm_32x32_sliced1x4_tn", 7, "16", "30", 1),
    runtime("cudaLaunchKernel", kMainTid, "20", "4", 2),
    gpu("kernel", "splitKreduce_kernel", 7, "46", "3", 2),
    cpu_op("aten::add", kMainTid, "40", "10",
           R"({"Input Dims": [[1024], [1024], []], "Input type": ["float", "float", "Scalar"]})"),
    runtime("cudaLaunchKernel", kMainTid, "42", "4", 3),
    gpu("kernel", "vectorized_elementwise_kernel", 7, "49", "2", 3),
    cpu_op("fbgemm::split_embedding_codegen_lookup_sgd_function", kMainTid, "60", "10"),
    runtime("cudaLaunchKernel", kMainTid, "62", "4", 4),
    gpu("kernel", "split_embedding_codegen_forward_kernel", 7, "66", "40", 4),
    runtime("cudaMemcpyAsync", kMainTid, "80", "5", 5),
    gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 7, "106", "10", 5, 1 << 20),
    runtime("cudaDeviceSynchronize", kMainTid, "90", "27", 6),
});

TEST(TraceModelMode, kernels_get_descriptors_from_op_shapes) {
  TraceGraphOptions options;
  options.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(kTrace), g, options);
  EXPECT_EQ(info.ranks[0].kernels, 4u);
  EXPECT_EQ(info.ranks[0].kernels_kept_measured, 1u);  // the embedding lookup
  const auto kernels = tasks_of(g, TaskKind::kKernel);
  ASSERT_EQ(kernels.size(), 4u);
  const KernelDesc& gemm = g.kernel(kernels[0]);
  EXPECT_EQ(gemm.cls, KernelClass::kGemm);
  EXPECT_EQ(gemm.m, 64);
  EXPECT_EQ(gemm.k, 128);
  EXPECT_EQ(gemm.n, 512);
  EXPECT_EQ(g.task(kernels[0]).fixed_ps, -1);
  EXPECT_EQ(g.kernel(kernels[1]).cls, KernelClass::kMemoryBound);  // split-K reduction
  const KernelDesc& add = g.kernel(kernels[2]);
  EXPECT_EQ(add.cls, KernelClass::kMemoryBound);
  EXPECT_DOUBLE_EQ(add.bytes_read, 8192.0);
  EXPECT_DOUBLE_EQ(add.bytes_written, 4096.0);
  EXPECT_EQ(add.memory_op, MemoryOp::kBinary);  // the op's family, as the generators name it
  EXPECT_EQ(g.kernel(kernels[1]).memory_op, MemoryOp::kUnspecified);  // addmm's reduction
  EXPECT_EQ(g.task(kernels[3]).fixed_ps, 40'000'000);                 // embedding: kept measured
  const auto copies = tasks_of(g, TaskKind::kMemcpy);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(g.task(copies[0]).fixed_ps, -1);
  // Host time stays measured in model mode.
  for (TaskId t : tasks_of(g, TaskKind::kCpuOp))
    EXPECT_GE(g.task(t).fixed_ps, 0);
  for (TaskId t : tasks_of(g, TaskKind::kLaunch))
    EXPECT_GE(g.task(t).fixed_ps, 0);
}

// A torch.compile step: AOTAutograd's CompiledFunction op (inputs: every tensor of the graph)
// launches two Inductor kernels and, inside the region, an extern GEMM through aten::mm; the
// backward runs under CompiledFunctionBackward. The Inductor kernels once got the region's
// inputs as their own (a 70 us kernel priced at 32 ms); now only aten::mm's GEMM is priced.
const std::string kCompiledTrace = kineto_json({
    annotation("ProfilerStep#1", kMainTid, "0", "400"),
    cpu_op("CompiledFunction", kMainTid, "10", "100",
           R"({"Input Dims": [[8192, 8192], [8192, 8192], [8192, 8192], [8192, 8192]],)"
           R"( "Input type": ["float", "float", "float", "float"]})"),
    runtime("cudaLaunchKernel", kMainTid, "12", "4", 1),
    gpu("kernel", "triton_poi_fused_add_mul_0", 7, "16", "70", 1),
    cpu_op("aten::mm", kMainTid, "30", "20",
           R"({"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]})"),
    runtime("cudaLaunchKernel", kMainTid, "32", "4", 2),
    gpu("kernel", "ampere_sgemm_32x32_sliced1x4_nn", 7, "90", "10", 2),
    runtime("cudaLaunchKernel", kMainTid, "60", "4", 3),
    gpu("kernel", "triton_red_fused_sum_1", 7, "101", "8", 3),
    cpu_op("autograd::engine::evaluate_function: CompiledFunctionBackward", kMainTid, "200", "60"),
    cpu_op("CompiledFunctionBackward", kMainTid, "201", "58",
           R"({"Input Dims": [[8192, 8192], [8192, 8192]], "Input type": ["float", "float"]})"),
    runtime("cudaLaunchKernel", kMainTid, "210", "4", 4),
    gpu("kernel", "vectorized_elementwise_kernel", 7, "215", "5", 4),
    runtime("cudaDeviceSynchronize", kMainTid, "300", "10", 5),
});

TEST(TraceModelMode, compiled_region_kernels_keep_their_measured_time) {
  TraceGraphOptions options;
  options.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(kCompiledTrace), g, options);
  const TraceRankSummary& s = info.ranks[0];
  EXPECT_EQ(s.kernels, 4u);
  EXPECT_EQ(s.kernels_kept_measured, 3u);
  EXPECT_EQ(s.kernels_compiled_kept_measured, 3u);
  EXPECT_EQ(s.kernels_non_aten_kept_measured, 0u);
  const auto kernels = tasks_of(g, TaskKind::kKernel);
  ASSERT_EQ(kernels.size(), 4u);
  EXPECT_EQ(g.task(kernels[0]).fixed_ps, 70'000'000);       // triton, measured
  EXPECT_EQ(g.kernel(kernels[1]).cls, KernelClass::kGemm);  // aten::mm inside the region
  EXPECT_EQ(g.kernel(kernels[1]).m, 64);
  EXPECT_EQ(g.task(kernels[1]).fixed_ps, -1);
  EXPECT_EQ(g.task(kernels[2]).fixed_ps, 8'000'000);
  EXPECT_EQ(g.task(kernels[3]).fixed_ps, 5'000'000);  // CompiledFunctionBackward's own kernel
  // No kernel is ever priced from the region's inputs.
  for (TaskId k : kernels)
    EXPECT_LT(g.kernel(k).bytes_read, 8192.0 * 8192 * 4);
}

TEST(TraceModelMode, only_registered_operators_lend_their_shapes) {
  EXPECT_TRUE(is_registered_operator("aten::mm"));
  EXPECT_TRUE(is_registered_operator("fbgemm::permute_2D_sparse_data"));
  EXPECT_FALSE(is_registered_operator("torch::autograd::CppNode<SplitLookupFunction_sgd_Op>"));
  EXPECT_FALSE(is_registered_operator("autograd::engine::evaluate_function: MmBackward0"));
  EXPECT_FALSE(is_registered_operator("CompiledFunction"));
  EXPECT_FALSE(is_registered_operator("MyAutogradFunction"));
  EXPECT_FALSE(is_registered_operator("## Call CompiledFxGraph fabc ##"));
  EXPECT_FALSE(is_registered_operator("nn.Module: Linear_0"));
  EXPECT_TRUE(is_compiled_region_op("Torch-Compiled Region: 0/0"));
  EXPECT_TRUE(is_compiled_region_op("CompiledFunctionBackward"));
  KinetoOpInputs in;
  in.dims = {{4096, 4096}};
  in.types = {"float"};
  EXPECT_FALSE(op_kernel_desc("MyAutogradFunction", "elementwise_kernel", in, false));
  EXPECT_FALSE(op_kernel_desc("aten::add", "triton_poi_fused_add_0", in, false));
  EXPECT_TRUE(op_kernel_desc("aten::add", "vectorized_elementwise_kernel", in, false));
}

// An fp32 GEMM is priced in tf32 when its kernel ran on TF32 tensor cores, as its name says;
// a SIMT sgemm stays fp32, half inputs stay fp16.
TEST(TraceModelMode, Fp32GemmsNamedAsTf32TensorCoreKernelsAreTf32) {
  KinetoOpInputs in;
  in.dims = {{512, 1024}, {1024, 256}};
  in.types = {"float", "float"};
  const auto dtype_of = [&](std::string_view kernel) {
    return op_kernel_desc("aten::mm", kernel, in, false).value().dtype;
  };
  EXPECT_EQ(dtype_of("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>"),
            DType::kTf32);
  EXPECT_EQ(dtype_of("ampere_s1688gemm_128x128_ldg8_stages_32x3_nn"), DType::kTf32);
  EXPECT_EQ(dtype_of("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"), DType::kTf32);
  EXPECT_EQ(dtype_of("volta_sgemm_128x64_nn"), DType::kFp32);
  EXPECT_EQ(dtype_of("ampere_sgemm_32x32_sliced1x4_tn"), DType::kFp32);
  in.types = {"c10::Half", "c10::Half"};
  EXPECT_EQ(dtype_of("ampere_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn"), DType::kFp16);
}

// One rank (global rank 2) of an 8-GPU job: an all-reduce of 4 MiB over the process group
// {0, 2, 4, 6} (record_param_comms args, PyTorch >= 2.2) and one over the world group without
// a recorded group. Priced over 1 member it cost nothing; now each is priced over its group's
// GPUs, the traced rank first and simulated, the others mirrored.
const std::string kOneOfEight = kineto_json(
    {
        annotation("ProfilerStep#1", kMainTid, "0", "500"),
        cpu_op("record_param_comms", kMainTid, "10", "20",
               R"({"Collective name": "allreduce", "Process Group Name": "1", "Seq": 0,)"
               R"( "Group size": 4, "Process Group Ranks": "[0, 2, 4, 6]",)"
               R"( "In msg nelems": 1048576, "dtype": "Float"})"),
        runtime("cudaLaunchKernel", kMainTid, "12", "4", 1),
        gpu("kernel",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
            "ncclWork*)",
            20, "20", "150", 1),
        cpu_op("record_param_comms", kMainTid, "200", "20",
               R"({"Collective name": "allreduce", "Process Group Name": "0", "Seq": 0,)"
               R"( "In msg nelems": 262144, "dtype": "Float"})"),
        runtime("cudaLaunchKernel", kMainTid, "202", "4", 2),
        gpu("kernel",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
            "ncclWork*)",
            20, "210", "60", 2),
        runtime("cudaDeviceSynchronize", kMainTid, "400", "10", 3),
    },
    R"(  "distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 8},)"
    "\n");

/// Each task's duration, from its begin to its end.
class TaskDurations final : public Observer {
 public:
  void on_task_begin(TaskId task, Time at) override { begin_[task] = at; }
  void on_task_end(TaskId task, Time at) override { end_[task] = at; }
  Duration of(TaskId task) const { return end_.at(task) - begin_.at(task); }

 private:
  std::map<TaskId, Time> begin_;
  std::map<TaskId, Time> end_;
};

/// Ring all-reduce at 50 GB/s per GPU plus 5 us per member: a 1-member group costs 5 us.
class RingCollectives final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc& c) const override {
    const auto n = static_cast<double>(c.members.size());
    return Duration::from_us(5) * static_cast<int64_t>(c.members.size()) +
           Duration::from_seconds_f(2.0 * (n - 1) / n * static_cast<double>(c.bytes) / 50e9);
  }
  Duration transfer_duration(const TransferDesc&) const override { return Duration::zero(); }
};

/// Toy kernels, no host cost and RingCollectives over an analytical network, for `gpus` GPUs.
struct RingJob {
  explicit RingJob(size_t gpus) : kernels(1e13, 1e12), net(ring) {
    models.kernels = &kernels;
    models.cpu = &cpu;
    models.network = &net;
    models.devices.resize(gpus);
  }
  RingJob(const RingJob&) = delete;
  RingJob& operator=(const RingJob&) = delete;
  ToyKernels kernels;
  NoCpu cpu;
  RingCollectives ring;
  AnalyticalNetwork net;
  ModelSet models;
};

TEST(TraceModelMode, one_rank_of_a_job_prices_collectives_over_its_groups) {
  TraceSetOptions options;
  options.graph.mode = TraceMode::kModel;
  options.graph.job_world_size = 8;
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(kOneOfEight), g, options.graph);
  ASSERT_EQ(g.collective_count(), 2u);
  EXPECT_EQ(g.collective(0).members, (std::vector<RankId>{2, 0, 4, 6}));
  EXPECT_EQ(g.collective(0).simulated_members, 1u);
  EXPECT_EQ(g.collective(0).bytes, 4 << 20);
  EXPECT_EQ(g.collective(1).members, (std::vector<RankId>{2, 0, 1, 3, 4, 5, 6, 7}));
  EXPECT_EQ(g.rank(0).device, 2u);
  const TraceRankSummary& s = info.ranks[0];
  EXPECT_EQ(s.collectives_over_job, 2u);
  EXPECT_EQ(s.collectives_world_assumed, 1u);
  EXPECT_EQ(s.collectives_kept_measured, 0u);

  // Run: each collective takes exactly what the network prices for its whole group.
  g.seal();
  RingJob job(8);
  const RingCollectives& ring = job.ring;
  TaskDurations durations;
  const TraceReplayResult r = run_trace_graph(g, info, job.models, options, {&durations});
  const std::vector<TaskId> collectives = tasks_of(g, TaskKind::kCollective);
  ASSERT_EQ(collectives.size(), 2u);
  EXPECT_EQ(durations.of(collectives[0]), ring.collective_duration(g.collective(0)));
  EXPECT_EQ(durations.of(collectives[1]), ring.collective_duration(g.collective(1)));
  EXPECT_GT(durations.of(collectives[0]), Duration::from_us(100));  // 4 members, 4 MiB

  // Without the job's world size (or in replay), the group is the trace alone: kept measured.
  options.graph.job_world_size = 0;
  TaskGraph alone;
  const TraceGraphInfo kept = build_replay_graph(one(kOneOfEight), alone, options.graph);
  EXPECT_EQ(kept.ranks[0].collectives_kept_measured, 2u);
  EXPECT_EQ(alone.task(tasks_of(alone, TaskKind::kCollective)[0]).fixed_ps, 150'000'000);
}

// One rank of a 16-GPU job whose all-to-all NCCL ran as a grouped send / receive with every
// peer (one SendRecv kernel): in model mode it is priced as an all-to-all over the 16 GPUs, not
// refused as a send / receive of 16 members.
TEST(TraceModelMode, a_grouped_send_recv_with_many_peers_is_an_all_to_all) {
  const std::string json = kineto_json(
      {
          annotation("ProfilerStep#1", kMainTid, "0", "500"),
          cpu_op("record_param_comms", kMainTid, "10", "20",
                 R"({"Collective name": "send", "Process Group Name": "0", "Seq": 0,)"
                 R"( "Group size": 16, "In msg nelems": 1048576, "dtype": "Float"})"),
          runtime("cudaLaunchKernel", kMainTid, "12", "4", 1),
          gpu("kernel", "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 20, "20",
              "150", 1),
          runtime("cudaDeviceSynchronize", kMainTid, "400", "10", 2),
      },
      R"(  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 16},)"
      "\n");
  TraceSetOptions options;
  options.graph.mode = TraceMode::kModel;
  options.graph.job_world_size = 16;
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(json), g, options.graph);
  ASSERT_EQ(g.collective_count(), 1u);
  EXPECT_EQ(g.collective(0).kind, CollectiveKind::kAllToAll);
  EXPECT_EQ(g.collective(0).members.size(), 16u);
  EXPECT_EQ(g.collective(0).members.front(), 3u);
  g.seal();
  RingJob job(16);
  const TraceReplayResult r = run_trace_graph(g, info, job.models, options, {});
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_GT(r.ranks[0].predicted, Duration::zero());
}

TEST(TraceModelMode, job_groups_come_from_recorded_ranks_or_the_world) {
  bool assumed = false;
  EXPECT_EQ(job_collective_members({0, 2, 4, 6}, 4, 4, 8, assumed),
            (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_FALSE(assumed);
  EXPECT_EQ(job_collective_members({}, 8, 3, 8, assumed).size(), 8u);
  EXPECT_FALSE(assumed);
  EXPECT_EQ(job_collective_members({}, -1, 3, 8, assumed).size(), 8u);
  EXPECT_TRUE(assumed);
  // A sub-group whose ranks were not recorded, a rank outside its group, a rank past the world.
  EXPECT_TRUE(job_collective_members({}, 4, 3, 8, assumed).empty());
  EXPECT_TRUE(job_collective_members({0, 2}, 2, 3, 8, assumed).empty());
  EXPECT_TRUE(job_collective_members({0, 9}, 2, 0, 8, assumed).empty());
}

TEST(TraceModelMode, memory_bound_kernels_carry_the_ops_family_and_rows) {
  KinetoOpInputs in;
  in.dims = {{32, 128, 1024}, {}};
  in.types = {"c10::Half", "Scalar"};
  const std::optional<KernelDesc> softmax =
      op_kernel_desc("aten::_softmax", "softmax_warp_forward", in, false);
  ASSERT_TRUE(softmax);
  EXPECT_EQ(softmax->memory_op, MemoryOp::kSoftmax);
  EXPECT_EQ(softmax->row_elements, 1024);
  EXPECT_EQ(softmax->dtype, DType::kFp16);
  const std::optional<KernelDesc> relu =
      op_kernel_desc("aten::threshold_backward", "vectorized_elementwise_kernel", in, false);
  ASSERT_TRUE(relu);
  EXPECT_EQ(relu->memory_op, MemoryOp::kRelu);
  EXPECT_EQ(relu->row_elements, 0);
}

TEST(TraceModelMode, modelled_host_time_follows_the_seed_phases_of_each_top_level_op) {
  TraceGraphOptions options;
  options.mode = TraceMode::kModel;
  options.host = TraceHost::kModelled;
  TaskGraph g;
  build_replay_graph(one(kTrace), g, options);
  // Host tasks after the first iteration mark, in program order, with what the cost model sees.
  std::vector<std::string> seen;
  bool marked = false;
  for (TaskId t = 0; t < g.task_count(); ++t) {
    const Task& task = g.task(t);
    if (task.kind == TaskKind::kIterationMark) marked = true;
    if (!marked || (task.kind != TaskKind::kCpuOp && task.kind != TaskKind::kLaunch)) continue;
    std::string line = std::string(g.name(task.op_name)) + " " +
                       std::string(host_phase_name(task.phase)) + " " +
                       std::to_string(task.launch_index);
    if (task.fixed_ps >= 0) line += " fixed " + std::to_string(task.fixed_ps);
    seen.push_back(line);
  }
  const std::string launch(host_phase_name(HostPhase::kLaunch));
  const std::string begin(host_phase_name(HostPhase::kOpBegin));
  const std::string end(host_phase_name(HostPhase::kOpEnd));
  const std::vector<std::string> expected = {
      "aten::addmm " + begin + " 0",   // T1 + T2
      "aten::addmm " + launch + " 0",  // T4
      "aten::addmm " + launch + " 1",  // T4 + T5
      "aten::addmm " + end + " 0",     // T3
      "aten::add " + begin + " 0",
      "aten::add " + launch + " 0",
      "aten::add " + end + " 0",
      "fbgemm::split_embedding_codegen_lookup_sgd_function " + begin + " 0",
      "fbgemm::split_embedding_codegen_lookup_sgd_function " + launch + " 0",
      "fbgemm::split_embedding_codegen_lookup_sgd_function " + end + " 0",
      "ProfilerStep#1 " + launch + " 0",  // cudaMemcpyAsync outside any op: T4 only
  };
  EXPECT_EQ(seen, expected);
}

TEST(TraceModelMode, a_faster_gpu_shortens_a_gpu_bound_step) {
  TraceSetOptions options;
  options.graph.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(one(kTrace), g, options.graph);
  g.seal();
  NoCpu cpu;
  ToyCollectives coll;
  AnalyticalNetwork net(coll);
  auto run = [&](double flops, double bandwidth) {
    ToyKernels kernels(flops, bandwidth);
    ModelSet models;
    models.kernels = &kernels;
    models.cpu = &cpu;
    models.network = &net;
    models.devices.resize(1);
    return run_trace_graph(g, info, models, options).ranks[0].predicted;
  };
  const Duration slow = run(1e11, 1e9);
  const Duration fast = run(1e13, 1e12);
  EXPECT_GT(slow, fast);
  // With infinitely fast kernels the step is the host time plus the measured embedding kernel.
  EXPECT_GE(fast, Duration::from_us(150));
}

TEST(TraceModelMode, dlrm_runs_end_to_end_with_models) {
  // Mechanics only: the accuracy of model mode depends on the calibrated models that tools/
  // wires in; here a toy roofline shows that every rank completes and how much is modelled.
  const LoadedTraces loaded =
      load_trace_directory(std::filesystem::path(UPSIM_TRACE_TEST_DATA) / "dlrm");
  TraceSetOptions options;
  options.graph.mode = TraceMode::kModel;
  TaskGraph g;
  const TraceGraphInfo info = build_replay_graph(loaded.ranks, g, options.graph);
  g.seal();
  ToyKernels kernels(14e12 * 0.6, 900e9 * 0.7);  // V100 fp32 peak and HBM2, derated (toy)
  NoCpu cpu;
  ToyCollectives coll;
  AnalyticalNetwork net(coll);
  ModelSet models;
  models.kernels = &kernels;
  models.cpu = &cpu;
  models.network = &net;
  models.devices.resize(info.ranks.size());
  const TraceReplayResult r = run_trace_graph(g, info, models, options);
  std::cout << format_trace_validation(r.ranks);
  ASSERT_EQ(r.ranks.size(), 8u);
  for (const TraceRankSummary& s : info.ranks) {
    EXPECT_EQ(s.collectives, 8u);
    // More than 85% of the traced kernels are modelled (untraced ones, left over from the step
    // before the profiler started, have no op and keep their measured time). The embedding
    // backward's kernels run under autograd nodes (torch::autograd::CppNode<SplitLookupFunction_
    // ..._Op>), whose inputs are not the kernels': kept measured, and counted as such.
    EXPECT_LT((s.kernels_kept_measured - s.untraced_launches) * 100, s.kernels * 15);
    EXPECT_GT(s.kernels_non_aten_kept_measured, 0u);
    EXPECT_EQ(s.kernels_compiled_kept_measured, 0u);
  }
  for (const RankValidation& v : r.ranks)
    EXPECT_GT(v.predicted, Duration::zero());
}

}  // namespace
}  // namespace upsim
