// Fixture: Boost.Graph in a .cpp of topology/ is allowed.
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "topology/fabric.h"
