// ChromeTraceWriter: the file is strict JSON, lays out one process per rank with a track per CPU
// thread and stream, prints exact picosecond times, links launches to kernels, splits collective
// waits, is byte-for-byte deterministic and reports unwritable paths.
//
// The writer is driven by calling its Observer callbacks directly, as the executor would.
#include "sim/export/chrome_trace_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/executor.h"
#include "sim/export/run_summary.h"
#include "sim/network_model.h"
#include "sim/task_graph.h"
#include "test/unit/export/read_gzip.h"

namespace upsim {
namespace {

namespace fs = std::filesystem;

// ---- a strict JSON reader (RFC 8259), enough to validate the writer's output -----------------

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;               ///< string value, or a number's literal text
  std::vector<Json> items;        ///< array elements, or object values
  std::vector<std::string> keys;  ///< object keys, in file order (items[i] is keys[i]'s)

  const Json* find(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &items[i];
    }
    return nullptr;
  }
  const Json& at(std::string_view key) const {
    const Json* v = find(key);
    if (v == nullptr) throw std::out_of_range("no key " + std::string(key));
    return *v;
  }
  /// The string value, or a number's literal text.
  const std::string& str(std::string_view key) const { return at(key).text; }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view s) : s_(s) {}

  Json document() {
    Json v = value();
    skip_ws();
    if (pos_ != s_.size()) error("trailing content");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error("JSON error at byte " + std::to_string(pos_) + ": " + what);
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }
  char peek() {
    if (pos_ >= s_.size()) error("unexpected end");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  void literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) error("bad literal");
    pos_ += word.size();
  }

  Json value() {
    skip_ws();
    Json v;
    switch (peek()) {
      case '{':
        v.type = Json::Type::kObject;
        ++pos_;
        skip_ws();
        if (peek() == '}') {
          ++pos_;
          return v;
        }
        for (;;) {
          skip_ws();
          std::string key = string();
          if (v.find(key) != nullptr) error("duplicate key " + key);
          skip_ws();
          expect(':');
          v.keys.push_back(std::move(key));
          v.items.push_back(value());
          skip_ws();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect('}');
          return v;
        }
      case '[':
        v.type = Json::Type::kArray;
        ++pos_;
        skip_ws();
        if (peek() == ']') {
          ++pos_;
          return v;
        }
        for (;;) {
          v.items.push_back(value());
          skip_ws();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect(']');
          return v;
        }
      case '"':
        v.type = Json::Type::kString;
        v.text = string();
        return v;
      case 't':
        literal("true");
        v.type = Json::Type::kBool;
        v.boolean = true;
        return v;
      case 'f':
        literal("false");
        v.type = Json::Type::kBool;
        return v;
      case 'n':
        literal("null");
        return v;
      default:
        v.type = Json::Type::kNumber;
        v.text = number();
        return v;
    }
  }

  std::string number() {
    const size_t start = pos_;
    auto digits = [this] {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
        ++pos_;
      if (pos_ == from) error("expected a digit");
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else {
      digits();
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      const auto c = static_cast<unsigned char>(peek());
      ++pos_;
      if (c == '"') return out;
      // DEL is legal JSON but Perfetto's tokenizer rejects it, so the writer must escape it.
      if (c < 0x20 || c == 0x7f) error("unescaped control character");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        continue;
      }
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          if (pos_ + 4 > s_.size()) error("short \\u escape");
          const unsigned long cp = std::stoul(std::string(s_.substr(pos_, 4)), nullptr, 16);
          pos_ += 4;
          if (cp >= 0x80) error("test reader only decodes ASCII \\u escapes");
          out.push_back(static_cast<char>(cp));
          break;
        }
        default:
          error("bad escape");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Json parse_json(const std::string& text) {
  return JsonReader(text).document();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::string text(fs::file_size(path), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

/// A fresh directory per test, removed at the end.
class ChromeTraceWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("upsim_chrome_trace_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  fs::path file(const std::string& name) const { return dir_ / name; }

  fs::path dir_;
};

Time us(double v) {
  return Time::zero() + Duration::from_us_f(v);
}

/// Two ranks, one CPU thread and two streams each. Rank 0 marks iteration 0, runs an op that
/// launches a GEMM, and joins an all-reduce that rank 1 reaches later; rank 1 copies to host.
struct Scenario {
  TaskGraph graph;
  TaskId mark = 0;
  TaskId op_begin = 0;
  TaskId launch = 0;
  TaskId kernel = 0;
  TaskId coll0 = 0;
  TaskId coll1 = 0;
  TaskId copy = 0;
  CollectiveId group = 0;

  Scenario() {
    graph.add_rank(RankInfo{"rank 0 (A100-SXM4-40GB)", 1, {"compute", "comm"}});
    graph.add_rank(RankInfo{"rank 1 (A100-SXM4-40GB)", 1, {"compute", "comm"}});
    mark = graph.add_iteration_mark(0, 0, 0);
    KernelDesc gemm;
    gemm.cls = KernelClass::kGemm;
    gemm.dtype = DType::kFp16;
    gemm.batch = 1;
    gemm.m = 4096;
    gemm.n = 1024;
    gemm.k = 512;
    kernel = graph.add_kernel(0, 0, "sm80_xmma_gemm", "aten::addmm", gemm);
    op_begin = graph.add_cpu_op(0, 0, "aten::addmm", HostPhase::kOpBegin);
    launch = graph.add_launch(0, 0, "cudaLaunchKernel", "aten::addmm", 0, kernel);
    CollectiveDesc allreduce;
    allreduce.kind = CollectiveKind::kAllReduce;
    allreduce.members = {0, 1};
    allreduce.bytes = 1 << 20;
    group = graph.add_collective_group(allreduce, "allreduce_grad");
    coll0 = graph.add_collective(0, 1, group, "c10d::allreduce_");
    coll1 = graph.add_collective(1, 1, group, "c10d::allreduce_");
    copy = graph.add_memcpy(1, 0, "Memcpy DtoH", "aten::copy_",
                            TransferDesc{TransferKind::kDeviceToHost, 1, 4096});
    graph.seal();
  }

  /// The callbacks of one run, in engine order.
  void drive(Observer& o) const {
    o.on_run_begin(graph);
    o.on_task_begin(mark, us(0));
    o.on_task_end(mark, us(0));
    o.on_task_begin(op_begin, us(0));
    o.on_task_begin(copy, us(0));
    o.on_task_end(op_begin, us(0.5));
    o.on_task_begin(launch, us(0.5));
    o.on_task_end(launch, us(1.5));
    o.on_task_begin(kernel, us(1.5));
    o.on_task_begin(coll0, us(2));
    o.on_task_end(copy, us(3));
    o.on_task_begin(coll1, us(5));
    o.on_collective_begin(group, us(5));
    o.on_task_end(kernel, us(11.5));
    o.on_task_end(coll0, us(20));
    o.on_task_end(coll1, us(20));
    o.on_run_end(us(20));
  }
};

std::vector<const Json*> events_where(const Json& doc,
                                      const std::function<bool(const Json&)>& pred) {
  std::vector<const Json*> out;
  for (const Json& e : doc.at("traceEvents").items) {
    if (pred(e)) out.push_back(&e);
  }
  return out;
}

const Json& only_event(const Json& doc, std::string_view ph, std::string_view name) {
  auto found =
      events_where(doc, [&](const Json& e) { return e.str("ph") == ph && e.str("name") == name; });
  if (found.size() != 1) {
    throw std::runtime_error(std::to_string(found.size()) + " events ph=" + std::string(ph) +
                             " name=" + std::string(name));
  }
  return *found.front();
}

std::string write_scenario(const fs::path& path) {
  Scenario s;
  ChromeTraceWriter writer(path);
  s.drive(writer);
  return read_file(path);
}

// ---- tests -----------------------------------------------------------------------------------

TEST_F(ChromeTraceWriterTest, OutputIsStrictJsonWithTraceEventsAndOtherData) {
  Scenario s;
  ChromeTraceWriter writer(file("trace.json"));
  writer.add_metadata("scenario", "configs/dlrm_4gpu.yaml");
  s.drive(writer);
  ASSERT_TRUE(writer.finished());

  const Json doc = parse_json(read_file(file("trace.json")));
  ASSERT_EQ(doc.type, Json::Type::kObject);
  ASSERT_EQ(doc.keys, (std::vector<std::string>{"displayTimeUnit", "traceEvents", "otherData"}));
  EXPECT_EQ(doc.str("displayTimeUnit"), "ns");
  EXPECT_EQ(doc.at("traceEvents").type, Json::Type::kArray);
  const Json& other = doc.at("otherData");
  EXPECT_EQ(other.str("generator"), "upsim");
  EXPECT_EQ(other.str("format_version"), "2");
  EXPECT_EQ(other.str("scenario"), "configs/dlrm_4gpu.yaml");
  for (const Json& e : doc.at("traceEvents").items) {
    ASSERT_NE(e.find("ph"), nullptr);
    ASSERT_NE(e.find("pid"), nullptr);
    if (e.str("ph") != "M") {
      ASSERT_NE(e.find("ts"), nullptr);
    }
  }
}

TEST_F(ChromeTraceWriterTest, MetadataNamesAndOrdersEveryRankThreadAndStream) {
  const Json doc = parse_json(write_scenario(file("trace.json")));
  const auto& events = doc.at("traceEvents").items;

  // Metadata comes first.
  bool seen_other = false;
  for (const Json& e : events) {
    if (e.str("ph") != "M") seen_other = true;
    EXPECT_FALSE(seen_other && e.str("ph") == "M") << "metadata after events";
  }

  std::map<std::string, std::string> process_names;
  std::map<std::string, std::string> process_sort;
  std::map<std::pair<std::string, std::string>, std::string> thread_names;
  std::map<std::pair<std::string, std::string>, std::string> thread_sort;
  for (const Json& e : events) {
    if (e.str("ph") != "M") continue;
    const std::string& kind = e.str("name");
    if (kind == "process_name") process_names[e.str("pid")] = e.at("args").str("name");
    if (kind == "process_sort_index") process_sort[e.str("pid")] = e.at("args").str("sort_index");
    if (kind == "thread_name") {
      thread_names[{e.str("pid"), e.str("tid")}] = e.at("args").str("name");
    }
    if (kind == "thread_sort_index") {
      thread_sort[{e.str("pid"), e.str("tid")}] = e.at("args").str("sort_index");
    }
  }
  EXPECT_EQ(process_names, (std::map<std::string, std::string>{{"1", "rank 0 (A100-SXM4-40GB)"},
                                                               {"2", "rank 1 (A100-SXM4-40GB)"}}));
  EXPECT_EQ(process_sort, (std::map<std::string, std::string>{{"1", "0"}, {"2", "1"}}));

  // Each rank: CPU thread 0, then its streams in order; tids unique across the file.
  std::set<std::string> tids;
  for (const std::string pid : {"1", "2"}) {
    std::map<std::string, std::string> by_sort;  // sort index -> name
    for (const auto& [key, name] : thread_names) {
      if (key.first != pid) continue;
      EXPECT_TRUE(tids.insert(key.second).second) << "duplicate tid " << key.second;
      ASSERT_TRUE(thread_sort.count(key)) << name;
      by_sort[thread_sort.at(key)] = name;
    }
    EXPECT_EQ(by_sort,
              (std::map<std::string, std::string>{
                  {"0", "CPU thread 0"}, {"1", "stream 0: compute"}, {"2", "stream 1: comm"}}));
  }
}

TEST_F(ChromeTraceWriterTest, KernelSliceHasExactTimesAndDescribesItsShape) {
  const std::string text = write_scenario(file("trace.json"));
  const TaskId kernel_id = Scenario().kernel;
  // The exact text: 1.5 us -> 11.5 us, six decimals.
  EXPECT_NE(text.find(R"("name":"sm80_xmma_gemm","cat":"kernel","ph":"X","pid":1,)"),
            std::string::npos);
  EXPECT_NE(text.find(R"("ts":1.500000,"dur":10.000000)"), std::string::npos);

  const Json doc = parse_json(text);
  const Json& k = only_event(doc, "X", "sm80_xmma_gemm");
  EXPECT_EQ(k.str("cat"), "kernel");
  EXPECT_EQ(k.str("ts"), "1.500000");
  EXPECT_EQ(k.str("dur"), "10.000000");
  const Json& args = k.at("args");
  EXPECT_EQ(args.str("op"), "aten::addmm");
  EXPECT_EQ(args.str("class"), "gemm");
  EXPECT_EQ(args.str("dtype"), "fp16");
  EXPECT_EQ(args.str("m"), "4096");
  EXPECT_EQ(args.str("n"), "1024");
  EXPECT_EQ(args.str("k"), "512");
  EXPECT_EQ(args.str("batch"), "1");

  // On rank 0's first stream track, not its CPU thread.
  const Json& launch = only_event(doc, "X", "cudaLaunchKernel");
  EXPECT_EQ(k.str("pid"), launch.str("pid"));
  EXPECT_NE(k.str("tid"), launch.str("tid"));
  EXPECT_EQ(launch.str("cat"), "launch");
  EXPECT_EQ(launch.str("ts"), "0.500000");
  EXPECT_EQ(launch.str("dur"), "1.000000");
  EXPECT_EQ(launch.at("args").str("gpu_task"), std::to_string(kernel_id));
  EXPECT_EQ(launch.at("args").str("stream"), "stream 0: compute");
}

TEST_F(ChromeTraceWriterTest, LaunchFlowStartsInsideTheLaunchAndEndsAtTheKernelStart) {
  Scenario s;
  ChromeTraceWriter writer(file("trace.json"));
  s.drive(writer);
  const Json doc = parse_json(read_file(file("trace.json")));

  const Json& launch = only_event(doc, "X", "cudaLaunchKernel");
  const Json& kernel = only_event(doc, "X", "sm80_xmma_gemm");
  const Json& start = only_event(doc, "s", "launch");
  const Json& end = only_event(doc, "f", "launch");
  const std::string id = std::to_string(s.kernel);
  EXPECT_EQ(start.str("id"), id);
  EXPECT_EQ(end.str("id"), id);
  EXPECT_EQ(start.str("cat"), "launch");
  EXPECT_EQ(end.str("cat"), "launch");
  EXPECT_EQ(end.str("bp"), "e");
  // The start lies strictly inside the launch slice [0.5, 1.5] on its track.
  EXPECT_EQ(start.str("pid"), launch.str("pid"));
  EXPECT_EQ(start.str("tid"), launch.str("tid"));
  EXPECT_EQ(start.str("ts"), "1.000000");
  // The end is at the kernel's start on the kernel's track.
  EXPECT_EQ(end.str("pid"), kernel.str("pid"));
  EXPECT_EQ(end.str("tid"), kernel.str("tid"));
  EXPECT_EQ(end.str("ts"), kernel.str("ts"));

  // Both flow events follow the slice they bind to in the file.
  const auto& items = doc.at("traceEvents").items;
  auto index_of = [&](const Json& e) { return &e - items.data(); };
  EXPECT_LT(index_of(launch), index_of(start));
  EXPECT_LT(index_of(kernel), index_of(end));
}

TEST_F(ChromeTraceWriterTest, IterationMarkIsAProcessScopedInstant) {
  const Json doc = parse_json(write_scenario(file("trace.json")));
  const Json& mark = only_event(doc, "i", "iteration 0");
  EXPECT_EQ(mark.str("s"), "p");
  EXPECT_EQ(mark.str("pid"), "1");
  EXPECT_EQ(mark.str("ts"), "0.000000");
  EXPECT_EQ(mark.find("dur"), nullptr);
  EXPECT_TRUE(events_where(doc, [](const Json& e) {
                return e.str("ph") == "X" && e.str("cat") == "iteration";
              }).empty());
}

TEST_F(ChromeTraceWriterTest, CollectiveSplitsRendezvousWaitFromTransfer) {
  Scenario s;
  ChromeTraceWriter writer(file("trace.json"));
  s.drive(writer);
  const Json doc = parse_json(read_file(file("trace.json")));

  // Rank 0 arrived at 2 us, the group began at 5 us when rank 1 arrived; both end at 20 us.
  const Json& wait = only_event(doc, "X", "wait: allreduce_grad");
  EXPECT_EQ(wait.str("cat"), "rendezvous");
  EXPECT_EQ(wait.str("pid"), "1");
  EXPECT_EQ(wait.str("ts"), "2.000000");
  EXPECT_EQ(wait.str("dur"), "3.000000");
  EXPECT_EQ(wait.at("args").str("task"), std::to_string(s.coll0));

  auto transfers = events_where(
      doc, [](const Json& e) { return e.str("ph") == "X" && e.str("name") == "allreduce_grad"; });
  ASSERT_EQ(transfers.size(), 2u);
  for (const Json* t : transfers) {
    EXPECT_EQ(t->str("cat"), "collective");
    EXPECT_EQ(t->str("ts"), "5.000000");
    EXPECT_EQ(t->str("dur"), "15.000000");
    EXPECT_EQ(t->at("args").str("kind"), "all_reduce");
    EXPECT_EQ(t->at("args").str("bytes"), "1048576");
    EXPECT_EQ(t->at("args").str("members"), "2");
    EXPECT_EQ(t->at("args").str("op"), "c10d::allreduce_");
  }
  // The same track carries the wait and the transfer.
  EXPECT_EQ(transfers[0]->str("tid"), wait.str("tid"));
}

TEST_F(ChromeTraceWriterTest, ArgsDescribeCopiesCpuOpsSyncsAndAllToAll) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  g.add_rank(RankInfo{"rank 1", 1, {"compute"}});
  const TaskId op = g.add_cpu_op(0, 0, "aten::relu", HostPhase::kOpBody);
  const TaskId sync = g.add_host_sync(0, 0, kAllStreams, "aten::item");
  const TaskId copy = g.add_memcpy(0, 0, "Memcpy HtoD", "aten::to",
                                   TransferDesc{TransferKind::kHostToDevice, 0, 8192});
  CollectiveDesc a2a;
  a2a.kind = CollectiveKind::kAllToAll;
  a2a.members = {0, 1};
  a2a.send_bytes = AllToAllSizes::dense(2, {0, 100, 30, 0});  // rank 0 sends 100, receives 30
  const CollectiveId group = g.add_collective_group(a2a, "a2a_fwd");
  const TaskId c0 = g.add_collective(0, 0, group, "alltoall");
  const TaskId c1 = g.add_collective(1, 0, group, "alltoall");
  g.seal();

  ChromeTraceWriter writer(file("trace.json"));
  writer.on_run_begin(g);
  writer.on_task_begin(op, us(0));
  writer.on_task_begin(copy, us(0));
  writer.on_task_begin(c1, us(0));
  writer.on_task_end(op, us(1));
  writer.on_task_begin(sync, us(1));
  writer.on_task_end(copy, us(2));
  writer.on_task_begin(c0, us(2));
  writer.on_collective_begin(group, us(2));
  writer.on_task_end(c0, us(3));
  writer.on_task_end(c1, us(3));
  writer.on_task_end(sync, us(3));
  writer.on_run_end(us(3));
  const Json doc = parse_json(read_file(file("trace.json")));

  const Json& relu = only_event(doc, "X", "aten::relu");
  EXPECT_EQ(relu.str("cat"), "cpu_op");
  EXPECT_EQ(relu.at("args").str("phase"), "op_body");
  const Json& item = only_event(doc, "X", "aten::item");
  EXPECT_EQ(item.str("cat"), "host_sync");
  EXPECT_EQ(item.at("args").str("target"), "all streams");
  const Json& h2d = only_event(doc, "X", "Memcpy HtoD");
  EXPECT_EQ(h2d.str("cat"), "memcpy");
  EXPECT_EQ(h2d.at("args").str("kind"), "h2d");
  EXPECT_EQ(h2d.at("args").str("bytes"), "8192");
  auto a2a_events = events_where(doc, [](const Json& e) { return e.str("name") == "a2a_fwd"; });
  ASSERT_EQ(a2a_events.size(), 2u);
  const Json& rank0 = a2a_events[0]->str("pid") == "1" ? *a2a_events[0] : *a2a_events[1];
  EXPECT_EQ(rank0.at("args").str("kind"), "all_to_all");
  EXPECT_EQ(rank0.at("args").str("send_bytes"), "100");
  EXPECT_EQ(rank0.at("args").str("recv_bytes"), "30");
  // Rank 1 waited from 0 to 2 us, rank 0 arrived last: one wait slice.
  const Json& wait = only_event(doc, "X", "wait: a2a_fwd");
  EXPECT_EQ(wait.str("pid"), "2");
  EXPECT_EQ(wait.str("dur"), "2.000000");
}

TEST_F(ChromeTraceWriterTest, TimesPrintIntegerPicosecondsWithSixDecimals) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  const TaskId a = g.add_kernel(0, 0, "a", "op", KernelDesc{});
  const TaskId b = g.add_kernel(0, 0, "b", "op", KernelDesc{});
  g.seal();

  ChromeTraceWriter writer(file("trace.json"));
  writer.on_run_begin(g);
  writer.on_task_begin(a, Time::from_ps(1));
  writer.on_task_end(a, Time::from_ps(1));
  writer.on_task_begin(b, Time::from_ps(999'999));
  writer.on_task_end(b, Time::from_ps(123'456'789'012'345));
  writer.on_run_end(Time::from_ps(123'456'789'012'345));
  const Json doc = parse_json(read_file(file("trace.json")));
  EXPECT_EQ(only_event(doc, "X", "a").str("ts"), "0.000001");
  EXPECT_EQ(only_event(doc, "X", "a").str("dur"), "0.000000");
  EXPECT_EQ(only_event(doc, "X", "b").str("ts"), "0.999999");
  EXPECT_EQ(only_event(doc, "X", "b").str("dur"), "123456788.012346");
}

TEST_F(ChromeTraceWriterTest, StreamWaitThatWaitsIsASlice) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute", "copy"}});
  const TaskId record = g.add_event_record(0, 1);
  const TaskId wait = g.add_stream_wait(0, 0, record);
  g.seal();

  ChromeTraceWriter writer(file("trace.json"));
  writer.on_run_begin(g);
  writer.on_task_begin(wait, us(1));
  writer.on_task_begin(record, us(4));
  writer.on_task_end(record, us(4));
  writer.on_task_end(wait, us(4));
  writer.on_run_end(us(4));
  const Json doc = parse_json(read_file(file("trace.json")));
  const Json& w = only_event(doc, "X", "cudaStreamWaitEvent");
  EXPECT_EQ(w.str("cat"), "stream_wait");
  EXPECT_EQ(w.str("ts"), "1.000000");
  EXPECT_EQ(w.str("dur"), "3.000000");
  const Json& r = only_event(doc, "X", "cudaEventRecord");
  EXPECT_EQ(r.str("dur"), "0.000000");
  EXPECT_NE(r.str("tid"), w.str("tid"));
}

TEST_F(ChromeTraceWriterTest, NamesAreEscapedIntoValidJson) {
  const std::string nasty = "void f<\"q\">(a\\b)\n\t\x01\x7f end";
  TaskGraph g;
  g.add_rank(RankInfo{"rank \"0\"", 1, {"s\\0"}});
  const TaskId k = g.add_kernel(0, 0, nasty, "op", KernelDesc{});
  g.seal();

  ChromeTraceWriter writer(file("trace.json"));
  writer.on_run_begin(g);
  writer.on_task_begin(k, us(0));
  writer.on_task_end(k, us(1));
  writer.on_run_end(us(1));
  const Json doc = parse_json(read_file(file("trace.json")));
  EXPECT_EQ(only_event(doc, "X", nasty).str("dur"), "1.000000");
  EXPECT_EQ(only_event(doc, "M", "process_name").at("args").str("name"), "rank \"0\"");
}

TEST_F(ChromeTraceWriterTest, IdenticalCallbackSequencesGiveIdenticalBytes) {
  const std::string first = write_scenario(file("a.json"));
  const std::string second = write_scenario(file("b.json"));
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first, second);
}

TEST_F(ChromeTraceWriterTest, FileAppearsOnlyWhenFinishedThroughATmpFile) {
  Scenario s;
  const fs::path path = file("trace.json");
  const fs::path tmp = file("trace.json.tmp");
  ChromeTraceWriter writer(path);
  writer.on_run_begin(s.graph);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::exists(tmp));
  writer.on_run_end(us(0));
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(tmp));
  // finish() is idempotent.
  writer.finish();
  EXPECT_NO_THROW(parse_json(read_file(path)));
}

