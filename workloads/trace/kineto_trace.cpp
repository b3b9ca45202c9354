#include "workloads/trace/kineto_trace.h"

#include <map>
#include <optional>
#include <unordered_map>

#include "sim/formats/json_reader.h"
#include "sim/formats/parse_error.h"
#include "workloads/trace/trace_file.h"

namespace upsim {

std::string_view kineto_category_name(KinetoCategory category) {
  switch (category) {
    case KinetoCategory::kCpuOp:
      return "cpu_op";
    case KinetoCategory::kUserAnnotation:
      return "user_annotation";
    case KinetoCategory::kCudaRuntime:
      return "cuda_runtime";
    case KinetoCategory::kCudaDriver:
      return "cuda_driver";
    case KinetoCategory::kKernel:
      return "kernel";
    case KinetoCategory::kGpuMemcpy:
      return "gpu_memcpy";
    case KinetoCategory::kGpuMemset:
      return "gpu_memset";
    case KinetoCategory::kCudaSync:
      return "cuda_sync";
    case KinetoCategory::kPythonFunction:
      return "python_function";
  }
  return "?";
}

namespace {

/// Category names of current and older (PyTorch 1.8-1.10) Kineto versions.
std::optional<KinetoCategory> parse_category(std::string_view cat) {
  if (cat == "cpu_op" || cat == "Operator") return KinetoCategory::kCpuOp;
  if (cat == "user_annotation") return KinetoCategory::kUserAnnotation;
  if (cat == "cuda_runtime" || cat == "Runtime") return KinetoCategory::kCudaRuntime;
  if (cat == "cuda_driver") return KinetoCategory::kCudaDriver;
  if (cat == "kernel" || cat == "Kernel") return KinetoCategory::kKernel;
  if (cat == "gpu_memcpy" || cat == "Memcpy") return KinetoCategory::kGpuMemcpy;
  if (cat == "gpu_memset" || cat == "Memset") return KinetoCategory::kGpuMemset;
  if (cat == "cuda_sync") return KinetoCategory::kCudaSync;
  if (cat == "python_function") return KinetoCategory::kPythonFunction;
  return std::nullopt;
}

/// A pid or tid: a number, or a string that is a number ("7"), else -1 (profiler spans use names
/// such as "Spans" or "PyTorch Profiler"; so is a digit string beyond int64, which no id is).
int64_t read_id(JsonCursor& cur) {
  const JsonType t = cur.peek();
  if (t == JsonType::kNumber) return cur.integer();
  if (t == JsonType::kString) {
    const std::string_view s = cur.string();
    int64_t v = 0;
    bool any = false;
    for (char c : s) {
      if (c < '0' || c > '9') return -1;
      if (!append_decimal_digit(v, c)) return -1;
      any = true;
    }
    return any ? v : -1;
  }
  cur.skip();
  return -1;
}

/// An integer arg that some Kineto versions write as a string.
int64_t read_int_arg(JsonCursor& cur) {
  const JsonType t = cur.peek();
  if (t == JsonType::kNumber) return cur.integer();
  return read_id(cur);
}

class KinetoParser {
 public:
  KinetoParser(std::string_view text, const std::string& file) : text_(text), cur_(text, file) {
    trace_.file = file;
  }

  KinetoTrace parse() {
    if (cur_.at_end()) cur_.fail("empty file: not a Kineto trace");
    if (cur_.peek() != JsonType::kObject) {
      cur_.fail("not a Kineto trace: the document is not a JSON object");
    }
    cur_.begin_object();
    bool have_events = false;
    std::string_view key;
    while (cur_.next_member(key)) {
      if (key == "traceEvents") {
        read_events();
        have_events = true;
      } else if (key == "deviceProperties") {
        read_devices();
      } else if (key == "distributedInfo") {
        read_distributed();
      } else if (key == "traceName") {
        trace_.trace_name = cur_.peek() == JsonType::kString ? std::string(cur_.string()) : "";
        if (trace_.trace_name.empty()) cur_.skip();
      } else {
        cur_.skip();
      }
    }
    if (!cur_.at_end()) cur_.fail("unexpected text after the end of the JSON document");
    if (!have_events) {
      throw ParseError(trace_.file, "not a Kineto trace: no `traceEvents` array");
    }
    return std::move(trace_);
  }

