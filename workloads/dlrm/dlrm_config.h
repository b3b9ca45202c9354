// DLRM workload description, read from a scenario's `workload:` section.
//
// Schema (parse_dlrm_config asks for every key below, so ConfigDocument::check_all_keys_used()
// reports any other key; absent optional keys are written back with their default):
//
//   workload:
//     model: dlrm                  # required; must be `dlrm` (the caller dispatches on it)
//     mode: train                  # train (default): a training step | inference: a served
//                                  #   batch (its inputs copied, the forward, the host waits for
//                                  #   the scores; no DataLoader fetch, loss, backward or
//                                  #   optimizer, and no gradients or optimizer state in memory)
//     global_batch: 4096           # required; 1 .. 2^31; divisible by the number of ranks;
//                                  #   global_batch x tables x dim x 4 B (the embedding
//                                  #   all-to-all) at most 2^62
//     dtype: fp32                  # fp32 | tf32 | fp16 | bf16 (default fp32): element type of the
//                                  #   MLP parameters, activations and gradients (tf32 stores
//                                  #   fp32 and multiplies in TF32)
//     bottom_mlp: [512, 1024, 256, 128]  # required; dense input features, then layer widths
//                                  #   (>= 2 entries of 1 .. 2^20); the last must equal
//                                  #   embeddings.dim
//     master_weights: false        # true: mixed precision as torch.autocast runs it (fp32
//                                  #   parameters, gradients, DDP all-reduce and optimizer; each
//                                  #   forward casts the weights to `dtype`, each backward casts
//                                  #   their gradients back); needs dtype fp16 or bf16
//     grad_scaler: true            # torch.cuda.amp.GradScaler (default: master_weights with
//                                  #   dtype fp16, the fp16 recipe; bf16 needs no loss scaling):
//                                  #   the loss scaled before backward; the step unscales the
//                                  #   gradients (_amp_foreach_non_finite_check_and_unscale_),
//                                  #   reads found_inf on the host (.item(): the CPU waits for
//                                  #   the backward) before the dense optimizer, and updates the
//                                  #   scale (_amp_update_scale_); needs master_weights and
//                                  #   mode train
//     cuda_graphs: false           # true: the step runs as a captured CUDA graph
//                                  #   (torch.cuda.graph), as DeepLearningExamples' DLRM main.py
//                                  #   does: mode inference (inference_benchmark_graphed, one
//                                  #   rank): each served batch is copied to the device, into the
//                                  #   graph's static inputs, and one cudaGraphLaunch replays the
//                                  #   forward; mode train (CudaGraphWrapper, any rank count): the
//                                  #   prefetched batch is copied into the static inputs (dense,
//                                  #   indices, targets), one cudaGraphLaunch replays the forward,
//                                  #   the loss and the scaled backward with their all-to-alls and
//                                  #   DDP all-reduces, and the optimizer step runs eagerly after
//                                  #   it; needs input: prefetch and loss_to_host: false (a
//                                  #   capture cannot wait for a copy)
//     loss_to_host: true           # true (default; the seed's script: the loss is copied to
//                                  #   the host every step, which waits for the forward) |
//                                  #   false (DeepLearningExamples: it stays on the GPU; the
//                                  #   default with train_pipeline: sparse_dist, whose progress()
//                                  #   does not read it)
//     input: blocking              # how a batch reaches the GPU: blocking (default; the seed's
//                                  #   script: at the step's start the dense features, offsets
//                                  #   and indices are copied and waited for) | prefetch (NVIDIA
//                                  #   DeepLearningExamples' prefetcher: the next batch is copied
//                                  #   on a side stream after the optimizer step, from pageable
//                                  #   memory, so the CPU is held for the copies; the compute
//                                  #   stream waits for them before the forward; mode train only)
//                                  #   | preloaded (mode inference: the batch is on the device
//                                  #   before the timed step starts, as DeepLearningExamples'
//                                  #   inference benchmark has it: its DataLoader's collate,
//                                  #   dlrm/data/utils.py collate_split_tensors, copies it; the
//                                  #   step's .to() calls move nothing)
//     input_dist: local            # how each rank gets the indices its lookups read: local
//                                  #   (default; dlrm_s_pytorch.py and DeepLearningExamples:
//                                  #   each rank's loader reads its own tables' indices for the
//                                  #   global batch) | all_to_all (TorchRec's sharded modules,
//                                  #   torchrec/distributed/dist_data.py KJTAllToAll: each rank
//                                  #   loads its local batch of every feature; per sharding type
//                                  #   the features are permuted (table-wise, column-wise) or
//                                  #   bucketized by row block (row-wise, table-row-wise,
//                                  #   hybrid), a splits all-to-all is read back on the host
//                                  #   (.tolist(): the host waits for it), then the lengths and
//                                  #   the indices go to their lookups' ranks in two all-to-alls
//                                  #   and are reordered (recat) there); not with
//                                  #   bottom_mlp_placement: first_rank or cuda_graphs
//     train_pipeline: none         # none (default: the step runs its input distribution in
//                                  #   the forward) | sparse_dist (TorchRec's
//                                  #   TrainPipelineSparseDist, train_pipelines.py: batch i+2 is
//                                  #   copied from pinned memory on a memcpy stream and batch
//                                  #   i+1's input distribution runs on a data-dist stream
//                                  #   during batch i's forward and backward; its splits
//                                  #   all-to-all is launched before the forward, its lengths
//                                  #   and indices all-to-alls after it); needs mode train,
//                                  #   input_dist: all_to_all and input: prefetch
//                                  #   | semi_sync (TorchRec's TrainPipelineSemiSync, same file,
//                                  #   its steady state after start_batch, stash_gradients
//                                  #   false as by default: batch i+2's input distribution as
//                                  #   above; after batch i's forward, batch i+1's lookups run
//                                  #   and its pooled embeddings' exchange is launched, so it
//                                  #   overlaps batch i's backward; the backward stops at the
//                                  #   detached embeddings, then emb_backward sends their
//                                  #   gradients and runs the lookups' backward; same needs)
//     bottom_mlp_placement: data_parallel  # data_parallel (default; the seed's script: every
//                                  #   rank, its local batch, DDP) | first_rank (NVIDIA
//                                  #   DeepLearningExamples' hybrid parallel: rank 0 alone on the
//                                  #   global batch, its output sent with the embeddings in the
//                                  #   all-to-all; with more than 4 ranks rank 0 holds no table)
//     top_mlp: [1024, 512, 256, 1] # required; layer widths (>= 1 entries of 1 .. 2^20); the input
//                                  #   width is dim + T(T+1)/2 for T tables; the last must be 1
//                                  #   (the logit that binary_cross_entropy reads)
//     interaction: dot             # dot (default): pairwise dot products of the bottom MLP output
//                                  #   and the pooled embeddings (Naumov et al., 2019); dcnv2:
//                                  #   a low-rank cross network over their concatenation (Wang
//                                  #   et al., DCN V2, WWW 2021; MLPerf DLRMv2), then the top MLP
//     interaction_kernel: aten     # aten (default; dot: dlrm_s_pytorch.py's cat, bmm, index
//                                  #   and cat; dcnv2: TorchRec LowRankCrossNet's GEMMs and
//                                  #   elementwise ops) | fused (dot: DeepLearningExamples'
//                                  #   cuda_dot, one kernel forward, one backward; dcnv2:
//                                  #   HugeCTR's MultiCrossLayer with projection_dim, as NVIDIA's
//                                  #   MLPerf DLRM-DCNv2 runs it: per layer two cuBLASLt GEMMs,
//                                  #   the second with the bias in its epilogue, and one fused
//                                  #   x0 * h + x_l kernel; backward per layer one fused kernel
//                                  #   and four GEMMs, the last adding the incoming gradient as
//                                  #   its C operand) | xla (dcnv2 only: TensorFlow's Cross
//                                  #   layer, tf-recommenders / DeepLearningExamples TF2, as XLA
//                                  #   compiles it: the same kernels as fused, one loop fusion
//                                  #   x0 * h + x_l forward and one multi-output fusion per
//                                  #   layer backward, the bias in the GEMM epilogue or the
//                                  #   fusion, the residual gradient a GEMM's C operand; no
//                                  #   accumulator memset)
//     mlp_kernels: aten            # aten (default: addmm and relu per layer, each its own host
//                                  #   op) | apex_fused (apex.mlp.MLP, DeepLearningExamples'
//                                  #   CppMlp: one host op per MLP, per layer a GEMM and a fused
//                                  #   bias + ReLU kernel; backward likewise) | cublaslt_fused
//                                  #   (HugeCTR's FusedReluBiasFullyConnectedLayer chain, NVIDIA's
//                                  #   MLPerf DLRM: per layer one cuBLASLt GEMM with bias and
//                                  #   ReLU in its epilogue, the chain's output copied as the
//                                  #   ReLU mask; backward one dReLU + bias-gradient kernel for
//                                  #   the last layer, then per layer the weight-gradient GEMM and
//                                  #   the input-gradient GEMM whose epilogue takes the layer
//                                  #   below's dReLU and bias gradient); the top MLP's last layer
//                                  #   stays an nn.Linear
//     cross_layers: 3              # dcnv2 only: cross layers, 1 .. 64 (default 3, MLPerf DLRMv2)
//     cross_rank: 512              # dcnv2 only: low-rank projection, 1 .. 2^16 (default 512,
//                                  #   MLPerf DLRMv2's dcn_low_rank_dim)
//     all_to_all_dtype: fp16       # fp32 | fp16 | bf16: payload of the embedding all-to-all
//                                  #   (pooled embeddings forward, their gradients backward);
//                                  #   default: embeddings.dtype. When it differs from the
//                                  #   embeddings' or the MLPs' dtype, cast kernels convert.
//     embeddings:                  # required
//       dim: 128                   # required; 1 .. 2^16 (production tables reach 512; 2^16 keeps
//                                  #   every size derived from it in 64 bits)
//       dtype: fp32                # fp32 (default) | fp16 | bf16: table weights, lookups and
//                                  #   the fused backward's gradients (FBGEMM SparseType)
//       index_bytes: 8             # 8 (int64 indices, default) or 4 (int32)
//       tables:                    # required, non-empty: groups of identical tables whose ids
//         - {count: 16, rows: 4000000, pooling: 30}  # follow the list order
//                                  # Ranges of the table statistics (a value outside is a
//                                  #   ConfigError naming its key and the range):
//                                  #   count 1 .. 65536 (default 1), and at most 65536 tables in
//                                  #     all (the interaction is T x T)
//                                  #   rows 1 .. 2^40 (production tables reach ~10^10 rows), the
//                                  #     tables holding at most 2^62 bytes with optimizer state
//                                  #   pooling 0 .. 10^6: mean indices per bag (real bags hold
//                                  #     tens to thousands; 10^6 keeps global_batch x pooling an
//                                  #     exact count in a double); 0 is a table without lookups
//                                  #     (its kernels move offsets only, whatever its access law);
//                                  #     global_batch x the summed pooling x dim x 4 B (the rows
//                                  #     one iteration gathers) at most 2^62
//                                  #   pooling_std 0 .. 10^6 (recorded: kernels are priced at the
//                                  #     mean)
//                                  #   Optional per group, the access statistics of a batch:
//                                  #   reuse: [17 fractions, each 0 .. 1, summing to 1 within 1%]
//                                  #     (the seed's reuse histogram, Lin et al., TPDS 2024 2.4b;
//                                  #     also as bin_0 .. bin_16 keys) or access: zipf with
//                                  #     zipf_alpha 0.01 .. 10 (default 1), whose histogram
//                                  #     table_statistics.h derives per batch; default uniform
//                                  #     accesses
//         - {rows: 40000000, pooling: 100, sharding_type: row_wise}
//       and in each group:
//           sharding_type: table_wise  # how each table of the group is split (TorchRec's
//                                  #   ShardingType): table_wise (default; whole, on the rank the
//                                  #   sharder picks) | row_wise (rows in blocks over all ranks,
//                                  #   reduce-scatter forward, all-gather backward) |
//                                  #   column_wise (column_shards shards, each placed like a
//                                  #   table, in the all-to-all) | data_parallel (replicated,
//                                  #   local batch, gradients all-reduced, dense optimizer) |
//                                  #   table_row_wise (rows in blocks over one node's ranks,
//                                  #   the node chosen by lookup cost; nodes from
//                                  #   platform.topology, one node without it)
//                                  #   | hybrid (HugeCTR's hybrid embedding,
//                                  #   hybrid_embedding.h: the frequent rows replicated on every
//                                  #   rank, looked up locally, their dense gradient
//                                  #   all-reduced; the rest in row-wise blocks, only the
//                                  #   samples with an infrequent lookup exchanging partial sums)
//                                  #   | auto (chosen per table with the platform's memory:
//                                  #   choose_sharding_types below; never table_row_wise or
//                                  #   hybrid);
//                                  #   table_column_wise is not modelled
//                                  #   (workloads/dlrm/dlrm_generator.h describes each)
//           column_shards: 2       # column_wise only: shards, 1 .. 2^16, dividing
//                                  #   embeddings.dim (default 2)
//           frequent_rows: 100000  # hybrid only, with frequent_share: the replicated rows,
//           frequent_share: 0.8    #   0 .. rows, and the share of lookups that hit them, 0 .. 1;
//                                  #   both left out: derived from the group's access law
//                                  #   (access: zipf, or uniform) by HugeCTR's count threshold
//                                  #   (hybrid_split); a measured reuse histogram needs them
//       random_task:               # optional: the tables are a pool, and the run's tables a
//                                  #   task drawn from it as the seed's random tasks are
//                                  #   (workloads/dlrm/random_tasks.h; all_zero pool tables are
//                                  #   skipped):
//         seed: 0                  #   >= 0 (default 0)
//         task: 0                  #   which accepted draw, >= 0 (default 0)
//         heavy: false             #   only tables with pooling >= heavy_pooling (default 20)
//         tables_per_gpu: 13       #   1 .. 4096 (default 13, the seed's)
//         memory_fraction: 0.8     #   of all GPUs' memory the fp32 tables may take (0, 1]
//       tables_file: stats.json    # instead of `tables`: a file with a `tables` list of the same
//                                  #   entries (sharding_type and column_shards included), or the
//                                  #   seed's table configs ({"tables": [{index, num_embeddings,
//                                  #   embedding_dim, pooling_factor, pooling_factor_std,
//                                  #   bin_0..bin_16, rfs_<batch>, all_zero}], which may also
//                                  #   carry sharding_type and column_shards; num_embeddings,
//                                  #   pooling_factor(_std) and the bins have the ranges of rows,
//                                  #   pooling(_std) and reuse, every rfs_<batch> is a reuse
//                                  #   histogram, embedding_dim (1 .. 2^16) must equal dim, index
//                                  #   (the table's id in its data set, recorded) is 0 .. 2^31-1);
//                                  #   rfs_<global_batch> is used when present; or a CSV file
//                                  #   of either's keys, one group per line under a header
//                                  #   (rows,pooling,pooling_std,bin_0,...,bin_16,
//                                  #   sharding_type,...; a histogram as bin_0..bin_16 columns).
//                                  #   A null `tables` counts as absent. A table that fits no
//                                  #   rank's table memory (platform.table_memory_fraction of the
//                                  #   GPU's) is a ConfigError at its group, here or in the file.
//     sharding: size_lookup_greedy # naive | naive_chunk | random | size_greedy |
//                                  #   lookup_greedy | norm_lookup_greedy | size_lookup_greedy
//                                  #   (default; the seed's, Lin et al., TPDS 2024; sharders.h
//                                  #   defines each) | capped_size_greedy (DeepLearningExamples') |
//                                  #   plan (the placement in sharding_plan); a sharder
//                                  #   places the table_wise tables and column_wise shards in the
//                                  #   memory the row_wise and data_parallel tables leave
//     sharding_plan: plan.yaml     # required with sharding: plan, refused with any other
//                                  #   sharder (null counts as absent); a file relative to this
//                                  #   one (or the map inline), as `upsim shard` writes it:
//                                  #     tables: 48        # must equal the model's table count
//                                  #     ranks: 4          # must equal the run's rank count
//                                  #   and either, with table-wise tables only,
//                                  #     rank_of_table: [0, 3, 1, ...]  # one rank per table, in
//                                  #                       #   table-id order, each 0 .. ranks-1
//                                  #   or, with any sharding types, one entry per table in
//                                  #   table-id order:
//                                  #     placement:
//                                  #       - {type: table_wise, rank: 3}
//                                  #       - {type: column_wise, ranks: [0, 5]}  # a rank per
//                                  #           #   shard; their count divides embeddings.dim
//                                  #       - {type: row_wise}        # spans every rank
//                                  #       - {type: data_parallel}   # replicated on every rank
//                                  #       - {type: table_row_wise, node: 1}  # rows over the
//                                  #           #   node's ranks (nodes as for sharding_type)
//                                  #       - {type: hybrid}          # frequent rows replicated,
//                                  #           #   the rest row-wise (a table the plan makes
//                                  #           #   hybrid splits by its access law)
//                                  #   The plan's type is the table's: a group that leaves
//                                  #   sharding_type out (or says auto) takes it; a group that
//                                  #   states one must agree (its column_shards too), as
//                                  #   TorchRec's planner keeps a table's constraints.
//                                  #   Each rank's tables must fit its table memory and each node
//                                  #   must exist (a ConfigError at the plan's list or entry when
//                                  #   the run is built); with bottom_mlp_placement: first_rank
//                                  #   on more than 4 ranks, rank 0 may hold no table-wise table
//                                  #   or column shard.
//     sharding_seed: 0             # >= 0 (default 0); only the random sharder draws from it
//     ddp_bucket: 25MiB            # DDP bucket_cap_mb as bytes (default 25 MiB, PyTorch's)
//     ddp_first_bucket: 1MiB       # DDP first-bucket limit (default 1 MiB, PyTorch's)
//     optimizer: sgd               # dense MLP (and cross network) optimizer: sgd (default) |
//                                  #   adagrad | adam | adamw (torch.optim, foreach), state in fp32
//   and under embeddings:
//       two_d:                     # optional: TorchRec's 2D parallel (DMPCollection,
//                                  #   torchrec/distributed/model_parallel.py; workloads/dlrm/
//                                  #   two_d_parallel.h): the W ranks form W / S sharding groups
//                                  #   of S ranks, each a DistributedModelParallel with the same
//                                  #   placement made for S ranks (table memory from S ranks;
//                                  #   sharding_plan's `ranks` must be S); the embedding input
//                                  #   distribution, all-to-alls and row-wise reduce-scatter /
//                                  #   all-gather run within the group, whose lookups cover its
//                                  #   ranks' local batches (global_batch x S / W samples); the
//                                  #   MLPs and the data-parallel tables stay under DDP over all
//                                  #   W ranks. Each shard's W / S copies (a replica group) are
//                                  #   averaged after backward, before the optimizer step.
//         sharding_group_size: 4   #   required: S, 1 .. 2^20, dividing the rank count (else a
//                                  #   ConfigError); S = ranks is plain DMP (no replica sync)
//         sync_interval: 1         #   1 .. 10^6 (default 1; TrainPipelineSparseDist's
//                                  #   dmp_collection_sync_interval_batches): iteration i (from
//                                  #   0) syncs when i % sync_interval == 0
//         inter_host_allreduce: false  # false (default): sharding groups strided (g, g + W/S,
//                                  #   ...), replica groups contiguous blocks of W / S ranks (the
//                                  #   sync within a node); true (use_inter_host_allreduce):
//                                  #   sharding groups contiguous blocks of S, replica groups
//                                  #   strided
//         sync_optimizer_state: true  # the fused optimizer's state["sum"] averaged after the
//                                  #   weights (include_optimizer_state, default true): adagrad
//                                  #   rows x dim fp32, rowwise_adagrad rows fp32, sgd none;
//                                  #   adam has no "sum" (refused: set false)
//                                  # Refused with two_d (ConfigError at the key): table_row_wise
//                                  #   and hybrid tables, bottom_mlp_placement: first_rank,
//                                  #   cuda_graphs, embeddings.update: sparse.
//       optimizer: sgd             # fused into the embedding backward (FBGEMM): sgd | adagrad |
//                                  #   rowwise_adagrad | adam; default: the dense one's (adamw ->
//                                  #   adam); its fp32 state counts in the table memory
//       update: fused              # fused (default: FBGEMM's backward with the optimizer
//                                  #   fused, each distinct row updated once) | sparse
//                                  #   (PyTorch's sparse gradient, nn.Embedding(sparse=True) or
//                                  #   DeepLearningExamples' gather: one value row per lookup in
//                                  #   the table dtype, applied in the optimizer step by
//                                  #   torch.optim.SGD's index_add_; unscaled first under
//                                  #   grad_scaler); sparse needs optimizer sgd
//
// Units: byte sizes need one, "25MiB" or "25MB" (10^6); a bare number only for 0
// (sim/config/quantity_parse.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/config/config_node.h"
#include "sim/config/key_meaning.h"
#include "sim/cost_models.h"
#include "workloads/dlrm/random_tasks.h"
#include "workloads/dlrm/sharders.h"
#include "workloads/dlrm/two_d_parallel.h"
#include "workloads/pytorch/ddp_buckets.h"

