// torch.compile of each transformer block (the `compile` key): the memory-bound kernels that
// TorchInductor fuses into one generated kernel, with their byte counts.
//
// torchtitan compiles every TransformerBlock on its own (torchtitan/models/llama3/infra/
// parallelize.py, apply_compile: torch.compile(transformer_block, fullgraph=True)). Inductor
// fuses chains of pointwise ops and a reduction with its pointwise prologue and epilogue into one
// Triton kernel; GEMMs and SDPA / flash attention are extern kernels, fusion barriers, and so is
// the block's graph boundary. Between the barriers of one block the eager step has:
//   forward  norm | qkv | rotary | attention | proj | residual add, norm | fc1 | act | fc2 |
//            residual add
//   backward residual grad | fc2 | act grad | fc1 | norm grad, residual-gradient add | qkv | ...
// Compiled, the attention block's residual add and the MLP's norm are one kernel, each norm's
// backward and the residual-gradient add after it are one kernel, and the gradient of a
// residual add without dropout is the incoming gradient itself (no kernel). Norm, rotary and
// activation alone are one kernel eager too (the fused kernels Megatron / Apex / Transformer
// Engine ship, which this model already prices), so they are unchanged.
#pragma once

#include "sim/task_graph.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

/// The fused kernels of a compiled block (TransformerConfig::compile only).
struct CompiledFusionKernels {
  /// Residual add (with its dropout) fused with the next norm: reads the residual stream and the
  /// branch output, writes the new residual stream (and the dropout mask) and the normed
  /// activation; the eager pair also writes and reads back the residual stream in between.
  KernelDescId add_norm_fwd = 0;
  /// A norm's backward fused with the add of the residual gradient: reads the input, the output
  /// gradient and the residual gradient (and the saved statistics), writes the summed input
  /// gradient; the eager pair also writes and reads back the norm's input gradient.
  KernelDescId norm_bwd_add = 0;
};

/// Adds the fused kernels' descriptions of `config`'s layer to `graph`.
CompiledFusionKernels add_compiled_fusion_kernels(const TransformerConfig& config,
                                                  const LayerSizes& sizes, TaskGraph& graph);

}  // namespace upsim
