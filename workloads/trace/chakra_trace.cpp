#include "workloads/trace/chakra_trace.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

#include "workloads/trace/trace_error.h"
#include "workloads/trace/trace_file.h"

namespace upsim {

const ChakraAttr* ChakraNode::attr(std::string_view key) const {
  for (const ChakraAttr& a : attrs) {
    if (a.name == key) return &a;
  }
  return nullptr;
}

namespace {

/// Protobuf wire-format reader over one message (or the whole file).
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& file, size_t base)
      : bytes_(bytes), file_(file), base_(base) {}

  bool done() const { return pos_ >= bytes_.size(); }
  size_t offset() const { return base_ + pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(file_, "byte " + std::to_string(offset()) + ": " + what +
                                " (truncated or not a Chakra trace?)");
  }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) fail("varint runs past the end");
      const auto b = static_cast<uint8_t>(bytes_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }

  std::string_view bytes(size_t n) {
    if (n > bytes_.size() - pos_)
      fail("field of " + std::to_string(n) + " bytes runs past the end");
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  std::string_view length_delimited() { return bytes(static_cast<size_t>(varint())); }

  uint64_t fixed(size_t n) {
    const std::string_view b = bytes(n);
    uint64_t v = 0;
    std::memcpy(&v, b.data(), n);  // little-endian hosts (x86-64, aarch64)
    return v;
  }

  /// Skips a field of wire type `wt`.
  void skip(uint32_t wt) {
    switch (wt) {
      case 0:
        varint();
        return;
      case 1:
        bytes(8);
        return;
      case 2:
        length_delimited();
        return;
      case 5:
        bytes(4);
        return;
      default:
        fail("unsupported wire type " + std::to_string(wt));
    }
  }

  /// A nested reader for a length-delimited field.
  WireReader sub() {
    const size_t len = static_cast<size_t>(varint());
    const size_t at = offset();
    return WireReader(bytes(len), file_, at);
  }

 private:
  std::string_view bytes_;
  const std::string& file_;
  size_t base_;
  size_t pos_ = 0;
};

int64_t zigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

double as_double(uint64_t bits) {
  double d = 0.0;
  std::memcpy(&d, &bits, 8);
  return d;
}

float as_float(uint64_t bits) {
  const auto b32 = static_cast<uint32_t>(bits);
  float f = 0.0f;
  std::memcpy(&f, &b32, 4);
  return f;
}

/// The values of a *List message (field 1, packed or not) of scalar `field` type.
void read_list(WireReader r, uint32_t field, ChakraAttr& a) {
  // field numbers of AttributeProto: even = list types; the element type follows the scalar one
  // (field - 1): 3 double, 5 float, 7 int32, 9 int64, 11 uint32, 13 uint64, 15 sint32,
  // 17 sint64, 19 fixed32, 21 fixed64, 23 sfixed32, 25 sfixed64, 27 bool, 29 string, 31 bytes.
  const uint32_t scalar = field - 1;
  auto element = [&](WireReader& e, uint32_t wt) {
    switch (scalar) {
      case 3:
        a.doubles.push_back(as_double(e.fixed(8)));
        break;
      case 5:
        a.doubles.push_back(static_cast<double>(as_float(e.fixed(4))));
        break;
      case 15:
      case 17:
        a.ints.push_back(zigzag(e.varint()));
        break;
      case 19:
      case 23:
        a.ints.push_back(static_cast<int32_t>(e.fixed(4)));
        break;
      case 21:
      case 25:
        a.ints.push_back(static_cast<int64_t>(e.fixed(8)));
        break;
      case 29:
      case 31:
        a.strings.emplace_back(wt == 2 ? e.length_delimited() : std::string_view());
        break;
      default:  // int32, int64, uint32, uint64, bool
        a.ints.push_back(static_cast<int64_t>(e.varint()));
        break;
    }
  };
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto wt = static_cast<uint32_t>(key & 7);
    if ((key >> 3) != 1) {
      r.skip(wt);
      continue;
    }
    if (wt == 2 && scalar != 29 && scalar != 31) {  // packed scalars
      WireReader packed = r.sub();
      while (!packed.done())
        element(packed, scalar == 3 || scalar == 21 || scalar == 25 ? 1 : 0);
    } else {
      element(r, wt);
    }
  }
  if (scalar == 3 || scalar == 5) {
    a.kind = ChakraAttr::Kind::kDoubleList;
  } else if (scalar == 29 || scalar == 31) {
    a.kind = ChakraAttr::Kind::kStringList;
  } else {
    a.kind = ChakraAttr::Kind::kIntList;
  }
}

