#include "workloads/trace/chakra_trace.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sim/formats/parse_error.h"
#include "workloads/trace/trace_kernel_desc.h"

namespace upsim {

namespace {

constexpr uint32_t kTypeMemLoad = static_cast<uint32_t>(ChakraNodeType::kMemLoad);
constexpr uint32_t kTypeMemStore = static_cast<uint32_t>(ChakraNodeType::kMemStore);
constexpr uint32_t kTypeComp = static_cast<uint32_t>(ChakraNodeType::kComp);
constexpr uint32_t kTypeSend = static_cast<uint32_t>(ChakraNodeType::kCommSend);
constexpr uint32_t kTypeRecv = static_cast<uint32_t>(ChakraNodeType::kCommRecv);
constexpr uint32_t kTypeColl = static_cast<uint32_t>(ChakraNodeType::kCommColl);

/// Stream key of communication nodes that name no stream (a stream of their own, as ASTRA-sim
/// keeps GPU compute and communication apart).
constexpr int64_t kCommStream = INT64_MIN;

std::string node_label(const ChakraNode& n) {
  return "node " + std::to_string(n.id) + " (" + std::string(chakra_node_type_name(n.type)) + " `" +
         n.name + "`)";
}

/// An integer-valued attribute (int, bool or double kinds), or nullopt.
std::optional<int64_t> int_attr(const ChakraNode& n, std::string_view key) {
  const ChakraAttr* a = n.attr(key);
  if (!a) return std::nullopt;
  switch (a->kind) {
    case ChakraAttr::Kind::kInt:
    case ChakraAttr::Kind::kBool:
      return a->i;
    case ChakraAttr::Kind::kDouble:
      return static_cast<int64_t>(a->d);
    default:
      return std::nullopt;
  }
}

std::string string_attr(const ChakraNode& n, std::string_view key) {
  const ChakraAttr* a = n.attr(key);
  return a && a->kind == ChakraAttr::Kind::kString ? a->s : std::string();
}

const ChakraAttr* metadata_attr(const ChakraTrace& t, std::string_view key) {
  for (const ChakraAttr& a : t.metadata) {
    if (a.name == key) return &a;
  }
  return nullptr;
}

bool is_cpu_node(const ChakraNode& n) {
  return int_attr(n, "is_cpu_op").value_or(0) != 0;
}

bool has_task(const ChakraNode& n) {
  return n.type >= kTypeMemLoad && n.type <= kTypeColl;
}

bool is_comm(const ChakraNode& n) {
  return n.type == kTypeSend || n.type == kTypeRecv || n.type == kTypeColl;
}

/// GPU stream of a GPU node: attr `stream`; else attr `tid` (converters before `stream` existed
/// copied the Kineto tid, which for GPU events is the stream); else the communication stream for
/// communication nodes and stream 0 for the rest.
int64_t stream_key(const ChakraNode& n) {
  if (const auto s = int_attr(n, "stream")) return *s;
  if (const auto t = int_attr(n, "tid")) return *t;
  return is_comm(n) ? kCommStream : 0;
}

/// One value of a Python-literal integer list (IOInfo shapes): an integer or a list.
struct Literal {
  bool list = false;
  int64_t value = 0;
  std::vector<Literal> items;
};

/// Parses `text` from `pos`: nested lists of integers ("[[64], [2, 3], []]"); nullopt on anything
/// else (strings, floats, nesting deeper than 8).
std::optional<Literal> parse_literal(std::string_view text, size_t& pos, int depth = 0) {
  auto skip_space = [&] {
    while (pos < text.size() && text[pos] == ' ')
      ++pos;
  };
  skip_space();
  if (pos >= text.size() || depth > 8) return std::nullopt;
  Literal out;
  if (text[pos] == '[') {
    out.list = true;
    ++pos;
    skip_space();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return out;
    }
    while (true) {
      auto item = parse_literal(text, pos, depth + 1);
      if (!item) return std::nullopt;
      out.items.push_back(std::move(*item));
      skip_space();
      if (pos >= text.size()) return std::nullopt;
      if (text[pos] == ']') {
        ++pos;
        return out;
      }
      if (text[pos] != ',') return std::nullopt;
      ++pos;
    }
  }
  const size_t begin = pos;
  if (text[pos] == '-') ++pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
    ++pos;
  if (pos == begin || (pos == begin + 1 && text[begin] == '-')) return std::nullopt;
  out.value = std::stoll(std::string(text.substr(begin, pos - begin)));
  return out;
}

bool all_integers(const Literal& l) {
  return std::all_of(l.items.begin(), l.items.end(), [](const Literal& i) { return !i.list; });
}

/// The element types of IOInfo types ("['Tensor(float)', 'GenericList[Tensor(float),Int]']"),
/// one per argument, a GenericList expanded into its elements, "Tensor(T)" read as T.
std::vector<std::string> parse_types(std::string_view text) {
  std::vector<std::string> out;
  auto element = [&](std::string_view t) {
    if (t.starts_with("Tensor(") && t.ends_with(")")) t = t.substr(7, t.size() - 8);
    out.emplace_back(t);
  };
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const char quote = text[pos];
    if (quote != '\'' && quote != '"') continue;
    const size_t end = text.find(quote, pos + 1);
    if (end == std::string_view::npos) break;
    const std::string_view item = text.substr(pos + 1, end - pos - 1);
    pos = end;
    if (!(item.starts_with("GenericList[") && item.ends_with("]"))) {
      element(item);
      continue;
    }
    const std::string_view inner = item.substr(12, item.size() - 13);
    int depth = 0;
    size_t from = 0;
    for (size_t i = 0; i <= inner.size(); ++i) {
      if (i == inner.size() || (inner[i] == ',' && depth == 0)) {
        if (i > from) element(inner.substr(from, i - from));
        from = i + 1;
      } else if (inner[i] == '(' || inner[i] == '[') {
        ++depth;
      } else if (inner[i] == ')' || inner[i] == ']') {
        --depth;
      }
    }
  }
  return out;
}

