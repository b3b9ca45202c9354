#include "workloads/transformer/gradient_sync.h"

#include <algorithm>
#include <set>

namespace upsim {

using pytorch::HostOp;

TaskId GradientSync::collective(uint32_t pg, CollectiveKind kind, int64_t bytes,
                                std::string_view op_name) {
  const pytorch::RankThreads& at = rank_.threads;
  HostOp h(rank_.graph, at, op_name);
  const TaskId ready = h.record(at.compute_stream);
  h.wait(at.comm_stream, ready);
  h.collective_on(at.comm_stream, rank_.groups.call(pg, kind, bytes, collective_kind_name(kind)),
                  op_name);
  const TaskId done = h.record(at.comm_stream);
  h.end();
  return done;
}

void GradientSync::wait_compute(TaskId event, std::string_view op_name) {
  if (event == kNoTask) return;
  HostOp h(rank_.graph, rank_.threads, op_name);
  h.wait(rank_.threads.compute_stream, event);
  h.end();
}

void GradientSync::finish_backward() {
  wait_compute(last_event_, "ddp.reducer::finalize_backward");
}

namespace {

/// DDP and ZeRO-1/2: the gradients of each buffer in DDP buckets (GradBuffer::buckets), each
/// bucket all-reduced (ZeRO-1/2: reduce-scattered) once its last tensor is ready in the last
/// micro-batch (overlap_grad_reduce), or all of them after the pipeline flush. ZeRO-1/2
/// (Megatron's distributed optimizer) then all-gathers the updated parameters, bucket by bucket:
/// after the optimizer step, or with overlap_param_gather in the next iteration's first forward
/// (ParallelismConfig::overlap_param_gather).
class BucketedReduction final : public GradientSync {
 public:
  BucketedReduction(GradSyncRank rank, bool sharded_optimizer, bool overlap,
                    bool overlap_param_gather, bool align_param_gather)
      : GradientSync(rank),
        sharded_optimizer_(sharded_optimizer),
        overlap_(overlap),
        overlap_param_gather_(sharded_optimizer && overlap_param_gather),
        align_param_gather_(overlap_param_gather_ && align_param_gather) {}

  void begin_iteration() override {
    GradientSync::begin_iteration();
    forwarded_.clear();
    for (ParamGather& g : gathers_)
      g = ParamGather{};
  }

  /// overlap_param_gather: before a unit's first forward of the iteration, the compute stream
  /// waits for the all-gathers of the buckets holding its parameters, and the next bucket's is
  /// issued ahead. Megatron-Core's forward pre-hook (megatron/core/distributed/
  /// distributed_data_parallel.py, _make_forward_pre_hook: finish_param_sync of the parameter's
  /// bucket group, which dispatches the next group's all-gather); the buckets are gathered in
  /// forward order, the reverse of the gradients' ready order. With align_param_gather the
  /// schedule dispatches them (dispatch_param_gather): the pre-hook dispatches only a bucket
  /// it needs that is not dispatched yet (skip_next_bucket_dispatch).
  void before_forward(int64_t unit, const PerBuffer& elements,
                      const std::optional<UnitElements>& /*next*/) override {
    if (!overlap_param_gather_ || !forwarded_.insert(unit).second) return;
    for (size_t b = 0; b < kGradBuffers; ++b) {
      const GradBuffer& buffer = rank_.buffers[b];
      if (buffer.replicas == 1 || elements[b] == 0) continue;
      ParamGather& g = gathers_[b];
      g.forward_elements += elements[b];
      const size_t n = buffer.buckets.size();
      // The unit needs every bucket (forward order) that starts before the end of its
      // parameters.
      size_t needed = g.issued.size();
      int64_t start = g.issued_elements;
      while (needed < n && start < g.forward_elements) {
        start += param_elements(forward_bucket(buffer, needed));
        ++needed;
      }
      while (g.issued.size() < std::min(align_param_gather_ ? needed : needed + 1, n))
        issue_param_gather(buffer, g);
      if (needed > 0) {
        wait_compute(g.issued[needed - 1], "DistributedDataParallel._forward_pre_hook");
      }
    }
  }

  void dispatch_param_gather(const PerBuffer& through_elements) override {
    if (!align_param_gather_) return;
    for (size_t b = 0; b < kGradBuffers; ++b) {
      const GradBuffer& buffer = rank_.buffers[b];
      if (buffer.replicas == 1) continue;
      ParamGather& g = gathers_[b];
      while (g.issued.size() < buffer.buckets.size() && g.issued_elements < through_elements[b])
        issue_param_gather(buffer, g);
    }
  }

  void after_backward(int64_t /*unit*/, const LayerParams& params, bool last_micro_batch) override {
    if (!last_micro_batch) return;
    for (size_t b = 0; b < kGradBuffers; ++b) {
      GradBuffer& buffer = rank_.buffers[b];
      if (buffer.replicas == 1) continue;
      buffer.tensors_ready += params.tensors[b].size();
      if (!overlap_) continue;
      while (buffer.next_bucket < buffer.buckets.size() &&
             buffer.tensors_ready >= buffer.bucket_end[buffer.next_bucket]) {
        reduce_bucket(buffer, buffer.buckets[buffer.next_bucket].bytes);
        ++buffer.next_bucket;
      }
    }
  }

