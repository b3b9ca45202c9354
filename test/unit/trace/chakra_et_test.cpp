#include "sim/formats/chakra_et.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/formats/parse_error.h"
#include "test/unit/trace/chakra_writer.h"

namespace upsim {
namespace {

using namespace upsim::test::chakra;

/// The ParseError message of reading every message of `bytes`, or "(no error)".
std::string read_error(const std::string& bytes, ChakraEtLimits limits = {}) {
  ChakraEtReader reader(bytes, "rank0.et", limits);
  chakra_et::GlobalMetadata metadata;
  chakra_et::Node node;
  try {
    reader.read_metadata(metadata);
    while (reader.next_node(node)) {
    }
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), "rank0.et");
    return e.what();
  }
  return "(no error)";
}

std::string two_nodes() {
  return et_file({node(1, "aten::mm", chakra_et::COMP_NODE, {}, 10, {cpu()}),
                  node(2, "sgemm", chakra_et::COMP_NODE, {1}, 50, {gpu()})});
}

TEST(ChakraEt, reads_the_metadata_then_each_node_with_its_index_and_offset) {
  const std::string bytes = two_nodes();
  ChakraEtReader reader(bytes, "rank0.et");
  chakra_et::GlobalMetadata metadata;
  reader.read_metadata(metadata);
  EXPECT_EQ(metadata.version(), "0.0.4");
  EXPECT_EQ(reader.messages_read(), 1u);
  chakra_et::Node node;
  ASSERT_TRUE(reader.next_node(node));
  EXPECT_EQ(node.name(), "aten::mm");
  ASSERT_TRUE(reader.next_node(node));
  EXPECT_EQ(node.name(), "sgemm");
  EXPECT_EQ(node.data_deps_size(), 1);
  EXPECT_EQ(node.attr(0).name(), "is_cpu_op");
  EXPECT_FALSE(reader.next_node(node));
  EXPECT_EQ(reader.messages_read(), 3u);
  EXPECT_EQ(reader.offset(), bytes.size());
}

TEST(ChakraEt, unknown_fields_and_node_types_read) {
  chakra_et::Node newer = node(1, "checkpoint", static_cast<chakra_et::NodeType>(10), {}, 3, {});
  newer.GetReflection()->MutableUnknownFields(&newer)->AddLengthDelimited(11, "newer field");
  const std::string bytes = et_file({newer});
  ChakraEtReader reader(bytes, "rank0.et");
  chakra_et::GlobalMetadata metadata;
  reader.read_metadata(metadata);
  chakra_et::Node node;
  ASSERT_TRUE(reader.next_node(node));
  EXPECT_EQ(static_cast<int>(node.type()), 10);
  EXPECT_EQ(node.duration_micros(), 3u);
}

TEST(ChakraEt, a_size_that_runs_past_the_end_names_the_message_and_its_byte) {
  const std::string bytes = two_nodes();
  const std::string cut = bytes.substr(0, bytes.size() - 3);
  ChakraEtReader reader(bytes, "rank0.et");
  chakra_et::GlobalMetadata metadata;
  reader.read_metadata(metadata);
  chakra_et::Node node;
  reader.next_node(node);
  const size_t last = reader.offset();
  const size_t body = bytes.size() - last - 1;  // a Node of under 128 bytes: a 1-byte size
  EXPECT_EQ(read_error(cut),
            "rank0.et: message 2 (Node) at byte " + std::to_string(last) + ": its size, " +
                std::to_string(body) + " bytes, runs past the end of the file (" +
                std::to_string(body - 3) + " bytes left; truncated, or not a Chakra trace?)");
}

TEST(ChakraEt, a_truncated_or_overlong_size_varint_is_an_error) {
  const std::string bytes = two_nodes();
  // A size varint whose last byte says "more follows", at the end of the file.
  EXPECT_EQ(read_error(bytes + "\x80\x80"),
            "rank0.et: message 3 (Node) at byte " + std::to_string(bytes.size()) +
                ": its size varint runs past the end of the file (2 bytes left; truncated, or not "
                "a Chakra trace?)");
  EXPECT_EQ(read_error(std::string(11, '\xff')),
            "rank0.et: message 0 (GlobalMetadata) at byte 0: its size varint is longer than 10 "
            "bytes (not a Chakra trace?)");
}

TEST(ChakraEt, a_message_over_the_size_limit_is_an_error) {
  ChakraEtLimits limits;
  limits.max_message_bytes = 16;
  const std::string error = read_error(two_nodes(), limits);
  EXPECT_NE(error.find("rank0.et: message 1 (Node) at byte "), std::string::npos) << error;
  EXPECT_NE(error.find("bytes, is over the limit of 16 bytes for one message"), std::string::npos)
      << error;
}

TEST(ChakraEt, a_message_that_does_not_parse_names_its_type) {
  // A field tag of wire type 7, which protobuf does not have.
  std::string bad_wire_type;
  message(bad_wire_type, chakra_et::GlobalMetadata());
  bad_wire_type += "\x01\x0f";
  EXPECT_EQ(read_error(bad_wire_type),
            "rank0.et: message 1 (Node) at byte 1: its 1 bytes are not a Node (a malformed field, "
            "nesting deeper than 16, or a string that is not UTF-8; truncated, or not a Chakra "
            "trace?)");
  // proto3 strings are UTF-8.
  const std::string latin1 = et_file({node(1, "caf\xe9", chakra_et::COMP_NODE, {}, 1, {})});
  EXPECT_NE(read_error(latin1).find("message 1 (Node) at byte 8: its "), std::string::npos)
      << read_error(latin1);
}

TEST(ChakraEt, nesting_deeper_than_the_recursion_limit_is_an_error) {
  // An unknown field of 20 nested groups (field 15: start-group tag 0x7b, end-group tag 0x7c).
  chakra_et::Node deep = node(1, "deep", chakra_et::COMP_NODE, {}, 1, {});
  std::string groups = std::string(20, '\x7b') + std::string(20, '\x7c');
  std::string body = deep.SerializeAsString() + groups;
  std::string file;
  message(file, chakra_et::GlobalMetadata());
  file += static_cast<char>(body.size());
  file += body;
  EXPECT_NE(read_error(file).find("message 1 (Node) at byte 1: its "), std::string::npos);
  ChakraEtLimits deeper;
  deeper.recursion_limit = 32;
  EXPECT_EQ(read_error(file, deeper), "(no error)");
}

TEST(ChakraEt, an_end_group_tag_outside_a_group_is_an_error) {
  std::string file;
  message(file, chakra_et::GlobalMetadata());
  file += "\x01\x0c";  // end-group tag of field 1
  EXPECT_NE(read_error(file).find("message 1 (Node) at byte 1: its 1 bytes are not a Node"),
            std::string::npos);
}

TEST(ChakraEt, an_empty_file_has_no_metadata) {
  EXPECT_EQ(read_error(""),
            "rank0.et: message 0 (GlobalMetadata) at byte 0: the file ends before it");
}

}  // namespace
}  // namespace upsim
