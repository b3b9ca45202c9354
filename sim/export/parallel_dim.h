// The parallel dimension of a collective, read from the prefix of its group name
// (TaskGraph::collective_name): "tp:" tensor, "cp:" context, "ep:" expert, "pp:" pipeline,
// "dp:" data parallelism, as the transformer workload names its groups ("tp:all_reduce",
// "pp:send_recv"); any other name is kOther. Used by the run summary (exposed communication per
// dimension, pipeline bubble) and the Chrome trace (bubble slices).
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

/// The dimension named by `collective_name`'s prefix ("tp:all_reduce" -> kTensor); kOther when
/// it has none.
constexpr ParallelDim parallel_dim_of(std::string_view collective_name) {
  for (ParallelDim d : kParallelDims) {
    if (d == ParallelDim::kOther) break;
    const std::string_view name = parallel_dim_name(d);
    if (collective_name.size() > name.size() && collective_name.starts_with(name) &&
        collective_name[name.size()] == ':') {
      return d;
    }
  }
  return ParallelDim::kOther;
}

}  // namespace upsim