/// A node's input shapes and element types in op_kernel_desc's form: one entry per tensor (the
/// tensors of a Tensor[] argument each), non-tensor arguments with empty dims. Empty when the
/// node has no shapes or they do not parse; types left out when they do not pair with the shapes.
KinetoOpInputs chakra_inputs(const ChakraNode& n) {
  KinetoOpInputs in;
  size_t pos = 0;
  const auto shapes = parse_literal(n.input_shapes, pos);
  if (!shapes || !shapes->list) return in;
  for (const Literal& arg : shapes->items) {
    if (!arg.list) {
      in.dims.emplace_back();
    } else if (all_integers(arg)) {
      in.dims.emplace_back();
      for (const Literal& d : arg.items)
        in.dims.back().push_back(d.value);
    } else {
      for (const Literal& tensor : arg.items) {
        in.dims.emplace_back();
        if (!tensor.list || !all_integers(tensor)) continue;
        for (const Literal& d : tensor.items)
          in.dims.back().push_back(d.value);
      }
    }
  }
  in.types = parse_types(n.input_types);
  if (in.types.size() != in.dims.size()) in.types.clear();
  return in;
}

/// The op name without the PyTorch converter's "(N)" suffix: "aten::mm(0)" -> "aten::mm".
std::string_view op_name(const ChakraNode& n) {
  std::string_view name = n.name;
  if (name.ends_with(")")) {
    const size_t open = name.rfind('(');
    if (open != std::string_view::npos && open + 2 < name.size() &&
        std::all_of(name.begin() + static_cast<std::ptrdiff_t>(open) + 1, name.end() - 1,
                    [](char c) { return c >= '0' && c <= '9'; })) {
      name = name.substr(0, open);
    }
  }
  return name;
}

/// Model mode: the descriptor of GPU COMP_NODE `i` (ChakraGraphOptions::mode), or nullopt (kept
/// measured). `gemm_taken`: the ops whose GEMM an earlier kernel took.
std::optional<KernelDesc> chakra_kernel_desc(const std::vector<ChakraNode>& nodes,
                                             const std::unordered_map<uint64_t, size_t>& node_of_id,
                                             size_t i, std::unordered_set<size_t>& gemm_taken) {
  const ChakraNode& n = nodes[i];
  auto cpu_node = [&](uint64_t id) -> std::optional<size_t> {
    const auto it = node_of_id.find(id);
    if (it == node_of_id.end() || !is_cpu_node(nodes[it->second])) return std::nullopt;
    return it->second;
  };
  // The launching op: the CPU node among ctrl_deps, then data_deps, whose inputs are the node's
  // (the converter copies the op's inputs onto its kernels; in test/data/chakra a kernel's
  // ctrl_dep is often another op), else the first CPU node among data_deps.
  std::optional<size_t> op;
  std::optional<size_t> first_data_op;
  auto consider = [&](uint64_t id, bool data) {
    const auto c = cpu_node(id);
    if (!c) return;
    if (data && !first_data_op) first_data_op = c;
    const ChakraNode& o = nodes[*c];
    if (!op && !n.input_shapes.empty() && o.input_shapes == n.input_shapes &&
        o.input_types == n.input_types) {
      op = c;
    }
  };
  for (uint64_t d : n.ctrl_deps)
    consider(d, false);
  for (uint64_t d : n.data_deps)
    consider(d, true);
  if (!op) op = first_data_op;
  if (op) {
    KinetoOpInputs in = chakra_inputs(n);
    if (in.dims.empty()) in = chakra_inputs(nodes[*op]);
    if (auto kd = op_kernel_desc(op_name(nodes[*op]), n.name, in, gemm_taken.count(*op) > 0)) {
      if (kd->cls == KernelClass::kGemm) gemm_taken.insert(*op);
      return kd;
    }
  }
  const int64_t num_ops = int_attr(n, "num_ops").value_or(0);
  if (num_ops <= 0) return std::nullopt;
  KernelDesc kd;
  kd.cls = KernelClass::kMemoryBound;
  kd.flops = static_cast<double>(num_ops);
  kd.bytes_read = static_cast<double>(std::max<int64_t>(0, int_attr(n, "tensor_size").value_or(0)));
  return kd;
}

