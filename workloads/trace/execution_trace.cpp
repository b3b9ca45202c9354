#include "workloads/trace/execution_trace.h"

#include <algorithm>
#include <map>

#include "sim/formats/parse_error.h"
#include "workloads/trace/trace_file.h"

namespace upsim {

const JsonValue* EtNode::attr(std::string_view key) const {
  for (const auto& [k, v] : attrs) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool EtNode::is_root() const {
  return name.starts_with("[pytorch|profiler|") || name == "__ROOT_PROCESS__" ||
         name == "__ROOT_THREAD__";
}

namespace {

std::vector<std::string> string_list(const JsonValue& v) {
  std::vector<std::string> out;
  for (const JsonValue& item : v.items)
    out.push_back(item.is_string() ? item.string : std::string());
  return out;
}

int64_t as_int(const JsonValue& v, int64_t fallback = -1) {
  if (v.is_number()) return v.integer;
  if (v.is_string()) {
    int64_t x = 0;
    bool any = false;
    for (char c : v.string) {
      if (c < '0' || c > '9' || !append_decimal_digit(x, c)) return fallback;
      any = true;
    }
    return any ? x : fallback;
  }
  return fallback;
}

/// "[96, 224, 288]" (1.1.x attrs store split sizes as text) or a JSON list -> integers.
std::vector<int64_t> int_list(const JsonValue& v) {
  std::vector<int64_t> out;
  if (v.is_array()) {
    for (const JsonValue& item : v.items) {
      if (item.is_number()) out.push_back(item.integer);
    }
    return out;
  }
  if (v.is_string()) {
    // A number beyond int64 reads as -1, which no split size or rank is.
    int64_t x = 0;
    bool in_number = false;
    bool negative = false;
    bool overflow = false;
    const auto finish = [&] {
      if (in_number) out.push_back(overflow ? -1 : (negative ? -x : x));
    };
    for (char c : v.string) {
      if (c >= '0' && c <= '9') {
        overflow = overflow || !append_decimal_digit(x, c);
        in_number = true;
      } else {
        finish();
        negative = c == '-';
        x = 0;
        in_number = false;
        overflow = false;
      }
    }
    finish();
  }
  return out;
}

void read_io(JsonValue& io, JsonValue& values, JsonValue& shapes, std::vector<std::string>& types) {
  if (!io.is_object()) return;
  for (auto& [k, v] : io.members) {
    if (k == "values") values = std::move(v);
    if (k == "shapes") shapes = std::move(v);
    if (k == "types") types = string_list(v);
  }
}

EtNode make_node(JsonValue&& obj, JsonCursor& cur, size_t node_offset) {
  if (!obj.is_object()) cur.fail_at(node_offset, "an execution-trace node must be an object");
  EtNode n;
  for (auto& [k, v] : obj.members) {
    if (k == "id") {
      n.id = as_int(v);
    } else if (k == "name") {
      n.name = v.string;
    } else if (k == "parent" || k == "ctrl_deps") {
      n.parent = as_int(v);
    } else if (k == "rf_id") {
      n.rf_id = as_int(v);
    } else if (k == "tid") {
      n.tid = as_int(v);
    } else if (k == "seq_id") {
      n.seq_id = as_int(v);
    } else if (k == "op_schema") {
      n.op_schema = v.string;
    } else if (k == "inputs") {
      if (v.is_object()) {
        read_io(v, n.inputs, n.input_shapes, n.input_types);
      } else {
        n.inputs = std::move(v);
      }
    } else if (k == "outputs") {
      if (v.is_object()) {
        read_io(v, n.outputs, n.output_shapes, n.output_types);
      } else {
        n.outputs = std::move(v);
      }
    } else if (k == "input_shapes") {
      n.input_shapes = std::move(v);
    } else if (k == "input_types") {
      n.input_types = string_list(v);
    } else if (k == "output_shapes") {
      n.output_shapes = std::move(v);
    } else if (k == "output_types") {
      n.output_types = string_list(v);
    } else if (k == "attrs" && v.is_array()) {
      for (JsonValue& a : v.items) {
        const JsonValue* name = a.find("name");
        const JsonValue* value = a.find("value");
        if (!name || !name->is_string() || !value) continue;
        const std::string& an = name->string;
        if (an == "rf_id") {
          n.rf_id = as_int(*value);
        } else if (an == "tid") {
          n.tid = as_int(*value);
        } else if (an == "seq_id") {
          n.seq_id = as_int(*value);
        } else if (an == "op_schema") {
          n.op_schema = value->string;
        } else {
          n.attrs.emplace_back(an, *value);
        }
      }
    }
  }
  if (n.id < 0) cur.fail_at(node_offset, "an execution-trace node without an `id`");
  return n;
}

/// `## process_group:init ##` carries a JSON text listing the process groups.
void read_process_groups(const EtNode& node, std::vector<EtProcessGroup>& out,
                         const std::string& file) {
  if (!node.inputs.is_array() || node.inputs.items.empty()) return;
  const JsonValue& text = node.inputs.items.front();
  if (!text.is_string()) return;
  JsonCursor cur(text.string, file + " (## process_group:init ##)");
  const JsonValue groups = read_json_value(cur);
  for (const JsonValue& g : groups.items) {
    EtProcessGroup pg;
    if (const JsonValue* v = g.find("pg_name")) pg.name = v->is_string() ? v->string : "";
    if (const JsonValue* v = g.find("pg_desc")) pg.desc = v->is_string() ? v->string : "";
    if (const JsonValue* v = g.find("ranks")) pg.ranks = int_list(*v);
    if (const JsonValue* v = g.find("group_size")) pg.size = as_int(*v);
    out.push_back(std::move(pg));
  }
}

}  // namespace

ExecutionTrace parse_execution_trace(std::string_view text, const std::string& file) {
  JsonCursor cur(text, file);
  ExecutionTrace et;
  et.file = file;
  if (cur.at_end()) cur.fail("empty file: not an execution trace");
  if (cur.peek() != JsonType::kObject) {
    cur.fail("not an execution trace: the document is not a JSON object");
  }
  cur.begin_object();
  bool have_nodes = false;
  std::string_view key;
  while (cur.next_member(key)) {
    if (key == "schema") {
      et.schema = cur.peek() == JsonType::kString ? std::string(cur.string()) : (cur.skip(), "");
    } else if (key == "pid") {
      et.pid = cur.peek() == JsonType::kNumber ? cur.integer() : (cur.skip(), -1);
    } else if (key == "time") {
      et.time = cur.peek() == JsonType::kString ? std::string(cur.string()) : (cur.skip(), "");
    } else if (key == "nodes") {
      if (cur.peek() != JsonType::kArray) cur.fail("`nodes` must be an array");
      have_nodes = true;
      cur.begin_array();
      while (cur.next_element()) {
        const size_t at = cur.offset();
        et.nodes.push_back(make_node(read_json_value(cur), cur, at));
      }
    } else {
      cur.skip();
    }
  }
  if (!cur.at_end()) cur.fail("unexpected text after the end of the JSON document");
  if (!have_nodes) throw ParseError(file, "not an execution trace: no `nodes` array");
  for (const EtNode& n : et.nodes) {
    if (n.name == "## process_group:init ##") read_process_groups(n, et.process_groups, file);
  }
  return et;
}

ExecutionTrace read_execution_trace(const std::filesystem::path& path) {
  const std::string text = read_trace_file(path);
  return parse_execution_trace(text, path.string());
}

int64_t et_tensor_bytes(const JsonValue& value) {
  if (!value.is_array()) return -1;
  // A tensor: [id, storage id, offset, elements, bytes per element, device].
  if (value.items.size() == 6 && value.items[3].is_number() && value.items[4].is_number() &&
      value.items[5].is_string()) {
    return value.items[3].integer * value.items[4].integer;
  }
  int64_t total = -1;
  for (const JsonValue& item : value.items) {
    const int64_t b = et_tensor_bytes(item);
    if (b >= 0) total = std::max<int64_t>(total, 0) + b;
  }
  return total;
}

namespace {

/// Bytes per element of the first tensor inside `value`, or -1.
int64_t first_elem_bytes(const JsonValue& value) {
  if (!value.is_array()) return -1;
  if (value.items.size() == 6 && value.items[4].is_number() && value.items[5].is_string()) {
    return value.items[4].integer;
  }
  for (const JsonValue& item : value.items) {
    const int64_t b = first_elem_bytes(item);
    if (b > 0) return b;
  }
  return -1;
}

bool is_collective_name(std::string_view s) {
  static constexpr std::string_view kNames[] = {"allreduce",
                                                "all_reduce",
                                                "allreduce_coalesced",
                                                "allgather",
                                                "all_gather",
                                                "_allgather_base",
                                                "allgather_into_tensor_coalesced",
                                                "allgather_coalesced",
                                                "reduce_scatter",
                                                "_reduce_scatter_base",
                                                "reduce_scatter_tensor_coalesced",
                                                "all_to_all",
                                                "all_to_allv",
                                                "alltoall",
                                                "alltoall_base",
                                                "broadcast",
                                                "reduce",
                                                "gather",
                                                "scatter",
                                                "send",
                                                "recv",
                                                "barrier",
                                                "wait"};
  return std::find(std::begin(kNames), std::end(kNames), s) != std::end(kNames);
}

}  // namespace

std::optional<EtCollective> et_collective(const EtNode& node) {
  if (node.name != "record_param_comms") return std::nullopt;
  EtCollective c;
  const auto& in = node.inputs.items;
  // Positional layout (c10d RECORD_PARAM_COMMS): [tensors,] seq, process group, rank, name,
  // in_split, out_split[, global_rank_start, global_rank_stride, world_size]. "wait" records
  // have no tensor.
  size_t name_at = in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].is_string() && is_collective_name(in[i].string)) {
      name_at = i;
      break;
    }
  }
  if (name_at < in.size()) {
    c.name = in[name_at].string;
    if (name_at >= 3) {
      const JsonValue& pg = in[name_at - 2];
      if (pg.is_array() && !pg.items.empty() && pg.items.front().is_string()) {
        c.pg = pg.items.front().string;
      } else if (pg.is_number()) {
        c.pg = std::to_string(pg.integer);
      } else if (pg.is_string()) {
        c.pg = pg.string;
      }
      if (in[name_at - 3].is_number()) c.seq = in[name_at - 3].integer;
    }
    if (name_at >= 4) {
      c.in_bytes = et_tensor_bytes(in[0]);
      c.elem_bytes = first_elem_bytes(in[0]);
    }
    if (name_at + 1 < in.size()) c.in_split = int_list(in[name_at + 1]);
    if (name_at + 2 < in.size()) c.out_split = int_list(in[name_at + 2]);
    if (name_at + 5 < in.size() && in[name_at + 3].is_number() && in[name_at + 4].is_number() &&
        in[name_at + 5].is_number()) {
      const int64_t start = in[name_at + 3].integer;
      const int64_t stride = in[name_at + 4].integer;
      const int64_t size = in[name_at + 5].integer;
      if (start >= 0 && stride > 0 && size > 0 && size <= (int64_t{1} << 20)) {
        c.pg_size = size;
        for (int64_t i = 0; i < size; ++i)
          c.pg_ranks.push_back(start + i * stride);
      }
    }
  }
  if (node.outputs.is_array() && !node.outputs.items.empty()) {
    c.out_bytes = et_tensor_bytes(node.outputs.items.front());
  }
  // 1.1.x attributes are authoritative where present.
  if (const JsonValue* v = node.attr("collective_name"); v && v->is_string()) c.name = v->string;
  if (const JsonValue* v = node.attr("pg_name"); v && v->is_string()) c.pg = v->string;
  if (const JsonValue* v = node.attr("pg_size")) c.pg_size = as_int(*v);
  if (const JsonValue* v = node.attr("in_msg_nelems")) c.in_elems = as_int(*v);
  if (const JsonValue* v = node.attr("out_msg_nelems")) c.out_elems = as_int(*v);
  if (const JsonValue* v = node.attr("in_split_size")) c.in_split = int_list(*v);
  if (const JsonValue* v = node.attr("out_split_size")) c.out_split = int_list(*v);
  if (c.name.empty()) return std::nullopt;
  if (c.elem_bytes > 0 && c.in_elems >= 0 && c.in_bytes < 0) c.in_bytes = c.in_elems * c.elem_bytes;
  if (c.elem_bytes > 0 && c.out_elems >= 0 && c.out_bytes < 0) {
    c.out_bytes = c.out_elems * c.elem_bytes;
  }
  if (c.elem_bytes > 0 && c.in_bytes >= 0 && c.in_elems < 0) c.in_elems = c.in_bytes / c.elem_bytes;
  return c;
}

