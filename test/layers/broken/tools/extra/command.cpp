// Fixture: a folder the layering table does not know.
#include "sim/engine.h"
