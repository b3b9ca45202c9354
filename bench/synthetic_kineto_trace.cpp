#include "bench/synthetic_kineto_trace.h"

#include <fmt/format.h>

#include <cstdint>
#include <iterator>

namespace upsim {

namespace {

constexpr size_t kTargetBytes = size_t{200} << 20;
constexpr int kOpsPerStep = 2000;

}  // namespace

std::string synthetic_kineto_trace() {
  std::string out;
  out.reserve(kTargetBytes + (1 << 20));
  out +=
      "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA "
      "H100\", \"totalGlobalMem\": 85520809984, \"numSms\": 132}],\n  \"distributedInfo\": "
      "{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n  \"traceEvents\": [\n";
  auto it = std::back_inserter(out);
  int64_t ts = 1694128201000000;
  int64_t corr = 1;
  int step = 0;
  bool first = true;
  while (out.size() < kTargetBytes) {
    const int64_t step_begin = ts;
    const int64_t step_dur = kOpsPerStep * 20 + 10;
    fmt::format_to(
        it,
        "{}  {{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{}\", "
        "\"pid\": 4242, \"tid\": 4242, \"ts\": {}.125, \"dur\": {}, \"args\": "
        "{{\"External id\": {}}}}}",
        first ? "" : ",\n", step, step_begin, step_dur, corr);
    first = false;
    ts += 5;
    for (int op = 0; op < kOpsPerStep; ++op, ts += 20, ++corr) {
      fmt::format_to(
          it,
          ",\n  {{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::addmm\", \"pid\": 4242, "
          "\"tid\": 4242, \"ts\": {}.250, \"dur\": 15.5, \"args\": {{\"External id\": {}, "
          "\"Record function id\": {}, \"Ev Idx\": {}, \"Input Dims\": [[512], [4096, 1024], "
          "[1024, 512], [], []], \"Input type\": [\"float\", \"float\", \"float\", \"Scalar\", "
          "\"Scalar\"]}}}}"
          ",\n  {{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
          "\"pid\": 4242, \"tid\": 4242, \"ts\": {}.5, \"dur\": 6.25, \"args\": {{\"External "
          "id\": {}, \"cbid\": 211, \"correlation\": {}}}}}"
          ",\n  {{\"ph\": \"f\", \"id\": {}, \"pid\": 0, \"tid\": 7, \"ts\": {}, \"cat\": "
          "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}}"
          ",\n  {{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ampere_sgemm_128x64_tn\", "
          "\"pid\": 0, \"tid\": 7, \"ts\": {}.75, \"dur\": 12.125, \"args\": {{\"External id\": "
          "{}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {}, "
          "\"registers per thread\": 126, \"shared memory\": 8704, \"blocks per SM\": 3.764706, "
          "\"warps per SM\": 7.529412, \"grid\": [16, 8, 2], \"block\": [64, 1, 1], \"est. "
          "achieved occupancy %\": 24}}}}"
          ",\n  {{\"ph\": \"s\", \"id\": {}, \"pid\": 4242, \"tid\": 4242, \"ts\": {}, \"cat\": "
          "\"ac2g\", \"name\": \"ac2g\"}}",
          ts, corr, corr, corr, ts + 3, corr, corr, corr, ts + 10, ts + 10, corr, corr, corr,
          ts + 3);
    }
    ts += 5;
    ++step;
  }
  out += "\n  ],\n  \"traceName\": \"synthetic\"\n}\n";
  return out;
}

}  // namespace upsim
