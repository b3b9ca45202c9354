#include "workloads/transformer/lora.h"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "sim/units.h"
#include "workloads/pytorch/kernels.h"
#include "workloads/transformer/layer_kernels.h"
#include "workloads/transformer/transformer_config.h"

namespace upsim {

namespace {

constexpr std::array<std::string_view, kLoraTargets> kTargetNames = {"linear_qkv", "linear_proj",
                                                                     "linear_fc1", "linear_fc2"};
/// Megatron-Bridge's LoRA.dim default.
constexpr int64_t kDefaultRank = 32;
constexpr int64_t kMaxRank = int64_t{1} << 16;

bool column_parallel(LoraTarget t) {
  return t == LoraTarget::kQkv || t == LoraTarget::kFc1;
}

/// The base linear's input and output widths on one tensor rank of `tensor`.
struct LinearWidths {
  int64_t in = 0;
  int64_t out = 0;
};
LinearWidths local_widths(const TransformerConfig& c, LoraTarget target, int64_t tensor) {
  const int64_t h = c.hidden;
  const int64_t q = c.heads / tensor * c.head_dim();
  const int64_t kv = std::max<int64_t>(1, c.kv_heads / tensor) * c.head_dim();
  const int64_t ffn = c.ffn / tensor;
  const int64_t fc1 = gated_activation(c.activation) ? 2 * ffn : ffn;
  switch (target) {
    case LoraTarget::kQkv:
      return {h, q + 2 * kv};
    case LoraTarget::kProj:
      return {q, h};
    case LoraTarget::kFc1:
      return {h, fc1};
    case LoraTarget::kFc2:
      return {ffn, h};
  }
  return {};
}

}  // namespace

LoraConfig read_lora(const ConfigNode& lora) {
  LoraConfig c;
  c.rank = lora.get_int_in_or("rank", 1, kMaxRank, kDefaultRank);
  if (!lora.has("targets")) {
    c.targets.fill(true);
    return c;
  }
  const ConfigNode list = lora.child("targets");
  if (!list.is_sequence() || list.size() == 0) {
    list.fail(
        fmt::format("expected a non-empty list of linears ({})", fmt::join(kTargetNames, ", ")));
  }
  for (const ConfigNode& item : list.items()) {
    const std::string name = item.as_string();
    size_t i = 0;
    while (i < kTargetNames.size() && kTargetNames[i] != name)
      ++i;
    if (i == kTargetNames.size()) {
      item.fail(
          fmt::format("unknown LoRA target `{}`; valid: {}", name, fmt::join(kTargetNames, ", ")));
    }
    if (c.targets[i]) item.fail(fmt::format("`{}` is listed twice", name));
    c.targets[i] = true;
  }
  return c;
}

LoraKernels add_lora_kernels(const TransformerConfig& config, const LayerSizes& z,
                             TaskGraph& graph) {
  LoraKernels kernels;
  const auto add = [&](const KernelDesc& d) { return graph.add_kernel_desc(d); };
  // The adapters are Megatron's own ColumnParallelLinear / RowParallelLinear, outside Transformer
  // Engine's fp8 autocast: their GEMMs run in the activation dtype (bf16 under fp8).
  const DType gemm_dt = config.activation_dtype();
  const DType act_dt = config.activation_dtype();
  const int64_t r = config.lora.rank;
  for (size_t i = 0; i < kLoraTargets; ++i) {
    const auto target = static_cast<LoraTarget>(i);
    if (!config.lora.adapts(target)) continue;
    LoraTargetKernels& k = kernels[i];
    const LinearWidths w = local_widths(config, target, z.t);
    // Column: A hidden -> rank / tensor on the gathered tokens, B rank -> out / tensor; its
    // output is the base's shape. Row: A in / tensor -> rank, B rank -> hidden / tensor, its
    // gathered output split to the sequence shard under SP.
    const pytorch::LinearGemms in = column_parallel(target)
                                        ? pytorch::linear_gemms(gemm_dt, z.tokens, w.in, r / z.t)
                                        : pytorch::linear_gemms(gemm_dt, z.tokens, w.in, r);
    const pytorch::LinearGemms out =
        pytorch::linear_gemms(gemm_dt, z.tokens, r, column_parallel(target) ? w.out : w.out / z.t);
    k.in_fwd = add(in.forward);
    k.in_dgrad = add(in.grad_input);
    k.in_wgrad = add(in.grad_weight);
    k.out_fwd = add(out.forward);
    k.out_dgrad = add(out.grad_input);
    k.out_wgrad = add(out.grad_weight);
    const double output_elements =
        as_double(column_parallel(target) ? z.tokens * w.out : z.sp_tokens * w.out);
    k.scale = add(pytorch::pointwise(MemoryOp::kBinary, act_dt, output_elements, 1, 1, 1));
    k.output_add = add(pytorch::pointwise(MemoryOp::kBinary, act_dt, output_elements, 1, 2, 1));
    k.input_grad_add =
        add(pytorch::pointwise(MemoryOp::kBinary, act_dt, as_double(z.tokens * w.in), 1, 2, 1));
  }
  return kernels;
}

std::vector<int64_t> lora_layer_tensors(const TransformerConfig& config, int64_t tensor) {
  std::vector<int64_t> tensors;
  const int64_t r = config.lora.rank;
  for (size_t i = 0; i < kLoraTargets; ++i) {
    const auto target = static_cast<LoraTarget>(i);
    if (!config.lora.adapts(target)) continue;
    const LinearWidths w = local_widths(config, target, tensor);
    if (column_parallel(target)) {
      tensors.push_back(w.in * (r / tensor));
      tensors.push_back(r * w.out);
    } else {
      tensors.push_back(w.in * r);
      tensors.push_back(r * (w.out / tensor));
    }
  }
  return tensors;
}

int64_t lora_layer_parameters(const TransformerConfig& config, int64_t tensor) {
  int64_t sum = 0;
  for (const int64_t n : lora_layer_tensors(config, tensor))
    sum += n;
  return sum;
}

std::string lora_targets_text(const LoraConfig& lora) {
  std::vector<std::string_view> names;
  for (size_t i = 0; i < kLoraTargets; ++i)
    if (lora.targets[i]) names.push_back(kTargetNames[i]);
  return fmt::format("{}", fmt::join(names, ", "));
}

double lora_flops_per_token(const TransformerConfig& config) {
  double flops = 0.0;
  const auto r = static_cast<double>(config.lora.rank);
  for (size_t i = 0; i < kLoraTargets; ++i) {
    const auto target = static_cast<LoraTarget>(i);
    if (!config.lora.adapts(target)) continue;
    const LinearWidths w = local_widths(config, target, 1);
    flops += 6.0 * r * static_cast<double>(w.in + w.out);
  }
  return flops;
}

}  // namespace upsim