namespace upsim {

/// Where the bottom MLP runs.
enum class BottomMlpPlacement : uint8_t {
  kDataParallel,  ///< on every rank, its local batch, under DDP (dlrm_s_pytorch.py; the seed)
  /// On rank 0 alone, on the global batch; its output joins the embedding all-to-all as one
  /// more vector per sample (DeepLearningExamples' hybrid parallel, dlrm/model/distributed.py).
  kFirstRank,
};
/// DeepLearningExamples' get_device_mapping: above this many ranks, rank 0 (the bottom MLP's)
/// holds no table.
inline constexpr uint32_t kHybridTablelessAbove = 4;

/// What one iteration is.
enum class DlrmMode : uint8_t {
  kTrain,      ///< a training step
  kInference,  ///< a served batch: inputs copied, the forward, the host waits for the scores
};

/// How each batch's inputs reach the GPU.
enum class InputPipeline : uint8_t {
  kBlocking,  ///< copied at the step's start, the host waiting for each copy (dlrm_s_pytorch.py)
  /// Copied for the next step on a side stream after the optimizer step (DeepLearningExamples
  /// dlrm/data/utils.py prefetcher); the compute stream waits for them before the forward.
  kPrefetch,
  /// Mode inference: on the device before the step (DeepLearningExamples' inference benchmark,
  /// whose DataLoader collate copies the batch before the timed step); the step's .to() calls
  /// are host ops that copy nothing.
  kPreloaded,
};

/// How each rank gets the sparse indices its lookups read.
enum class InputDistribution : uint8_t {
  kLocal,  ///< each rank's loader reads its own tables' indices (dlrm_s_pytorch.py, DLE)
  /// Each rank loads its local batch of every feature, and TorchRec's KJTAllToAll sends each
  /// feature's lengths and indices to the ranks that look it up (input_dist.h).
  kAllToAll,
};

/// Which training loop overlaps the next batch's input with this one's step.
enum class TrainPipeline : uint8_t {
  kNone,  ///< the input distribution runs in the step's own forward
  /// TorchRec's TrainPipelineSparseDist: batch i+1's input distribution on a data-dist stream
  /// during batch i's forward and backward, batch i+2 copied on a memcpy stream.
  kSparseDist,
  /// TorchRec's TrainPipelineSemiSync: as kSparseDist with batch i+2's input distribution, and
  /// batch i+1's lookups and forward exchange launched between batch i's forward and backward,
  /// so that exchange overlaps batch i's backward (the lookups read tables one update older).
  kSemiSync,
};

/// Which kernels compute the dot interaction.
enum class InteractionKernel : uint8_t {
  kAten,  ///< cat, bmm, index (tril) and cat (dlrm_s_pytorch.py interact_features)
  /// dot: one kernel each way (DeepLearningExamples' cuda_dot); dcnv2: HugeCTR's fused
  /// MultiCrossLayer (interaction_emitter.h)
  kFused,
  /// dcnv2 only: TensorFlow's Cross layer compiled by XLA (interaction_emitter.h)
  kXla,
};

/// Which kernels run the MLPs' ReLU layers.
enum class MlpKernels : uint8_t {
  kAten,       ///< nn.Linear + nn.ReLU: addmm and relu per layer, each its own host op
  kApexFused,  ///< apex.mlp.MLP: one host op per MLP, GEMM + fused bias-ReLU per layer
  /// HugeCTR's FusedReluBiasFullyConnectedLayer chain: one GEMM per layer, its epilogue the bias
  /// and ReLU forward, the dReLU and bias gradient backward
  kCublasLtFused,
};

/// How the dense features and the pooled embeddings meet before the top MLP.
enum class DlrmInteraction : uint8_t {
  kDot,    ///< pairwise dot products (dlrm_s_pytorch.py interact_features)
  kDcnV2,  ///< low-rank cross network (TorchRec LowRankCrossNet)
};

struct DlrmConfig {
  DlrmMode mode = DlrmMode::kTrain;
  int64_t global_batch = 0;
  DType dtype = DType::kFp32;
  /// Dense input features, then the width of each bottom layer.
  std::vector<int64_t> bottom_mlp;
  /// Width of each top layer.
  std::vector<int64_t> top_mlp;
  int64_t embedding_dim = 0;
  /// Element type of the table weights, the pooled lookups and their gradients.
  DType embedding_dtype = DType::kFp32;
  /// Element type of the embedding all-to-all payload (forward and backward).
  DType all_to_all_dtype = DType::kFp32;
  /// Bytes per sparse index and per offset (int64 or int32).
  int64_t index_bytes = 8;
  /// Every table, in table-id order (groups expanded), with its sharding type.
  std::vector<EmbeddingTable> tables;
  /// group_of_table[t]: the index of table t's group in the table list (dlrm_tables_node), for
  /// errors that name the group.
  std::vector<uint32_t> group_of_table;
  /// embeddings.random_task: `tables` is the pool until draw_dlrm_random_task replaces it by
  /// the drawn task (pool_tables then says how many the pool had, task_tables which were drawn).
  std::optional<RandomTaskSpec> random_task;
  size_t pool_tables = 0;
  std::vector<uint32_t> task_tables;
  ShardingStrategy sharding = ShardingStrategy::kSizeLookupGreedy;
  uint64_t sharding_seed = 0;
  /// sharding == kPlan: where each table goes (read_sharding_plan); empty otherwise.
  std::vector<PlannedTable> sharding_plan;
  int64_t ddp_bucket_bytes = pytorch::kDefaultDdpBucketBytes;
  int64_t ddp_first_bucket_bytes = pytorch::kDefaultDdpFirstBucketBytes;
  /// Optimizer fused into the embedding backward.
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kSgd;
  /// Optimizer of the dense parameters (MLPs, cross network).
  OptimizerKind dense_optimizer = OptimizerKind::kSgd;
  DlrmInteraction interaction = DlrmInteraction::kDot;
  InteractionKernel interaction_kernel = InteractionKernel::kAten;
  MlpKernels mlp_kernels = MlpKernels::kAten;
  BottomMlpPlacement bottom_mlp_placement = BottomMlpPlacement::kDataParallel;
  /// Mixed precision as torch.autocast runs it: fp32 parameters, gradients, DDP reduction and
  /// optimizer; each forward casts every weight to `dtype` and each backward casts the weight
  /// gradients back (only meaningful with a 16-bit dtype).
  bool master_weights = false;
  /// The dtype parameters, their gradients and the DDP reduction are kept in.
  DType param_dtype() const { return master_weights ? DType::kFp32 : dtype; }
  /// torch.cuda.amp.GradScaler around backward and the optimizer steps (needs master_weights).
  bool grad_scaler = false;
  InputPipeline input = InputPipeline::kBlocking;
  InputDistribution input_dist = InputDistribution::kLocal;
  TrainPipeline train_pipeline = TrainPipeline::kNone;
  /// The forward (training: forward and backward) replayed as a captured CUDA graph.
  bool cuda_graphs = false;
  /// The loss is copied to the host every step (the host waits for the forward).
  bool loss_to_host = true;
  /// How the embedding gradients reach the tables (kScatterAdd: torch.optim.SGD, sgd only).
  EmbeddingUpdate embedding_update = EmbeddingUpdate::kFusedDeduplicated;
  /// DCNv2: cross layers and the rank of each layer's U V^T factorisation.
  int64_t cross_layers = 0;
  int64_t cross_rank = 0;
  /// embeddings.two_d: TorchRec's 2D parallel (DMPCollection); sharding_group_size 0: off.
  TwoDParallel two_d;

