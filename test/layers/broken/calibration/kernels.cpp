// Fixture: sim/ in calibration/ is allowed; HDF5 (calibration/fitting/ only) and a test header
// are not.
#include <hdf5.h>

#include "sim/engine.h"
#include "test/unit/helpers.h"
