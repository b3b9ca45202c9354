// Runs a sealed TaskGraph on an Engine: CPU threads and GPU streams as resources, durations
// from the cost models, bytes moved by the network model, everything reported to observers.
//
// Contract:
//  - Resources only schedule; every duration comes from a model (or a task's fixed duration).
//  - A run ends when the event queue is empty. If tasks remain unfinished then, the run failed:
//    `run()` throws SimulationError naming each collective group whose members did not all
//    arrive (and which ranks never did), or else the first blocked task of each resource.
//  - Communication takes SMs from compute: from the moment a collective's member task starts on
//    its stream until the collective completes, its rank's GPU has
//    CollectiveDesc::sms (when >= 0) or else NetworkModel::communication_sms fewer SMs for kernels
//    (NCCL's thread blocks are resident while they wait for peers and while they move bytes). A
//    kernel priced by the kernel model runs on the SMs left (device_with_sms_held); when the SMs
//    held change while it runs, the work it has left is priced again on the new share (a fluid
//    model: done work is kept). Kernels with a fixed (measured) duration are not repriced: the
//    measurement holds whatever ran beside them. Sources of the slowdown in topology/nccl_tuning.h.
//  - GEMMs under a static persistent schedule (ModelSet::gemm_launch, sim/gemm_launch.h) are
//    not shared that way: a GEMM's CTAs that find no SM free at its launch wait until SMs free
//    up (a collective ends) or the resident CTAs finish, and then run their whole share, so the
//    GEMM ends when its last CTA started plus one CTA's share; resident CTAs are not slowed by
//    collectives that start later. A CTA's share is the GEMM's time on the SMs it may use (all,
//    less a carveout or a collective's gemm_sm_margin). Only collectives moving data count here
//    (from the moment every member arrived to the end): members that wait for their peers do
//    not. ASSUMPTION, chosen with NeMo's measured pipeline-parallel steps in view: counting the
//    waiting kernels doubles every GEMM of a stage beside its posted pipeline receives
//    (Megatron-Core's overlapped p2p), 40-55% slower than those steps were measured.
//    GEMMs under a carveout are priced on the SMs it leaves under every schedule.
//  - Communication takes HBM bandwidth from compute (ModelSet::achievable_memory_fraction,
//    sim/hbm_sharing.h): while a GPU's links carry bytes, a kernel priced by the kernel model runs
//    on the memory bandwidth left, repriced (fluid, as for SMs) when that share moves by a step.
//  - The executor does not own the graph, models or observers; they must outlive `run()`.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/cost_models.h"
#include "sim/engine.h"
#include "sim/gemm_launch.h"
#include "sim/network_model.h"
#include "sim/observer.h"
#include "sim/task_graph.h"

namespace upsim {

/// The run could not finish (deadlock, collective group that never completes).
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The models one run uses. `devices[r]` is the GPU rank r runs on.
struct ModelSet {
  const KernelCostModel* kernels = nullptr;
  const CpuCostModel* cpu = nullptr;
  NetworkModel* network = nullptr;
  std::vector<DeviceProfile> devices;
  /// How GEMMs launch their CTAs (sim/gemm_launch.h); the same on every rank.
  GemmLaunch gemm_launch;
  /// The fraction of a device's HBM bandwidth kernels reach (a hardware profile's achievable
  /// memory fraction). Above 0, with a network model that reports its links' rates, the traffic
  /// on a GPU's links takes its share of that bandwidth from the kernels beside it
  /// (sim/hbm_sharing.h); 0: communication takes no memory bandwidth.
  double achievable_memory_fraction = 0.0;
};

struct RunStats {
  Time end;             ///< time of the last completion
  uint64_t events = 0;  ///< engine events executed
  uint64_t tasks_done = 0;
  /// StreamWaits enqueued before their EventRecord was: CUDA makes such a wait a no-op
  /// (cudaStreamWaitEvent on an event not yet recorded "acts as if the record has already
  /// completed", CUDA Runtime API), so they did not wait. Only a what-if on host time (host
  /// work re-priced, so launches reorder) makes any.
  uint64_t stream_waits_before_record = 0;
  /// GEMM launches under a static persistent schedule some of whose CTAs found no SM free
  /// (ModelSet::gemm_launch), and the GPU time their waiting CTAs added, over every simulated
  /// rank and iteration.
  uint64_t persistent_gemms_split = 0;
  Duration persistent_gemm_split_time;
};

class GraphExecutor {
 public:
  GraphExecutor(Engine& engine, const TaskGraph& graph, const ModelSet& models);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  void add_observer(Observer* observer);
  /// Runs the graph to completion. Throws SimulationError if it cannot complete.
  RunStats run();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace upsim
