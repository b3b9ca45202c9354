// A synthetic Kineto trace of about 200 MB, shaped like torch.profiler output (pretty-printed, one
// event per line, epoch microsecond timestamps with sub-microsecond digits): per op a cpu_op with
// input dims, a cudaLaunchKernel, its kernel with launch configuration args and the two ac2g
// flow ends, in ProfilerStep#N iterations. Shared by the trace ingestion benchmarks.
#pragma once

#include <string>

namespace upsim {

std::string synthetic_kineto_trace();

}  // namespace upsim
