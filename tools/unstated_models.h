// Stand-ins for the platform model sections that a trace replay may leave out (platform.kernels,
// platform.host, platform.interconnect): a replay takes its kernels', collectives' and host
// times from the measurements, so it prices nothing with them. build_scenario refuses a
// scenario whose workload would price work with a section it left out, naming the key, before
// anything runs; a stand-in that is asked anyway throws std::logic_error (a bug, not bad input).
#pragma once

#include <stdexcept>
#include <string>

#include "sim/cost_models.h"

namespace upsim::cli {

class UnstatedKernelModel final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& /*kernel*/,
                           const DeviceProfile& /*device*/) const override {
    throw std::logic_error("kernel model asked without platform.kernels (the replay prices none)");
  }
};

class UnstatedCpuModel final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc& /*op*/) const override {
    throw std::logic_error("host model asked without platform.host (the replay prices none)");
  }
};

class UnstatedCollectiveModel final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc& /*collective*/) const override {
    throw std::logic_error(
        "interconnect model asked without platform.interconnect (the replay prices none)");
  }
  Duration transfer_duration(const TransferDesc& /*transfer*/) const override {
    throw std::logic_error(
        "interconnect model asked without platform.interconnect (the replay prices none)");
  }
};

}  // namespace upsim::cli
