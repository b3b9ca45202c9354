#include "workloads/pytorch/kernels.h"

#include <gtest/gtest.h>

#include <string_view>
#include <utility>

namespace upsim::pytorch {
namespace {

TEST(MemoryOpOfAten, NamesItsFamilyWithOrWithoutPrefixInPlaceOrBackward) {
  const std::pair<std::string_view, MemoryOp> cases[] = {
      {"aten::relu", MemoryOp::kRelu},
      {"aten::relu_", MemoryOp::kRelu},
      {"aten::threshold_backward", MemoryOp::kRelu},
      {"aten::gelu_backward", MemoryOp::kGelu},
      {"aten::silu", MemoryOp::kSwiglu},
      {"aten::sigmoid_backward", MemoryOp::kSigmoid},
      {"aten::tanh", MemoryOp::kTanh},
      {"aten::_softmax", MemoryOp::kSoftmax},
      {"aten::_softmax_backward_data", MemoryOp::kSoftmax},
      {"aten::_log_softmax", MemoryOp::kSoftmax},
      {"aten::native_layer_norm", MemoryOp::kLayerNorm},
      {"aten::native_layer_norm_backward", MemoryOp::kLayerNorm},
      {"aten::rms_norm", MemoryOp::kRmsNorm},
      {"aten::native_dropout", MemoryOp::kDropout},
      {"aten::native_dropout_backward", MemoryOp::kDropout},
      {"aten::add", MemoryOp::kBinary},
      {"aten::add_", MemoryOp::kBinary},
      {"aten::mul", MemoryOp::kBinary},
      {"aten::div_", MemoryOp::kBinary},
      {"aten::binary_cross_entropy", MemoryOp::kBinary},
      {"aten::sum", MemoryOp::kSum},
      {"aten::mean", MemoryOp::kSum},
      {"aten::copy_", MemoryOp::kCopy},
      {"aten::contiguous", MemoryOp::kCopy},
      {"aten::fill_", MemoryOp::kCopy},
      {"aten::zero_", MemoryOp::kCopy},
      {"aten::_to_copy", MemoryOp::kCopy},
      {"aten::cat", MemoryOp::kCat},
      {"aten::transpose", MemoryOp::kTranspose},
      {"aten::index", MemoryOp::kIndex},
      {"aten::index_put_", MemoryOp::kIndex},
      {"aten::cross_entropy_loss", MemoryOp::kCrossEntropy},
      {"aten::nll_loss_forward", MemoryOp::kCrossEntropy},
      {"aten::nll_loss_backward", MemoryOp::kCrossEntropy},
      {"relu", MemoryOp::kRelu},
      {"aten::t", MemoryOp::kTranspose},
      {"aten::convolution", MemoryOp::kUnspecified},
      {"aten::embedding_dense_backward", MemoryOp::kUnspecified},
      {"aten::_", MemoryOp::kUnspecified},
      {"", MemoryOp::kUnspecified},
  };
  for (const auto& [op, family] : cases)
    EXPECT_EQ(memory_op_name(memory_op_of_aten(op)), memory_op_name(family)) << op;
}

TEST(MemoryOpOfAten, RowwiseFamiliesAreTheNormsSoftmaxAndCrossEntropy) {
  EXPECT_TRUE(is_rowwise(MemoryOp::kSoftmax));
  EXPECT_TRUE(is_rowwise(MemoryOp::kLayerNorm));
  EXPECT_TRUE(is_rowwise(MemoryOp::kRmsNorm));
  EXPECT_TRUE(is_rowwise(MemoryOp::kCrossEntropy));
  EXPECT_FALSE(is_rowwise(MemoryOp::kBinary));
  EXPECT_FALSE(is_rowwise(MemoryOp::kUnspecified));
}

TEST(PytorchKernels, GemmNamesFollowTheDtype) {
  EXPECT_EQ(gemm_kernel_name(DType::kFp32, "addmm"), "sgemm/addmm");
  EXPECT_EQ(gemm_kernel_name(DType::kTf32, "mm"), "tf32gemm/mm");
  EXPECT_EQ(gemm_kernel_name(DType::kFp16, "bmm"), "hgemm/bmm");
  EXPECT_EQ(gemm_kernel_name(DType::kBf16, "mm"), "bf16gemm/mm");
}

}  // namespace
}  // namespace upsim::pytorch