namespace {

/// Host ops of one Kineto thread in record-function order, as name ids.
struct KinetoThreadOps {
  int64_t tid = -1;
  std::vector<uint32_t> events;
};

struct EtThreadOps {
  int64_t tid = -1;
  std::vector<uint32_t> nodes;
};

constexpr size_t kResyncWindow = 8;
constexpr size_t kProbeLength = 64;
constexpr size_t kMaxFullAlignments = 64;

/// Greedy alignment of `et` names against `kineto` names starting at kineto position `start`.
/// Calls link(i, j) for each matched pair; returns the number of matches.
template <typename Eq, typename Link>
size_t align_from(size_t et_size, size_t kineto_size, size_t start, size_t limit, Eq eq,
                  Link link) {
  size_t i = 0;
  size_t j = start;
  size_t matched = 0;
  while (i < et_size && j < kineto_size && i < limit) {
    if (eq(i, j)) {
      link(i, j);
      ++matched;
      ++i;
      ++j;
      continue;
    }
    size_t skip_k = 0;
    size_t skip_e = 0;
    for (size_t d = 1; d <= kResyncWindow; ++d) {
      if (skip_k == 0 && j + d < kineto_size && eq(i, j + d)) skip_k = d;
      if (skip_e == 0 && i + d < et_size && eq(i + d, j)) skip_e = d;
      if (skip_k || skip_e) break;
    }
    if (skip_k && (!skip_e || skip_k <= skip_e)) {
      j += skip_k;
    } else if (skip_e) {
      i += skip_e;
    } else {
      ++i;
      ++j;
    }
  }
  return matched;
}

struct Alignment {
  size_t score = 0;
  size_t start = 0;
};

Alignment best_alignment(const std::vector<std::string_view>& et_names,
                         const std::vector<std::string_view>& k_names) {
  Alignment best;
  if (et_names.empty()) return best;
  auto eq = [&](size_t i, size_t j) { return et_names[i] == k_names[j]; };
  auto no_link = [](size_t, size_t) {};
  // Probe every start whose first name matches, then align the best probes in full (a Kineto
  // trace of many identical iterations has many equal probes; a prefix that matches by chance
  // loses in the full alignment).
  std::vector<Alignment> probes;
  size_t best_probe = 0;
  for (size_t s = 0; s < k_names.size(); ++s) {
    if (k_names[s] != et_names.front()) continue;
    const size_t score = align_from(et_names.size(), k_names.size(), s, kProbeLength, eq, no_link);
    best_probe = std::max(best_probe, score);
    probes.push_back(Alignment{score, s});
  }
  size_t full_alignments = 0;
  for (const Alignment& p : probes) {
    if (p.score < best_probe || full_alignments == kMaxFullAlignments) continue;
    ++full_alignments;
    const size_t score =
        align_from(et_names.size(), k_names.size(), p.start, et_names.size(), eq, no_link);
    if (score > best.score) best = Alignment{score, p.start};
  }
  return best;
}

}  // namespace

