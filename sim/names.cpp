// Printable names of the sim/ enums (used by exporters and error messages).
#include "sim/cost_models.h"
#include "sim/task_graph.h"

namespace upsim {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return "fp32";
    case DType::kTf32:
      return "tf32";
    case DType::kFp16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
    case DType::kFp8:
      return "fp8";
    case DType::kInt8:
      return "int8";
  }
  return "?";
}

int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
    case DType::kTf32:
      return 4;
    case DType::kFp16:
    case DType::kBf16:
      return 2;
    case DType::kFp8:
    case DType::kInt8:
      return 1;
  }
  return 4;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kDTypeCount; ++i) {
    const auto dtype = static_cast<DType>(i);
    if (dtype_name(dtype) == name) return dtype;
  }
  return std::nullopt;
}

KernelDesc gemm_kernel(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k) {
  KernelDesc d;
  d.cls = KernelClass::kGemm;
  d.dtype = dtype;
  d.batch = batch;
  d.m = m;
  d.n = n;
  d.k = k;
  return d;
}

std::string_view kernel_class_name(KernelClass cls) {
  switch (cls) {
    case KernelClass::kGemm:
      return "gemm";
    case KernelClass::kMemoryBound:
      return "memory_bound";
    case KernelClass::kEmbeddingForward:
      return "embedding_forward";
    case KernelClass::kEmbeddingBackward:
      return "embedding_backward";
    case KernelClass::kAttention:
      return "attention";
  }
  return "?";
}

std::string_view attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFlash2:
      return "flash2";
    case AttentionKernel::kFlash3:
      return "flash3";
    case AttentionKernel::kCudnn:
      return "cudnn";
    case AttentionKernel::kFlash1:
      return "flash1";
    case AttentionKernel::kTriton:
      return "triton";
  }
  return "?";
}

std::string attention_kernel_names() {
  std::string names;
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    if (i > 0) names += ", ";
    names += attention_kernel_name(static_cast<AttentionKernel>(i));
  }
  return names;
}

std::optional<AttentionKernel> parse_attention_kernel(std::string_view name) {
  for (size_t i = 0; i < kAttentionKernelCount; ++i) {
    const auto kernel = static_cast<AttentionKernel>(i);
    if (attention_kernel_name(kernel) == name) return kernel;
  }
  return std::nullopt;
}

std::string_view optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kUnspecified:
      return "unspecified";
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kSgdMomentum:
      return "sgd_momentum";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kLamb:
      return "lamb";
  }
  return "?";
}

std::string_view optimizer_impl_name(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kForeach:
      return "foreach";
    case OptimizerImpl::kFused:
      return "fused";
  }
  return "?";
}

std::string_view embedding_update_name(EmbeddingUpdate update) {
  switch (update) {
    case EmbeddingUpdate::kFusedDeduplicated:
      return "fused";
    case EmbeddingUpdate::kScatterAdd:
      return "scatter_add";
  }
  return "?";
}

std::string_view host_phase_name(HostPhase phase) {
  switch (phase) {
    case HostPhase::kOpBegin:
      return "op_begin";
    case HostPhase::kLaunch:
      return "launch";
    case HostPhase::kOpEnd:
      return "op_end";
    case HostPhase::kOpBody:
      return "op_body";
    case HostPhase::kMarker:
      return "marker";
    case HostPhase::kGraphLaunch:
      return "graph_launch";
  }
  return "?";
}

std::string_view collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

std::string_view transfer_kind_name(TransferKind kind) {
  switch (kind) {
    case TransferKind::kHostToDevice:
      return "h2d";
    case TransferKind::kDeviceToHost:
      return "d2h";
    case TransferKind::kDeviceToDevice:
      return "d2d";
  }
  return "?";
}

std::string_view task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kCpuOp:
      return "cpu_op";
    case TaskKind::kLaunch:
      return "launch";
    case TaskKind::kHostSync:
      return "host_sync";
    case TaskKind::kIterationMark:
      return "iteration";
    case TaskKind::kKernel:
      return "kernel";
    case TaskKind::kMemcpy:
      return "memcpy";
    case TaskKind::kCollective:
      return "collective";
    case TaskKind::kEventRecord:
      return "event_record";
    case TaskKind::kStreamWait:
      return "stream_wait";
  }
  return "?";
}

}  // namespace upsim