/// Bytes of a send or receive: comm_size (PyTorch converter), else tensor_size (et_generator).
int64_t p2p_bytes(const ChakraNode& n) {
  if (const auto s = int_attr(n, "comm_size")) return *s;
  return int_attr(n, "tensor_size").value_or(0);
}

/// CollectiveCommType -> the engine's kind. REDUCE, GATHER, SCATTER and BARRIER have no kind of
/// their own: they take the kind with the same traffic pattern (BARRIER: an all-reduce of
/// comm_size, usually 0, bytes).
std::optional<CollectiveKind> collective_kind_of(int64_t comm_type) {
  switch (comm_type) {
    case 0:  // ALL_REDUCE
    case 1:  // REDUCE
    case 9:  // BARRIER
      return CollectiveKind::kAllReduce;
    case 2:  // ALL_GATHER
    case 3:  // GATHER
      return CollectiveKind::kAllGather;
    case 4:  // SCATTER
    case 5:  // BROADCAST
      return CollectiveKind::kBroadcast;
    case 6:  // ALL_TO_ALL
      return CollectiveKind::kAllToAll;
    case 7:  // REDUCE_SCATTER
    case 8:  // REDUCE_SCATTER_BLOCK
      return CollectiveKind::kReduceScatter;
    default:
      return std::nullopt;
  }
}

