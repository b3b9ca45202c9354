// DeepEP's high-throughput ("normal") dispatch and combine and HybridEP's, as Megatron-Core's
// flex token dispatcher runs them (moe.dispatcher flex; megatron/core/transformer/moe/
// token_dispatcher.py, MoEFlexTokenDispatcher, and fused_a2a.py; github.com/deepseek-ai/DeepEP
// @ 567632dd, the V1 Buffer API Megatron calls, README and csrc/; its hybrid-ep branch @
// 94a9f8f, whose data path is the same: "Hybrid-EP first performs IB communication between peer
// GPUs, then each rank distributes the received inter-node data locally",
// Hybrid-EP_Implementation.md). Pure functions of the routing and the layout.
//
// Contract:
//  - A token goes to a rank once, whatever number of that rank's experts it is routed to
//    (get_dispatch_layout's is_token_in_rank [tokens, ranks]; the receiver's experts are its
//    top-k entries that fall on it). Within a node every pair moves over NVLink directly.
//    Across nodes a token crosses the network once per destination node: RDMA to the GPU of
//    the sender's NVLink index on that node, which forwards it over NVLink to every rank of its
//    node the token is routed to (DeepEP's internode kernels; Megatron-Core's MoE README:
//    "Removes redundant tokens during cross-node communication"). Combine is the reverse.
//  - Where tokens go: each of `experts` routed experts is chosen by top_k without repetition;
//    a member's `expert_weight` is the experts' worth of routing it draws (its local experts
//    under uniform routing, more on a busier rank; the weights add up to `experts`). The chance
//    that a token reaches none of a set of ranks of total weight w is C(E - w, k) / C(E, k)
//    (continued through the Gamma function for fractional w): exact for uniform routing, and
//    monotone in the load.
//  - DeepEP's layout: an expert-parallel group of at most 8 ranks on one node (NVLink IPC,
//    intranode kernels), or of whole nodes of 8 ranks each (NUM_MAX_NVL_PEERS = 8; internode
//    kernels), of a size its config tables list (Buffer.get_dispatch_config).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace upsim {

/// Bytes of one top-k expert index DeepEP moves and buffers (csrc/kernels/configs.cuh,
/// topk_idx_t: int64 with the default TOPK_IDX_BITS 64).
inline constexpr int64_t kDeepEpTopkIdxBytes = 8;
/// DeepEP's NVLink peers per node (csrc/kernels/configs.cuh, NUM_MAX_NVL_PEERS).
inline constexpr int64_t kDeepEpNvlPeers = 8;
/// SMs DeepEP's normal kernels take by default (deep_ep/buffer.py, Buffer.num_sms = 20; Megatron-
/// Core passes moe_flex_dispatcher_num_sms, default 20). Must be even (set_num_sms asserts it).
inline constexpr int32_t kDeepEpDefaultSms = 20;

/// HybridEP's default SMs per dispatch and combine kernel (DeepEP hybrid-ep branch @ 94a9f8f,
/// csrc/hybrid_ep/config.cuh: `value_or((num_of_nodes == 1) ? 24 : 8)`).
inline constexpr int32_t kHybridEpIntranodeSms = 24;
inline constexpr int32_t kHybridEpInternodeSms = 8;

/// The SMs the flex dispatcher's kernels take: `sms` when set (> 0), else the backend's default
/// (`hybrid`: HybridEP's, by whether the group spans nodes; DeepEP's otherwise).
int32_t flex_dispatch_sms(bool hybrid, int32_t sms, bool across_nodes);

/// Why HybridEP cannot run an expert-parallel group on `member_node`, or nothing: its ranks
/// within a node share one NVLink domain, and across nodes every node holds as many of the
/// group's ranks (NUM_OF_RANKS_PER_NODE, a template parameter of its kernels).
std::optional<std::string> hybridep_layout_unsupported(const std::vector<uint32_t>& member_node);