  void finish_backward() override {
    for (GradBuffer& buffer : rank_.buffers) {
      if (buffer.replicas == 1) continue;
      for (; buffer.next_bucket < buffer.buckets.size(); ++buffer.next_bucket)
        reduce_bucket(buffer, buffer.buckets[buffer.next_bucket].bytes);
    }
    GradientSync::finish_backward();
  }

  void after_optimizer_step() override {
    // With overlap_param_gather the next iteration's forward gathers (before_forward).
    if (!sharded_optimizer_ || overlap_param_gather_) return;
    // The same buckets, in parameter bytes.
    TaskId done = kNoTask;
    for (const GradBuffer& buffer : rank_.buffers) {
      if (buffer.replicas == 1) continue;
      for (const pytorch::DdpBucket& bucket : buffer.buckets) {
        done = collective(buffer.pg, CollectiveKind::kAllGather, param_shard_bytes(buffer, bucket),
                          "nccl:all_gather");
      }
    }
    wait_compute(done, "DistributedOptimizer._finish_param_sync");
  }

 private:
  void reduce_bucket(const GradBuffer& buffer, int64_t bytes) {
    last_event_ = collective(
        buffer.pg, sharded_optimizer_ ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
        bytes, sharded_optimizer_ ? "nccl:reduce_scatter" : "nccl:all_reduce");
  }

  /// Parameter all-gathers of one buffer in the iteration's first forward.
  struct ParamGather {
    int64_t forward_elements = 0;  ///< parameters of the units forwarded so far
    int64_t issued_elements = 0;   ///< parameters of the buckets issued so far
    std::vector<TaskId> issued;    ///< completion events, forward order
  };

  /// Issues the next bucket's parameter all-gather (forward order) on the communication stream,
  /// which depends on nothing the compute stream does.
  void issue_param_gather(const GradBuffer& buffer, ParamGather& g) {
    const pytorch::DdpBucket& bucket = forward_bucket(buffer, g.issued.size());
    const std::string_view op_name = "DistributedDataParallel.start_param_sync";
    HostOp h(rank_.graph, rank_.threads, op_name);
    h.collective_on(rank_.threads.comm_stream,
                    rank_.groups.call(buffer.pg, CollectiveKind::kAllGather,
                                      param_shard_bytes(buffer, bucket), "all_gather"),
                    op_name);
    g.issued.push_back(h.record(rank_.threads.comm_stream));
    h.end();
    g.issued_elements += param_elements(bucket);
  }

  /// The k-th bucket in forward order: the gradients' ready order reversed.
  static const pytorch::DdpBucket& forward_bucket(const GradBuffer& buffer, size_t k) {
    return buffer.buckets[buffer.buckets.size() - 1 - k];
  }
  /// Parameters whose gradients `bucket` holds.
  int64_t param_elements(const pytorch::DdpBucket& bucket) const {
    return bucket.bytes / rank_.grad_elem_bytes;
  }
  /// Bytes of the parameters of `bucket` each rank contributes to its all-gather (its
  /// 1 / replicas shard, in the gathered dtype).
  int64_t param_shard_bytes(const GradBuffer& buffer, const pytorch::DdpBucket& bucket) const {
    return param_elements(bucket) * rank_.param_elem_bytes / buffer.replicas;
  }

  bool sharded_optimizer_;
  bool overlap_;
  bool overlap_param_gather_;
  bool align_param_gather_;
  std::set<int64_t> forwarded_;
  std::array<ParamGather, kGradBuffers> gathers_;
};

/// ZeRO-3 and FSDP: a unit's parameters are all-gathered before its forward (and, with full
/// sharding, again before its backward), the next unit's gather issued ahead (FSDP's forward /
/// backward prefetch of one unit); its gradients are reduce-scattered after its backward in
/// every micro-batch, or with ShardedGradientSync::kLastMicroBatch in the last one only, the
/// unit staying gathered after the others' backward (ParallelismConfig::gradient_sync).
class ShardedParameters final : public GradientSync {
 public:
  /// `shard_ranks`: the ranks one dense parameter is split over (ParallelismConfig::shard_ranks).
  ShardedParameters(GradSyncRank rank, int64_t shard_ranks, bool regather_for_backward,
                    bool sync_last_micro_batch_only)
      : GradientSync(rank),
        shard_ranks_(shard_ranks),
        regather_for_backward_(regather_for_backward),
        sync_last_micro_batch_only_(sync_last_micro_batch_only) {}

