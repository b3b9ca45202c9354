#include "sim/hbm_sharing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "sim/prefetch_pipeline.h"

namespace upsim {

HbmSharing::HbmSharing(std::span<const LinkInfo> links, const std::vector<int64_t>& gpu_of_rank,
                       std::vector<Bandwidth> achievable_hbm, std::function<void(RankId)> on_change)
    : link_rate_(links.size(), 0.0),
      achievable_hbm_(std::move(achievable_hbm)),
      level_(gpu_of_rank.size(), 0),
      on_change_(std::move(on_change)) {
  if (achievable_hbm_.size() != gpu_of_rank.size()) {
    throw std::invalid_argument("HbmSharing: one achievable HBM bandwidth per rank");
  }
  int64_t gpus = 0;
  link_gpu_.reserve(links.size());
  for (const LinkInfo& l : links) {
    link_gpu_.push_back(l.gpu);
    gpus = std::max(gpus, l.gpu + 1);
  }
  ranks_of_gpu_.resize(static_cast<size_t>(gpus));
  gpu_rate_.assign(static_cast<size_t>(gpus), 0.0);
  for (RankId r = 0; r < gpu_of_rank.size(); ++r) {
    if (!(achievable_hbm_[r].bytes_per_second() > 0.0)) {
      throw std::invalid_argument("HbmSharing: achievable HBM bandwidth must be positive");
    }
    const int64_t gpu = gpu_of_rank[r];
    if (gpu >= 0 && gpu < gpus) ranks_of_gpu_[static_cast<size_t>(gpu)].push_back(r);
  }
}

void HbmSharing::on_link_rate(uint32_t link, Time /*at*/, Bandwidth rate, uint32_t /*flows*/) {
  if (link >= link_gpu_.size() || link_gpu_[link] < 0) return;
  const auto gpu = static_cast<size_t>(link_gpu_[link]);
  const double now = rate.bytes_per_second();
  gpu_rate_[gpu] = std::max(0.0, gpu_rate_[gpu] + now - link_rate_[link]);
  link_rate_[link] = now;
  for (const RankId r : ranks_of_gpu_[gpu]) {
    const double share = gpu_rate_[gpu] / achievable_hbm_[r].bytes_per_second();
    const auto level = static_cast<int32_t>(
        std::min<double>(kMaxLevel, std::floor(share * static_cast<double>(kLevels) + 0.5)));
    if (level == level_[r]) continue;
    level_[r] = level;
    on_change_(r);
  }
}

void HbmSharing::on_link_rates(Time at, std::span<const LinkRateChange> changes) {
  // A large fabric's links are far apart: load each link's GPU, then (for a GPU's link) its
  // rate and the GPU's, chunks ahead.
  const auto load_gpu = [&](size_t i) {
    if (changes[i].link < link_gpu_.size()) prefetch::line(&link_gpu_[changes[i].link]);
  };
  const auto load_rates = [&](size_t i) {
    const uint32_t link = changes[i].link;
    if (link >= link_gpu_.size() || link_gpu_[link] < 0) return;
    prefetch::line(&link_rate_[link]);
    prefetch::line(&gpu_rate_[static_cast<size_t>(link_gpu_[link])]);
  };
  prefetch::two_stage(changes.size(), load_gpu, load_rates, [&](size_t i) {
    on_link_rate(changes[i].link, at, changes[i].rate, changes[i].flows);
  });
}

}  // namespace upsim
