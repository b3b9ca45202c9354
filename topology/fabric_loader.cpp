#include "topology/fabric_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/config/quantity_parse.h"

namespace upsim {

namespace {

/// Below 1 MB/s a link's routing cost (latency + 1 MiB / bandwidth, fabric.h) could add up to
/// more than the route search can represent; no real interconnect is that slow.
constexpr double kMinBandwidthBytesPerSecond = 1e6;
// 1 PB/s: a thousand times an NVLink5 GPU's 1.8 TB/s, so any what-if fits.
constexpr double kMaxBandwidthBytesPerSecond = 1e15;

constexpr std::array<std::string_view, 6> kDeviceKindNames = {"gpu",      "cpu", "pcie_switch",
                                                              "nvswitch", "nic", "network_switch"};
constexpr std::array<std::string_view, 3> kNetworkTopologies = {"rail_optimized", "fat_tree",
                                                                "leaf_spine"};

struct LinkSpec {
  std::string kind;
  Bandwidth bandwidth;
  Duration latency;
  /// The value that states `bandwidth` (the link's own, or its link_kinds entry's).
  std::optional<ConfigNode> bandwidth_at;
};

/// A link of a PCIe kind (see the header): pcie3, pcie4, pcie5, pcie_gen4, ...
bool is_pcie_kind(std::string_view kind) {
  return kind.starts_with("pcie");
}

/// "`node.link_kinds.pcie4.bandwidth` (file:line)", or "(--set)" for a value --set gave.
std::string located(const ConfigNode& value) {
  if (value.file() == kOverrideSource) return fmt::format("`{}` (--set)", value.key_path());
  return fmt::format("`{}` ({}:{})", value.key_path(), value.file().string(), value.line());
}

struct TemplateDevice {
  std::string id;
  DeviceKind kind;
  ConfigNode decl;  ///< the `devices` entry that declared it (errors point there)
};

struct TemplateLink {
  uint32_t a;
  uint32_t b;
  LinkSpec spec;
};

/// One server as declared under `node`, with ids as written (no node prefix).
struct NodeTemplate {
  std::vector<TemplateDevice> devices;
  std::unordered_map<std::string, uint32_t> index;
  std::vector<TemplateLink> links;
  std::vector<uint32_t> nics;  ///< template indices of NICs in declaration order (= rails)
  std::optional<uint32_t> first_gpu;
};

bool is_id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

bool is_valid_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), is_id_char);
}

