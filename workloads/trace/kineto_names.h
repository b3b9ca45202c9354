// Kineto event names and values as the trace graph builder reads them: NCCL kernels,
// synchronisations, stream waits, collective kinds from op and kernel names, element sizes of
// Kineto type names, integer lists of args, and file names for messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost_models.h"
#include "sim/formats/json_reader.h"

namespace upsim::trace_build {

/// The last component of `path`, as messages name a trace.
std::string file_name(const std::string& path);
/// Whether `s` contains `what`, ignoring ASCII case.
bool contains_nocase(std::string_view s, std::string_view what);
/// A GPU kernel of NCCL (its name mentions nccl, in any case).
bool is_nccl_kernel(std::string_view name);
/// cudaStreamSynchronize / cudaEventSynchronize and their driver calls.
bool is_stream_sync(std::string_view name);
/// cudaDeviceSynchronize / cuCtxSynchronize.
bool is_device_sync(std::string_view name);
/// cudaStreamWaitEvent / cuStreamWaitEvent.
bool is_stream_wait_event(std::string_view name);
/// Bytes per element of a Kineto "Input type" name; -1 when unknown.
int64_t kineto_type_bytes(std::string_view t);
/// The collective a c10d / record_param_comms name describes ("all_to_all", "allreduce", ...).
std::optional<CollectiveKind> kind_from_collective_name(std::string_view n);
/// The collective an NCCL kernel name describes; all-reduce when it names none.
CollectiveKind kind_from_kernel_name(std::string_view n);
/// The integers of an arg: an array's numbers, or the digit runs of a string ("[0, 1, 2]").
std::vector<int64_t> ints_of(const JsonValue& v);

}  // namespace upsim::trace_build