  /// Ranks one sharding plan spans on a run of `ranks`: the sharding group's size under two_d,
  /// else every rank.
  uint32_t sharding_ranks(uint32_t ranks) const {
    return two_d.sharding_group_size == 0 ? ranks : two_d.sharding_group_size;
  }

  /// Width the cross network works on: the bottom MLP output and the T pooled embeddings
  /// concatenated, (T + 1) x dim.
  int64_t cross_width() const { return (static_cast<int64_t>(tables.size()) + 1) * embedding_dim; }
  /// Number of pairwise dot products the interaction keeps: the strictly lower triangle of
  /// the (T+1) x (T+1) matrix of T pooled embeddings plus the bottom MLP output, T(T+1)/2
  /// (dlrm_s_pytorch.py `interact_features`, arch_interaction_itself = False).
  int64_t interaction_pairs() const;
  /// Input width of the top MLP: dot, the bottom MLP output (dim) concatenated with the pairs;
  /// dcnv2, the cross network's output, cross_width().
  int64_t top_mlp_input() const {
    return interaction == DlrmInteraction::kDot ? embedding_dim + interaction_pairs()
                                                : cross_width();
  }
};

/// The list of table groups of `workload`: embeddings.tables, or the list in the file that
/// embeddings.tables_file names (loaded on first use; a CSV is the list itself).
ConfigNode dlrm_tables_node(const ConfigNode& workload);

/// Reads `workload` (the scenario's `workload:` map) for a run on `ranks` ranks (>= 1).
/// Every invalid value throws ConfigError at its key (see the schema above).
DlrmConfig parse_dlrm_config(const ConfigNode& workload, uint32_t ranks);

/// What each key above means, one line each (sim/config/key_meaning.h), relative to `workload`.
std::span<const KeyMeaning> dlrm_key_meanings();

/// Reads a sharding plan (the content of `workload.sharding_plan`, see the schema above) for a
/// model of these tables (embedding dim `dim`, `global_batch` samples) on `ranks` ranks, and
/// gives each table the plan's sharding type (and column shards, or a hybrid table's split
/// derived from its access law: hybrid_split; no longer `auto`). A count that differs from the
/// model's or the run's, a missing or unknown key, a rank outside 0 .. ranks-1, a column shard
/// count that does not divide the dim, a key the entry's type has no use for, or a type other than
/// one the table's group states throws ConfigError naming the plan's file, line and key. Memory and
/// the node count are checked by shard_tables.
std::vector<PlannedTable> read_sharding_plan(const ConfigNode& plan,
                                             std::span<EmbeddingTable> model_tables, int64_t dim,
                                             int64_t global_batch, uint32_t ranks);

/// One entry of a plan's `placement` list as a YAML flow map, the form read_sharding_plan reads:
/// "{type: table_wise, rank: 3}", "{type: column_wise, ranks: [0, 5]}", "{type: row_wise}",
/// "{type: table_row_wise, node: 1}".
std::string sharding_plan_entry(const PlannedTable& entry);

/// What shard_tables places for `config` on ranks of these table-memory capacities (one entry
/// per rank): its tables (with their sharding types), dim, fused and dense optimizers, weight
/// bytes and plan; no tableless ranks (place_dlrm_tables sets them). Refers into both arguments,
/// which must outlive it.
ShardingInput dlrm_sharding_input(const DlrmConfig& config,
                                  std::span<const int64_t> rank_capacity_bytes);

/// Leading ranks that hold no table: 1 when rank 0 runs the bottom MLP alone
/// (bottom_mlp_placement: first_rank) on more than kHybridTablelessAbove ranks
/// (DeepLearningExamples' get_device_mapping), else 0.
uint32_t dlrm_tableless_ranks(const DlrmConfig& config, uint32_t ranks);

/// With config.random_task: replaces the pool in config.tables by the task drawn for `gpus`
/// GPUs of `gpu_memory_bytes` each (draw_random_task), once (a second call does nothing).
/// Throws std::invalid_argument when no task can be drawn.
void draw_dlrm_random_task(DlrmConfig& config, uint32_t gpus, int64_t gpu_memory_bytes);

/// Resolves `sharding_type: auto` (TorchRec's planner weighs every sharding type per table by its
/// estimated cost under the ranks' memory; these rules are a coarse stand-in, stated here):
/// data_parallel when the table's dense gradient all-reduce moves no more than its share of
/// the exchange (rows x dim x weight bytes <= 2 x global batch x dim x payload bytes) and a
/// replica with its gradient and dense optimizer state takes at most 1/16 of a rank's table
/// memory; row_wise when the table takes over half a rank's table memory or its lookups
/// (pooling x dim) exceed twice a rank's fair share of all the lookups; table_wise otherwise.
/// One rank: everything stays table_wise.
void choose_sharding_types(DlrmConfig& config, uint32_t ranks, int64_t rank_capacity_bytes);

/// The DLRM run's placement on ranks of these table-memory capacities (one entry per rank, at
/// least one): the leading dlrm_tableless_ranks hold no table-wise table or column-wise shard
/// (ShardingInput::tableless_ranks; row-wise and data-parallel tables span every rank), the
/// others are placed by config.sharding (a plan's ranks count from rank 0 of the run);
/// table-row-wise tables span the ranks of one node, nodes being consecutive blocks of
/// ranks_per_node ranks (0: all ranks one node). Throws ShardingError.
TablePlacement place_dlrm_tables(const DlrmConfig& config,
                                 std::span<const int64_t> rank_capacity_bytes,
                                 uint32_t ranks_per_node = 0);

}  // namespace upsim
