#include "workloads/transformer/op_recompute.h"

#include <algorithm>

namespace upsim {

std::vector<BlockMatmul> block_matmuls(const TransformerConfig& config) {
  std::vector<BlockMatmul> m = {BlockMatmul::kQuery, BlockMatmul::kKey, BlockMatmul::kValue,
                                BlockMatmul::kOutput, BlockMatmul::kGate};
  if (gated_activation(config.activation)) m.push_back(BlockMatmul::kUp);
  m.push_back(BlockMatmul::kDown);
  return m;
}

bool op_policy_saves(const TransformerConfig& config, int64_t forward_index, BlockMatmul matmul) {
  const std::vector<BlockMatmul> m = block_matmuls(config);
  const auto position = std::find(m.begin(), m.end(), matmul) - m.begin();
  const int64_t count = forward_index * static_cast<int64_t>(m.size()) + position + 1;
  return count % 2 == 1;
}

}  // namespace upsim
