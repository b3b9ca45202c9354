// Error messages name the file and what was expected, and never quote the content of a file
// that is not of the expected kind: a file that is not YAML structure is "plain text", a CSV
// where a map is expected is "a CSV table", a malformed CSV is described by line and column.
// Values typed with --set and short values of well-formed YAML files are still quoted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "sim/config/config_node.h"

namespace upsim {
namespace {

const std::filesystem::path kData = UPSIM_CONFIG_TEST_DATA;
const std::filesystem::path kForeign = kData / "foreign";

/// Every fixture of data/foreign/ carries this marker in each of its fields and lines.
constexpr std::string_view kCanary = "canary";

/// The error a test returns when nothing was thrown (out of line: GCC 12's -Wrestrict misfires
/// on ConfigError's message formatting when it is inlined into the template below).
[[gnu::noinline]] ConfigError nothing_thrown() {
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", 0, "", "nothing was thrown");
}

template <typename F>
ConfigError config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e;
  }
  return nothing_thrown();
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

/// A document in data/ whose key `gpu` names `reference` (relative to data/).
ConfigDocument referencing(const std::string& reference) {
  return ConfigDocument::parse_string("gpu: " + reference + "\n", (kData / "main.yaml").string());
}

TEST(ConfigMessages, PlainTextWhereAMapIsExpectedIsDescribedNotQuoted) {
  ConfigDocument doc = referencing("foreign/passwd_like");
  const ConfigNode gpu = doc.root().load_reference("gpu");
  const ConfigError e = config_error([&] { gpu.child("name"); });
  EXPECT_EQ(e.file(), (kForeign / "passwd_like").string());
  EXPECT_EQ(e.key_path(), "gpu");
  EXPECT_EQ(e.message(), "expected a map, got plain text (a YAML scalar)");
  EXPECT_FALSE(contains(e.what(), kCanary)) << e.what();
  // Every other way of asking for a shape describes it the same way.
  for (const ConfigError& other :
       {config_error([&] { gpu.get_int("x"); }), config_error([&] { gpu.items(); }),
        config_error([&] { gpu.as_int(); }), config_error([&] { gpu.as_bytes(); }),
        config_error([&] { gpu.map_keys(); }), config_error([&] { gpu.size(); })}) {
    EXPECT_FALSE(contains(other.what(), kCanary)) << other.what();
    EXPECT_TRUE(contains(other.message(), "plain text (a YAML scalar)")) << other.what();
  }
}

TEST(ConfigMessages, ExpectMapNamesWhatTheReaderExpected) {
  ConfigDocument doc = referencing("foreign/passwd_like");
  const ConfigNode gpu = doc.root().load_reference("gpu");
  const ConfigError e = config_error([&] { gpu.expect_map("a GPU hardware profile"); });
  EXPECT_EQ(e.what(), (kForeign / "passwd_like").string() +
                          ":1: gpu: expected a YAML map (a GPU hardware profile), got plain text "
                          "(a YAML scalar)");
  // A map (or an empty value) passes.
  ConfigDocument map = ConfigDocument::parse_string("a: {b: 1}\nc:\n", "t.yaml");
  map.root().child("a").expect_map("a section");
  map.root().child("c").expect_map("a section");
  EXPECT_TRUE(contains(config_error([&] {
                         ConfigDocument::parse_string("- 1\n", "s.yaml").root().expect_map("x");
                       }).message(),
                       "expected a YAML map (x), got a sequence"));
}

TEST(ConfigMessages, AWholeDocumentOfPlainTextIsDescribedNotQuoted) {
  ConfigDocument doc = ConfigDocument::load_file(kForeign / "passwd_like");
  const ConfigError e = config_error([&] { doc.root().child("workload"); });
  EXPECT_EQ(e.file(), (kForeign / "passwd_like").string());
  EXPECT_TRUE(contains(e.message(), "plain text (a YAML scalar)")) << e.what();
  EXPECT_FALSE(contains(e.what(), kCanary)) << e.what();
}

TEST(ConfigMessages, ACsvWhereAMapIsExpectedIsDescribedNotQuoted) {
  ConfigDocument doc = referencing("foreign/accounts.csv");
  const ConfigNode gpu = doc.root().load_reference("gpu");
  const ConfigError e = config_error([&] { gpu.expect_map("a GPU hardware profile"); });
  EXPECT_EQ(e.file(), (kForeign / "accounts.csv").string());
  EXPECT_EQ(
      e.message(),
      "expected a YAML map (a GPU hardware profile), got a CSV table (2 rows under a header)");
  EXPECT_FALSE(contains(e.what(), kCanary)) << e.what();
  const ConfigError child = config_error([&] { gpu.get_string("name"); });
  EXPECT_FALSE(contains(child.what(), kCanary)) << child.what();
}

TEST(ConfigMessages, AMalformedCsvIsDescribedByLineAndColumnNotQuoted) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("upsim-csv-messages-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto load_error = [&](const std::string& csv) {
    std::ofstream(dir / "t.csv") << csv;
    ConfigDocument doc = ConfigDocument::parse_string("t: t.csv\n", (dir / "main.yaml").string());
    return config_error([&] { doc.root().load_reference("t"); });
  };
  const ConfigError header = load_error("canary_a,canary b\n1,2\n");
  EXPECT_EQ(header.file(), (dir / "t.csv").string());
  EXPECT_EQ(header.line(), 1);
  EXPECT_EQ(header.message(),
            "column 2 of the CSV header is not a column name (letters, digits and `_ . + -`)");
  const ConfigError value = load_error("canary_a,canary_b\n1,2\n3,canary {4}\n");
  EXPECT_EQ(value.line(), 3);
  EXPECT_EQ(value.message(),
            "field 2 is not a number or a name (a CSV value here is letters, digits and "
            "`_ . + -`)");
  const ConfigError twice = load_error("canary_a,canary_b,canary_a\n1,2,3\n");
  EXPECT_EQ(twice.line(), 1);
  EXPECT_EQ(twice.message(), "columns 1 and 3 of the CSV header have the same name");
  const ConfigError passwd = load_error("canary_root:x:0:0:canary_root:/root:/bin/bash\n");
  EXPECT_EQ(passwd.line(), 1);
  for (const ConfigError& e : {header, value, twice, passwd}) {
    EXPECT_FALSE(contains(e.what(), kCanary)) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(ConfigMessages, YamlParserMessagesDoNotEchoTheFile) {
  // yaml-cpp appends the directive's text, the escape character or the code point to these.
  for (const std::string& text :
       {std::string("%YAML canary_version\n---\na: 1\n"), std::string("a: \"canary \\q\"\n"),
        std::string("a: \"canary \\UDEADBEEF\"\n")}) {
    const ConfigError e = config_error([&] { ConfigDocument::parse_string(text, "t.yaml"); });
    EXPECT_TRUE(contains(e.message(), "malformed YAML")) << e.what();
    EXPECT_FALSE(contains(e.what(), kCanary)) << e.what();
    EXPECT_FALSE(contains(e.what(), "\\q")) << e.what();
    EXPECT_FALSE(contains(e.what(), "deadbeef")) << e.what();
  }
}

TEST(ConfigMessages, TagsAreQuotedOnlyWhenShort) {
  EXPECT_TRUE(contains(
      config_error([] { ConfigDocument::parse_string("a: !inc x\n", "t.yaml"); }).message(),
      "unsupported YAML tag `!inc`"));
  std::string long_tag = "!";
  long_tag.append(kCanary).append(200, 'x');
  const ConfigError e =
      config_error([&] { ConfigDocument::parse_string("a: " + long_tag + " x\n", "t.yaml"); });
  EXPECT_TRUE(contains(e.message(), "unsupported YAML tag (of 207 characters)")) << e.what();
  EXPECT_FALSE(contains(e.what(), kCanary)) << e.what();
}

TEST(ConfigMessages, KeysAreQuotedOnlyWhenShortAndPrintable) {
  std::string long_key(kCanary);
  long_key.append(100, 'k');
  ConfigDocument doc =
      ConfigDocument::parse_string("a: 1\n" + long_key + ": 2\n\"canary\\e[2J\": 3\n", "t.yaml");
  doc.root().get_int("a");
  const ConfigError unknown = config_error([&] { doc.check_all_keys_used(); });
  EXPECT_EQ(unknown.message(), "unknown key (of 106 characters); valid keys: a");
  EXPECT_FALSE(contains(unknown.what(), kCanary)) << unknown.what();
  const ConfigError twice = config_error([&] {
    ConfigDocument::parse_string("\"canary\\e[2J\": 1\n\"canary\\e[2J\": 2\n", "t.yaml");
  });
  EXPECT_EQ(twice.message(), "duplicate key (of 10 characters) (first at line 1)");
  // A short key is named, as a typo deserves.
  ConfigDocument typo = ConfigDocument::parse_string("rowz: 1\n", "t.yaml");
  EXPECT_EQ(config_error([&] { typo.root().get_int("rows"); }).message(),
            "unknown key `rowz`; did you mean `rows`? (`rows` is required)");
}

TEST(ConfigMessages, ControlCharactersOfAQuotedValueAreEscaped) {
  ConfigDocument doc = ConfigDocument::parse_string("a: \"x\\e[2Jy\\by\"\n", "t.yaml");
  const ConfigError e = config_error([&] { doc.root().get_int("a"); });
  EXPECT_EQ(e.message(), "expected an integer, got the quoted string \"x\\x1b[2Jy\\x08y\"");
}

TEST(ConfigMessages, ValuesTypedWithSetAndValuesOfAYamlFileAreStillQuoted) {
  ConfigDocument doc = ConfigDocument::parse_string("b: abc\n", "t.yaml");
  doc.apply_override("a=typed_value");
  EXPECT_EQ(config_error([&] { doc.root().get_int("a"); }).message(),
            "expected an integer, got \"typed_value\"");
  EXPECT_EQ(config_error([&] { doc.root().get_int("b"); }).message(),
            "expected an integer, got \"abc\"");
  // A whole value given with --set is the user's own text, even where a file was expected.
  doc.apply_override("gpu=not_a_file_or_map");
  EXPECT_EQ(config_error([&] { doc.root().child("gpu").expect_map("a profile"); }).message(),
            "expected a YAML map (a profile), got \"not_a_file_or_map\"");
}

}  // namespace
}  // namespace upsim
