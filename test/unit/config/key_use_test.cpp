// ConfigNode::as_written and the keys read for a use (ConfigNode::read_for,
// ConfigDocument::unused_key_warnings): the config layer's record of what --set changed and of
// which keys no active model reads.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_node.h"

namespace upsim {
namespace {

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

constexpr std::string_view kProfile =
    "name: gpu\n"        // 1
    "sm_count: 108\n"    // 2
    "clock_mhz: 1410\n"  // 3
    "l2:\n"              // 4
    "  size: 40MiB\n"    // 5
    "  bandwidth: 2TB/s\n";

TEST(ConfigAsWritten, KeepsTheFileValueThatASetReplaced) {
  ConfigDocument doc = ConfigDocument::parse_string(kProfile, "gpu.yaml");
  doc.apply_override("sm_count=27");
  doc.apply_override("sm_count=54");  // the file's value survives a second --set
  doc.apply_override("extra=1");
  const ConfigNode root = doc.root();
  const ConfigNode sm = root.child("sm_count");
  EXPECT_EQ(sm.as_int(), 54);
  EXPECT_EQ(sm.file(), "--set");
  const std::optional<ConfigNode> written = sm.as_written();
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(written->as_int(), 108);
  EXPECT_EQ(written->file(), "gpu.yaml");
  EXPECT_EQ(written->line(), 2);
  // Untouched: the node itself. Given only by --set: no file states it.
  const std::optional<ConfigNode> clock = root.child("clock_mhz").as_written();
  ASSERT_TRUE(clock.has_value());
  EXPECT_EQ(clock->as_int(), 1410);
  EXPECT_FALSE(root.child("extra").as_written().has_value());
}

TEST(ConfigAsWritten, ReachesIntoAReferencedFileLoadedAfterTheSet) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "as_written";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "gpu.yaml") << kProfile;
    std::ofstream(dir / "scenario.yaml") << "platform:\n  gpu: gpu.yaml\n";
  }
  ConfigDocument doc = ConfigDocument::load_file(dir / "scenario.yaml");
  doc.apply_override("platform.gpu.sm_count=27");
  const ConfigNode gpu = doc.root().child("platform").load_reference("gpu");
  const ConfigNode sm = gpu.child("sm_count");
  EXPECT_EQ(sm.as_int(), 27);
  ASSERT_TRUE(sm.as_written().has_value());
  EXPECT_EQ(sm.as_written()->as_int(), 108);
  EXPECT_EQ(sm.as_written()->line(), 2);
  EXPECT_TRUE(contains(sm.as_written()->file().string(), "gpu.yaml"));
}

constexpr std::string_view kScenario =
    "platform:\n"                                          // 1
    "  interconnect: {model: seed_curve}\n"                // 2
    "  topology:\n"                                        // 3
    "    name: two\n"                                      // 4
    "    link_kinds:\n"                                    // 5
    "      nvlink: {bandwidth: 25GB/s, latency: 1us}\n"    // 6
    "    links:\n"                                         // 7
    "      - {between: [a, b], kind: nvlink, count: 4}\n"  // 8
    "      - {between: [b, c], kind: nvlink}\n";           // 9

/// Reads the topology as a fabric loader would: structure unconditionally, capacities for
/// "link capacity".
void read_topology(ConfigDocument& doc) {
  const ConfigNode platform = doc.root().child("platform");
  platform.child("interconnect").get_string("model");
  const ConfigNode topology = platform.child("topology");
  topology.get_string("name");
  for (const auto& [name, spec] :
       topology.read_for("link capacity").child("link_kinds").map_entries()) {
    spec.get_bandwidth("bandwidth");
    spec.get_duration("latency");
  }
  for (const ConfigNode& link : topology.child("links").items()) {
    link.get_string_list("between");
    link.get_string("kind");
    const ConfigNode capacity = link.read_for("link capacity");
    capacity.get_int_or("count", 1);  // a default: never named
    capacity.get_duration_or("latency", Duration::from_us(1));
  }
  doc.check_all_keys_used();
}

const InactiveUse kSeedCurve{"link capacity",
                             "interconnect model `seed_curve` prices collectives with fitted "
                             "curves, not the fabric's links"};

