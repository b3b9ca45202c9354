#include "workloads/transformer/torchao_float8.h"

#include <algorithm>
#include <stdexcept>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_kernels.h"

namespace upsim {
namespace {

constexpr std::string_view kAmax = "float8_amax";
constexpr std::string_view kAmaxFinal = "float8_amax_final";

/// What role an operand plays (roofline_utils.py's tensor_role).
enum class Role : uint8_t { kInput, kWeight, kGradOutput };

class Float8CastBuilder {
 public:
  Float8CastBuilder(const TransformerConfig& config, TaskGraph& graph)
      : config_(config), graph_(graph), act_dt_(config.activation_dtype()) {}

  /// The casts of a `role` operand of `elements` (on this rank). `tp_sharded`: a DTensor
  /// sharded over TP, whose amax is all-reduced (tensorwise only). `gathered_elements` > 0:
  /// the operand is cast on its shard and all-gathered in float8 (float8 TP), then transposed
  /// at its gathered size for the weight gradient.
  Float8Cast cast(Role role, int64_t elements, bool tp_sharded, int64_t gathered_elements = 0) {
    Float8Cast c;
    const double n = as_double(elements);
    switch (config_.fp8_recipe) {
      case Fp8Recipe::kTensorwise: {
        if (role == Role::kWeight && config_.fp8_fsdp_all_gather) {
          // FSDP gathered it in float8 (row-major): the forward uses it as is, the backward's
          // data gradient transposes it (1 + 1).
          c.backward.push_back({"float8_transpose", transpose(n, 0.5, 0.5)});
          break;
        }
        std::vector<Float8Step>& first = role == Role::kGradOutput ? c.backward : c.forward;
        first = {{kAmax, reduce(n)}, {kAmaxFinal, tiny()}};
        if (tp_sharded) first.push_back({"float8_amax_all_reduce", 0});
        if (role == Role::kWeight) {
          c.forward.push_back({"float8_cast", copy(n, 1, 0.5)});
          c.backward.push_back({"float8_cast", copy(n, 1, 0.5)});
        } else if (gathered_elements > 0) {
          // Row-major for the all-gather; the gathered copy transposed for the weight
          // gradient (1 + 1 bytes per element): an input's in the backward, an output
          // gradient's once gathered.
          first.push_back({"float8_cast", copy(n, 1, 0.5)});
          (role == Role::kInput ? c.backward : c.after_gather)
              .push_back({"float8_transpose", transpose(as_double(gathered_elements), 0.5, 0.5)});
        } else {
          first.push_back({"float8_cast_transpose", transpose(n, 1, 1)});
        }
        break;
      }
      case Fp8Recipe::kRowwise:
        if (role == Role::kWeight) {
          c.forward.push_back({"float8_cast_rowwise", copy(n, 1, 0.5)});
          c.backward.push_back({"bf16_transpose", transpose(n, 1, 1)});
          c.backward.push_back({"float8_cast_rowwise", copy(n, 1, 0.5)});
        } else {
          std::vector<Float8Step>& first = role == Role::kGradOutput ? c.backward : c.forward;
          first.push_back({"float8_cast_rowwise_transpose", transpose(n, 1, 1.5)});
          c.backward.push_back({"float8_cast_rowwise", copy(n, 1, 0.5)});
        }
        break;
      case Fp8Recipe::kRowwiseWithGwHp:
        if (role == Role::kWeight) {
          c.forward.push_back({"float8_cast_rowwise", copy(n, 1, 0.5)});
          c.backward.push_back({"float8_scale_tensorwise", tiny()});
          c.backward.push_back({"float8_cast", copy(n, 1, 0.5)});
        } else {
          (role == Role::kGradOutput ? c.backward : c.forward)
              .push_back({"float8_cast_rowwise", copy(n, 1, 0.5)});
        }
        break;
      default:
        // Transformer Engine's recipes run its own casts (layer_kernels.h, Fp8Cast); the config
        // gives torchtitan's kernels torchao's only (read_fp8_recipe).
        throw std::logic_error("torchao float8: fp8_recipe is not one of torchao's");
    }
    return c;
  }

  /// Reads `n` bf16 elements (2 bytes each) into a scalar.
  KernelDescId reduce(double n) {
    return graph_.add_kernel_desc(pytorch::pointwise(MemoryOp::kSum, act_dt_, n, 1, 1, 0));
  }
  /// `reads` and `writes` in bf16 units (an fp8 element is half of one).
  KernelDescId copy(double n, double reads, double writes) {
    return graph_.add_kernel_desc(
        pytorch::pointwise(MemoryOp::kCopy, act_dt_, n, 1, reads, writes));
  }
  KernelDescId transpose(double n, double reads, double writes) {
    return graph_.add_kernel_desc(
        pytorch::pointwise(MemoryOp::kTranspose, act_dt_, n, 1, reads, writes));
  }
  /// A launch with next to no work (the split reduction's final step, a scale's reduction over
  /// row scales): one fp32 block.
  KernelDescId tiny() {
    return graph_.add_kernel_desc(pytorch::pointwise(MemoryOp::kSum, DType::kFp32, 1024, 1, 1, 0));
  }