/// The kind of a collective node: attr comm_type, else the name as the PyTorch converter reads it
/// (lower case without '_' and '-': allreduce, alltoall, allgather, reducescatter, broadcast).
CollectiveKind collective_kind(const ChakraNode& n, const std::string& file) {
  if (const auto t = int_attr(n, "comm_type")) {
    if (const auto k = collective_kind_of(*t)) return *k;
    throw ParseError(file, node_label(n) + ": comm_type " + std::to_string(*t) +
                               " is not a CollectiveCommType (0..9)");
  }
  std::string name;
  for (char c : n.name) {
    if (c != '_' && c != '-')
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (name.find("allreduce") != std::string::npos) return CollectiveKind::kAllReduce;
  if (name.find("alltoall") != std::string::npos) return CollectiveKind::kAllToAll;
  if (name.find("allgather") != std::string::npos) return CollectiveKind::kAllGather;
  if (name.find("reducescatter") != std::string::npos) return CollectiveKind::kReduceScatter;
  if (name.find("broadcast") != std::string::npos) return CollectiveKind::kBroadcast;
  throw ParseError(file, node_label(n) +
                             ": no comm_type attribute, and the name does not say which "
                             "collective it is");
}

std::string file_name(const ChakraTrace& t) {
  return std::filesystem::path(t.file).filename().string();
}

/// A GPU communication task's group and fixed duration.
struct CommTask {
  CollectiveId group = 0;
  int64_t ps = 0;
  bool peers = true;  ///< the group has two or more ranks (model mode prices it)
};

using RankNode = std::pair<size_t, size_t>;  // (rank, node index)

/// Groups the GPU COMM_COLL_NODEs of all ranks (see the header) and declares their groups.
void group_collectives(const std::vector<ChakraTrace>& traces,
                       const std::vector<std::vector<size_t>>& order, TaskGraph& graph,
                       std::vector<std::unordered_map<size_t, CommTask>>& comm,
                       TraceGraphInfo& info) {
  const size_t nranks = traces.size();
  std::map<std::string, std::vector<std::vector<size_t>>> by_pg;  // pg -> per rank, node indices
  for (size_t r = 0; r < nranks; ++r) {
    for (size_t i : order[r]) {
      const ChakraNode& n = traces[r].nodes[i];
      if (n.type != kTypeColl || is_cpu_node(n)) continue;
      auto& per_rank = by_pg[string_attr(n, "pg_name")];
      per_rank.resize(nranks);
      per_rank[r].push_back(i);
    }
  }
  for (const auto& [pg, per_rank] : by_pg) {
    const std::string pg_text = pg.empty() ? "without pg_name" : "of process group `" + pg + "`";
    std::vector<size_t> members;
    size_t most = 0;
    for (size_t r = 0; r < nranks; ++r) {
      if (per_rank[r].empty()) continue;
      members.push_back(r);
      if (per_rank[r].size() > per_rank[most].size()) most = r;
    }
    if (pg.empty() && members.size() != nranks) {
      size_t absent = 0;
      while (!per_rank[absent].empty())
        ++absent;
      throw ParseError(traces[absent].file,
                       "no collective " + pg_text + ", but " + file_name(traces[most]) + " has " +
                           std::to_string(per_rank[most].size()) +
                           " (first: " + node_label(traces[most].nodes[per_rank[most].front()]) +
                           "); a collective without a process group spans every rank: the "
                           "traces do not belong to one run");
    }
    for (size_t r : members) {
      if (per_rank[r].size() == per_rank[most].size()) continue;
      const ChakraNode& extra = traces[most].nodes[per_rank[most][per_rank[r].size()]];
      throw ParseError(traces[most].file, node_label(extra) + " is collective " +
                                              std::to_string(per_rank[r].size() + 1) + " " +
                                              pg_text + ", but " + file_name(traces[r]) +
                                              " has only " + std::to_string(per_rank[r].size()) +
                                              ": the traces do not belong to one run");
    }
    for (size_t k = 0; k < per_rank[most].size(); ++k) {
      const size_t r0 = members.front();
      const ChakraNode& first = traces[r0].nodes[per_rank[r0][k]];
      CollectiveDesc desc;
      desc.kind = collective_kind(first, traces[r0].file);
      int64_t ps = INT64_MAX;
      for (size_t r : members) {
        const ChakraNode& n = traces[r].nodes[per_rank[r][k]];
        if (const CollectiveKind kind = collective_kind(n, traces[r].file); kind != desc.kind) {
          throw ParseError(traces[r].file,
                           node_label(n) + " is " + std::string(collective_kind_name(kind)) +
                               ", but the collective it meets in " + file_name(traces[r0]) + ", " +
                               node_label(first) + ", is " +
                               std::string(collective_kind_name(desc.kind)) +
                               ": the traces do not belong to one run");
        }
        desc.members.push_back(static_cast<RankId>(r));
        desc.bytes = std::max(desc.bytes, int_attr(n, "comm_size").value_or(0));
        ps = std::min(ps, static_cast<int64_t>(n.duration_micros) * 1'000'000);
      }
      if (desc.kind == CollectiveKind::kAllToAll) {
        const auto m = static_cast<int64_t>(members.size());
        desc.send_bytes = AllToAllSizes::dense(
            members.size(), std::vector<int64_t>(static_cast<size_t>(m * m), desc.bytes / m));
      }
      const std::string name =
          first.name + (pg.empty() ? "" : " pg " + pg) + " #" + std::to_string(k);
      const CollectiveId id = graph.add_collective_group(std::move(desc), name);
      ++info.collective_groups;
      for (size_t r : members)
        comm[r][per_rank[r][k]] = CommTask{id, ps, members.size() > 1};
    }
  }
}

/// Matches the GPU COMM_SEND_NODEs and COMM_RECV_NODEs of all ranks (see the header), declares a
/// send/recv group per pair, and returns per rank the nodes that name no peer.
std::vector<std::vector<size_t>> match_point_to_point(
    const std::vector<ChakraTrace>& traces, const std::vector<std::vector<size_t>>& order,
    TaskGraph& graph, std::vector<std::unordered_map<size_t, CommTask>>& comm,
    TraceGraphInfo& info) {
  const size_t nranks = traces.size();
  // (src, dst, tag) -> sends and receives in node-id order.
  std::map<std::tuple<int64_t, int64_t, int64_t>,
           std::pair<std::vector<RankNode>, std::vector<RankNode>>>
      p2p;
  std::vector<std::vector<size_t>> peerless(nranks);
  for (size_t r = 0; r < nranks; ++r) {
    const ChakraTrace& t = traces[r];
    const auto self = static_cast<int64_t>(r);
    for (size_t i : order[r]) {
      const ChakraNode& n = t.nodes[i];
      if ((n.type != kTypeSend && n.type != kTypeRecv) || is_cpu_node(n)) continue;
      const bool send = n.type == kTypeSend;
      const char* peer_key = send ? "comm_dst" : "comm_src";
      const char* self_key = send ? "comm_src" : "comm_dst";
      const auto peer = int_attr(n, peer_key);
      if (!peer) {
        peerless[r].push_back(i);
        continue;
      }
      if (const auto own = int_attr(n, self_key); own && *own != self) {
        throw ParseError(t.file, node_label(n) + " has " + self_key + " " + std::to_string(*own) +
                                     ", but it is in the trace of rank " + std::to_string(r));
      }
      if (*peer < 0 || *peer >= static_cast<int64_t>(nranks)) {
        throw ParseError(t.file, node_label(n) + " has " + peer_key + " " + std::to_string(*peer) +
                                     ", but the traces are ranks 0.." + std::to_string(nranks - 1));
      }
      if (*peer == self) {
        throw ParseError(t.file, node_label(n) + " has " + peer_key + " " + std::to_string(*peer) +
                                     ", its own rank");
      }
      const int64_t tag = int_attr(n, "comm_tag").value_or(0);
      if (send) {
        p2p[{self, *peer, tag}].first.emplace_back(r, i);
      } else {
        p2p[{*peer, self, tag}].second.emplace_back(r, i);
      }
    }
  }
  for (const auto& [key, ends] : p2p) {
    const auto& [src, dst, tag] = key;
    const auto& [sends, recvs] = ends;
    const std::string what = "rank " + std::to_string(src) + " -> rank " + std::to_string(dst) +
                             ", comm_tag " + std::to_string(tag);
    const std::string counts = std::to_string(sends.size()) + " COMM_SEND_NODE and " +
                               std::to_string(recvs.size()) + " COMM_RECV_NODE of " + what;
    if (sends.size() > recvs.size()) {
      const auto [r, i] = sends[recvs.size()];
      throw ParseError(traces[r].file,
                       node_label(traces[r].nodes[i]) + " has no matching receive in " +
                           file_name(traces[static_cast<size_t>(dst)]) + " (" + counts + ")");
    }
    if (recvs.size() > sends.size()) {
      const auto [r, i] = recvs[sends.size()];
      throw ParseError(traces[r].file,
                       node_label(traces[r].nodes[i]) + " has no matching send in " +
                           file_name(traces[static_cast<size_t>(src)]) + " (" + counts + ")");
    }
    for (size_t k = 0; k < sends.size(); ++k) {
      const ChakraTrace& ts = traces[sends[k].first];
      const ChakraTrace& tr = traces[recvs[k].first];
      const ChakraNode& s = ts.nodes[sends[k].second];
      const ChakraNode& v = tr.nodes[recvs[k].second];
      const int64_t sb = p2p_bytes(s);
      const int64_t rb = p2p_bytes(v);
      if (sb > 0 && rb > 0 && sb != rb) {
        throw ParseError(ts.file, node_label(s) + " sends " + std::to_string(sb) +
                                      " bytes, but the matching " + node_label(v) + " in " +
                                      file_name(tr) + " receives " + std::to_string(rb));
      }
      CollectiveDesc desc;
      desc.kind = CollectiveKind::kSendRecv;
      desc.members = {static_cast<RankId>(src), static_cast<RankId>(dst)};
      desc.bytes = std::max(sb, rb);
      const CollectiveId id = graph.add_collective_group(
          std::move(desc), s.name + " " + what + " #" + std::to_string(k));
      ++info.collective_groups;
      const int64_t ps =
          static_cast<int64_t>(std::min(s.duration_micros, v.duration_micros)) * 1'000'000;
      comm[sends[k].first][sends[k].second] = CommTask{id, ps, true};
      comm[recvs[k].first][recvs[k].second] = CommTask{id, ps, true};
    }
  }
  return peerless;
}

/// Per rank: its nodes in node-id order, and each node's index by id. A node id that appears
/// twice in a trace is a ParseError.
struct NodeIndex {
  std::vector<std::vector<size_t>> order;
  std::vector<std::unordered_map<uint64_t, size_t>> node_of_id;
};

NodeIndex index_nodes(const std::vector<ChakraTrace>& traces) {
  const size_t nranks = traces.size();
  NodeIndex out;
  std::vector<std::vector<size_t>>& order = out.order;
  std::vector<std::unordered_map<uint64_t, size_t>>& node_of_id = out.node_of_id;
  order.resize(nranks);
  node_of_id.resize(nranks);
  for (size_t r = 0; r < nranks; ++r) {
    const auto& nodes = traces[r].nodes;
    order[r].resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      order[r][i] = i;
      if (!node_of_id[r].emplace(nodes[i].id, i).second) {
        throw ParseError(traces[r].file, "node id " + std::to_string(nodes[i].id) +
                                             " appears twice (" + node_label(nodes[i]) + ")");
      }
    }
    std::sort(order[r].begin(), order[r].end(),
              [&](size_t a, size_t b) { return nodes[a].id < nodes[b].id; });
  }
  return out;
}

