// torch.compile of each transformer block (compiled_fusion.h): the fused kernels replace the
// eager pairs one for one, move fewer bytes, and are never slower than the pair under any
// shipped calibration; a compiled step is never slower than the eager one.
#include "workloads/transformer/compiled_fusion.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "calibration/calibrated_kernel_cost.h"
#include "calibration/hardware_profile.h"
#include "calibration/roofline_kernel_cost.h"
#include "sim/config/config_node.h"
#include "test/unit/transformer/step_simulation.h"
#include "test/unit/transformer/test_configs.h"
#include "topology/fabric_loader.h"
#include "workloads/transformer/transformer_generator.h"

namespace upsim {
namespace {

/// Rank 0's memory-bound kernels of one step: how many, and the bytes they move.
struct MemoryBoundWork {
  int kernels = 0;
  double bytes = 0;
};

MemoryBoundWork memory_bound_work(const TransformerConfig& c) {
  MemoryBoundWork w;
  for (const KernelDesc& k : test_configs::step_kernels(c)) {
    if (k.cls != KernelClass::kMemoryBound) continue;
    ++w.kernels;
    w.bytes += k.bytes_read + k.bytes_written;
  }
  return w;
}

TEST(CompiledFusion, EachLayerRunsFewerMemoryBoundKernelsAndMovesFewerBytes) {
  const int64_t layers = 2;
  // Without dropout: forward, add + norm fused (one fewer); backward, both norm-backward + add
  // pairs fused and both residual copies gone (four fewer).
  TransformerConfig llama = test_configs::llama(layers, 4096, 32, 8, 14336, 2048);
  const MemoryBoundWork eager = memory_bound_work(llama);
  llama.compile = true;
  const MemoryBoundWork compiled = memory_bound_work(llama);
  EXPECT_EQ(eager.kernels - compiled.kernels, layers * (1 + 4));
  // Per element of the residual stream and layer: the add's output not read back (1), two norm
  // input gradients not written and read back (4), two copies not made (4).
  const double stream = 2048.0 * 4096 * 2;  // tokens x hidden x bf16
  EXPECT_DOUBLE_EQ(eager.bytes - compiled.bytes, as_double(layers) * 9 * stream);

  // With dropout the residual backward is the dropout mask's multiply: it stays.
  TransformerConfig gpt = test_configs::small_gpt(layers);
  const MemoryBoundWork gpt_eager = memory_bound_work(gpt);
  gpt.compile = true;
  EXPECT_EQ(gpt_eager.kernels - memory_bound_work(gpt).kernels,
            gpt.micro_batches() * layers * (1 + 2));
}

struct Gpu {
  std::string hardware;
  std::string calibration;
};

TEST(CompiledFusion, AFusedKernelIsNeverSlowerThanTheEagerPairUnderAnyShippedCalibration) {
  const std::vector<Gpu> gpus = {{"v100_sxm2_32gb", "v100_deepbench"},
                                 {"a100_sxm4_80gb", "a100_llmcompass"},
                                 {"h100_sxm5_80gb", "h100_xla"},
                                 {"b200_sxm_180gb", "b200_xla"}};
  for (const Gpu& gpu : gpus) {
    const test_configs::CalibratedGpu calibrated =
        test_configs::calibrated_gpu(gpu.hardware, gpu.calibration);
    const HardwareProfile& hw = calibrated.hw;
    const CalibratedKernelCost& model = calibrated.model;
    const auto seconds = [&](const TaskGraph& g, KernelDescId id) {
      return model.kernel_duration(g.kernel_desc(id), hw.device).seconds();
    };
    for (const int64_t tokens : {512, 4096, 32768}) {
      for (const bool dropout : {false, true}) {
        TransformerConfig c = test_configs::llama(1, 8192, 64, 8, 28672, tokens);
        c.dropout = dropout ? 0.1 : 0.0;
        c.compile = true;
        TaskGraph g;
        const LayerKernels k = add_layer_kernels(c, layer_sizes(c), g);
        const std::string where = fmt::format("{} ({}), {} tokens, dropout {}", gpu.hardware,
                                              gpu.calibration, tokens, dropout);
        EXPECT_LE(seconds(g, k.add_norm_fwd), seconds(g, k.residual_fwd) + seconds(g, k.norm_fwd))
            << where;
        EXPECT_LE(seconds(g, k.norm_bwd_add), seconds(g, k.norm_bwd) + seconds(g, k.grad_add))
            << where;
      }
    }
  }
}

TEST(CompiledFusion, ACompiledStepIsNeverSlowerThanTheEagerOne) {
  const test_configs::CalibratedGpu h100 =
      test_configs::calibrated_gpu("h100_sxm5_80gb", "h100_xla");
  for (const int64_t seq : {1024, 8192}) {
    TransformerConfig c = test_configs::llama(2, 4096, 32, 8, 14336, seq);
    const Duration eager = test_configs::step_window(c, h100);
    c.compile = true;
    const Duration compiled = test_configs::step_window(c, h100);
    std::printf("Llama 8B-shaped 2 layers, seq %lld on H100: eager %.3f ms, compiled %.3f ms\n",
                static_cast<long long>(seq), eager.seconds() * 1e3, compiled.seconds() * 1e3);
    EXPECT_LT(compiled, eager);
  }
}

}  // namespace
}  // namespace upsim
