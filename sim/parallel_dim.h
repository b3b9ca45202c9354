// The parallel dimension of a collective (CollectiveDesc::parallel_dim): tensor, context, expert,
// pipeline or data parallelism, as a workload that lays ranks out in such dimensions (the
// transformer) states it; kOther for every other collective (DLRM's, a trace's). The transformer
// also orders its rank layout by these dimensions. Read by the run summary (exposed
// communication per dimension, pipeline bubble) and the Chrome trace (bubble slices).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace upsim {

enum class ParallelDim : uint8_t { kTensor, kContext, kExpert, kPipeline, kData, kOther };
inline constexpr size_t kParallelDimCount = 6;
/// Every dimension in enum order (the order in which the summary attributes overlaps).
inline constexpr std::array<ParallelDim, kParallelDimCount> kParallelDims{
    ParallelDim::kTensor,   ParallelDim::kContext, ParallelDim::kExpert,
    ParallelDim::kPipeline, ParallelDim::kData,    ParallelDim::kOther};

/// The dimension's position in kParallelDims (and its bit in a dimension mask).
constexpr size_t parallel_dim_index(ParallelDim dim) {
  return static_cast<size_t>(dim);
}

/// "tp", "cp", "ep", "pp", "dp", "other".
constexpr std::string_view parallel_dim_name(ParallelDim dim) {
  switch (dim) {
    case ParallelDim::kTensor:
      return "tp";
    case ParallelDim::kContext:
      return "cp";
    case ParallelDim::kExpert:
      return "ep";
    case ParallelDim::kPipeline:
      return "pp";
    case ParallelDim::kData:
      return "dp";
    case ParallelDim::kOther:
      return "other";
  }
  return "other";
}

}  // namespace upsim