/// Adds one rank of a Chakra trace set to the graph (the rules of chakra_trace.h): its threads
/// and streams, a task per node that has one between the rank's two iteration marks, the
/// dependencies between them, and its measured iteration.
class ChakraRankEmitter {
 public:
  /// Rank `t`, its nodes in id order (`order`) and by id (`node_of_id`), and the communication
  /// tasks its nodes take part in (`comm`: group_collectives, match_point_to_point).
  ChakraRankEmitter(const ChakraTrace& t, const std::vector<size_t>& order,
                    const std::unordered_map<uint64_t, size_t>& node_of_id,
                    const std::unordered_map<size_t, CommTask>& comm,
                    const ChakraGraphOptions& options, TaskGraph& graph)
      : t_(t),
        nodes_(t.nodes),
        order_(order),
        node_of_id_(node_of_id),
        comm_(comm),
        options_(options),
        model_(options.mode == TraceMode::kModel),
        graph_(graph) {}

  /// The rank's tasks and its summary. Appends to `warnings` (if given) that its sends and
  /// receives without a peer (`peerless`) are not matched, and a measured time that is not the
  /// nodes' own span.
  TraceRankSummary emit(const std::vector<size_t>& peerless, std::vector<std::string>* warnings) {
    s_.file = t_.file;
    s_.device = "GPU";
    add_rank();
    add_tasks();
    if (warnings && !peerless.empty()) {
      warnings->push_back(t_.file + ": " + std::to_string(peerless.size()) +
                          " COMM_SEND_NODE / COMM_RECV_NODE without comm_dst / comm_src (first: " +
                          node_label(nodes_[peerless.front()]) +
                          ") replayed with their measured time, not matched across ranks");
    }
    add_dependencies();
    s_.iterations.push_back(measured_iteration(warnings));
    return std::move(s_);
  }

