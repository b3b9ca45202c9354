// Fixture for check_layers_test.cmake: sim/ uses a third-party library and a layer above it.
#pragma once

#include <fmt/format.h>

#include "sim/config/config_node.h"