 private:
  const TransformerConfig& config_;
  TaskGraph& graph_;
  DType act_dt_;
};

}  // namespace

std::vector<Float8Step> float8_recomputed_steps(const std::vector<Float8Step>& steps) {
  std::vector<Float8Step> out;
  for (const Float8Step& step : steps) {
    if (step.kernel == 0 || step.kernel_name == kAmax || step.kernel_name == kAmaxFinal) continue;
    out.push_back(step);
  }
  return out;
}

int64_t torchao_float8_linear_elements(const LayerSizes& z) {
  const int64_t kv_out = z.kv_heads * z.head_dim;
  // wq, wk, wv, wo; w1, w3, w2.
  return z.h * (2 * z.attn_out + 2 * kv_out) + 3 * z.h * z.ffn;
}

TorchaoFloat8Kernels add_torchao_float8_kernels(const TransformerConfig& config,
                                                const LayerSizes& z, int64_t layers_on_rank,
                                                TaskGraph& graph) {
  Float8CastBuilder b(config, graph);
  TorchaoFloat8Kernels k;
  const bool float8_tp = config.float8_tensor_parallel();
  const int64_t kv_out = z.kv_heads * z.head_dim;
  const int64_t hidden_full = z.tokens * z.h;
  // The attention's and the MLP's inputs: on the sequence shard, gathered in float8, under
  // float8 TP; else on the tokens the GEMMs see.
  const auto block_input = [&] {
    return float8_tp ? b.cast(Role::kInput, z.sp_tokens * z.h, true, hidden_full)
                     : b.cast(Role::kInput, hidden_full, false);
  };
  k.attn_in = block_input();
  k.wo_in = b.cast(Role::kInput, z.tokens * z.attn_out, float8_tp);
  k.ffn_in = block_input();
  k.w2_in = b.cast(Role::kInput, z.tokens * z.ffn, float8_tp);
  // Weights are TP-sharded DTensors under TP (their amax all-reduced under float8 TP).
  const bool tp_weight = float8_tp;
  k.wq_weight = b.cast(Role::kWeight, z.h * z.attn_out, tp_weight);
  k.wkv_weight = b.cast(Role::kWeight, z.h * kv_out, tp_weight);
  k.wo_weight = b.cast(Role::kWeight, z.attn_out * z.h, tp_weight);
  k.w13_weight = b.cast(Role::kWeight, z.h * z.ffn, tp_weight);
  k.w2_weight = b.cast(Role::kWeight, z.ffn * z.h, tp_weight);
  // Output gradients: the column-parallel linears' on their output shard; wo's and w2's on the
  // sequence shard before the backward's float8 all-gather under float8 TP.
  k.wq_dy = b.cast(Role::kGradOutput, z.tokens * z.attn_out, float8_tp);
  k.wkv_dy = b.cast(Role::kGradOutput, z.tokens * kv_out, float8_tp);
  k.w13_dy = b.cast(Role::kGradOutput, z.tokens * z.ffn, float8_tp);
  const auto row_parallel_dy = [&] {
    return float8_tp ? b.cast(Role::kGradOutput, z.sp_tokens * z.h, true, hidden_full)
                     : b.cast(Role::kGradOutput, hidden_full, false);
  };
  k.wo_dy = row_parallel_dy();
  k.w2_dy = row_parallel_dy();
  if (config.fp8_recipe == Fp8Recipe::kRowwise) {
    // A linear of `in` -> `out` features: grad_input is tokens x in, grad_weight out x in.
    const auto rescale = [&](int64_t in, int64_t out) {
      return Float8Rescale{b.copy(as_double(z.tokens * in), 1, 1),
                           b.copy(as_double(out * in), 1, 1)};
    };
    k.wq_rescale = rescale(z.h, z.attn_out);
    k.wkv_rescale = rescale(z.h, kv_out);
    k.wo_rescale = rescale(z.attn_out, z.h);
    k.w13_rescale = rescale(z.h, z.ffn);
    k.w2_rescale = rescale(z.ffn, z.h);
  }
  if (config.fp8_fsdp_all_gather) {
    const int64_t shard =
        std::max<int64_t>(1, torchao_float8_linear_elements(z) / config.parallelism.shard_ranks());
    k.fsdp_shard_cast = b.copy(as_double(shard), 1, 0.5);
    k.fsdp_amax_precompute = b.reduce(as_double(shard * std::max<int64_t>(1, layers_on_rank)));
  }
  return k;
}

}  // namespace upsim
