// `upsim validate workloads`: whole training steps of published runs, measured vs predicted.
// Three sources (test/data/*/SOURCES.md):
//   Megatron-LM SC'21 Table 1 (GPT 1.7B-1T on Selene, DGX A100 80GB, 8x HDR IB per node): the
//     iteration time derived from the achieved TFLOP/s with the paper's Eq. 3;
//   llm-foundry's MPT benchmarks (FSDP on A100 80GB over RoCE and on DGX H100): the step time
//     GlobalBatchSize(T) / Throughput(T/s);
//   NVIDIA DeepLearningExamples' PyTorch DLRM (Criteo 1TB; DGX A100, DGX-1 V100, DGX-2; 1-16
//     GPUs; FP32 / TF32 and mixed precision): the step time 65536 / records per second. Held
//     out and reported without a bound (the source's geomean never fails the command).
// Each measured row becomes a scenario: a template (configs/validation/megatron_gpt.yaml,
// mpt_fsdp.yaml, mpt_fsdp_h100.yaml, dle_dlrm.yaml) with the row's values applied as `--set`
// overrides in-process, run like `upsim run` without outputs.
// The rows simulate on --jobs threads (sim/parallel.h) while the command prints them in row
// order as they finish.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace upsim::cli {

/// Returns the exit code: 0 every bounded source's geomean |error| within --bound and no row
/// failed, 1 otherwise (the dle-dlrm source is reported without a bound); bad input throws
/// (WorkloadTableError, ConfigError) for main to report (2).
int validate_workloads_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace upsim::cli
