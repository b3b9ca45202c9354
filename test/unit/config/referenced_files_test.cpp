// referenced_files (sim/config/referenced_files.h): every file a document's values name,
// relative to the file holding each value, followed through YAML files (cycles end), folders one
// level deep; pipes never opened; the document left as it was.
#include "sim/config/referenced_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/config/config_node.h"

namespace upsim {
namespace {

namespace fs = std::filesystem;

class ReferencedFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("upsim-referenced-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    for (const char* d : {"hw", "nodes", "traces/sub"})
      fs::create_directories(dir_ / d);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

TEST_F(ReferencedFiles, ListsEveryFileTheValuesNameThroughYamlFilesAndFolders) {
  write("main.yaml",
        "name: main\n"
        "platform:\n"
        "  gpu: hw/gpu.yaml\n"
        "  topology: topo.yaml\n"
        "  typo: 1\n"
        "workload:\n"
        "  model: dlrm\n"
        "  tables_file: tables.csv\n"
        "  traces: traces\n"
        "  notes: [a.txt, missing.txt, ., ..]\n"
        "  pipe: fifo\n"
        "  broken: bad.yaml\n");
  // Relative to the file that holds the value: hw/gpu.yaml names ../cal.yaml.
  write("hw/gpu.yaml", "name: gpu\ncalibration: ../cal.yaml\n");
  // A cycle back to main.yaml, and a file naming itself.
  write("cal.yaml", "back: main.yaml\nself: cal.yaml\n");
  write("topo.yaml", "node: nodes/n.yaml\n");
  write("nodes/n.yaml", "gpus: 8\n");
  write("nodes/m.yaml", "gpus: 4\n");
  write("tables.csv", "rows,pooling\n10,1\n");
  write("a.txt", "a\n");
  write("bad.yaml", "key: [unclosed\n");
  write("traces/r0.json", "{}");
  write("traces/r1.json", "{}");
  write("traces/sub/deeper.json", "{}");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0644), 0);

  ConfigDocument doc = ConfigDocument::load_file(dir_ / "main.yaml");
  const std::string resolved = doc.resolved_yaml();
  const std::vector<fs::path> files = referenced_files(doc);
  const std::vector<fs::path> expected = {
      dir_ / "a.txt",          dir_ / "bad.yaml",       dir_ / "cal.yaml",   dir_ / "hw/gpu.yaml",
      dir_ / "main.yaml",      dir_ / "nodes/n.yaml",   dir_ / "tables.csv", dir_ / "topo.yaml",
      dir_ / "traces/r0.json", dir_ / "traces/r1.json",
  };
  EXPECT_EQ(files, expected);
  // With a cache of what each YAML file names, the same lists, for this document and for one
  // that enters the cycle elsewhere (cal.yaml names main.yaml, which names the rest).
  ReferencedFilesCache cache;
  EXPECT_EQ(referenced_files(doc, {}, &cache), expected);
  EXPECT_EQ(referenced_files(doc, {}, &cache), expected);
  write("only.yaml", "calibration: cal.yaml\n");
  ConfigDocument only = ConfigDocument::load_file(dir_ / "only.yaml");
  std::vector<fs::path> with_only = expected;
  with_only.insert(with_only.begin() + 6, dir_ / "only.yaml");
  EXPECT_EQ(referenced_files(only, {}, &cache), with_only);
  EXPECT_EQ(referenced_files(only), with_only);

  // The document is as it was: nothing loaded, no key marked asked.
  EXPECT_EQ(doc.resolved_yaml(), resolved);
  try {
    doc.check_all_keys_used();
    ADD_FAILURE() << "no key was read, so the first one is unknown";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "name");
  }
}

TEST_F(ReferencedFiles, SetValuesAreTakenAsWrittenAndInlinedReferencesCount) {
  write("main.yaml", "platform:\n  topology: topo.yaml\n  gpu: hw/gpu.yaml\n");
  write("topo.yaml", "node: nodes/n.yaml\n");
  write("nodes/n.yaml", "gpus: 8\n");
  write("nodes/m.yaml", "gpus: 4\n");
  write("hw/gpu.yaml", "name: gpu\n");
  write("hw/other.yaml", "name: other\n");
  ConfigDocument doc = ConfigDocument::load_file(dir_ / "main.yaml");
  // A --set value is taken as written (here absolute), not relative to main.yaml.
  doc.apply_override("platform.gpu=" + (dir_ / "hw/other.yaml").string());
  // This one waits inside the unloaded topology reference, where no walk sees it: the caller
  // passes its value.
  const std::string node = (dir_ / "nodes/m.yaml").string();
  doc.apply_override("platform.topology.node=" + node);
  const std::vector<std::string> set_values = {node};
  EXPECT_EQ(
      referenced_files(doc, set_values),
      (std::vector<fs::path>{dir_ / "hw/other.yaml", dir_ / "main.yaml", dir_ / "nodes/m.yaml",
                             dir_ / "nodes/n.yaml", dir_ / "topo.yaml"}));

  // A reference a reader already inlined is listed as the file its values came from.
  ConfigDocument loaded = ConfigDocument::load_file(dir_ / "main.yaml");
  (void)loaded.root().child("platform").load_reference("topology");
  EXPECT_EQ(referenced_files(loaded),
            (std::vector<fs::path>{dir_ / "hw/gpu.yaml", dir_ / "main.yaml", dir_ / "nodes/n.yaml",
                                   dir_ / "topo.yaml"}));
}

}  // namespace
}  // namespace upsim