EtLink link_execution_trace(const KinetoTrace& kineto, const ExecutionTrace& et) {
  EtLink link;
  link.event_of_node.assign(et.nodes.size(), UINT32_MAX);
  for (const EtNode& n : et.nodes) {
    if (!n.is_root()) ++link.et_ops;
  }
  link.pid_match = et.pid >= 0 && et.pid == kineto_process_id(kineto);
  auto record = [&](uint32_t node, uint32_t event) {
    if (link.event_of_node[node] != UINT32_MAX) return;
    link.event_of_node[node] = event;
    link.node_of_event.emplace(event, node);
    ++link.linked;
  };

  // 1. Record-function ids.
  bool kineto_has_rf = false;
  std::unordered_map<int64_t, uint32_t> event_by_rf;
  for (uint32_t i = 0; i < kineto.events.size(); ++i) {
    const KinetoEvent& e = kineto.events[i];
    if ((e.category == KinetoCategory::kCpuOp || e.category == KinetoCategory::kUserAnnotation) &&
        e.record_function_id >= 0) {
      kineto_has_rf = true;
      event_by_rf.emplace(e.record_function_id, i);
    }
  }
  if (kineto_has_rf) {
    for (uint32_t n = 0; n < et.nodes.size(); ++n) {
      const EtNode& node = et.nodes[n];
      if (node.is_root() || node.rf_id < 0) continue;
      const auto it = event_by_rf.find(node.rf_id);
      if (it != event_by_rf.end() && kineto.name_of(kineto.events[it->second]) == node.name) {
        record(n, it->second);
      }
    }
    if (link.linked_fraction() >= kMinLinkedFraction) {
      link.by_record_function_id = true;
      return link;
    }
    link.event_of_node.assign(et.nodes.size(), UINT32_MAX);
    link.node_of_event.clear();
    link.linked = 0;
  }

  // 2. Sequence alignment per thread.
  std::map<int64_t, KinetoThreadOps> k_threads;
  for (uint32_t i = 0; i < kineto.events.size(); ++i) {
    const KinetoEvent& e = kineto.events[i];
    if (e.category != KinetoCategory::kCpuOp && e.category != KinetoCategory::kUserAnnotation) {
      continue;
    }
    KinetoThreadOps& t = k_threads[e.tid];
    t.tid = e.tid;
    t.events.push_back(i);
  }
  for (auto& [tid, t] : k_threads) {
    std::stable_sort(t.events.begin(), t.events.end(), [&](uint32_t a, uint32_t b) {
      const KinetoEvent& ea = kineto.events[a];
      const KinetoEvent& eb = kineto.events[b];
      if (ea.external_id >= 0 && eb.external_id >= 0 && ea.external_id != eb.external_id) {
        return ea.external_id < eb.external_id;
      }
      if (ea.ts_ps != eb.ts_ps) return ea.ts_ps < eb.ts_ps;
      return ea.dur_ps > eb.dur_ps;
    });
  }
  std::map<int64_t, EtThreadOps> e_threads;
  for (uint32_t n = 0; n < et.nodes.size(); ++n) {
    const EtNode& node = et.nodes[n];
    if (node.is_root()) continue;
    EtThreadOps& t = e_threads[node.tid];
    t.tid = node.tid;
    t.nodes.push_back(n);
  }
  for (auto& [tid, t] : e_threads) {
    std::stable_sort(t.nodes.begin(), t.nodes.end(), [&](uint32_t a, uint32_t b) {
      const EtNode& na = et.nodes[a];
      const EtNode& nb = et.nodes[b];
      if (na.rf_id >= 0 && nb.rf_id >= 0) return na.rf_id < nb.rf_id;
      return na.id < nb.id;
    });
  }
  struct Candidate {
    size_t score;
    int64_t et_tid;
    int64_t k_tid;
    size_t start;
  };
  std::vector<Candidate> candidates;
  std::map<int64_t, std::vector<std::string_view>> k_names;
  for (const auto& [tid, t] : k_threads) {
    auto& names = k_names[tid];
    for (uint32_t i : t.events)
      names.push_back(kineto.name_of(kineto.events[i]));
  }
  std::map<int64_t, std::vector<std::string_view>> e_names;
  for (const auto& [tid, t] : e_threads) {
    auto& names = e_names[tid];
    for (uint32_t n : t.nodes)
      names.push_back(et.nodes[n].name);
  }
  for (const auto& [etid, et_t] : e_threads) {
    for (const auto& [ktid, k_t] : k_threads) {
      const Alignment a = best_alignment(e_names[etid], k_names[ktid]);
      if (a.score > 0) candidates.push_back(Candidate{a.score, etid, ktid, a.start});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.et_tid != b.et_tid) return a.et_tid < b.et_tid;
    return a.k_tid < b.k_tid;
  });
  std::vector<int64_t> used_et;
  std::vector<int64_t> used_k;
  for (const Candidate& c : candidates) {
    if (std::find(used_et.begin(), used_et.end(), c.et_tid) != used_et.end()) continue;
    if (std::find(used_k.begin(), used_k.end(), c.k_tid) != used_k.end()) continue;
    used_et.push_back(c.et_tid);
    used_k.push_back(c.k_tid);
    const auto& en = e_names[c.et_tid];
    const auto& kn = k_names[c.k_tid];
    const auto& et_nodes = e_threads[c.et_tid].nodes;
    const auto& k_events = k_threads[c.k_tid].events;
    align_from(
        en.size(), kn.size(), c.start, en.size(),
        [&](size_t i, size_t j) { return en[i] == kn[j]; },
        [&](size_t i, size_t j) { record(et_nodes[i], k_events[j]); });
  }
  return link;
}

std::optional<std::string> et_link_problem(const EtLink& link, const KinetoTrace& kineto,
                                           const ExecutionTrace& et) {
  const int64_t kpid = kineto_process_id(kineto);
  const std::string kname = std::filesystem::path(kineto.file).filename().string();
  if (et.pid >= 0 && kpid >= 0 && et.pid != kpid) {
    return "execution trace does not belong to " + kname + ": it was recorded by process " +
           std::to_string(et.pid) + ", the Kineto trace by process " + std::to_string(kpid) + " (" +
           std::to_string(link.linked) + " of " + std::to_string(link.et_ops) +
           " ops have a match)";
  }
  if (link.linked_fraction() < kMinLinkedFraction) {
    return "execution trace does not match " + kname + ": only " + std::to_string(link.linked) +
           " of its " + std::to_string(link.et_ops) +
           " ops could be linked to Kineto ops (another run or another program?)";
  }
  return std::nullopt;
}

}  // namespace upsim