 private:
  uint32_t intern(std::string_view name) {
    const auto it = name_index_.find(name);
    if (it != name_index_.end()) return it->second;
    trace_.names.emplace_back(name);
    const auto id = static_cast<uint32_t>(trace_.names.size() - 1);
    name_index_.emplace(trace_.names.back(), id);
    return id;
  }

  /// A string value that stays valid while the input text lives (copied when it was unescaped
  /// into the cursor's scratch buffer).
  std::string_view stable_string(std::string& holder) {
    const std::string_view s = cur_.string();
    if (s.data() >= text_.data() && s.data() + s.size() <= text_.data() + text_.size()) return s;
    holder.assign(s);
    return holder;
  }

  /// whole_us x 10^6 + sub_us_ps, or an error at `offset` naming `what` when that leaves the
  /// int64 picosecond range (about +-106 days: a trace's span, not its epoch, must fit).
  int64_t checked_ps(int64_t whole_us, int64_t sub_us_ps, size_t offset, std::string_view what) {
    int64_t ps = 0;
    if (__builtin_mul_overflow(whole_us, int64_t{1'000'000}, &ps) ||
        __builtin_add_overflow(ps, sub_us_ps, &ps)) {
      cur_.fail_at(offset, "`" + std::string(what) +
                               "` is out of range: over 106 days (the int64 picosecond range)");
    }
    return ps;
  }

  int64_t relative_ps(const DecimalMicros& t, size_t offset) {
    if (!have_base_) {
      trace_.base_us = t.whole_us;
      have_base_ = true;
    }
    int64_t us = 0;
    if (__builtin_sub_overflow(t.whole_us, trace_.base_us, &us)) {
      cur_.fail_at(offset, "`ts` is out of range of the trace's first event");
    }
    return checked_ps(us, t.sub_us_ps, offset, "ts");
  }

  void read_events() {
    if (cur_.peek() != JsonType::kArray) cur_.fail("`traceEvents` must be an array");
    cur_.begin_array();
    while (cur_.next_element()) {
      if (cur_.peek() != JsonType::kObject) cur_.fail("a trace event must be an object");
      read_event();
    }
  }

