#include "workloads/transformer/parallel_layout.h"

#include <algorithm>

namespace upsim {

namespace {

size_t dim_index(ParallelDim d) {
  return static_cast<size_t>(d);
}

}  // namespace

ParallelLayout::ParallelLayout(const ParallelismConfig& p)
    : parallel_(p),
      gpus_(p.gpus()),
      expert_stride_(rank_stride(p, RankLayout::kExpert, ParallelDim::kExpert)),
      expert_data_stride_(rank_stride(p, RankLayout::kExpert, ParallelDim::kData)) {
  for (ParallelDim d : parallel_.order)
    stride_[dim_index(d)] = rank_stride(parallel_, RankLayout::kDense, d);
}

int64_t ParallelLayout::size(ParallelDim dim) const {
  switch (dim) {
    case ParallelDim::kTensor:
      return parallel_.tensor;
    case ParallelDim::kContext:
      return parallel_.context;
    case ParallelDim::kExpert:
      return parallel_.expert;
    case ParallelDim::kData:
      return parallel_.data;
    case ParallelDim::kPipeline:
      return parallel_.pipeline;
    case ParallelDim::kOther:  // no layout dimension: a group of one
      return 1;
  }
  return 1;
}

ParallelCoords ParallelLayout::coords(int64_t rank) const {
  auto at = [&](ParallelDim d) { return rank / stride_[dim_index(d)] % size(d); };
  return {at(ParallelDim::kTensor), at(ParallelDim::kContext), at(ParallelDim::kData),
          at(ParallelDim::kPipeline)};
}

int64_t ParallelLayout::rank(const ParallelCoords& c) const {
  return c.tp * stride_[dim_index(ParallelDim::kTensor)] +
         c.cp * stride_[dim_index(ParallelDim::kContext)] +
         c.dp * stride_[dim_index(ParallelDim::kData)] +
         c.pp * stride_[dim_index(ParallelDim::kPipeline)];
}

std::vector<int64_t> ParallelLayout::group(ParallelDim dim, int64_t of) const {
  const ParallelCoords base = coords(of);
  std::vector<int64_t> members;
  if (dim == ParallelDim::kExpert) {
    // The ep group of Megatron-Core's expert rank layout (RankLayout::kExpert).
    const int64_t first = of - of / expert_stride_ % parallel_.expert * expert_stride_;
    for (int64_t i = 0; i < parallel_.expert; ++i)
      members.push_back(first + i * expert_stride_);
    return members;
  }
  for (int64_t i = 0; i < size(dim); ++i) {
    ParallelCoords c = base;
    switch (dim) {
      case ParallelDim::kTensor:
        c.tp = i;
        break;
      case ParallelDim::kContext:
        c.cp = i;
        break;
      case ParallelDim::kData:
        c.dp = i;
        break;
      case ParallelDim::kPipeline:
        c.pp = i;
        break;
      case ParallelDim::kExpert:
      case ParallelDim::kOther:
        break;
    }
    members.push_back(rank(c));
  }
  return members;
}

std::vector<int64_t> ParallelLayout::replica_group(int64_t of) const {
  std::vector<int64_t> members;
  for (int64_t dp : group(ParallelDim::kData, of)) {
    for (int64_t r : group(ParallelDim::kContext, dp))
      members.push_back(r);
  }
  std::sort(members.begin(), members.end());
  return members;
}

std::vector<int64_t> ParallelLayout::expert_replica_group(int64_t of) const {
  const int64_t size = parallel_.expert_data();
  const int64_t first = of - of / expert_data_stride_ % size * expert_data_stride_;
  std::vector<int64_t> members;
  for (int64_t i = 0; i < size; ++i)
    members.push_back(first + i * expert_data_stride_);
  return members;
}

}  // namespace upsim
