// Fixture: a runtime model that includes its fitting library.
#pragma once

#include "calibration/fitting/measurements.h"
