// Fixture: a family may include the interface, not the registry, and not a sibling family.
#pragma once

#include "workloads/trace/trace_workload.h"
#include "workloads/workload.h"
#include "workloads/workload_registry.h"
