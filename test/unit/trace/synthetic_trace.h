// Builders of small Kineto traces for tests: each event is one JSON object, times in
// microseconds as text (so sub-microsecond digits can be written exactly).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace upsim::test {

inline constexpr int64_t kPid = 100;
inline constexpr int64_t kMainTid = 100;

inline std::string cpu_op(const std::string& name, int64_t tid, const std::string& ts,
                          const std::string& dur, const std::string& args = "{}") {
  return R"({"ph": "X", "cat": "cpu_op", "name": ")" + name + R"(", "pid": )" +
         std::to_string(kPid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + ts +
         R"(, "dur": )" + dur + R"(, "args": )" + args + "}";
}

inline std::string annotation(const std::string& name, int64_t tid, const std::string& ts,
                              const std::string& dur, const std::string& args = "{}") {
  return R"({"ph": "X", "cat": "user_annotation", "name": ")" + name + R"(", "pid": )" +
         std::to_string(kPid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + ts +
         R"(, "dur": )" + dur + R"(, "args": )" + args + "}";
}

inline std::string runtime(const std::string& name, int64_t tid, const std::string& ts,
                           const std::string& dur, int64_t correlation) {
  return R"({"ph": "X", "cat": "cuda_runtime", "name": ")" + name + R"(", "pid": )" +
         std::to_string(kPid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + ts +
         R"(, "dur": )" + dur + R"(, "args": {"correlation": )" + std::to_string(correlation) +
         "}}";
}

/// GPU work: cat is "kernel", "gpu_memcpy" or "gpu_memset".
inline std::string gpu(const std::string& cat, const std::string& name, int64_t stream,
                       const std::string& ts, const std::string& dur, int64_t correlation,
                       int64_t bytes = -1) {
  std::string args = R"({"device": 0, "stream": )" + std::to_string(stream) +
                     R"(, "correlation": )" + std::to_string(correlation);
  if (bytes >= 0) args += R"(, "bytes": )" + std::to_string(bytes);
  args += "}";
  return R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": 0, "tid": )" +
         std::to_string(stream) + R"(, "ts": )" + ts + R"(, "dur": )" + dur + R"(, "args": )" +
         args + "}";
}

inline std::string kineto_json(const std::vector<std::string>& events,
                               const std::string& extra_members = "") {
  std::string out = "{\n  \"schemaVersion\": 1,\n" + extra_members + "  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += "    " + events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  }
  return out + "  ]\n}\n";
}

/// A fresh directory under the system temp directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("upsim-trace-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
             std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& bytes) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace upsim::test
