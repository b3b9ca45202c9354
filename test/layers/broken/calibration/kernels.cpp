// Fixture: HDF5 and sim/ in calibration/ are allowed; a test header is not.
#include <hdf5.h>

#include "sim/engine.h"
#include "test/unit/helpers.h"
