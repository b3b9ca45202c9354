// Communication's share of device memory bandwidth. Every byte a GPU sends over one of its links
// is read from its memory, and every byte it receives is written there (NCCL's transports move
// user buffers: an NVLink peer-to-peer or GPUDirect RDMA send reads the sender's HBM, the data
// lands in the receiver's). While a collective moves data, the kernels beside it reach that much
// less HBM bandwidth: compute and communication compete for the accelerator's memory bandwidth
// (Rashidi et al., "Enabling Compute-Communication Overlap in Distributed Deep Learning Training
// Platforms", ISCA 2021, section 3).
//
// Model: communication takes, of a GPU's achievable HBM bandwidth (the profile's bandwidth times
// its achievable memory fraction), the sum of the rates its links carry now in both directions,
// at most half (max-min sharing: a memory-bound kernel keeps at least half against a stream
// that wants less than the whole). ASSUMPTION, a lower bound: one access per byte on each side;
// NCCL's copies through its FIFO buffers and a reduction's read of the local operand add one or
// two more per byte and are not counted. The share is the rates the network model reports
// (Observer::on_link_rate), the rate bytes actually flow at, not the links' capacity: a
// latency-bound collective takes little. It is kept in steps of 1/kLevels so that a kernel is
// repriced when the share moves by a step, not on every flow's change.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sim/cost_models.h"
#include "sim/observer.h"
#include "sim/task_graph.h"

namespace upsim {

class HbmSharing final : public Observer {
 public:
  /// Steps of the share: a level is a share of level / kLevels.
  static constexpr int32_t kLevels = 64;
  /// The largest level: half the bandwidth.
  static constexpr int32_t kMaxLevel = kLevels / 2;

  /// `links`: the network model's links (LinkInfo::gpu, the fabric GPU at one end);
  /// `gpu_of_rank`: each rank's fabric GPU; `achievable_hbm`: each rank's achievable HBM bandwidth
  /// (> 0); `on_change(rank)` runs when a rank's level changes, after level() reads the new one.
  HbmSharing(std::span<const LinkInfo> links, const std::vector<int64_t>& gpu_of_rank,
             std::vector<Bandwidth> achievable_hbm, std::function<void(RankId)> on_change);

  void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) override;
  void on_link_rates(Time at, std::span<const LinkRateChange> changes) override;

  /// The share of `rank`'s HBM bandwidth communication takes now, in 1/kLevels (0..kMaxLevel).
  int32_t level(RankId rank) const { return level_[rank]; }

 private:
  /// Per link: its GPU (-1: none) and the rate it carries now, bytes / s.
  std::vector<int64_t> link_gpu_;
  std::vector<double> link_rate_;
  /// Per fabric GPU: the ranks on it, and the rate its links carry in total, bytes / s.
  std::vector<std::vector<RankId>> ranks_of_gpu_;
  std::vector<double> gpu_rate_;
  std::vector<Bandwidth> achievable_hbm_;
  std::vector<int32_t> level_;
  std::function<void(RankId)> on_change_;
};

/// The device a kernel sees while communication takes `level` / HbmSharing::kLevels of its HBM
/// bandwidth: that much less bandwidth; peaks, SMs and L2 unchanged. Level 0 returns the device.
inline DeviceProfile device_with_hbm_taken(const DeviceProfile& device, int32_t level) {
  if (level <= 0) return device;
  DeviceProfile left = device;
  left.hbm_bandwidth = device.hbm_bandwidth * (1.0 - static_cast<double>(level) /
                                                         static_cast<double>(HbmSharing::kLevels));
  return left;
}

}  // namespace upsim