ChakraAttr read_attr(WireReader r) {
  ChakraAttr a;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3);
    const auto wt = static_cast<uint32_t>(key & 7);
    if (field == 1 && wt == 2) {
      a.name = std::string(r.length_delimited());
    } else if (field >= 4 && field <= 32 && field % 2 == 0 && wt == 2) {
      read_list(r.sub(), field, a);
    } else if (field == 3 && wt == 1) {
      a.kind = ChakraAttr::Kind::kDouble;
      a.d = as_double(r.fixed(8));
    } else if (field == 5 && wt == 5) {
      a.kind = ChakraAttr::Kind::kDouble;
      a.d = static_cast<double>(as_float(r.fixed(4)));
    } else if ((field == 15 || field == 17) && wt == 0) {
      a.i = zigzag(r.varint());
    } else if ((field == 19 || field == 23) && wt == 5) {
      a.i = static_cast<int32_t>(r.fixed(4));
    } else if ((field == 21 || field == 25) && wt == 1) {
      a.i = static_cast<int64_t>(r.fixed(8));
    } else if (field == 27 && wt == 0) {
      a.kind = ChakraAttr::Kind::kBool;
      a.b = r.varint() != 0;
      a.i = a.b ? 1 : 0;
    } else if ((field == 29 || field == 31) && wt == 2) {
      a.kind = ChakraAttr::Kind::kString;
      a.s = std::string(r.length_delimited());
    } else if (field >= 7 && field <= 13 && wt == 0) {  // int32, int64, uint32, uint64
      a.i = static_cast<int64_t>(r.varint());
    } else {
      r.skip(wt);
    }
  }
  return a;
}

/// Repeated uint64 (packed or not).
void read_ids(WireReader& r, uint32_t wt, std::vector<uint64_t>& out) {
  if (wt == 2) {
    WireReader packed = r.sub();
    while (!packed.done())
      out.push_back(packed.varint());
  } else if (wt == 0) {
    out.push_back(r.varint());
  } else {
    r.fail("dependency ids with wire type " + std::to_string(wt));
  }
}

ChakraNode read_node(WireReader r) {
  ChakraNode n;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3);
    const auto wt = static_cast<uint32_t>(key & 7);
    switch (field) {
      case 1:
        n.id = wt == 0 ? r.varint() : (r.skip(wt), 0);
        break;
      case 2:
        if (wt != 2) r.fail("node name is not a string");
        n.name = std::string(r.length_delimited());
        break;
      case 3:
        n.type = wt == 0 ? static_cast<uint32_t>(r.varint()) : (r.skip(wt), 0u);
        break;
      case 4:
        read_ids(r, wt, n.ctrl_deps);
        break;
      case 5:
        read_ids(r, wt, n.data_deps);
        break;
      case 6:
        n.start_time_micros = wt == 0 ? r.varint() : (r.skip(wt), 0);
        break;
      case 7:
        n.duration_micros = wt == 0 ? r.varint() : (r.skip(wt), 0);
        break;
      case 10:
        if (wt != 2) r.fail("node attribute is not a message");
        n.attrs.push_back(read_attr(r.sub()));
        break;
      default:
        r.skip(wt);
    }
  }
  return n;
}

}  // namespace