TEST_F(ChromeTraceWriterTest, AbandonedRunLeavesNoFiles) {
  Scenario s;
  {
    ChromeTraceWriter writer(file("trace.json"));
    writer.on_run_begin(s.graph);
    writer.on_task_begin(s.mark, us(0));
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(ChromeTraceWriterTest, UnwritablePathThrowsNamingIt) {
  Scenario s;
  const fs::path missing = dir_ / "no_such_dir" / "trace.json";
  ChromeTraceWriter writer(missing);
  try {
    writer.on_run_begin(s.graph);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }

  // A directory in the way of the final rename: the error names the path, the .tmp is removed.
  const fs::path blocked = file("blocked");
  fs::create_directories(blocked / "child");
  ChromeTraceWriter blocked_writer(blocked);
  blocked_writer.on_run_begin(s.graph);
  try {
    blocked_writer.finish();
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(blocked.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(file("blocked.tmp")));
}

TEST_F(ChromeTraceWriterTest, FinishBeforeRunBeginIsALogicError) {
  ChromeTraceWriter writer(file("trace.json"));
  EXPECT_THROW(writer.finish(), std::logic_error);
}

TEST_F(ChromeTraceWriterTest, FinishAfterAFailedRunDrawsUnfinishedTasks) {
  Scenario s;
  ChromeTraceWriter writer(file("trace.json"));
  // Rank 1 never reaches the all-reduce; the executor throws instead of calling on_run_end.
  writer.on_run_begin(s.graph);
  writer.on_task_begin(s.coll0, us(2));
  writer.on_task_begin(s.copy, us(0));
  writer.on_task_end(s.copy, us(7));
  writer.finish();
  const Json doc = parse_json(read_file(file("trace.json")));
  const Json& wait = only_event(doc, "X", "wait: allreduce_grad");
  EXPECT_EQ(wait.str("ts"), "2.000000");
  EXPECT_EQ(wait.str("dur"), "5.000000");
  EXPECT_TRUE(wait.at("args").at("unfinished").boolean);
  EXPECT_TRUE(
      events_where(doc, [](const Json& e) { return e.str("name") == "allreduce_grad"; }).empty());
}

/// 40,000 launches and kernels on one rank, written to `path`: over 8 MiB of JSON.
constexpr int kLargeRunKernels = 40'000;
void write_large_run(const fs::path& path) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0", 1, {"compute"}});
  std::vector<std::pair<TaskId, TaskId>> pairs;
  for (int i = 0; i < kLargeRunKernels; ++i) {
    const TaskId k = g.add_kernel(0, 0, "elementwise_kernel_with_a_long_templated_name<float>",
                                  "aten::add", KernelDesc{});
    pairs.emplace_back(g.add_launch(0, 0, "cudaLaunchKernel", "aten::add", 0, k), k);
  }
  g.seal();

  ChromeTraceWriter writer(path);
  writer.on_run_begin(g);
  int64_t ps = 0;
  for (const auto& [launch, kernel] : pairs) {
    writer.on_task_begin(launch, Time::from_ps(ps));
    writer.on_task_end(launch, Time::from_ps(ps + 4'000'000));
    writer.on_task_begin(kernel, Time::from_ps(ps + 4'000'000));
    writer.on_task_end(kernel, Time::from_ps(ps + 9'000'001));
    ps += 10'000'000;
  }
  writer.on_run_end(Time::from_ps(ps));
}

TEST_F(ChromeTraceWriterTest, LargeRunStreamsThroughSeveralChunks) {
  constexpr int kKernels = kLargeRunKernels;
  write_large_run(file("trace.json"));
  const std::string text = read_file(file("trace.json"));
  EXPECT_GT(text.size(), size_t{8} << 20);  // more than one 4 MiB chunk
  const Json doc = parse_json(text);
  size_t slices = 0;
  size_t flow_starts = 0;
  size_t flow_ends = 0;
  for (const Json& e : doc.at("traceEvents").items) {
    const std::string& ph = e.str("ph");
    slices += ph == "X";
    flow_starts += ph == "s";
    flow_ends += ph == "f";
  }
  EXPECT_EQ(slices, 2u * kKernels);
  EXPECT_EQ(flow_starts, size_t{kKernels});
  EXPECT_EQ(flow_ends, size_t{kKernels});
}

TEST_F(ChromeTraceWriterTest, GzipTraceDecompressesToThePlainOne) {
  // Several 4 MiB buffers through the compressing thread, in order, and the gzip member ended.
  write_large_run(file("trace.json"));
  write_large_run(file("trace.json.gz"));
  const std::string plain = read_file(file("trace.json"));
  EXPECT_LT(fs::file_size(file("trace.json.gz")), plain.size() / 4);
  EXPECT_EQ(test::read_gzip_file(file("trace.json.gz")), plain);
  EXPECT_FALSE(fs::exists(file("trace.json.gz.tmp")));
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

TEST_F(ChromeTraceWriterTest, LinkRatesBecomeCounterTracksInAFabricProcess) {
  Scenario s;
  ChromeTraceWriter writer(file("trace.json"));
  writer.on_run_begin(s.graph);
  const std::vector<LinkInfo> links{
      {"gpu0 -> nvswitch0 (nvlink4)", Bandwidth::gigabytes_per_second(450)},
      {"never used", Bandwidth::gigabytes_per_second(1)}};
  writer.on_links_declared(links);
  writer.on_link_rate(0, us(2), Bandwidth::gigabytes_per_second(225), 1);
  writer.on_link_rate(1, us(2), Bandwidth{}, 0);
  writer.on_link_rate(0, us(4), Bandwidth{}, 0);
  writer.on_run_end(us(4));
  const Json doc = parse_json(read_file(file("trace.json")));
  const auto counters = events_where(doc, [](const Json& e) { return e.str("ph") == "C"; });
  ASSERT_EQ(counters.size(), 2u) << "an idle link gets no track";
  EXPECT_EQ(counters[0]->str("name"), "gpu0 -> nvswitch0 (nvlink4)");
  EXPECT_EQ(counters[0]->str("ts"), "2.000000");
  EXPECT_EQ(counters[0]->at("args").str("utilization_%"), "50");
  EXPECT_EQ(counters[1]->at("args").str("GB/s"), "0");
  const auto fabric = events_where(doc, [](const Json& e) {
    return e.str("ph") == "M" && e.str("name") == "process_name" &&
           e.at("args").str("name") == "fabric links";
  });
  ASSERT_EQ(fabric.size(), 1u);
  EXPECT_EQ(fabric[0]->str("pid"), counters[0]->str("pid"));
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

// Decimated link counters: 100 rate changes 10 ns apart, then one after a pause, with a 1 us
// interval: the first change, the last level before the pause (pending) and the change after it.
TEST_F(ChromeTraceWriterTest, LinkCountersAreDecimatedToTheSampleInterval) {
  Scenario s;
  ChromeTraceOptions options;
  options.link_sample_interval = Duration::from_us(1);
  ChromeTraceWriter writer(file("trace.json"), options);
  writer.on_run_begin(s.graph);
  const std::vector<LinkInfo> links{
      {"gpu0 -> nvswitch0 (nvlink4)", Bandwidth::gigabytes_per_second(100)}};
  writer.on_links_declared(links);
  for (int i = 0; i < 100; ++i) {
    writer.on_link_rate(0, Time::from_ps(1'000'000 + int64_t{i} * 10'000),
                        Bandwidth::gigabytes_per_second(i + 1), 1);
  }
  writer.on_link_rate(0, us(5), Bandwidth{}, 0);
  writer.on_run_end(us(6));
  const Json doc = parse_json(read_file(file("trace.json")));
  const auto counters = events_where(doc, [](const Json& e) { return e.str("ph") == "C"; });
  ASSERT_EQ(counters.size(), 3u);
  EXPECT_EQ(counters[0]->at("args").str("GB/s"), "1");
  EXPECT_EQ(counters[1]->str("ts"), "1.990000");  // the last level before the pause
  EXPECT_EQ(counters[1]->at("args").str("GB/s"), "100");
  EXPECT_EQ(counters[2]->str("ts"), "5.000000");
  EXPECT_EQ(counters[2]->at("args").str("GB/s"), "0");
}

// Two pipeline stages: micro-batch markers are named instants on the CPU thread, stage 1's wait
// in the pp send/recv is a "bubble" slice, and a tp all-reduce carries its dimension.
TEST_F(ChromeTraceWriterTest, PipelineMarkersAndBubblesAreVisible) {
  TaskGraph g;
  g.add_rank(RankInfo{"rank 0 (stage 0)", 1, {"compute"}});
  g.add_rank(RankInfo{"rank 1 (stage 1)", 1, {"compute"}});
  const TaskId marker = g.add_cpu_op(0, 0, "forward mb 3", HostPhase::kMarker);
  CollectiveDesc pipeline{CollectiveKind::kSendRecv, {0, 1}, 4096, {}};
  pipeline.parallel_dim = ParallelDim::kPipeline;
  CollectiveDesc tensor{CollectiveKind::kAllReduce, {0, 1}, 4096, {}};
  tensor.parallel_dim = ParallelDim::kTensor;
  const CollectiveId p2p = g.add_collective_group(pipeline, "pp:send_recv");
  const CollectiveId tp = g.add_collective_group(tensor, "tp:all_reduce");
  const TaskId send = g.add_collective(0, 0, p2p, "pp:send_recv");
  const TaskId recv = g.add_collective(1, 0, p2p, "pp:send_recv");
  const TaskId ar0 = g.add_collective(0, 0, tp, "tp:all_reduce");
  const TaskId ar1 = g.add_collective(1, 0, tp, "tp:all_reduce");
  g.seal();
  {
    ChromeTraceWriter w(file("trace.json"));
    w.on_run_begin(g);
    w.on_task_begin(marker, us(1));
    w.on_task_end(marker, us(1));
    w.on_task_begin(recv, us(0));  // stage 1 waits for stage 0 from 0 to 4 us
    w.on_task_begin(send, us(4));
    w.on_collective_begin(p2p, us(4));
    w.on_task_end(send, us(6));
    w.on_task_end(recv, us(6));
    w.on_task_begin(ar0, us(6));
    w.on_task_begin(ar1, us(7));
    w.on_collective_begin(tp, us(7));
    w.on_task_end(ar0, us(9));
    w.on_task_end(ar1, us(9));
    w.on_run_end(us(9));
  }
  const Json doc = parse_json(read_file(file("trace.json")));

  const Json& mark = only_event(doc, "i", "forward mb 3");
  EXPECT_EQ(mark.str("s"), "t");
  EXPECT_EQ(mark.str("cat"), "marker");
  EXPECT_EQ(mark.str("pid"), "1");
  EXPECT_EQ(mark.str("ts"), "1.000000");
  EXPECT_EQ(mark.at("args").str("task"), std::to_string(marker));
  EXPECT_TRUE(events_where(doc, [](const Json& e) {
                return e.str("ph") == "X" && e.str("name") == "forward mb 3";
              }).empty());

  const Json& bubble = only_event(doc, "X", "bubble: pp:send_recv");
  EXPECT_EQ(bubble.str("cat"), "bubble");
  EXPECT_EQ(bubble.str("pid"), "2");
  EXPECT_EQ(bubble.str("ts"), "0.000000");
  EXPECT_EQ(bubble.str("dur"), "4.000000");
  EXPECT_EQ(bubble.at("args").str("parallel_dim"), "pp");
  auto transfers = events_where(
      doc, [](const Json& e) { return e.str("ph") == "X" && e.str("name") == "pp:send_recv"; });
  ASSERT_EQ(transfers.size(), 2u);
  for (const Json* t : transfers)
    EXPECT_EQ(t->at("args").str("parallel_dim"), "pp");

  // Other collectives keep "wait: ", with their dimension in args.
  const Json& wait = only_event(doc, "X", "wait: tp:all_reduce");
  EXPECT_EQ(wait.str("cat"), "rendezvous");
  EXPECT_EQ(wait.at("args").str("parallel_dim"), "tp");

  std::map<std::string, std::string> process_names;
  for (const Json& e : doc.at("traceEvents").items) {
    if (e.str("ph") == "M" && e.str("name") == "process_name") {
      process_names[e.str("pid")] = e.at("args").str("name");
    }
  }
  EXPECT_EQ(process_names, (std::map<std::string, std::string>{{"1", "rank 0 (stage 0)"},
                                                               {"2", "rank 1 (stage 1)"}}));
}

// Collectives that state no parallel dimension carry no "parallel_dim".
TEST_F(ChromeTraceWriterTest, CollectivesOfNoDimensionHaveNoParallelDim) {
  const Json doc = parse_json(write_scenario(file("trace.json")));
  for (const Json* e : events_where(doc, [](const Json& ev) { return ev.str("ph") == "X"; }))
    EXPECT_EQ(e->at("args").find("parallel_dim"), nullptr) << e->str("name");
}

}  // namespace
}  // namespace upsim

namespace upsim {
namespace {

// ---- rank filter -----------------------------------------------------------------------------

/// Four ranks, each with an op that launches a kernel and a member of one all-reduce over all.
struct FourRanks {
  TaskGraph graph;
  std::vector<TaskId> launches;
  std::vector<TaskId> kernels;
  std::vector<TaskId> collectives;
  CollectiveId group = 0;

  FourRanks() {
    for (RankId r = 0; r < 4; ++r)
      graph.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute"}});
    group = graph.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllReduce, {0, 1, 2, 3}, 4096, {}}, "dp:all_reduce");
    for (RankId r = 0; r < 4; ++r) {
      KernelDesc k;
      k.cls = KernelClass::kMemoryBound;
      k.bytes_read = 1024;
      kernels.push_back(graph.add_kernel(r, 0, "vectorized_elementwise", "aten::add", k));
      launches.push_back(
          graph.add_launch(r, 0, "cudaLaunchKernel", "aten::add", 0, kernels.back()));
      collectives.push_back(graph.add_collective(r, 0, group, "c10d::allreduce_"));
    }
    graph.seal();
  }

  void drive(Observer& o) const {
    o.on_run_begin(graph);
    const std::vector<LinkInfo> links{{"gpu0 -> gpu1", Bandwidth::gigabytes_per_second(100)}};
    o.on_links_declared(links);
    for (RankId r = 0; r < 4; ++r) {
      o.on_task_begin(launches[r], us(r));
      o.on_task_end(launches[r], us(r + 1));
      o.on_task_begin(kernels[r], us(r + 1));
      o.on_task_end(kernels[r], us(r + 2));
      o.on_task_begin(collectives[r], us(r + 2));
    }
    o.on_collective_begin(group, us(5));
    o.on_link_rate(0, us(5), Bandwidth::gigabytes_per_second(50), 1);
    for (RankId r = 0; r < 4; ++r)
      o.on_task_end(collectives[r], us(9));
    o.on_link_rate(0, us(9), Bandwidth{}, 0);
    o.on_run_end(us(9));
  }
};

ChromeTraceOptions only(std::vector<RankId> ranks) {
  ChromeTraceOptions options;
  options.ranks = std::move(ranks);
  return options;
}

std::string write_four_ranks(const fs::path& path, ChromeTraceOptions options) {
  FourRanks s;
  ChromeTraceWriter writer(path, std::move(options));
  s.drive(writer);
  return read_file(path);
}

// A trace of some ranks draws the link counters of their nodes and of the links between nodes,
// not those inside other nodes.
TEST_F(ChromeTraceWriterTest, RankFilterDrawsTheLinksOfTheDrawnRanksNodes) {
  FourRanks s;  // ranks 0..3 on GPUs 0..3; GPUs 0, 1 in node 0, GPUs 2, 3 in node 1
  const std::vector<LinkInfo> links{
      {"node0/gpu0 -> node0/nvswitch", Bandwidth::gigabytes_per_second(300), 0, 0},
      {"node1/gpu2 -> node1/nvswitch", Bandwidth::gigabytes_per_second(300), 1, 2},
      {"leaf0 -> spine0", Bandwidth::gigabytes_per_second(50), -1, -1}};
  auto counters = [&](const fs::path& path, ChromeTraceOptions options) {
    ChromeTraceWriter w(path, std::move(options));
    w.on_run_begin(s.graph);
    w.on_links_declared(links);
    for (uint32_t l = 0; l < 3; ++l)
      w.on_link_rate(l, us(1), Bandwidth::gigabytes_per_second(10), 1);
    w.on_run_end(us(2));
    std::set<std::string> names;
    const Json doc = parse_json(read_file(path));
    for (const Json* e : events_where(doc, [](const Json& x) { return x.str("ph") == "C"; })) {
      names.insert(e->str("name"));
    }
    return names;
  };
  EXPECT_EQ(counters(file("rank0.json"), only({0})),
            (std::set<std::string>{"node0/gpu0 -> node0/nvswitch", "leaf0 -> spine0"}));
  EXPECT_EQ(counters(file("all.json"), ChromeTraceOptions{}).size(), 3u);
}

TEST_F(ChromeTraceWriterTest, RankFilterDrawsOnlyTheChosenProcessesWithWholeFlows) {
  const Json doc = parse_json(write_four_ranks(file("trace.json"), only({3, 1, 3})));
  const Json full = parse_json(write_four_ranks(file("full.json"), ChromeTraceOptions{}));

  std::set<std::string> names;
  for (const Json* e : events_where(doc, [](const Json& x) {
         return x.str("ph") == "M" && x.str("name") == "process_name";
       })) {
    names.insert(e->at("args").str("name"));
  }
  EXPECT_EQ(names, (std::set<std::string>{"rank 1", "rank 3", "fabric links"}));

  // Every event is on a drawn rank (pids 2 and 4) or the fabric process (pid 5, as unfiltered).
  std::map<std::string, int> per_pid;
  for (const Json& e : doc.at("traceEvents").items)
    ++per_pid[e.str("pid")];
  EXPECT_EQ(per_pid.size(), 3u);
  EXPECT_TRUE(per_pid.count("2") && per_pid.count("4") && per_pid.count("5"));
  EXPECT_EQ(events_where(doc, [](const Json& e) { return e.str("ph") == "C"; }).size(), 2u);

  // The drawn ranks' events are exactly the full trace's events of those pids.
  const auto slices = [](const Json& d, const std::string& pid) {
    std::vector<std::string> out;
    for (const Json& e : d.at("traceEvents").items) {
      if (e.str("pid") == pid && e.str("ph") != "M") {
        out.push_back(e.str("ph") + e.str("name") + e.str("ts") + e.str("tid"));
      }
    }
    return out;
  };
  EXPECT_FALSE(slices(doc, "2").empty());
  EXPECT_EQ(slices(doc, "2"), slices(full, "2"));
  EXPECT_EQ(slices(doc, "4"), slices(full, "4"));

  // Each flow id has its start and its end, both on a drawn rank.
  std::map<std::string, std::string> flow_phases;
  for (const Json* e :
       events_where(doc, [](const Json& x) { return x.str("ph") == "s" || x.str("ph") == "f"; })) {
    flow_phases[e->str("id")] += e->str("ph");
  }
  FourRanks s;
  EXPECT_EQ(flow_phases,
            (std::map<std::string, std::string>{{std::to_string(s.kernels[1]), "sf"},
                                                {std::to_string(s.kernels[3]), "sf"}}));

  EXPECT_EQ(doc.at("otherData").str("ranks_drawn"), "1,3 of 4");
  EXPECT_EQ(full.at("otherData").find("ranks_drawn"), nullptr);
}

TEST_F(ChromeTraceWriterTest, AFilterOfEveryRankDrawsTheUnfilteredEvents) {
  const std::string unfiltered = write_four_ranks(file("a.json"), ChromeTraceOptions{});
  // Only otherData says that the ranks were chosen.
  const std::string every = write_four_ranks(file("b.json"), only({0, 1, 2, 3}));
  const size_t other = unfiltered.find("\n],\"otherData\"");
  ASSERT_NE(other, std::string::npos);
  EXPECT_EQ(every.substr(0, other), unfiltered.substr(0, other));
  EXPECT_NE(every.find("\"ranks_drawn\":\"0-3 of 4\""), std::string::npos);
}

TEST_F(ChromeTraceWriterTest, RankFilterOutsideTheGraphIsRejectedAndLeavesNoFile) {
  FourRanks s;
  ChromeTraceWriter writer(file("trace.json"), only({2, 4}));
  try {
    writer.on_run_begin(s.graph);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0-3"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(ChromeTraceWriterTest, EmptyRankFilterKeepsOnlyTheFabricAndValidJson) {
  const Json doc = parse_json(write_four_ranks(file("trace.json"), only({})));
  for (const Json& e : doc.at("traceEvents").items)
    EXPECT_EQ(e.str("pid"), "5");
}

// ---- the summary and the trace agree on collective waits ------------------------------------

class OneMicrosecondHostOps final : public CpuCostModel {
 public:
  Duration host_duration(const HostOpDesc&) const override { return Duration::from_us(1); }
};
class FlopsAsMicroseconds final : public KernelCostModel {
 public:
  Duration kernel_duration(const KernelDesc& k, const DeviceProfile&) const override {
    return Duration::from_us_f(k.flops);
  }
};
class FiveMicrosecondCollectives final : public CollectiveCostModel {
 public:
  Duration collective_duration(const CollectiveDesc&) const override {
    return Duration::from_us(5);
  }
  Duration transfer_duration(const TransferDesc&) const override { return Duration::from_us(1); }
};

/// A trace time ("12.345678", microseconds with six decimals) in picoseconds, exactly.
int64_t trace_ps(const std::string& text) {
  const size_t dot = text.find('.');
  EXPECT_NE(dot, std::string::npos) << text;
  return std::stoll(text.substr(0, dot)) * 1'000'000 + std::stoll(text.substr(dot + 1));
}

/// Rank 0's comm stream reaches each iteration's all-reduce at once and waits for rank 1, whose
/// comm stream first runs a 30 us kernel, while rank 0's compute stream runs a 40 us kernel: the
/// wait is hidden behind compute, so rendezvous wait is 0 while the trace draws a "wait:" slice.
/// The summary's collective wait is what the trace draws, over the measured iterations.
TEST_F(ChromeTraceWriterTest, SummaryCollectiveWaitIsTheTracesWaitSlicesInTheWindow) {
  TaskGraph g;
  for (int r = 0; r < 2; ++r)
    g.add_rank(RankInfo{"rank " + std::to_string(r), 1, {"compute", "comm"}});
  constexpr uint32_t kIterations = 3;
  constexpr uint32_t kWarmup = 1;
  for (uint32_t it = 0; it < kIterations; ++it) {
    const CollectiveId ar = g.add_collective_group(
        CollectiveDesc{CollectiveKind::kAllReduce, {0, 1}, 1 << 20, {}}, "allreduce_grad");
    for (RankId r = 0; r < 2; ++r) {
      g.add_iteration_mark(r, 0, it);
      KernelDesc work;
      work.flops = r == 0 ? 40 : 30;
      const TaskId k = g.add_kernel(r, r == 0 ? 0 : 1, "work", "op", work);
      g.add_launch(r, 0, "cudaLaunchKernel", "op", 0, k);
      const TaskId c = g.add_collective(r, 1, ar, "nccl:all_reduce");
      g.add_launch(r, 0, "ncclAllReduce", "nccl:all_reduce", 0, c);
      g.add_host_sync(r, 0, kAllStreams, "torch.cuda.synchronize");
    }
  }
  g.seal();
  OneMicrosecondHostOps cpu;
  FlopsAsMicroseconds kernels;
  FiveMicrosecondCollectives collectives;
  AnalyticalNetwork network(collectives);
  ModelSet models{&kernels, &cpu, &network, std::vector<DeviceProfile>(g.rank_count()), {}};
  Engine engine;
  GraphExecutor exec(engine, g, models);
  RunSummaryObserver summary_observer(kWarmup);
  ChromeTraceWriter writer(file("trace.json"));
  exec.add_observer(&summary_observer);
  exec.add_observer(&writer);
  exec.run();
  const RunSummary summary = summary_observer.summary();
  const Json doc = parse_json(read_file(file("trace.json")));

  for (RankId r = 0; r < 2; ++r) {
    const std::string pid = std::to_string(r + 1);
    // The window: from the first measured iteration's mark to the rank's last slice end.
    std::vector<int64_t> marks;
    int64_t last_end = 0;
    std::vector<std::pair<int64_t, int64_t>> waits;
    for (const Json& e : doc.at("traceEvents").items) {
      if (e.find("pid") == nullptr || e.str("pid") != pid) continue;
      if (e.str("ph") == "i" && e.str("name").starts_with("iteration ")) {
        marks.push_back(trace_ps(e.str("ts")));
      }
      if (e.str("ph") != "X") continue;
      const int64_t begin = trace_ps(e.str("ts"));
      const int64_t end = begin + trace_ps(e.str("dur"));
      last_end = std::max(last_end, end);
      if (e.str("cat") == "rendezvous") waits.emplace_back(begin, end);
    }
    ASSERT_EQ(marks.size(), kIterations);
    const int64_t lo = marks[kWarmup];
    // Union of the wait slices clipped to [lo, last_end].
    std::sort(waits.begin(), waits.end());
    int64_t union_ps = 0;
    int64_t covered_to = lo;
    for (const auto& [b, e] : waits) {
      const int64_t from = std::max(b, covered_to);
      const int64_t to = std::min(e, last_end);
      if (to > from) union_ps += to - from;
      covered_to = std::max(covered_to, std::min(e, last_end));
    }
    const RankBreakdown& rank = summary.ranks[r];
    EXPECT_EQ(rank.window.ps(), last_end - lo) << rank.name;
    EXPECT_EQ(rank.collective_wait.ps(), union_ps) << rank.name;
  }
  // Rank 0 waited about 25 us per iteration behind its compute kernel: none of it is exposed.
  EXPECT_EQ(summary.ranks[0].rendezvous_wait, Duration::zero());
  EXPECT_GT(summary.ranks[0].collective_wait, Duration::from_us(40));
  EXPECT_EQ(summary.ranks[1].collective_wait, Duration::zero());
  // The table prints it, per iteration.
  const std::string text = format_run_summary(summary);
  EXPECT_NE(text.find("collective wait"), std::string::npos) << text;
}

TEST(FormatRankList, SortsDeduplicatesAndJoinsRuns) {
  EXPECT_EQ(format_rank_list({}), "");
  EXPECT_EQ(format_rank_list({7}), "7");
  EXPECT_EQ(format_rank_list({56, 3, 0, 1, 2, 3, 9, 10}), "0-3,9-10,56");
}

}  // namespace
}  // namespace upsim
