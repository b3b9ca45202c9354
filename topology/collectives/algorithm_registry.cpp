// Every collective algorithm family, by its CollectiveAlgorithm value.
#include <stdexcept>

#include "topology/collectives/algorithm.h"

namespace upsim::collectives {

const Algorithm& collective_algorithm(CollectiveAlgorithm id) {
  switch (id) {
    case CollectiveAlgorithm::kRing:
      return ring_algorithm();
    case CollectiveAlgorithm::kTree:
      return tree_algorithm();
    case CollectiveAlgorithm::kNvls:
      return nvls_algorithm();
    case CollectiveAlgorithm::kHierarchical:
      return hierarchical_algorithm();
    case CollectiveAlgorithm::kDirect:
      return direct_algorithm();
  }
  throw std::logic_error("collective planner: unknown collective algorithm");
}

}  // namespace upsim::collectives
