// Chakra execution traces (MLCommons Chakra ET, `.et` files): the message stream of one file,
// parsed by libprotobuf into the classes generated from sim/formats/chakra/et_def.proto (package
// upsim.chakra_et, the schema's messages and field numbers).
//
// Contract:
//  - A file is a stream of messages, each preceded by its size in bytes as a base-128 varint (at
//    most 10 bytes; protobuf's delimited framing, as Chakra's converters write it): one
//    GlobalMetadata, then Node messages to the end of the file.
//  - ChakraEtReader reads bytes it does not own (the caller keeps them alive), front to back, one
//    message at a time; each message is parsed on its own, so files larger than protobuf's 2 GiB
//    stream limit read too. Fields the schema does not know are skipped (newer schema versions
//    read); a NodeType value it does not list is kept as its number.
//  - Everything it rejects is a ParseError naming the file, the message (its index: 0 is the
//    GlobalMetadata, 1 the first Node) and the byte offset of its size varint:
//      rank0.et: message 12 (Node) at byte 4410: its size, 180 bytes, runs past the end of the file
//      (97 bytes left; truncated, or not a Chakra trace?)
//    for a size varint that runs past the end of the file or is longer than 10 bytes, a message
//    over ChakraEtLimits::max_message_bytes or past the end of the file, and a message that does
//    not parse (a malformed field, nesting deeper than ChakraEtLimits::recursion_limit, a string
//    field that is not UTF-8, which proto3 requires).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sim/formats/chakra/et_def.pb.h"

namespace upsim {

struct ChakraEtLimits {
  /// Largest message, in bytes (a Node of the shipped traces is under 8 KiB; protobuf's own limit
  /// is 2 GiB - 1).
  size_t max_message_bytes = size_t{256} << 20;
  /// Deepest nesting of messages and groups within one message (the schema nests three deep:
  /// Node > AttributeProto > Int64List, ...).
  int recursion_limit = 16;
};

class ChakraEtReader {
 public:
  ChakraEtReader(std::string_view bytes, std::string file, ChakraEtLimits limits = {});

  /// Reads the first message into `metadata`. Call once, before next_node.
  void read_metadata(chakra_et::GlobalMetadata& metadata);
  /// Reads the next message into `node` (cleared first); false at the end of the file.
  bool next_node(chakra_et::Node& node);

  /// Messages read so far (the index of the next one).
  size_t messages_read() const { return index_; }
  /// Byte offset of the next message's size varint.
  size_t offset() const { return pos_; }
  const std::string& file() const { return file_; }

 private:
  /// The bytes of the next message, past its size varint; throws ParseError.
  std::string_view next_message(const char* type);
  void parse(std::string_view message, google::protobuf::MessageLite& out, const char* type,
             size_t at) const;
  [[noreturn]] void fail(const char* type, size_t at, const std::string& what) const;

  std::string_view bytes_;
  std::string file_;
  ChakraEtLimits limits_;
  size_t pos_ = 0;
  size_t index_ = 0;
};

}  // namespace upsim