bool is_valid_link_kind(std::string_view kind) {
  return !kind.empty() && std::all_of(kind.begin(), kind.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// "; did you mean `gpu1`?" when a declared id is close to `wanted`, else "".
std::string id_suggestion(std::string_view wanted, const NodeTemplate& t) {
  const std::string* best = nullptr;
  size_t best_distance = std::max<size_t>(2, wanted.size() / 3) + 1;
  for (const TemplateDevice& d : t.devices) {
    const size_t distance = edit_distance(wanted, d.id);
    if (distance < best_distance) {
      best_distance = distance;
      best = &d.id;
    }
  }
  return best == nullptr ? std::string() : fmt::format("; did you mean `{}`?", *best);
}

Bandwidth read_bandwidth(const ConfigNode& n, std::string_view key) {
  const Bandwidth b = n.get_bandwidth(key);
  const double v = b.bytes_per_second();
  if (!std::isfinite(v)) n.child(key).fail("bandwidth must be finite");
  if (v <= 0.0)
    n.child(key).fail(fmt::format("bandwidth must be positive, got {}", format_bandwidth(b)));
  if (v < kMinBandwidthBytesPerSecond) {
    n.child(key).fail(
        fmt::format("bandwidth must be at least 1 MB/s, got {}", format_bandwidth(b)));
  }
  if (v > kMaxBandwidthBytesPerSecond) {
    n.child(key).fail(fmt::format("bandwidth must be at most 1 PB/s, got {}", format_bandwidth(b)));
  }
  return b;
}

Duration read_latency(const ConfigNode& n, std::string_view key) {
  const Duration d = n.get_duration(key);
  if (d > kMaxConfiguredLatency) {
    n.child(key).fail(fmt::format("latency must be at most 1 s, got {}", format_duration(d)));
  }
  return d;
}

using LinkKindTable = std::map<std::string, LinkSpec, std::less<>>;

/// kind / bandwidth / latency of a link entry (or of network.nic_link / switch_link, which pass
/// no table). With a table the kind must be one of its keys and the others default to it.
LinkSpec read_link_spec(const ConfigNode& n, const LinkKindTable* kinds) {
  LinkSpec s;
  const ConfigNode capacity = n.read_for(kFabricLinkCapacityUse);
  if (kinds != nullptr) {
    std::vector<std::string_view> names;
    names.reserve(kinds->size());
    for (const auto& entry : *kinds)
      names.push_back(entry.first);
    s.kind = n.get_choice("kind", std::span<const std::string_view>(names));
    const LinkSpec& defaults = kinds->find(s.kind)->second;
    if (capacity.has("bandwidth")) {
      s.bandwidth = read_bandwidth(capacity, "bandwidth");
      s.bandwidth_at = capacity.child("bandwidth");
    } else {
      s.bandwidth = defaults.bandwidth;
      s.bandwidth_at = defaults.bandwidth_at;
    }
    s.latency = capacity.has("latency") ? read_latency(capacity, "latency") : defaults.latency;
    return s;
  }
  s.kind = n.get_string("kind");
  if (!is_valid_link_kind(s.kind)) {
    n.child("kind").fail(fmt::format(
        "invalid link kind `{}`: use letters, digits and `_` (e.g. nvlink4, pcie5, ib_ndr)",
        s.kind));
  }
  s.bandwidth = read_bandwidth(capacity, "bandwidth");
  s.bandwidth_at = capacity.child("bandwidth");
  s.latency = read_latency(capacity, "latency");
  return s;
}

LinkKindTable read_link_kinds(const ConfigNode& table) {
  LinkKindTable kinds;
  for (const auto& [name, value] : table.map_entries()) {
    if (!is_valid_link_kind(name)) {
      value.fail(fmt::format("invalid link kind `{}`: use letters, digits and `_`", name));
    }
    const ConfigNode capacity = value.read_for(kFabricLinkCapacityUse);
    kinds.emplace(name, LinkSpec{name, read_bandwidth(capacity, "bandwidth"),
                                 read_latency(capacity, "latency"), capacity.child("bandwidth")});
  }
  return kinds;
}

void add_template_device(NodeTemplate& t, std::string id, DeviceKind kind, const ConfigNode& decl) {
  if (auto it = t.index.find(id); it != t.index.end()) {
    const ConfigNode& first = t.devices[it->second].decl;
    decl.child("id").fail(fmt::format("duplicate device id `{}`: already declared by {} (line {})",
                                      id, first.key_path(), first.line()));
  }
  if (static_cast<int64_t>(t.devices.size()) >= kMaxFabricDevices) {
    decl.fail(fmt::format("a node may declare at most {} devices", kMaxFabricDevices));
  }
  const auto index = static_cast<uint32_t>(t.devices.size());
  if (kind == DeviceKind::kNic) t.nics.push_back(index);
  if (kind == DeviceKind::kGpu && !t.first_gpu) t.first_gpu = index;
  t.index.emplace(id, index);
  t.devices.push_back(TemplateDevice{std::move(id), kind, decl});
}

void read_devices(const ConfigNode& devices, NodeTemplate& t) {
  for (const ConfigNode& item : devices.items()) {
    const std::string id = item.get_string("id");
    if (!is_valid_id(id)) {
      item.child("id").fail(fmt::format(
          "invalid device id `{}`: use letters, digits, `_`, `-` and `.` (`/` and `*` are "
          "reserved)",
          id));
    }
    const DeviceKind kind = *parse_device_kind(
        item.get_choice("kind", std::span<const std::string_view>(kDeviceKindNames)));
    if (!item.has("count")) {
      add_template_device(t, id, kind, item);
      continue;
    }
    const int64_t count = item.get_positive_int("count");
    if (count > kMaxDeviceCount) {
      item.child("count").fail(
          fmt::format("at most {} devices per entry, got {}", kMaxDeviceCount, count));
    }
    for (int64_t i = 0; i < count; ++i)
      add_template_device(t, fmt::format("{}{}", id, i), kind, item);
  }
}

/// One device reference: an id, or `name*` (ids `name` followed by one or more digits).
std::vector<uint32_t> resolve_reference(const ConfigNode& ref, const NodeTemplate& t,
                                        bool allow_pattern) {
  const std::string text = ref.as_string();
  const size_t star = text.find('*');
  if (star == std::string::npos) {
    auto it = t.index.find(text);
    if (it == t.index.end()) {
      ref.fail(fmt::format("unknown device `{}`{}", text, id_suggestion(text, t)));
    }
    return {it->second};
  }
  if (!allow_pattern) {
    ref.fail(fmt::format(
        "`{}`: `between` and `pairs` take device ids; use `from`/`to` or `mesh` for patterns",
        text));
  }
  if (star != text.size() - 1 || star == 0) {
    ref.fail(fmt::format("bad pattern `{}`: a pattern is `name*`, e.g. `gpu*`", text));
  }
  const std::string_view prefix = std::string_view(text).substr(0, star);
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < t.devices.size(); ++i) {
    const std::string_view id = t.devices[i].id;
    if (id.size() <= prefix.size() || id.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = id.substr(prefix.size());
    if (std::all_of(rest.begin(), rest.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
      out.push_back(i);
    }
  }
  if (out.empty()) ref.fail(fmt::format("pattern `{}` matches no device", text));
  return out;
}

/// A reference or a list of references, concatenated in order.
std::vector<uint32_t> resolve_group(const ConfigNode& group, const NodeTemplate& t) {
  if (!group.is_sequence()) return resolve_reference(group, t, true);
  std::vector<uint32_t> out;
  for (const ConfigNode& ref : group.items()) {
    const std::vector<uint32_t> part = resolve_reference(ref, t, true);
    out.insert(out.end(), part.begin(), part.end());
  }
  if (out.empty()) group.fail("expected at least one device");
  return out;
}

/// The two ids of `[a, b]`.
std::pair<uint32_t, uint32_t> resolve_pair(const ConfigNode& pair, const NodeTemplate& t) {
  const std::vector<ConfigNode> ends = pair.items();
  if (ends.size() != 2) {
    pair.fail(fmt::format("expected two device ids [a, b], got {} entries", ends.size()));
  }
  return {resolve_reference(ends[0], t, false)[0], resolve_reference(ends[1], t, false)[0]};
}

/// The endpoint pairs of one `links` entry, each with the value to blame for it.
std::vector<std::pair<std::pair<uint32_t, uint32_t>, ConfigNode>> link_endpoints(
    const ConfigNode& item, const NodeTemplate& t) {
  const bool between = item.has("between");
  const bool pairs = item.has("pairs");
  const bool from_to = item.has("from") || item.has("to");
  const bool mesh = item.has("mesh");
  if (int{between} + int{pairs} + int{from_to} + int{mesh} != 1) {
    item.fail("a link entry needs exactly one of `between`, `pairs`, `from`/`to` or `mesh`");
  }
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, ConfigNode>> out;
  if (between) {
    const ConfigNode value = item.child("between");
    out.emplace_back(resolve_pair(value, t), value);
  } else if (pairs) {
    const ConfigNode value = item.child("pairs");
    for (const ConfigNode& pair : value.items())
      out.emplace_back(resolve_pair(pair, t), pair);
    if (out.empty()) value.fail("expected at least one pair");
  } else if (from_to) {
    const std::vector<uint32_t> from = resolve_group(item.child("from"), t);
    const ConfigNode to_node = item.child("to");
    const std::vector<uint32_t> to = resolve_group(to_node, t);
    for (uint32_t b : to) {
      if (std::find(from.begin(), from.end(), b) != from.end()) {
        to_node.fail(fmt::format(
            "`{}` is in both `from` and `to`; use `mesh` to link every two devices of a group",
            t.devices[b].id));
      }
    }
    if (static_cast<double>(from.size()) * static_cast<double>(to.size()) >
        static_cast<double>(kMaxFabricLinks)) {
      item.fail(fmt::format("more than {} links", kMaxFabricLinks));
    }
    for (uint32_t a : from) {
      for (uint32_t b : to)
        out.emplace_back(std::make_pair(a, b), item);
    }
  } else {
    const ConfigNode value = item.child("mesh");
    const std::vector<uint32_t> group = resolve_group(value, t);
    if (group.size() < 2) value.fail("a mesh needs at least two devices");
    if (static_cast<double>(group.size()) * static_cast<double>(group.size()) / 2.0 >
        static_cast<double>(kMaxFabricLinks)) {
      value.fail(fmt::format("more than {} links", kMaxFabricLinks));
    }
    for (size_t i = 0; i < group.size(); ++i) {
      for (size_t j = i + 1; j < group.size(); ++j)
        out.emplace_back(std::make_pair(group[i], group[j]), value);
    }
  }
  return out;
}

void read_links(const ConfigNode& links, const LinkKindTable* kinds, NodeTemplate& t) {
  // Unordered device pair -> the entry that linked it, to reject accidental parallel links.
  std::unordered_map<uint64_t, ConfigNode> linked;
  for (const ConfigNode& item : links.items()) {
    const auto endpoints = link_endpoints(item, t);
    LinkSpec spec = read_link_spec(item, kinds);
    const ConfigNode capacity = item.read_for(kFabricLinkCapacityUse);
    if (capacity.has("count")) {
      const int64_t count = capacity.get_positive_int("count");
      if (count > kMaxParallelLinks) {
        capacity.child("count").fail(
            fmt::format("at most {} parallel links, got {}", kMaxParallelLinks, count));
      }
      spec.bandwidth = spec.bandwidth * static_cast<double>(count);
    }
    for (const auto& [ends, blame] : endpoints) {
      const auto [a, b] = ends;
      if (a == b) blame.fail(fmt::format("a link from `{}` to itself", t.devices[a].id));
      const uint64_t key = (uint64_t{std::min(a, b)} << 32) | std::max(a, b);
      if (auto it = linked.find(key); it != linked.end()) {
        blame.fail(fmt::format(
            "`{}` and `{}` are already linked by {} (line {}); state parallel links with `count`",
            t.devices[a].id, t.devices[b].id, it->second.key_path(), it->second.line()));
      }
      if (static_cast<int64_t>(t.links.size()) >= kMaxFabricLinks) {
        item.fail(fmt::format("a node may declare at most {} links", kMaxFabricLinks));
      }
      linked.emplace(key, item);
      t.links.push_back(TemplateLink{a, b, spec});
    }
  }
}

NodeTemplate read_template(const ConfigNode& node) {
  node.expect_map("a node template: devices and links");
  NodeTemplate t;
  std::optional<LinkKindTable> kinds;
  if (auto table = node.optional_child("link_kinds")) kinds = read_link_kinds(*table);
  const ConfigNode devices = node.child("devices");
  read_devices(devices, t);
  if (!t.first_gpu) devices.fail("the node template declares no GPU");
  if (auto links = node.optional_child("links")) {
    read_links(*links, kinds ? &*kinds : nullptr, t);
  }
  return t;
}

/// The builder plus the plain adjacency the loader needs for its own checks.
struct Assembly {
  explicit Assembly(const std::string& name) : builder(name) {}

  DeviceIndex add_device(std::string id, DeviceKind kind, int32_t node) {
    const DeviceIndex d = builder.add_device(std::move(id), kind, node);
    kinds.push_back(kind);
    return d;
  }
  void add_link(DeviceIndex a, DeviceIndex b, const LinkSpec& spec) {
    builder.add_link(a, b, spec.kind, spec.bandwidth, spec.latency);
    edges.emplace_back(a, b);
  }

  FabricBuilder builder;
  std::vector<DeviceKind> kinds;
  std::vector<std::pair<DeviceIndex, DeviceIndex>> edges;
};

/// Builds the network section (see the header) on top of `nodes` copies of `t`.
void build_network(Assembly& fabric, const ConfigNode& net, const NodeTemplate& t, int64_t nodes) {
  const std::string topology =
      net.get_choice("topology", std::span<const std::string_view>(kNetworkTopologies));
  const LinkSpec nic = read_link_spec(net.child("nic_link"), nullptr);
  std::optional<LinkSpec> uplink;
  if (auto value = net.optional_child("switch_link")) uplink = read_link_spec(*value, nullptr);
  const int64_t per_leaf = net.get_positive_int_or("nodes_per_leaf", nodes);
  const ConfigNode capacity = net.read_for(kFabricLinkCapacityUse);
  const double oversubscription = capacity.get_double_in_or(
      "oversubscription", kMinOversubscription, kMaxOversubscription, 1.0);
  const auto rails = static_cast<int64_t>(t.nics.size());
  if (rails == 0) net.fail("the node template declares no NIC for the network to connect");

  const int64_t groups = (nodes + per_leaf - 1) / per_leaf;
  const bool rail_optimized = topology == "rail_optimized";
  const int64_t leaves = rail_optimized ? groups * rails : groups;
  const auto template_size = static_cast<int64_t>(t.devices.size());
  std::vector<std::vector<DeviceIndex>> leaf_nics(static_cast<size_t>(leaves));
  for (int64_t k = 0; k < nodes; ++k) {
    const int64_t group = k / per_leaf;
    for (int64_t r = 0; r < rails; ++r) {
      const int64_t leaf = rail_optimized ? group * rails + r : group;
      leaf_nics[static_cast<size_t>(leaf)].push_back(
          static_cast<DeviceIndex>(k * template_size + t.nics[static_cast<size_t>(r)]));
    }
  }

  // Uplink cables per leaf, and how many spines to build.
  std::vector<int64_t> cables(static_cast<size_t>(leaves), 0);
  int64_t spines = 0;
  if (leaves > 1) {
    if (!uplink) {
      net.fail(fmt::format(
          "`switch_link` is required: the network has {} leaf switches, joined by spines", leaves));
    }
    int64_t most = 1;
    for (size_t l = 0; l < leaf_nics.size(); ++l) {
      const double exact = static_cast<double>(leaf_nics[l].size()) *
                           nic.bandwidth.bytes_per_second() / oversubscription /
                           uplink->bandwidth.bytes_per_second();
      if (!(exact <= static_cast<double>(kMaxFabricLinks))) {
        net.fail(fmt::format("leaf{} would need more than {} uplink cables", l, kMaxFabricLinks));
      }
      // Relative slack so that 2.0000000000001 (rounding in unit conversion) stays 2 cables.
      cables[l] = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(exact * (1.0 - 1e-12))));
      most = std::max(most, cables[l]);
    }
    const int64_t asked = capacity.get_positive_int_or("spines", std::min(most, kMaxSpines));
    if (asked > kMaxSpines) {
      capacity.child("spines").fail(fmt::format("at most {} spines, got {}", kMaxSpines, asked));
    }
    spines = std::min(asked, most);
  } else if (capacity.has("spines")) {
    capacity.get_positive_int("spines");  // read so it counts as used; one leaf needs no spine
  }

  int64_t link_count = 0;
  for (size_t l = 0; l < leaf_nics.size(); ++l)
    link_count += static_cast<int64_t>(leaf_nics[l].size()) + std::min(cables[l], spines);
  const int64_t device_count = static_cast<int64_t>(fabric.kinds.size()) + leaves + spines;
  if (device_count > kMaxFabricDevices ||
      static_cast<int64_t>(fabric.edges.size()) + link_count > kMaxFabricLinks) {
    net.fail(fmt::format("the network makes the fabric larger than {} devices or {} links",
                         kMaxFabricDevices, kMaxFabricLinks));
  }

  std::vector<DeviceIndex> leaf_index;
  for (int64_t l = 0; l < leaves; ++l) {
    leaf_index.push_back(
        fabric.add_device(fmt::format("leaf{}", l), DeviceKind::kNetworkSwitch, kNoNode));
  }
  for (size_t l = 0; l < leaf_nics.size(); ++l) {
    for (DeviceIndex n : leaf_nics[l])
      fabric.add_link(n, leaf_index[l], nic);
  }
  std::vector<DeviceIndex> spine_index;
  for (int64_t s = 0; s < spines; ++s) {
    spine_index.push_back(
        fabric.add_device(fmt::format("spine{}", s), DeviceKind::kNetworkSwitch, kNoNode));
  }
  for (size_t l = 0; l < leaf_nics.size() && spines > 0; ++l) {
    // Cables dealt round robin: spine s gets one more than the rest while s < remainder.
    for (int64_t s = 0; s < spines; ++s) {
      const int64_t n = cables[l] / spines + (s < cables[l] % spines ? 1 : 0);
      if (n == 0) continue;
      LinkSpec bundle = *uplink;
      bundle.bandwidth = uplink->bandwidth * static_cast<double>(n);
      fabric.add_link(leaf_index[l], spine_index[static_cast<size_t>(s)], bundle);
    }
  }
}

/// Devices reachable from `sources` over links, never leaving a GPU that is not a source
/// (routes never pass through a GPU).
std::vector<char> reachable(const Assembly& fabric, const std::vector<DeviceIndex>& sources) {
  const size_t n = fabric.kinds.size();
  std::vector<uint32_t> first(n + 1, 0);
  for (const auto& [a, b] : fabric.edges) {
    ++first[a + 1];
    ++first[b + 1];
  }
  for (size_t v = 0; v < n; ++v)
    first[v + 1] += first[v];
  std::vector<DeviceIndex> adjacent(first[n]);
  std::vector<uint32_t> fill(first.begin(), first.end() - 1);
  for (const auto& [a, b] : fabric.edges) {
    adjacent[fill[a]++] = b;
    adjacent[fill[b]++] = a;
  }
  std::vector<char> seen(n, 0);
  std::vector<DeviceIndex> queue(sources.begin(), sources.end());
  for (DeviceIndex s : sources)
    seen[s] = 1;
  for (size_t head = 0; head < queue.size(); ++head) {
    const DeviceIndex v = queue[head];
    const bool is_source = head < sources.size();
    if (fabric.kinds[v] == DeviceKind::kGpu && !is_source) continue;
    for (uint32_t i = first[v]; i < first[v + 1]; ++i) {
      const DeviceIndex w = adjacent[i];
      if (seen[w] == 0) {
        seen[w] = 1;
        queue.push_back(w);
      }
    }
  }
  return seen;
}

std::string device_id(const NodeTemplate& t, int64_t nodes, DeviceIndex d) {
  const size_t size = t.devices.size();
  const std::string& id = t.devices[d % size].id;
  return nodes == 1 ? id : fmt::format("node{}/{}", d / size, id);
}

/// GPU-GPU and GPU-CPU reachability, checked here (not left to FabricBuilder::seal) so that the
/// error names the declaration at fault.
void check_connectivity(const Assembly& fabric, const NodeTemplate& t, int64_t nodes,
                        const ConfigNode& root) {
  const size_t size = t.devices.size();
  const auto blame = [&](DeviceIndex gpu) -> const ConfigNode& {
    return t.devices[gpu % size].decl;
  };
  const DeviceIndex g0 = *t.first_gpu;
  const std::vector<char> from_g0 = reachable(fabric, {g0});
  for (DeviceIndex d = 0; d < fabric.kinds.size(); ++d) {
    if (fabric.kinds[d] != DeviceKind::kGpu || from_g0[d] != 0) continue;
    const std::string message = fmt::format(
        "`{}` cannot reach `{}` (links missing, or every path passes through "
        "another GPU, which routes never do)",
        device_id(t, nodes, d), device_id(t, nodes, g0));
    // In node 0 the template is at fault; in other nodes (node 0 being fine up to here) the
    // way out of a node: GPU -> NIC links in the template, or the network.
    if (d < size) blame(d).fail(message);
    if (auto net = root.optional_child("network")) {
      net->fail(message + "; every GPU needs a path to a NIC of its node");
    }
    root.fail(message);
  }
  std::vector<DeviceIndex> cpus;
  for (DeviceIndex d = 0; d < fabric.kinds.size(); ++d) {
    if (fabric.kinds[d] == DeviceKind::kCpu) cpus.push_back(d);
  }
  if (cpus.empty()) return;
  const std::vector<char> from_cpus = reachable(fabric, cpus);
  for (DeviceIndex d = 0; d < fabric.kinds.size(); ++d) {
    if (fabric.kinds[d] == DeviceKind::kGpu && from_cpus[d] == 0) {
      blame(d).fail(fmt::format(
          "`{}` cannot reach any CPU (host copies need one) without passing through another GPU",
          device_id(t, nodes, d)));
    }
  }
}

/// Caps the PCIe links at GPUs of `t` at `rate` (see the header) and lists them as stated.
void apply_gpu_pcie_rate(NodeTemplate& t, const std::optional<Bandwidth>& rate,
                         std::vector<GpuPcieLink>* stated) {
  for (TemplateLink& l : t.links) {
    const bool at_gpu =
        t.devices[l.a].kind == DeviceKind::kGpu || t.devices[l.b].kind == DeviceKind::kGpu;
    if (!at_gpu || !is_pcie_kind(l.spec.kind)) continue;
    if (stated != nullptr) {
      stated->push_back(GpuPcieLink{
          fmt::format("{} -- {} ({})", t.devices[l.a].id, t.devices[l.b].id, l.spec.kind),
          l.spec.bandwidth, l.spec.bandwidth_at ? located(*l.spec.bandwidth_at) : ""});
    }
    if (rate && *rate < l.spec.bandwidth) l.spec.bandwidth = *rate;
  }
}

}  // namespace