TEST(ConfigUnusedKeys, NamesTheKeysReadOnlyForAnInactiveUseWithFileAndLine) {
  ConfigDocument doc = ConfigDocument::parse_string(kScenario, "scenario.yaml");
  read_topology(doc);
  const std::array<InactiveUse, 1> inactive{kSeedCurve};
  const std::vector<std::string> warnings = doc.unused_key_warnings(inactive);
  ASSERT_EQ(warnings.size(), 1u);
  const std::string& w = warnings[0];
  // The whole link_kinds map is read only for link capacity: named once, at its key.
  EXPECT_TRUE(contains(w,
                       "interconnect model `seed_curve` prices collectives with fitted curves, "
                       "not the fabric's links, so these keys change nothing: "
                       "`platform.topology.link_kinds` (scenario.yaml:5), "
                       "`platform.topology.links[0].count` (scenario.yaml:8)"))
      << w;
  // Structure is consumed; the latency default written into links[1] is nobody's input.
  EXPECT_FALSE(contains(w, ".kind")) << w;
  EXPECT_FALSE(contains(w, ".between")) << w;
  EXPECT_FALSE(contains(w, "links[1]")) << w;
}

TEST(ConfigUnusedKeys, AnActiveUseOrAnUnconditionalReadConsumesTheKey) {
  {
    ConfigDocument doc = ConfigDocument::parse_string(kScenario, "scenario.yaml");
    read_topology(doc);
    // The flow network reads link capacities: nothing is named.
    EXPECT_TRUE(doc.unused_key_warnings({}).empty());
    const std::array<InactiveUse, 1> other{InactiveUse{"cache model", "no cache model"}};
    EXPECT_TRUE(doc.unused_key_warnings(other).empty());
  }
  ConfigDocument doc = ConfigDocument::parse_string(kScenario, "scenario.yaml");
  read_topology(doc);
  // A reader that also reads the count unconditionally (say, to draw the fabric) consumes it.
  doc.root().child("platform").child("topology").child("links").items()[0].get_int("count");
  const std::array<InactiveUse, 1> inactive{kSeedCurve};
  const std::vector<std::string> warnings = doc.unused_key_warnings(inactive);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_FALSE(contains(warnings[0], "count")) << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "`platform.topology.link_kinds` (scenario.yaml:5)"))
      << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "so this key changes nothing")) << warnings[0];
}

TEST(ConfigUnusedKeys, SetValuesAreNamedAsSetAndOnlyIfSetUsesWaitForOne) {
  const InactiveUse cache{"cache model", "kernel model `roofline` has no cache model", true};
  const std::array<InactiveUse, 2> inactive{kSeedCurve, cache};
  const auto read = [](ConfigDocument& doc) {
    const ConfigNode root = doc.root();
    root.get_string("name");
    root.get_int("sm_count");
    root.get_int("clock_mhz");
    const ConfigNode l2 = root.read_for("cache model").child("l2");
    l2.get_bytes("size");
    l2.get_bandwidth("bandwidth");
    doc.check_all_keys_used();
  };
  {
    // A profile's L2 facts are not news under a model without a cache model ...
    ConfigDocument doc = ConfigDocument::parse_string(kProfile, "gpu.yaml");
    read(doc);
    EXPECT_TRUE(doc.unused_key_warnings(inactive).empty());
  }
  // ... until a what-if changes one.
  ConfigDocument doc = ConfigDocument::parse_string(kProfile, "gpu.yaml");
  doc.apply_override("l2.bandwidth=4TB/s");
  read(doc);
  const std::vector<std::string> warnings = doc.unused_key_warnings(inactive);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "kernel model `roofline` has no cache model, so this key changes nothing: "
            "`l2.bandwidth` (--set)");
  ConfigDocument only_set = ConfigDocument::parse_string(kProfile, "gpu.yaml");
  only_set.apply_override("l2.size=80MiB");
  const ConfigNode root = only_set.root();
  root.read_for("cache model").child("l2").get_bytes("size");
  root.child("l2").get_bandwidth("bandwidth");  // consumed: only the size is named
  const std::vector<std::string> named = only_set.unused_key_warnings(inactive);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_TRUE(contains(named[0], "this key changes nothing: `l2.size` (--set)")) << named[0];
}

TEST(ConfigUnusedKeys, AtMostEightKeysAreNamedThenACount) {
  std::string yaml = "links:\n";
  for (int i = 0; i < 11; ++i)
    yaml += "  - {kind: k, bandwidth: 1GB/s}\n";
  ConfigDocument doc = ConfigDocument::parse_string(yaml, "f.yaml");
  for (const ConfigNode& link : doc.root().child("links").items()) {
    link.get_string("kind");
    link.read_for("link capacity").get_bandwidth("bandwidth");
  }
  const std::array<InactiveUse, 1> inactive{kSeedCurve};
  const std::vector<std::string> warnings = doc.unused_key_warnings(inactive);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "`links[7].bandwidth` (f.yaml:9) and 3 more")) << warnings[0];
  EXPECT_FALSE(contains(warnings[0], "links[8]")) << warnings[0];
}

}  // namespace
}  // namespace upsim
