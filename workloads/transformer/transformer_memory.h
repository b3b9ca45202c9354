// Per-GPU memory of a transformer training step (Megatron-LM style 3D/4D/5D parallelism, ZeRO
// and FSDP): what one GPU of a pipeline stage holds at its peak, by part.
//
// Parts (MemoryFootprint::Part names, bytes per GPU; formulas and sources in
// transformer_memory.cpp):
//   weights          the stage's parameters after tensor (and expert) splitting, in the param
//                    dtype; / data x context with ZeRO-3 or FSDP full_shard
//   gradients        same count; fp32 main_grad for bf16 / fp8 with master weights, else the
//                    param dtype (Megatron's distributed-optimizer table); sharded with ZeRO-2/3
//                    or FSDP
//   optimizer state  Adam: fp32 m and v, fp32 master weights when params are 16-bit, and fp32
//                    gradient copy when gradients are 16-bit; sharded with ZeRO >= 1 or FSDP
//   activations      Korthikanti et al. 2022 (arXiv 2205.05198) per layer per micro-batch, times
//                    the stage's layers and the micro-batches it holds in flight
//   output logits    the last stage's fp32 logits kept for the cross entropy (only if > 0)
//   buffers          ZeRO / FSDP gather and reduce buffers, NCCL workspaces
//   autocast weight copies  autocast's 16-bit copies of the stage's weights (autocast.h)
//   allocator reserve       what PyTorch's default caching allocator reserves above the peak
//                    allocation of the step's short-lived tensors (activations, output logits,
//                    autocast copies): kCachingAllocatorFragmentation of the reserve; none
//                    with expandable segments (allocator: expandable_segments)
#pragma once

#include <cstdint>

#include "workloads/transformer/transformer_config.h"
#include "workloads/workload.h"

namespace upsim {

/// The share of its reserve that PyTorch's default caching allocator leaves unallocated at the
/// peak, fragmented between the step's short-lived blocks: 15%, the average fragmentation that
/// GMLake's virtual-memory stitching removed from PyTorch's allocator over eight LLM training
/// workloads on A100 80GB (Guo et al., ASPLOS 2024, arXiv 2401.08156: "fragmentation
/// reductions of 15% (up to 33%)"). Applied to the short-lived parts only: the parameters,
/// gradients and optimizer state are allocated once at the start, in blocks of their own.
/// Expandable segments (one growing mapping per stream) leave no such gaps: 0.
inline constexpr double kCachingAllocatorFragmentation = 0.15;

/// Parameters one GPU of a pipeline stage holds before ZeRO / FSDP sharding: dense ones
/// (replicated over data x context) and routed-expert ones (replicated over the expert
/// data-parallel ranks, data x context / expert).
struct StageParameters {
  int64_t dense = 0;
  int64_t expert = 0;
  int64_t total() const { return dense + expert; }
};

/// Parameters on one GPU of `pipeline_stage` (0-based, < parallelism.pipeline): its layers
/// split over tensor (routed experts also over expert), the word (and learned position)
/// embedding on the first stage, the final norm and output layer on the last (a tied output
/// layer is kept as a copy there when pipeline > 1, as Megatron-LM does).
StageParameters transformer_stage_parameters(const TransformerConfig& c, int64_t pipeline_stage);

/// Activation bytes one GPU keeps for one layer and one micro-batch until its backward
/// (Korthikanti et al. 2022, Table 2, generalised to the config's shapes and dtypes).
int64_t transformer_layer_activation_bytes(const TransformerConfig& c, bool moe_layer);

/// Micro-batches whose activations a GPU of `pipeline_stage` holds at its peak, in units of
/// the stage's whole layer set (fractional for interleaved 1F1B).
double transformer_micro_batches_in_flight(const TransformerConfig& c, int64_t pipeline_stage);

/// The peak footprint of a GPU of `pipeline_stage`; owner = "pipeline stage <p>".
MemoryFootprint transformer_memory(const TransformerConfig& c, int64_t pipeline_stage);

/// The most loaded stage's footprint (largest total; the earliest stage on ties).
MemoryFootprint transformer_peak_memory(const TransformerConfig& c);

}  // namespace upsim