 private:
  /// CPU threads by attr `tid` and streams by stream_key, each numbered in key order, and the
  /// rank with them.
  void add_rank() {
    for (size_t i : order_) {
      const ChakraNode& n = nodes_[i];
      if (!has_task(n)) continue;
      if (is_cpu_node(n)) {
        thread_index_.emplace(int_attr(n, "tid").value_or(0), 0);
      } else {
        stream_index_.emplace(stream_key(n), 0);
      }
    }
    if (thread_index_.empty()) thread_index_.emplace(0, 0);
    if (thread_index_.size() > UINT16_MAX || stream_index_.size() > UINT16_MAX) {
      throw ParseError(t_.file, std::to_string(thread_index_.size()) +
                                    " host threads (attr tid) and " +
                                    std::to_string(stream_index_.size()) +
                                    " streams: more than 65535 of one kind");
    }
    RankInfo rank_info;
    rank_info.name = "rank " + std::to_string(graph_.rank_count()) + " (" + file_name(t_) + ")";
    uint16_t next = 0;
    for (auto& [tid, index] : thread_index_)
      index = next++;
    rank_info.cpu_threads = next;
    next = 0;
    for (auto& [stream, index] : stream_index_) {
      index = next++;
      rank_info.stream_names.push_back(stream == kCommStream ? "comm"
                                                             : "stream " + std::to_string(stream));
    }
    rank_ = graph_.add_rank(rank_info);
    s_.rank = rank_;
    s_.cpu_threads = rank_info.cpu_threads;
    s_.streams = next;
  }