  void read_event() {
    const size_t event_offset = cur_.offset();
    cur_.begin_object();
    std::string_view key;
    std::string_view ph;
    std::string_view cat;
    std::string_view name;
    std::string name_holder;
    std::string ph_holder;
    std::string cat_holder;
    bool have_ts = false;
    DecimalMicros ts;
    DecimalMicros dur;
    int64_t pid = -1;
    int64_t tid = -1;
    int64_t flow_id = -1;
    KinetoEvent e;
    size_t args_begin = 0;
    size_t args_end = 0;
    while (cur_.next_member(key)) {
      // Keys are compared by length first: the common ones are short and distinct.
      switch (key.size()) {
        case 2:
          if (key == "ph") {
            ph = stable_string(ph_holder);
            continue;
          }
          if (key == "ts") {
            const size_t at = cur_.offset();
            if (!decimal_us_to_ps(cur_.number(), ts)) cur_.fail_at(at, "malformed `ts`");
            have_ts = true;
            continue;
          }
          if (key == "id") {
            flow_id = read_int_arg(cur_);
            continue;
          }
          break;
        case 3:
          if (key == "cat") {
            cat = stable_string(cat_holder);
            continue;
          }
          if (key == "pid") {
            pid = read_id(cur_);
            continue;
          }
          if (key == "tid") {
            tid = read_id(cur_);
            continue;
          }
          if (key == "dur") {
            const size_t at = cur_.offset();
            if (!decimal_us_to_ps(cur_.number(), dur)) cur_.fail_at(at, "malformed `dur`");
            continue;
          }
          break;
        case 4:
          if (key == "name") {
            if (cur_.peek() == JsonType::kString) {
              name = stable_string(name_holder);
              continue;
            }
          } else if (key == "args") {
            if (cur_.peek() != JsonType::kObject) break;  // peek() has skipped the whitespace
            args_begin = cur_.offset();
            read_args(e);
            args_end = cur_.offset();
            continue;
          }
          break;
        default:
          break;
      }
      cur_.skip();
    }
    if (ph == "X") {
      const std::optional<KinetoCategory> category = parse_category(cat);
      if (!category) return;
      if (!have_ts) cur_.fail_at(event_offset, "a complete (\"X\") event without `ts`");
      e.category = *category;
      if (is_gpu_category(e.category) || e.category == KinetoCategory::kCudaSync) {
        if (e.device < 0) e.device = static_cast<int32_t>(pid);
        if (e.stream < 0) e.stream = tid;
      }
      if (pid < 0 || tid < 0) return;  // profiler spans, not program activity
      e.pid = pid;
      e.tid = tid;
      e.ts_ps = relative_ps(ts, event_offset);
      e.dur_ps = checked_ps(dur.whole_us, dur.sub_us_ps, event_offset, "dur");
      if (e.dur_ps < 0) {
        cur_.fail_at(event_offset, "negative `dur` (" + std::to_string(e.dur_ps) + " ps) of " +
                                       std::string(kineto_category_name(e.category)) + " `" +
                                       std::string(name) + "`: a duration cannot be negative");
      }
      int64_t end_ps = 0;
      if (__builtin_add_overflow(e.ts_ps, e.dur_ps, &end_ps)) {
        cur_.fail_at(event_offset,
                     "`ts` + `dur` is out of range: over 106 days (the int64 picosecond range)");
      }
      if (e.dur_ps == 0) ++trace_.zero_duration[static_cast<size_t>(e.category)];
      e.name = intern(name);
      if ((e.category == KinetoCategory::kCpuOp || e.category == KinetoCategory::kUserAnnotation ||
           e.category == KinetoCategory::kCudaSync) &&
          args_end > args_begin) {
        e.args = static_cast<uint32_t>(trace_.raw_args.size());
        trace_.raw_args.push_back(
            KinetoTrace::ArgsSpan{trace_.args_arena.size(), args_end - args_begin});
        trace_.args_arena.append(text_.substr(args_begin, args_end - args_begin));
      }
      trace_.events.push_back(e);
    } else if ((ph == "s" || ph == "f") && cat == "ac2g" && have_ts && flow_id >= 0) {
      trace_.flows.push_back(
          KinetoFlow{flow_id, relative_ps(ts, event_offset), pid, tid, ph == "s"});
    }
  }

  void read_args(KinetoEvent& e) {
    cur_.begin_object();
    std::string_view key;
    while (cur_.next_member(key)) {
      if (key == "External id" || key == "external id") {
        e.external_id = read_int_arg(cur_);
      } else if (key == "correlation") {
        e.correlation = read_int_arg(cur_);
      } else if (key == "Record function id") {
        e.record_function_id = read_int_arg(cur_);
      } else if (key == "Ev Idx") {
        e.ev_idx = read_int_arg(cur_);
      } else if (key == "stream") {
        e.stream = read_int_arg(cur_);
      } else if (key == "device") {
        e.device = static_cast<int32_t>(read_int_arg(cur_));
      } else if (key == "bytes") {
        e.bytes = read_int_arg(cur_);
      } else {
        cur_.skip();
      }
    }
  }