Fabric load_fabric(const ConfigNode& root, const FabricOptions& options,
                   std::vector<GpuPcieLink>* gpu_pcie_links) {
  root.expect_map("a fabric: nodes of GPUs, switches and links");
  const std::string name = root.get_string("name");
  if (name.empty()) root.child("name").fail("the fabric name must not be empty");
  const int64_t nodes = root.get_positive_int_or("nodes", 1);
  const ConfigNode nodes_value = root.child("nodes");
  if (nodes > kMaxNodes) {
    nodes_value.fail(fmt::format("at most {} nodes are supported, got {}", kMaxNodes, nodes));
  }
  NodeTemplate t = read_template(root.load_reference("node"));
  apply_gpu_pcie_rate(t, options.gpu_pcie_rate, gpu_pcie_links);
  const std::optional<ConfigNode> net = root.optional_child("network");
  if (nodes > 1 && !net) {
    nodes_value.fail(fmt::format("{} nodes need a `network` section to connect them", nodes));
  }
  const auto template_size = static_cast<int64_t>(t.devices.size());
  if (nodes * template_size > kMaxFabricDevices ||
      nodes * static_cast<int64_t>(t.links.size()) > kMaxFabricLinks) {
    nodes_value.fail(
        fmt::format("{} nodes of {} devices and {} links exceed the limit of {} "
                    "devices and {} links",
                    nodes, template_size, t.links.size(), kMaxFabricDevices, kMaxFabricLinks));
  }

  Assembly fabric(name);
  // Ids are checked unique and links valid above, so the builder cannot refuse the template;
  // only network switch ids can collide (with template ids when nodes == 1).
  try {
    for (int64_t k = 0; k < nodes; ++k) {
      for (const TemplateDevice& d : t.devices) {
        fabric.add_device(nodes == 1 ? d.id : fmt::format("node{}/{}", k, d.id), d.kind,
                          static_cast<int32_t>(k));
      }
    }
    for (int64_t k = 0; k < nodes; ++k) {
      const auto base = static_cast<DeviceIndex>(k * template_size);
      for (const TemplateLink& l : t.links)
        fabric.add_link(base + l.a, base + l.b, l.spec);
    }
  } catch (const FabricError& e) {
    root.child("node").fail(e.what());
  }
  if (net) {
    try {
      build_network(fabric, *net, t, nodes);
    } catch (const FabricError& e) {
      net->fail(fmt::format("{} (the network names its switches leaf<i> and spine<i>)", e.what()));
    }
  }
  check_connectivity(fabric, t, nodes, root);
  try {
    return std::move(fabric.builder).seal();
  } catch (const FabricError& e) {
    root.fail(fmt::format("invalid fabric: {}", e.what()));
  }
}

}  // namespace upsim

