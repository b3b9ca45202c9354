// Fixture: Boost.Graph in a header, and a sibling layer.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include "calibration/hardware_profile.h"
#include "sim/engine.h"
