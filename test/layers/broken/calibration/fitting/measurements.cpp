// Fixture: the fitting library may use HDF5 and the runtime models; the runtime models never
// include it.
#include <hdf5.h>

#include "calibration/kernels.h"
