#include "workloads/trace/kineto_names.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace upsim::trace_build {

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

bool contains_nocase(std::string_view s, std::string_view what) {
  return std::search(s.begin(), s.end(), what.begin(), what.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != s.end();
}

bool is_nccl_kernel(std::string_view name) {
  return contains_nocase(name, "nccl");
}

bool is_stream_sync(std::string_view name) {
  return name == "cudaStreamSynchronize" || name == "cuStreamSynchronize" ||
         name == "cudaEventSynchronize" || name == "cuEventSynchronize";
}

bool is_device_sync(std::string_view name) {
  return name == "cudaDeviceSynchronize" || name == "cuCtxSynchronize";
}

bool is_stream_wait_event(std::string_view name) {
  return name == "cudaStreamWaitEvent" || name == "cuStreamWaitEvent";
}

int64_t kineto_type_bytes(std::string_view t) {
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "double" || t == "long int" || t == "long" || t == "c10::complex<float>") return 8;
  if (t == "c10::Half" || t == "c10::BFloat16" || t == "short" || t == "Half" || t == "BFloat16") {
    return 2;
  }
  if (t == "signed char" || t == "unsigned char" || t == "bool" || t == "c10::Float8_e4m3fn" ||
      t == "c10::Float8_e5m2") {
    return 1;
  }
  return -1;
}

std::optional<CollectiveKind> kind_from_collective_name(std::string_view n) {
  if (n.find("all_to_all") != std::string_view::npos ||
      n.find("alltoall") != std::string_view::npos)
    return CollectiveKind::kAllToAll;
  if (n.find("reduce_scatter") != std::string_view::npos) return CollectiveKind::kReduceScatter;
  if (n.find("allgather") != std::string_view::npos ||
      n.find("all_gather") != std::string_view::npos)
    return CollectiveKind::kAllGather;
  if (n.find("allreduce") != std::string_view::npos ||
      n.find("all_reduce") != std::string_view::npos || n == "reduce" || n == "barrier")
    return CollectiveKind::kAllReduce;
  if (n.find("broadcast") != std::string_view::npos) return CollectiveKind::kBroadcast;
  if (n == "send" || n == "recv") return CollectiveKind::kSendRecv;
  return std::nullopt;
}

CollectiveKind kind_from_kernel_name(std::string_view n) {
  if (n.find("AllReduce") != std::string_view::npos) return CollectiveKind::kAllReduce;
  if (n.find("AllGather") != std::string_view::npos) return CollectiveKind::kAllGather;
  if (n.find("ReduceScatter") != std::string_view::npos) return CollectiveKind::kReduceScatter;
  if (n.find("Broadcast") != std::string_view::npos) return CollectiveKind::kBroadcast;
  if (n.find("SendRecv") != std::string_view::npos || n.find("Send") != std::string_view::npos ||
      n.find("Recv") != std::string_view::npos)
    return CollectiveKind::kSendRecv;
  return CollectiveKind::kAllReduce;
}

std::vector<int64_t> ints_of(const JsonValue& v) {
  std::vector<int64_t> out;
  if (v.is_array()) {
    for (const JsonValue& i : v.items) {
      if (i.is_number()) out.push_back(i.integer);
    }
  } else if (v.is_string()) {
    // A number beyond int64 reads as -1, which no rank or size is.
    int64_t x = 0;
    bool in = false;
    bool overflow = false;
    for (char c : v.string) {
      if (c >= '0' && c <= '9') {
        overflow = overflow || !append_decimal_digit(x, c);
        in = true;
      } else if (in) {
        out.push_back(overflow ? -1 : x);
        x = 0;
        in = false;
        overflow = false;
      }
    }
    if (in) out.push_back(overflow ? -1 : x);
  }
  return out;
}

}  // namespace upsim::trace_build