/// The nodes of an expert-parallel group of `members` where the platform does not say: DeepEP's
/// own numbering (rank = rdma_rank x NUM_MAX_NVL_PEERS + nvl_rank), 8 consecutive members a
/// node, as on DGX nodes (taken for HybridEP too).
std::vector<uint32_t> default_member_nodes(size_t members);

/// Whether DeepEP's config tables list a group of `ranks` (Buffer.get_dispatch_config: 2, 4, 8,
/// 16, 24, 32, 48, 64, 96, 128, 144, 160).
bool deepep_supports_ranks(int64_t ranks);

/// Why DeepEP cannot run an expert-parallel group whose members (in group order) sit on
/// `member_node` (any node ids), or nothing. Checks the size, then the layout of the contract.
std::optional<std::string> deepep_layout_unsupported(const std::vector<uint32_t>& member_node);

/// The chance that a token routed to `top_k` distinct experts of `experts` reaches none of a set
/// of ranks holding `weight` experts' worth of its routing (0 <= weight <= experts).
double deepep_miss_chance(double experts, double weight, int64_t top_k);

/// Bytes member i sends member j (members x members, row-major) in one DeepEP dispatch of
/// `tokens` tokens from every member, `row_bytes` a token (its hidden state, and what travels
/// with it); with `combine`, the combine's (the transpose: each token's rows come back the same
/// way). `member_node`: the node of each member in group order; `expert_weight`: each member's
/// (the contract). A member's own tokens count as its send to itself (the copy into its
/// receive buffer), as an all-to-all's diagonal.
std::vector<int64_t> deepep_send_matrix(const std::vector<uint32_t>& member_node,
                                        const std::vector<double>& expert_weight, int64_t experts,
                                        int64_t top_k, int64_t tokens, int64_t row_bytes,
                                        bool combine);

/// The bytes of the NVLink and RDMA buffers Megatron-Core allocates for a group of `ranks`
/// (fused_a2a.py get_buffer: the larger of the dispatch and combine configs' size hints;
/// DeepEP csrc/config.hpp, get_nvl_buffer_size_hint and get_rdma_buffer_size_hint), with
/// `hidden_bytes` = hidden x max(element bytes, 2) and `sms` SMs. `ranks` must be supported.
int64_t deepep_buffer_bytes(int64_t ranks, int64_t hidden_bytes, int32_t sms);

/// Bytes of HybridEP's buffers on one GPU of an expert-parallel group of `ranks` (8 a node, or
/// one node of fewer: default_member_nodes) for `tokens_per_rank` tokens of `hidden` bf16
/// values and `experts_per_rank` local experts (hybrid-ep branch @ 94a9f8f; Megatron-Core's
/// fused_a2a.py init_hybrid_ep_buffer passes the rank's tokens and no fp8). With T the tokens
/// per rank, R the ranks a node, N the nodes, h = hidden, e = experts a node's ranks hold (R x
/// experts_per_rank):
///  - NVLink (csrc/hybrid_ep/buffer/intranode.cu; use_shared_buffer True, the default: dispatch
///    and combine share the token and probability buffers): for the worst case of every
///    token on one rank, T R N tokens of h bf16 values and e fp32 probabilities, and the
///    dispatch's scaling factors, h / 128 fp32 a token;
///  - RDMA, with N > 1 (internode_doca.cu, RDMACoordinator): the dispatch's send buffer (T
///    tokens with N e probabilities and scaling factors) and its receive buffer from the N - 1
///    other nodes (T (N - 1) tokens with e probabilities and scaling factors); the combine's
///    reduction and receive buffers (2 T (N - 1) tokens with e probabilities).
/// The synchronisation flags (a few KiB) are left out.
int64_t hybridep_buffer_bytes(int64_t ranks, int64_t tokens_per_rank, int64_t hidden,
                              int64_t experts_per_rank);

}  // namespace upsim
