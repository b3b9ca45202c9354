#include "workloads/trace/trace_host_overheads.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <unordered_map>

namespace upsim {

namespace {

constexpr double kT1MinGapUs = 2.0;
constexpr double kDataLoaderMinUs = 100.0;
constexpr std::string_view kLaunchNames[] = {"cudaLaunchKernel", "cudaMemcpyAsync",
                                             "cudaStreamSynchronize"};
constexpr std::string_view kIgnoredRuntime[] = {
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cudaPeekAtLastError",
    "cudaStreamGetCaptureInfo", "cudaEventQuery", "cudaEventRecord"};
constexpr std::string_view kModuleMarkers[] = {"##", "__", "module::", "DLRM ",
                                               "DistributedDataParallel"};

template <size_t N>
bool in(std::string_view s, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

struct Node {
  std::string_view name;
  KinetoCategory cat;
  int64_t tid;
  double start;  // us
  double end;
  double dur;
  Node* parent = nullptr;
  std::vector<Node*> children;

  bool is_label() const { return is_host_overhead_label(cat, name); }
  bool is_op() const { return cat == KinetoCategory::kCpuOp && !is_label(); }
  bool is_launch() const { return is_host_overhead_launch(cat, name); }
};

double us(int64_t ps) {
  return static_cast<double>(ps) / 1e6;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// The host events the extraction looks at, in file order, data loading removed. Each long
/// DataLoader event adds one body sample under its name to `loader_samples`: its duration less
/// `event_overhead_us` per host event of its thread that starts inside it.
std::vector<std::unique_ptr<Node>> load_nodes(
    const KinetoTrace& t, double event_overhead_us,
    std::map<std::string, std::vector<double>>& loader_samples) {
  std::vector<const KinetoEvent*> events;
  for (const KinetoEvent& e : t.events) {
    if (e.category != KinetoCategory::kCpuOp && e.category != KinetoCategory::kCudaRuntime &&
        e.category != KinetoCategory::kUserAnnotation) {
      continue;
    }
    if (e.category == KinetoCategory::kCudaRuntime && in(t.name_of(e), kIgnoredRuntime)) continue;
    events.push_back(&e);
  }
  std::vector<double> loaders;
  std::vector<double> forwards;
  for (const KinetoEvent* e : events) {
    const std::string_view n = t.name_of(*e);
    if (n.find("DataLoader") != std::string_view::npos && us(e->dur_ps) > kDataLoaderMinUs) {
      loaders.push_back(us(e->ts_ps));
      const double start = us(e->ts_ps);
      const double end = start + us(e->dur_ps);
      const auto inside = std::count_if(events.begin(), events.end(), [&](const KinetoEvent* o) {
        return o != e && o->tid == e->tid && start <= us(o->ts_ps) && us(o->ts_ps) < end;
      });
      loader_samples[std::string(n)].push_back(us(e->dur_ps) -
                                               event_overhead_us * static_cast<double>(inside));
    }
    if (lower(n) == "## forward ##") forwards.push_back(us(e->ts_ps));
  }
  std::sort(loaders.begin(), loaders.end());
  std::sort(forwards.begin(), forwards.end());
  std::vector<std::pair<double, double>> skipped;
  for (double s : loaders) {
    const auto f = std::upper_bound(forwards.begin(), forwards.end(), s);
    if (f != forwards.end()) skipped.emplace_back(s, *f);
  }
  std::vector<std::unique_ptr<Node>> nodes;
  for (const KinetoEvent* e : events) {
    const double start = us(e->ts_ps);
    if (std::any_of(skipped.begin(), skipped.end(),
                    [&](const auto& r) { return r.first <= start && start < r.second; })) {
      continue;
    }
    auto n = std::make_unique<Node>();
    n->name = t.name_of(*e);
    n->cat = e->category;
    n->tid = e->tid;
    n->start = start;
    n->dur = us(e->dur_ps);
    n->end = n->start + n->dur;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

/// Nests `nodes` (sorted in place) and returns the roots.
std::vector<Node*> build_forest(std::vector<std::unique_ptr<Node>>& nodes) {
  std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    if (a->start != b->start) return a->start < b->start;
    return a->dur > b->dur;
  });
  int64_t main_tid = nodes.empty() ? 0 : nodes.front()->tid;
  for (const auto& n : nodes) {
    if (n->cat == KinetoCategory::kUserAnnotation) {
      main_tid = n->tid;
      break;
    }
  }
  std::unordered_map<int64_t, std::vector<Node*>> stacks;
  std::vector<Node*> roots;
  for (const auto& owned : nodes) {
    Node* node = owned.get();
    std::vector<Node*>& stack = stacks[node->tid];
    while (!stack.empty() && node->start >= stack.back()->end)
      stack.pop_back();
    if (!stack.empty() && node->end <= stack.back()->end) {
      node->parent = stack.back();
    } else if (node->tid != main_tid) {
      // The autograd thread's roots belong to the main thread's enclosing label.
      const std::vector<Node*>& main = stacks[main_tid];
      for (auto it = main.rbegin(); it != main.rend(); ++it) {
        if ((*it)->is_label() && (*it)->start <= node->start && node->end <= (*it)->end) {
          node->parent = *it;
          break;
        }
      }
    }
    if (node->parent) {
      node->parent->children.push_back(node);
    } else {
      roots.push_back(node);
    }
    stacks[node->tid].push_back(node);
  }
  return roots;
}

void collect_ops(const std::vector<Node*>& nodes, std::vector<Node*>& out) {
  for (Node* n : nodes) {
    if (n->is_op()) {
      out.push_back(n);
    } else if (n->is_label()) {
      collect_ops(n->children, out);
    }
  }
}

void descendants(const Node* n, std::vector<Node*>& out) {
  for (Node* c : n->children) {
    out.push_back(c);
    descendants(c, out);
  }
}

struct RawOp {
  std::vector<double> t2;
  std::vector<double> t3;
  std::vector<double> t5;
};

void op_samples(const Node* op, double event_overhead_us, std::map<std::string, RawOp>& samples) {
  std::vector<Node*> subs;
  descendants(op, subs);
  std::stable_sort(subs.begin(), subs.end(), [](const Node* a, const Node* b) {
    if (a->start != b->start) return a->start < b->start;
    return a->dur > b->dur;
  });
  std::vector<const Node*> launches;
  for (const Node* n : subs) {
    if (n->is_launch()) launches.push_back(n);
  }
  RawOp& per_op = samples[std::string(op->name)];
  if (launches.empty()) {
    if (op->name == "aten::to" && subs.empty()) return;
    per_op.t5.push_back(op->dur - event_overhead_us * static_cast<double>(subs.size()));
    return;
  }
  double boundary = op->start;
  for (size_t i = 0; i < launches.size(); ++i) {
    const Node* launch = launches[i];
    size_t n_before = 0;
    for (const Node* n : subs) {
      if (boundary <= n->start && n->start < launch->start && n != launch) ++n_before;
    }
    const double gap = launch->start - boundary - event_overhead_us * static_cast<double>(n_before);
    (i == 0 ? per_op.t2 : per_op.t5).push_back(gap);
    boundary = launch->end;
  }
  if (launches.size() == 1) per_op.t5.push_back(0.0);
  size_t trailing = 0;
  for (const Node* n : subs) {
    if (n->start >= boundary) ++trailing;
  }
  per_op.t3.push_back(
      std::max(0.0, op->end - boundary - event_overhead_us * static_cast<double>(trailing)));
}

void t1_samples(const std::vector<Node*>& ops, double event_overhead_us, std::vector<double>& out) {
  std::map<int64_t, std::vector<Node*>> by_thread;
  for (Node* op : ops)
    by_thread[op->tid].push_back(op);
  for (auto& [tid, thread_ops] : by_thread) {
    std::stable_sort(thread_ops.begin(), thread_ops.end(),
                     [](const Node* a, const Node* b) { return a->start < b->start; });
    for (size_t i = 1; i < thread_ops.size(); ++i) {
      if (thread_ops[i - 1]->parent != thread_ops[i]->parent) continue;
      const double gap = thread_ops[i]->start - thread_ops[i - 1]->end;
      if (kT1MinGapUs < gap && gap < kSeedT1MaxGapUs) out.push_back(gap - event_overhead_us);
    }
  }
}

/// Clamps to >= 0, then keeps [Q1 - 1.5 IQR, Q3 + 1.5 IQR] with Python's
/// statistics.quantiles(n=4, method="inclusive") quartiles.
std::vector<double> tukey(std::vector<double> values) {
  for (double& v : values)
    v = std::max(0.0, v);
  if (values.size() < 4) return values;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size() - 1;
  auto quartile = [&](size_t i) {
    const size_t j = i * m / 4;
    const auto delta = static_cast<double>(i * m % 4);
    return (sorted[j] * (4.0 - delta) + sorted[j + 1] * delta) / 4.0;
  };
  const double q1 = quartile(1);
  const double q3 = quartile(3);
  const double lo = q1 - 1.5 * (q3 - q1);
  const double hi = q3 + 1.5 * (q3 - q1);
  std::vector<double> kept;
  for (double v : values) {
    if (lo <= v && v <= hi) kept.push_back(v);
  }
  return kept;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  // Neumaier summation: Python's fmean sums exactly (fsum).
  double sum = 0.0;
  double c = 0.0;
  for (double x : v) {
    const double t = sum + x;
    c += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  return (sum + c) / static_cast<double>(v.size());
}

std::string yaml_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

bool is_host_overhead_label(KinetoCategory category, std::string_view name) {
  if (category == KinetoCategory::kUserAnnotation) return true;
  if (category != KinetoCategory::kCpuOp) return false;
  return std::any_of(std::begin(kModuleMarkers), std::end(kModuleMarkers),
                     [&](std::string_view m) { return name.starts_with(m); });
}

bool is_host_overhead_launch(KinetoCategory category, std::string_view name) {
  return category == KinetoCategory::kCudaRuntime && in(name, kLaunchNames);
}

HostOverheads host_overheads_of(const ExtractedHostOverheads& o) {
  auto or_zero = [](const std::vector<double>& v) {
    return Duration::from_us_f(v.empty() ? 0.0 : mean(v));
  };
  auto optional_mean = [](const std::vector<double>& v) {
    return v.empty() ? std::nullopt : std::optional<Duration>(Duration::from_us_f(mean(v)));
  };
  HostOverheads h;
  h.t1 = or_zero(o.t1);
  h.t4 = or_zero(o.launch_kernel_us);
  h.default_t2 = or_zero(o.default_t2);
  h.default_t3 = or_zero(o.default_t3);
  h.default_t5 = or_zero(o.default_t5);
  h.default_body = or_zero(o.default_body);
  for (const auto& [name, c] : o.ops)
    h.ops[name] = OpHostOverheads{optional_mean(c.t2), optional_mean(c.t3), optional_mean(c.t5)};
  return h;
}

ExtractedHostOverheads extract_host_overheads(const std::vector<const KinetoTrace*>& traces,
                                              double cpu_event_overhead_us) {
  ExtractedHostOverheads out;
  std::map<std::string, RawOp> samples;
  std::map<std::string, std::vector<double>> loader_samples;
  for (const KinetoTrace* t : traces) {
    out.sources.push_back(std::filesystem::path(t->file).filename().string());
    std::vector<std::unique_ptr<Node>> nodes =
        load_nodes(*t, cpu_event_overhead_us, loader_samples);
    for (const auto& n : nodes) {
      if (n->name == "cudaLaunchKernel") out.launch_kernel_us.push_back(n->dur);
      if (n->name == "cudaMemcpyAsync") out.memcpy_async_us.push_back(n->dur);
    }
    const std::vector<Node*> roots = build_forest(nodes);
    std::vector<Node*> ops;
    collect_ops(roots, ops);
    for (const Node* op : ops)
      op_samples(op, cpu_event_overhead_us, samples);
    t1_samples(ops, cpu_event_overhead_us, out.t1_raw);
  }
  out.t1 = tukey(out.t1_raw);
  for (const auto& [name, raw] : samples) {
    OpOverheadSamples& c = out.ops[name];
    c.t2 = tukey(raw.t2);
    c.t3 = tukey(raw.t3);
    c.t5 = tukey(raw.t5);
    c.launches = !raw.t2.empty();
    if (c.launches) {
      out.default_t2.insert(out.default_t2.end(), c.t2.begin(), c.t2.end());
      out.default_t3.insert(out.default_t3.end(), c.t3.begin(), c.t3.end());
      out.default_t5.insert(out.default_t5.end(), c.t5.begin(), c.t5.end());
    } else {
      out.default_body.insert(out.default_body.end(), c.t5.begin(), c.t5.end());
    }
  }
  // Data loading: launch-free bodies of their own, outside the defaults.
  for (const auto& [name, values] : loader_samples) {
    const std::vector<double> cleaned = tukey(values);
    std::vector<double>& t5 = out.ops[name].t5;
    t5.insert(t5.end(), cleaned.begin(), cleaned.end());
  }
  return out;
}

std::string format_host_overheads_yaml(const ExtractedHostOverheads& o, LaunchStatistic t4) {
  std::string s = "# Host overheads T1-T5 (Lin et al., TPDS 2024), measured by\n";
  s += fmt::format("# upsim (workloads/trace/trace_host_overheads.h) on {} traces:\n",
                   o.sources.size());
  for (const std::string& src : o.sources)
    s += "#   " + src + "\n";
  s += "# Every value below is a mean in microseconds from that run; n = samples after cleaning.\n";
  s +=
      fmt::format("t1: {:.3f}us  # gap between consecutive ops, n = {}\n", mean(o.t1), o.t1.size());
  if (t4 == LaunchStatistic::kMean) {
    s += fmt::format("t4: {:.3f}us  # mean cudaLaunchKernel duration, n = {}\n",
                     mean(o.launch_kernel_us), o.launch_kernel_us.size());
  } else {
    const std::vector<double> cleaned = tukey(o.launch_kernel_us);
    s += fmt::format(
        "t4: {:.3f}us  # mean cudaLaunchKernel duration after Tukey's rule, n = {} of {} (mean "
        "of all: {:.3f}us)\n",
        mean(cleaned), cleaned.size(), o.launch_kernel_us.size(), mean(o.launch_kernel_us));
  }
  s += "default:  # all ops pooled; used for ops missing from `ops`\n";
  const std::pair<const char*, const std::vector<double>*> defaults[] = {{"t2", &o.default_t2},
                                                                         {"t3", &o.default_t3},
                                                                         {"t5", &o.default_t5},
                                                                         {"body", &o.default_body}};
  const char* comments[] = {
      "op start to first launch, ops with launches", "last launch end to op end, ops with launches",
      "gap between launches (0 for single-launch ops)", "whole host time of ops without launches"};
  for (size_t i = 0; i < 4; ++i) {
    s += fmt::format("  {}: {:.3f}us  # {}, n = {}\n", defaults[i].first, mean(*defaults[i].second),
                     comments[i], defaults[i].second->size());
  }
  s += "ops:  # per op name; n(t2,t3,t5) = samples\n";
  for (const auto& [name, c] : o.ops) {
    std::string fields;
    const std::pair<const char*, const std::vector<double>*> ts[] = {
        {"t2", &c.t2}, {"t3", &c.t3}, {"t5", &c.t5}};
    for (const auto& [key, values] : ts) {
      if (values->empty()) continue;
      if (!fields.empty()) fields += ", ";
      fields += fmt::format("{}: {:.3f}us", key, mean(*values));
    }
    s += fmt::format("  {}: {{{}}}  # n = {},{},{}\n", yaml_quoted(name), fields, c.t2.size(),
                     c.t3.size(), c.t5.size());
  }
  return s;
}

}  // namespace upsim