namespace upsim {

std::span<const KeyMeaning> fabric_key_meanings() {
  static constexpr KeyMeaning kMeanings[] = {
      {"name", "the fabric's name"},
      {"nodes", "servers built from the `node` template"},
      {"node", "the template of one server (a map or a file)"},
      {"node.link_kinds.*.bandwidth",
       "default bandwidth of a link of that kind, per physical link and direction"},
      {"node.link_kinds.*.latency", "default one-way latency of a link of that kind"},
      {"node.devices[].id", "device id (with count: the prefix of id0 .. id<count-1>)"},
      {"node.devices[].kind", "gpu, cpu, pcie_switch, nvswitch, nic or network_switch"},
      {"node.devices[].count", "devices this entry declares"},
      {"node.links[].between[]", "one link between these two devices"},
      {"node.links[].pairs[][]", "one link per pair of devices"},
      {"node.links[].from", "a link from every device of this reference to every one of `to`"},
      {"node.links[].from[]", "a link from every device of these references to every one of `to`"},
      {"node.links[].to", "the other ends of the links from `from`"},
      {"node.links[].mesh", "one link between every two devices of this reference"},
      {"node.links[].kind", "the link technology (a key of link_kinds)"},
      {"node.links[].count", "parallel physical links, modelled as one link of count x bandwidth"},
      {"network.topology",
       "how the nodes' NICs are connected: rail_optimized, fat_tree or leaf_spine"},
      {"network.nic_link.kind", "technology of a NIC's link to its leaf switch"},
      {"network.nic_link.bandwidth", "bandwidth of a NIC's link, per direction"},
      {"network.nic_link.latency", "one-way latency of a NIC's link"},
      {"network.switch_link.kind", "technology of a leaf-spine cable"},
      {"network.switch_link.bandwidth", "bandwidth of one leaf-spine cable, per direction"},
      {"network.switch_link.latency", "one-way latency of a leaf-spine cable"},
      {"network.nodes_per_leaf", "nodes under one leaf switch (per rail when rail_optimized)"},
      {"network.oversubscription", "a leaf's downlink bandwidth over its uplink bandwidth"},
      {"network.spines", "spine switches at most"},
  };
  return kMeanings;
}

}  // namespace upsim