  /// IterationMark 0, a task per node that has one (in node-id order), then IterationMark 1
  /// after a device-wide HostSync on thread 0 that also waits for every thread's last task.
  void add_tasks() {
    task_.assign(nodes_.size(), kNoTask);
    std::vector<TaskId> last_on_thread(thread_index_.size(), kNoTask);
    graph_.add_iteration_mark(rank_, 0, 0);
    for (size_t i : order_) {
      const ChakraNode& n = nodes_[i];
      if (!has_task(n)) continue;
      timed_ |= n.start_time_micros > 0;
      first_us_ = std::min(first_us_, n.start_time_micros);
      last_us_ = std::max(last_us_, n.start_time_micros + n.duration_micros);
      const Duration d = Duration::from_us(static_cast<int64_t>(n.duration_micros));
      if (is_cpu_node(n)) {
        const uint16_t thread = thread_index_.at(int_attr(n, "tid").value_or(0));
        task_[i] = graph_.add_cpu_op(rank_, thread, n.name, HostPhase::kOpBody);
        graph_.set_fixed_duration(task_[i], d);
        last_on_thread[thread] = task_[i];
        continue;
      }
      add_gpu_task(i, d);
    }
    const TaskId end_sync = graph_.add_host_sync(rank_, 0, kAllStreams, "end of trace");
    for (TaskId last : last_on_thread) {
      if (last != kNoTask) graph_.add_dependency(last, end_sync);
    }
    graph_.add_iteration_mark(rank_, 0, 1);
  }

  /// The task of GPU node `i` (measured duration `d`): a collective of its group, a copy, or a
  /// kernel, priced in model mode where ChakraGraphOptions::mode says so.
  void add_gpu_task(size_t i, Duration d) {
    const ChakraNode& n = nodes_[i];
    const uint16_t stream = stream_index_.at(stream_key(n));
    if (const auto c = comm_.find(i); c != comm_.end()) {
      task_[i] = graph_.add_collective(rank_, stream, c->second.group, n.name);
      if (!model_ || !c->second.peers) {
        graph_.set_fixed_duration(task_[i], Duration::from_ps(c->second.ps));
        if (model_) ++s_.collectives_kept_measured;
      }
      ++s_.collectives;
    } else if (n.type == kTypeMemLoad || n.type == kTypeMemStore) {
      TransferDesc td;
      td.rank = rank_;
      td.bytes = std::max<int64_t>(0, int_attr(n, "tensor_size").value_or(0));
      td.kind = n.type == kTypeMemLoad ? TransferKind::kHostToDevice : TransferKind::kDeviceToHost;
      task_[i] = graph_.add_memcpy(rank_, stream, n.name, n.name, td);
      if (!model_ || td.bytes == 0) graph_.set_fixed_duration(task_[i], d);
      ++s_.copies;
    } else {
      // COMP_NODE, and sends / receives that name no peer (measured time, no rendezvous).
      std::optional<KernelDesc> kd;
      if (n.type == kTypeComp) {
        ++s_.kernels;
        if (model_) {
          kd = chakra_kernel_desc(nodes_, node_of_id_, i, gemm_taken_);
          if (!kd) ++s_.kernels_kept_measured;
        }
      }
      const bool priced = kd.has_value();
      if (!kd) {
        kd = KernelDesc{};
        kd->flops = static_cast<double>(int_attr(n, "num_ops").value_or(0));
        kd->bytes_read = static_cast<double>(int_attr(n, "tensor_size").value_or(0));
      }
      task_[i] = graph_.add_kernel(rank_, stream, n.name, n.name, *kd);
      if (!priced) graph_.set_fixed_duration(task_[i], d);
    }
  }

  /// Dependencies; nodes without a task pass their own dependencies through.
  void add_dependencies() {
    std::vector<std::vector<TaskId>> through(nodes_.size());
    std::vector<uint8_t> state(nodes_.size(), 0);  // 0 new, 1 visiting, 2 done
    auto deps_of = [&](size_t i) {
      std::vector<uint64_t> ids = nodes_[i].data_deps;
      if (options_.use_ctrl_deps)
        ids.insert(ids.end(), nodes_[i].ctrl_deps.begin(), nodes_[i].ctrl_deps.end());
      return ids;
    };
    // The tasks a node stands for as a dependency: itself, or (no task) what it depends on.
    std::function<const std::vector<TaskId>&(size_t)> resolve =
        [&](size_t i) -> const std::vector<TaskId>& {
      if (state[i] == 2) return through[i];
      if (state[i] == 1) {
        throw ParseError(t_.file, "dependency cycle through " + node_label(nodes_[i]));
      }
      state[i] = 1;
      if (task_[i] != kNoTask) {
        through[i] = {task_[i]};
      } else {
        for (uint64_t d : deps_of(i)) {
          const auto it = node_of_id_.find(d);
          if (it == node_of_id_.end()) continue;
          const auto& up = resolve(it->second);
          through[i].insert(through[i].end(), up.begin(), up.end());
        }
      }
      state[i] = 2;
      return through[i];
    };
    for (size_t i : order_) {
      if (task_[i] == kNoTask) continue;
      const ChakraNode& n = nodes_[i];
      for (uint64_t d : n.data_deps) {
        if (!node_of_id_.count(d)) {
          throw ParseError(t_.file, node_label(n) + " has data dependency " + std::to_string(d) +
                                        ", a node the trace does not have");
        }
      }
      for (uint64_t d : deps_of(i)) {
        const auto it = node_of_id_.find(d);
        if (it == node_of_id_.end()) continue;  // a ctrl_dep on a dropped parent
        for (TaskId before : resolve(it->second)) {
          if (before != task_[i]) graph_.add_dependency(before, task_[i]);
        }
      }
    }
  }

