// Fixture: the registry includes the families.
#include "workloads/dlrm/dlrm_workload.h"