ChakraTrace parse_chakra_trace(std::string_view bytes, const std::string& file) {
  ChakraTrace t;
  t.file = file;
  if (bytes.empty()) throw TraceError(file, "empty file: not a Chakra trace");
  WireReader r(bytes, t.file, 0);
  bool first = true;
  while (!r.done()) {
    WireReader msg = r.sub();
    if (first) {
      first = false;
      while (!msg.done()) {
        const uint64_t key = msg.varint();
        const auto field = static_cast<uint32_t>(key >> 3);
        const auto wt = static_cast<uint32_t>(key & 7);
        if (field == 1 && wt == 2) {
          t.version = std::string(msg.length_delimited());
        } else if (field == 2 && wt == 2) {
          t.metadata.push_back(read_attr(msg.sub()));
        } else {
          msg.skip(wt);
        }
      }
      continue;
    }
    t.nodes.push_back(read_node(msg));
  }
  return t;
}

ChakraTrace read_chakra_trace(const std::filesystem::path& path) {
  const std::string bytes = read_trace_file(path);
  return parse_chakra_trace(bytes, path.string());
}

namespace {

std::optional<CollectiveKind> chakra_collective_kind(int64_t comm_type) {
  switch (comm_type) {
    case 0:  // ALL_REDUCE
    case 1:  // REDUCE
    case 9:  // BARRIER (no bytes)
      return CollectiveKind::kAllReduce;
    case 2:  // ALL_GATHER
    case 3:  // GATHER
      return CollectiveKind::kAllGather;
    case 4:  // SCATTER
    case 5:  // BROADCAST
      return CollectiveKind::kBroadcast;
    case 6:
      return CollectiveKind::kAllToAll;
    case 7:  // REDUCE_SCATTER
    case 8:  // REDUCE_SCATTER_BLOCK
      return CollectiveKind::kReduceScatter;
    default:
      return std::nullopt;
  }
}

int64_t attr_int(const ChakraNode& n, std::string_view key, int64_t fallback) {
  const ChakraAttr* a = n.attr(key);
  return a ? a->i : fallback;
}

struct ChakraCollective {
  size_t node = 0;
  std::string key;
};

}  // namespace

