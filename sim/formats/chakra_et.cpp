#include "sim/formats/chakra_et.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "sim/formats/parse_error.h"

namespace upsim {

namespace {

/// Longest base-128 varint of a 64-bit value.
constexpr size_t kMaxVarintBytes = 10;

}  // namespace

ChakraEtReader::ChakraEtReader(std::string_view bytes, std::string file, ChakraEtLimits limits)
    : bytes_(bytes), file_(std::move(file)), limits_(limits) {
  limits_.max_message_bytes = std::min<size_t>(limits_.max_message_bytes, INT_MAX);
}

void ChakraEtReader::fail(const char* type, size_t at, const std::string& what) const {
  throw ParseError(file_, "message " + std::to_string(index_) + " (" + type + ") at byte " +
                              std::to_string(at) + ": " + what);
}

std::string_view ChakraEtReader::next_message(const char* type) {
  const size_t at = pos_;
  const size_t left = bytes_.size() - pos_;
  const size_t window = std::min(left, kMaxVarintBytes);
  google::protobuf::io::ArrayInputStream array(bytes_.data() + pos_, static_cast<int>(window));
  google::protobuf::io::CodedInputStream in(&array);
  uint64_t size = 0;
  if (!in.ReadVarint64(&size)) {
    if (window < kMaxVarintBytes) {
      fail(type, at,
           "its size varint runs past the end of the file (" + std::to_string(left) +
               " bytes left; truncated, or not a Chakra trace?)");
    }
    fail(type, at, "its size varint is longer than 10 bytes (not a Chakra trace?)");
  }
  pos_ += static_cast<size_t>(in.CurrentPosition());
  const size_t body_left = bytes_.size() - pos_;
  if (size > body_left) {
    fail(type, at,
         "its size, " + std::to_string(size) + " bytes, runs past the end of the file (" +
             std::to_string(body_left) + " bytes left; truncated, or not a Chakra trace?)");
  }
  if (size > limits_.max_message_bytes) {
    fail(type, at,
         "its size, " + std::to_string(size) + " bytes, is over the limit of " +
             std::to_string(limits_.max_message_bytes) + " bytes for one message");
  }
  const std::string_view message = bytes_.substr(pos_, static_cast<size_t>(size));
  pos_ += static_cast<size_t>(size);
  return message;
}

void ChakraEtReader::parse(std::string_view message, google::protobuf::MessageLite& out,
                           const char* type, size_t at) const {
  const int size = static_cast<int>(message.size());  // <= max_message_bytes <= INT_MAX
  google::protobuf::io::ArrayInputStream array(message.data(), size);
  google::protobuf::io::CodedInputStream in(&array);
  in.SetTotalBytesLimit(size);
  in.SetRecursionLimit(limits_.recursion_limit);
  // ConsumedEntireMessage: false when the parse stopped at an end-group tag before the end.
  if (!out.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
    fail(type, at,
         "its " + std::to_string(message.size()) + " bytes are not a " + type +
             " (a malformed field, nesting deeper than " + std::to_string(limits_.recursion_limit) +
             ", or a string that is not UTF-8; truncated, or not a Chakra trace?)");
  }
}

void ChakraEtReader::read_metadata(chakra_et::GlobalMetadata& metadata) {
  const size_t at = pos_;
  if (at >= bytes_.size()) fail("GlobalMetadata", at, "the file ends before it");
  const std::string_view message = next_message("GlobalMetadata");
  parse(message, metadata, "GlobalMetadata", at);
  ++index_;
}

bool ChakraEtReader::next_node(chakra_et::Node& node) {
  if (pos_ >= bytes_.size()) return false;
  const size_t at = pos_;
  const std::string_view message = next_message("Node");
  parse(message, node, "Node", at);
  ++index_;
  return true;
}

}  // namespace upsim
