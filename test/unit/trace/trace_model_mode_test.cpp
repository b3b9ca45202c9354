// Model mode: kernels, copies and collectives priced by models from the trace's shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "sim/network_model.h"
#include "test/unit/trace/synthetic_trace.h"
#include "workloads/trace/trace_graph.h"
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
    // More than 90% of the traced kernels are modelled (untraced ones, left over from the step
    // before the profiler started, have no op and keep their measured time).
    EXPECT_LT((s.kernels_kept_measured - s.untraced_launches) * 10, s.kernels);
  }
  for (const RankValidation& v : r.ranks)
    EXPECT_GT(v.predicted, Duration::zero());
}

}  // namespace
}  // namespace upsim