  void read_devices() {
    if (cur_.peek() != JsonType::kArray) {
      cur_.skip();
      return;
    }
    cur_.begin_array();
    while (cur_.next_element()) {
      if (cur_.peek() != JsonType::kObject) {
        cur_.skip();
        continue;
      }
      KinetoDevice d;
      cur_.begin_object();
      std::string_view key;
      while (cur_.next_member(key)) {
        if (key == "id") {
          d.id = static_cast<int32_t>(read_int_arg(cur_));
        } else if (key == "name" && cur_.peek() == JsonType::kString) {
          d.name = std::string(cur_.string());
        } else if (key == "totalGlobalMem") {
          d.total_memory_bytes = read_int_arg(cur_);
        } else if (key == "numSms") {
          d.sm_count = static_cast<int32_t>(read_int_arg(cur_));
        } else if (key == "computeMajor") {
          d.compute_major = static_cast<int32_t>(read_int_arg(cur_));
        } else if (key == "computeMinor") {
          d.compute_minor = static_cast<int32_t>(read_int_arg(cur_));
        } else {
          cur_.skip();
        }
      }
      trace_.devices.push_back(std::move(d));
    }
  }

  void read_distributed() {
    if (cur_.peek() != JsonType::kObject) {
      cur_.skip();
      return;
    }
    trace_.distributed.present = true;
    cur_.begin_object();
    std::string_view key;
    while (cur_.next_member(key)) {
      if (key == "backend" && cur_.peek() == JsonType::kString) {
        trace_.distributed.backend = std::string(cur_.string());
      } else if (key == "rank") {
        trace_.distributed.rank = static_cast<int32_t>(read_int_arg(cur_));
      } else if (key == "world_size") {
        trace_.distributed.world_size = static_cast<int32_t>(read_int_arg(cur_));
      } else {
        cur_.skip();
      }
    }
  }

  std::string_view text_;
  JsonCursor cur_;
  KinetoTrace trace_;
  std::unordered_map<std::string_view, uint32_t> name_index_;
  bool have_base_ = false;
};

}  // namespace

KinetoTrace parse_kineto_trace(std::string_view text, const std::string& file) {
  return KinetoParser(text, file).parse();
}

KinetoTrace read_kineto_trace(const std::filesystem::path& path) {
  const std::string text = read_trace_file(path);
  return parse_kineto_trace(text, path.string());
}

KinetoOpInputs kineto_op_inputs(const KinetoTrace& trace, const KinetoEvent& event) {
  KinetoOpInputs out;
  const std::string_view args = trace.args_of(event);
  if (args.empty()) return out;
  JsonCursor cur(args, trace.file);
  cur.begin_object();
  std::string_view key;
  while (cur.next_member(key)) {
    if (key == "Input Dims" && cur.peek() == JsonType::kArray) {
      const JsonValue dims = read_json_value(cur);
      for (const JsonValue& input : dims.items) {
        std::vector<int64_t> shape;
        // A tensor list records one shape per tensor: keep the first.
        const JsonValue* s = &input;
        if (!s->items.empty() && s->items.front().is_array()) s = &s->items.front();
        for (const JsonValue& d : s->items) {
          if (d.is_number()) shape.push_back(d.integer);
        }
        out.dims.push_back(std::move(shape));
      }
    } else if (key == "Input type" && cur.peek() == JsonType::kArray) {
      cur.begin_array();
      while (cur.next_element()) {
        out.types.emplace_back(cur.peek() == JsonType::kString ? std::string(cur.string())
                                                               : (cur.skip(), std::string()));
      }
    } else {
      cur.skip();
    }
  }
  return out;
}

int64_t kineto_process_id(const KinetoTrace& kineto) {
  std::map<int64_t, size_t> counts;
  for (const KinetoEvent& e : kineto.events) {
    if (e.category == KinetoCategory::kCpuOp) ++counts[e.pid];
  }
  int64_t best = -1;
  size_t n = 0;
  for (const auto& [pid, c] : counts) {
    if (c > n) {
      best = pid;
      n = c;
    }
  }
  return best;
}

}  // namespace upsim