  /// The rank's one iteration, from IterationMark 0 to 1, and its measured time (the header's
  /// rules); a warning (if `warnings`) when that time is not the nodes' own span.
  TraceIteration measured_iteration(std::vector<std::string>* warnings) const {
    TraceIteration it;
    it.start_mark = 0;
    it.end_mark = 1;
    const ChakraAttr* start_ts = metadata_attr(t_, "start_ts");
    const ChakraAttr* finish_ts = metadata_attr(t_, "finish_ts");
    if (timed_) {
      it.label = "trace span";
      it.measured = Duration::from_us(static_cast<int64_t>(last_us_ - first_us_));
    } else if (start_ts && finish_ts && finish_ts->i > start_ts->i) {
      it.label = "ET observer window";
      it.measured = Duration::from_ms(finish_ts->i - start_ts->i);
      it.not_an_iteration =
          "no node has a start time, so the measured time is the execution-trace observer's "
          "window, everything from its registration to its removal (whole milliseconds), not "
          "the traced step's length";
      if (warnings) {
        warnings->push_back(
            t_.file +
            ": no node has start_time_micros; measured = the execution-trace observer's "
            "lifetime (GlobalMetadata finish_ts - start_ts, whole milliseconds), which also "
            "holds untraced host time: an upper bound on the traced work");
      }
    } else {
      it.label = "no timestamps";
      it.measured = Duration::zero();
      it.not_an_iteration =
          "no node has a start time and the metadata has no observer window: nothing was measured";
      if (warnings) {
        warnings->push_back(t_.file +
                            ": no node has start_time_micros and the metadata has no "
                            "start_ts / finish_ts: nothing measured to compare with");
      }
    }
    return it;
  }

  const ChakraTrace& t_;
  const std::vector<ChakraNode>& nodes_;
  const std::vector<size_t>& order_;
  const std::unordered_map<uint64_t, size_t>& node_of_id_;
  const std::unordered_map<size_t, CommTask>& comm_;
  const ChakraGraphOptions& options_;
  const bool model_;
  TaskGraph& graph_;
  TraceRankSummary s_;
  std::map<int64_t, uint16_t> thread_index_;  // attr tid -> CPU thread
  std::map<int64_t, uint16_t> stream_index_;  // stream_key -> stream
  RankId rank_ = 0;
  std::vector<TaskId> task_;               // per node: its task (kNoTask: none)
  std::unordered_set<size_t> gemm_taken_;  // model mode: ops whose GEMM a kernel took
  uint64_t first_us_ = UINT64_MAX;
  uint64_t last_us_ = 0;
  bool timed_ = false;  // some node has start_time_micros (proto3 cannot tell 0 from absent)
};

}  // namespace

TraceGraphInfo build_chakra_graph(const std::vector<ChakraTrace>& traces, TaskGraph& graph,
                                  const ChakraGraphOptions& options,
                                  std::vector<std::string>* warnings) {
  if (traces.empty()) throw ParseError("(no file)", "no Chakra trace to build a graph from");
  if (graph.rank_count() != 0) {
    throw std::invalid_argument("build_chakra_graph: the graph already has ranks");
  }
  const size_t nranks = traces.size();
  const NodeIndex index = index_nodes(traces);
  TraceGraphInfo info;
  std::vector<std::unordered_map<size_t, CommTask>> comm(nranks);
  group_collectives(traces, index.order, graph, comm, info);
  const std::vector<std::vector<size_t>> peerless =
      match_point_to_point(traces, index.order, graph, comm, info);
  for (size_t r = 0; r < nranks; ++r) {
    info.ranks.push_back(
        ChakraRankEmitter(traces[r], index.order[r], index.node_of_id[r], comm[r], options, graph)
            .emit(peerless[r], warnings));
  }
  return info;
}

}  // namespace upsim