TraceGraphInfo build_chakra_graph(const std::vector<ChakraTrace>& traces, TaskGraph& graph,
                                  const ChakraGraphOptions& options) {
  if (traces.empty()) throw TraceError("(no file)", "no Chakra trace to build a graph from");
  // Per rank: node order by id, and the collectives in that order.
  std::vector<std::vector<size_t>> order(traces.size());
  std::vector<std::vector<ChakraCollective>> colls(traces.size());
  for (size_t r = 0; r < traces.size(); ++r) {
    const auto& nodes = traces[r].nodes;
    order[r].resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
      order[r][i] = i;
    std::stable_sort(order[r].begin(), order[r].end(),
                     [&](size_t a, size_t b) { return nodes[a].id < nodes[b].id; });
    std::map<std::string, size_t> per_pg;
    for (size_t i : order[r]) {
      if (nodes[i].type != static_cast<uint32_t>(ChakraNodeType::kCommColl)) continue;
      const ChakraAttr* pg = nodes[i].attr("pg_name");
      const std::string pg_name = pg && pg->kind == ChakraAttr::Kind::kString ? pg->s : "";
      colls[r].push_back(ChakraCollective{i, pg_name + "/" + std::to_string(per_pg[pg_name]++)});
    }
  }
  // Groups across ranks.
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> members;  // key -> (rank, node)
  std::vector<std::string> keys;
  for (size_t r = 0; r < traces.size(); ++r) {
    for (const ChakraCollective& c : colls[r]) {
      auto [it, inserted] = members.try_emplace(c.key);
      if (inserted) keys.push_back(c.key);
      it->second.emplace_back(r, c.node);
    }
  }
  std::vector<std::unordered_map<size_t, CollectiveId>> group_of(traces.size());
  std::vector<std::unordered_map<size_t, int64_t>> group_ps(traces.size());
  TraceGraphInfo info;
  for (const std::string& key : keys) {
    const auto& m = members.at(key);
    if (traces.size() > 1 && m.size() != traces.size()) {
      std::string present;
      for (const auto& [r, n] : m)
        present += (present.empty() ? "" : ", ") + std::to_string(r);
      throw TraceError(traces[m.front().first].file,
                       "collective " + key +
                           " (process group/position) is in the traces of "
                           "ranks " +
                           present + " only: the traces do not belong to one run");
    }
    const ChakraNode& first = traces[m.front().first].nodes[m.front().second];
    CollectiveDesc desc;
    desc.kind = chakra_collective_kind(attr_int(first, "comm_type", 0))
                    .value_or(CollectiveKind::kAllReduce);
    int64_t ps = INT64_MAX;
    for (const auto& [r, n] : m) {
      desc.members.push_back(static_cast<RankId>(r));
      const ChakraNode& node = traces[r].nodes[n];
      desc.bytes = std::max(desc.bytes, attr_int(node, "comm_size", 0));
      ps = std::min(ps, static_cast<int64_t>(node.duration_micros) * 1'000'000);
    }
    if (desc.kind == CollectiveKind::kAllToAll) {
      const auto n = static_cast<int64_t>(m.size());
      desc.send_bytes.assign(static_cast<size_t>(n * n), desc.bytes / n);
    }
    const CollectiveId id = graph.add_collective_group(desc, first.name + " " + key);
    ++info.collective_groups;
    for (const auto& [r, n] : m) {
      group_of[r][n] = id;
      group_ps[r][n] = ps;
    }
  }

  for (size_t r = 0; r < traces.size(); ++r) {
    const ChakraTrace& t = traces[r];
    const auto& nodes = t.nodes;
    TraceRankSummary s;
    s.file = t.file;
    s.device = "GPU";
    // Streams: attr `stream` of GPU nodes; collectives default to their own stream.
    std::map<int64_t, uint16_t> stream_index;
    constexpr int64_t kCommStream = -1;
    auto stream_of = [&](const ChakraNode& n) {
      if (const ChakraAttr* a = n.attr("stream")) return a->i;
      return n.type == static_cast<uint32_t>(ChakraNodeType::kCommColl) ? kCommStream : 0;
    };
    auto is_cpu = [](const ChakraNode& n) {
      const ChakraAttr* a = n.attr("is_cpu_op");
      return a && a->i != 0;
    };
    auto has_task = [&](const ChakraNode& n) {
      const auto type = static_cast<ChakraNodeType>(n.type);
      return type == ChakraNodeType::kComp || type == ChakraNodeType::kCommColl ||
             type == ChakraNodeType::kMemLoad || type == ChakraNodeType::kMemStore ||
             type == ChakraNodeType::kCommSend || type == ChakraNodeType::kCommRecv;
    };
    for (size_t i : order[r]) {
      if (has_task(nodes[i]) && !is_cpu(nodes[i])) stream_index.emplace(stream_of(nodes[i]), 0);
    }
    RankInfo rank_info;
    rank_info.name = "rank " + std::to_string(graph.rank_count()) + " (" +
                     std::filesystem::path(t.file).filename().string() + ")";
    rank_info.cpu_threads = 1;
    uint16_t next = 0;
    for (auto& [stream, index] : stream_index) {
      index = next++;
      rank_info.stream_names.push_back(stream == kCommStream ? "comm"
                                                             : "stream " + std::to_string(stream));
    }
    const RankId rank = graph.add_rank(rank_info);
    s.rank = rank;
    s.cpu_threads = 1;
    s.streams = next;

    std::unordered_map<uint64_t, size_t> node_of_id;
    for (size_t i = 0; i < nodes.size(); ++i)
      node_of_id.emplace(nodes[i].id, i);
    std::vector<TaskId> task(nodes.size(), kNoTask);
    graph.add_iteration_mark(rank, 0, 0);
    uint64_t first_us = UINT64_MAX;
    uint64_t last_us = 0;
    for (size_t i : order[r]) {
      const ChakraNode& n = nodes[i];
      if (!has_task(n)) continue;
      first_us = std::min(first_us, n.start_time_micros);
      last_us = std::max(last_us, n.start_time_micros + n.duration_micros);
      const Duration d = Duration::from_us(static_cast<int64_t>(n.duration_micros));
      const auto type = static_cast<ChakraNodeType>(n.type);
      if (is_cpu(n)) {
        task[i] = graph.add_cpu_op(rank, 0, n.name, HostPhase::kOpBody);
        graph.set_fixed_duration(task[i], d);
        continue;
      }
      const uint16_t stream = stream_index.at(stream_of(n));
      if (type == ChakraNodeType::kCommColl) {
        task[i] = graph.add_collective(rank, stream, group_of[r].at(i), n.name);
        graph.set_fixed_duration(task[i], Duration::from_ps(group_ps[r].at(i)));
        ++s.collectives;
      } else if (type == ChakraNodeType::kMemLoad || type == ChakraNodeType::kMemStore) {
        TransferDesc td;
        td.rank = rank;
        td.bytes = attr_int(n, "tensor_size", 0);
        td.kind = type == ChakraNodeType::kMemLoad ? TransferKind::kHostToDevice
                                                   : TransferKind::kDeviceToHost;
        task[i] = graph.add_memcpy(rank, stream, n.name, n.name, td);
        graph.set_fixed_duration(task[i], d);
        ++s.copies;
      } else {
        // COMP_NODE on the GPU; point-to-point send/recv keep their measured time (their peer is
        // not matched across ranks).
        KernelDesc kd;
        kd.flops = static_cast<double>(attr_int(n, "num_ops", 0));
        kd.bytes_read = static_cast<double>(attr_int(n, "tensor_size", 0));
        task[i] = graph.add_kernel(rank, stream, n.name, n.name, kd);
        graph.set_fixed_duration(task[i], d);
        ++s.kernels;
      }
    }
    graph.add_host_sync(rank, 0, kAllStreams, "end of trace");
    graph.add_iteration_mark(rank, 0, 1);
    // Dependencies; nodes without a task pass their own dependencies through.
    std::vector<std::vector<TaskId>> through(nodes.size());
    std::vector<uint8_t> state(nodes.size(), 0);  // 0 new, 1 visiting, 2 done
    auto deps_of = [&](size_t i) {
      std::vector<uint64_t> ids = nodes[i].data_deps;
      if (options.use_ctrl_deps)
        ids.insert(ids.end(), nodes[i].ctrl_deps.begin(), nodes[i].ctrl_deps.end());
      return ids;
    };
    // The tasks a node stands for as a dependency: itself, or (no task) what it depends on.
    std::function<const std::vector<TaskId>&(size_t)> resolve =
        [&](size_t i) -> const std::vector<TaskId>& {
      if (state[i] == 2) return through[i];
      if (state[i] == 1) {
        throw TraceError(t.file, "dependency cycle through node " + std::to_string(nodes[i].id));
      }
      state[i] = 1;
      if (task[i] != kNoTask) {
        through[i] = {task[i]};
      } else {
        for (uint64_t d : deps_of(i)) {
          const auto it = node_of_id.find(d);
          if (it == node_of_id.end()) continue;
          const auto& up = resolve(it->second);
          through[i].insert(through[i].end(), up.begin(), up.end());
        }
      }
      state[i] = 2;
      return through[i];
    };
    for (size_t i : order[r]) {
      if (task[i] == kNoTask) continue;
      for (uint64_t d : deps_of(i)) {
        const auto it = node_of_id.find(d);
        if (it == node_of_id.end()) {
          throw TraceError(t.file, "node " + std::to_string(nodes[i].id) + " depends on node " +
                                       std::to_string(d) + ", which the trace does not have");
        }
        for (TaskId before : resolve(it->second)) {
          if (before != task[i]) graph.add_dependency(before, task[i]);
        }
      }
    }
    TraceIteration it;
    it.start_mark = 0;
    it.end_mark = 1;
    it.label = "trace span";
    it.measured = first_us == UINT64_MAX
                      ? Duration::zero()
                      : Duration::from_us(static_cast<int64_t>(last_us - first_us));
    s.iterations.push_back(it);
    info.ranks.push_back(std::move(s));
  }
  return info;
}

}  // namespace upsim
