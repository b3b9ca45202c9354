// Fixture: only workloads/workload_registry.cpp includes the families.
#include "workloads/dlrm/dlrm_workload.h"