  void before_forward(int64_t unit, const PerBuffer& elements,
                      const std::optional<UnitElements>& next) override {
    gather_unit(unit, elements, next, "FullyShardedDataParallel._pre_forward_unshard");
    // reshard_after_forward: a fully sharded unit is sharded again once its forward is done.
    if (regather_for_backward_) gathered_.erase(unit);
  }
  bool gathers_for_backward() const override { return regather_for_backward_; }
  void before_backward(int64_t unit, const PerBuffer& elements,
                       const std::optional<UnitElements>& next) override {
    if (regather_for_backward_) {
      gather_unit(unit, elements, next, "FullyShardedDataParallel._pre_backward_unshard");
    }
  }

  void after_backward(int64_t unit, const LayerParams& params, bool last_micro_batch) override {
    if (sync_last_micro_batch_only_ && !last_micro_batch) {
      // No reduce-scatter; the gradients accumulate unsharded and the unit stays gathered
      // (reshard_after_backward False) for the next micro-batch.
      gathered_.insert(unit);
      return;
    }
    gathered_.erase(unit);
    for (size_t b = 0; b < kGradBuffers; ++b) {
      const GradBuffer& buffer = rank_.buffers[b];
      if (params.elements[b] == 0) continue;
      const int64_t bytes = params.elements[b] * rank_.grad_elem_bytes;
      if (buffer.replicas > 1) {
        last_event_ =
            collective(buffer.pg, CollectiveKind::kReduceScatter, bytes, "nccl:reduce_scatter");
      }
      // HSDP: the shard is all-reduced with the same shard of the other groups.
      if (buffer.shard_replicas > 1) {
        last_event_ = collective(buffer.replicate_pg, CollectiveKind::kAllReduce,
                                 bytes / buffer.replicas, "nccl:all_reduce");
      }
    }
  }

 private:
  /// The all-gathers of one unit's parameters (one per gradient buffer shared by more than one
  /// rank) on the communication stream; they depend on nothing the compute stream does.
  TaskId issue_gather(int64_t unit, const PerBuffer& elements, std::string_view op_name) {
    HostOp h(rank_.graph, rank_.threads, op_name);
    const bool float8_layer = unit >= 0 && rank_.layer_param_elem_bytes > 0;
    const int64_t elem_bytes = float8_layer ? rank_.layer_param_elem_bytes : rank_.param_elem_bytes;
    for (size_t b = 0; b < kGradBuffers; ++b) {
      const GradBuffer& buffer = rank_.buffers[b];
      if (buffer.replicas == 1 || elements[b] == 0) continue;
      if (float8_layer && rank_.layer_gather_cast != 0) {
        h.kernel_on(rank_.threads.comm_stream, "float8_cast", "fsdp_pre_all_gather",
                    rank_.layer_gather_cast);
      }
      h.collective_on(rank_.threads.comm_stream,
                      rank_.groups.call(buffer.pg, CollectiveKind::kAllGather,
                                        elements[b] * elem_bytes / buffer.replicas, "all_gather"),
                      op_name);
    }
    const TaskId done = h.record(rank_.threads.comm_stream);
    h.end();
    return done;
  }

  /// Gathers `unit` (prefetched when the previous unit was used) and the unit after it, then
  /// makes compute wait for `unit`.
  /// A unit still gathered (kept after a backward without gradient sync) is neither gathered
  /// nor prefetched.
  void gather_unit(int64_t unit, const PerBuffer& elements, const std::optional<UnitElements>& next,
                   std::string_view op_name) {
    if (shard_ranks_ == 1) return;
    TaskId ready = kNoTask;
    if (prefetched_ && prefetched_->first == unit) {
      ready = prefetched_->second;
    } else if (!gathered_.contains(unit)) {
      ready = issue_gather(unit, elements, op_name);
    }
    prefetched_.reset();
    if (next && !gathered_.contains(next->first)) {
      prefetched_ = std::make_pair(next->first, issue_gather(next->first, next->second, op_name));
    }
    wait_compute(ready, op_name);
  }

  int64_t shard_ranks_;
  bool regather_for_backward_;
  bool sync_last_micro_batch_only_;
  /// Units whose parameters stay gathered across micro-batches (kLastMicroBatch).
  std::set<int64_t> gathered_;
  /// The unit whose all-gather was issued ahead of use, and its completion event.
  std::optional<std::pair<int64_t, TaskId>> prefetched_;
};

}  // namespace

std::unique_ptr<GradientSync> make_gradient_sync(const ParallelismConfig& p, GradSyncRank rank) {
  const bool sharded_params = p.zero >= 3 || p.fsdp != FsdpMode::kNone;
  if (sharded_params) {
    const bool full_shard =
        p.fsdp == FsdpMode::kFullShard || (p.zero >= 3 && p.fsdp == FsdpMode::kNone);
    return std::make_unique<ShardedParameters>(
        rank, p.shard_ranks(), full_shard, p.gradient_sync == ShardedGradientSync::kLastMicroBatch);
  }
  return std::make_unique<BucketedReduction>(rank, p.zero >= 1, p.overlap_grad_reduce,
                                             p.overlap_param_gather, p.align_param_gather);
}

}  // namespace upsim
