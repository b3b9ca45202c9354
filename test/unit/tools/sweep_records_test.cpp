// The sweep's records (tools/sweep_records.h) and their SHA-256 (tools/sha256.h): what the
// formatter writes parses back exactly, whatever the text holds; any edit, truncation or glued
// record of a row is refused by its checksum; old manifests still parse.
#include "tools/sweep_records.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tools/sha256.h"

namespace upsim::cli {
namespace {

namespace fs = std::filesystem;

TEST(Sha256, KnownVectorsAndFiles) {
  // FIPS 180-4 examples.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const fs::path dir = fs::temp_directory_path() / ("upsim-sha256-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string big(3 << 20, 'x');  // more than one read chunk
  std::ofstream(dir / "big") << big;
  std::string why;
  EXPECT_EQ(sha256_of_file(dir / "big", why), sha256_hex(big));
  // A pipe is refused without waiting for a writer; a missing file gives the system's reason.
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0644), 0);
  EXPECT_EQ(sha256_of_file(dir / "pipe", why), std::nullopt);
  EXPECT_EQ(why, "a named pipe");
  EXPECT_EQ(sha256_of_file(dir / "missing", why), std::nullopt);
  EXPECT_EQ(why, "No such file or directory");
  fs::remove_all(dir);
}

RowRecord sample_row() {
  RowRecord r;
  r.point = 12;
  r.identity = "workload.global_batch=128\tname=a\\b\ttab\there\t";
  r.source.version = "0.1.0";
  r.source.files = {{"/a/base.yaml", sha256_hex("base")}, {"/a/x\ny.yaml", sha256_hex("x")}};
  r.source.scenario_sha256 = scenario_sha256("/a/base.yaml", {"k=v"}, r.source.files);
  r.row = "12,128,\"a\nb\",ok,1.5,,,\"say \"\"hi\"\"\"\n";
  return r;
}

TEST(SweepRecords, ARowRecordParsesBackExactly) {
  const RowRecord r = sample_row();
  const std::string text = format_row_record(r);
  std::string why;
  const std::optional<RowRecord> back = parse_row_record(text, why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, r);
  // No file list at all, an empty row: still exact.
  RowRecord bare;
  bare.source.scenario_sha256 = sha256_hex("s");
  EXPECT_EQ(parse_row_record(format_row_record(bare), why), bare) << why;
}

TEST(SweepRecords, AnyEditTruncationOrGlueOfARowIsRefused) {
  const std::string text = format_row_record(sample_row());
  std::string why;
  for (size_t i = 0; i < text.size(); ++i) {
    std::string edited = text;
    edited[i] = edited[i] == '1' ? '2' : '1';
    EXPECT_EQ(parse_row_record(edited, why), std::nullopt) << "byte " << i << " changed";
    EXPECT_EQ(parse_row_record(text.substr(0, i), why), std::nullopt) << "cut at " << i;
  }
  EXPECT_EQ(parse_row_record(text + text, why), std::nullopt);
  EXPECT_EQ(why,
            "its checksum does not match its content: edited, truncated or joined with another");
  EXPECT_EQ(parse_row_record("", why), std::nullopt);
  EXPECT_EQ(why, "it is empty");
  // The row before these records: its identity line, then the row.
  EXPECT_EQ(parse_row_record("workload.global_batch=128\t\n0,128,ok\n", why), std::nullopt);
  EXPECT_EQ(why, "it is not a row record");
}

TEST(SweepRecords, AManifestParsesBackAndOldManifestsStillParse) {
  Manifest m;
  m.version = "0.1.0";
  m.base = "/a/b\tc.yaml";
  m.fits_memory = true;
  m.points = {{sha256_hex("0"), "k=1\t"}, {sha256_hex("1"), "k=2\nx\t"}};
  std::string why;
  const std::optional<Manifest> back = parse_manifest(format_manifest(m), why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, m);

  // What upsim wrote before it recorded versions and hashes.
  const std::optional<Manifest> old =
      parse_manifest("base\t/a/base.yaml\nfits_memory\n0\tk=1\t\n1\tk=2\t\n", why);
  ASSERT_TRUE(old) << why;
  EXPECT_EQ(old->version, "");
  EXPECT_EQ(old->base, "/a/base.yaml");
  EXPECT_TRUE(old->fits_memory);
  ASSERT_EQ(old->points.size(), 2u);
  EXPECT_EQ(old->points[1].identity, "k=2\t");

  // The same study whatever the versions and hashes; another with other points.
  Manifest same = m;
  same.version = "9.9.9";
  same.points[0].scenario_sha256 = sha256_hex("changed");
  EXPECT_TRUE(same_study(m, same));
  Manifest other = m;
  other.points[1].identity = "k=3\t";
  EXPECT_FALSE(same_study(m, other));
  other = m;
  other.points.pop_back();
  EXPECT_FALSE(same_study(m, other));
}

TEST(SweepRecords, AnythingElseIsNotAManifest) {
  const std::string good =
      "upsim-study 1\nversion\t0.1.0\nbase\t/b.yaml\npoint\t0\t" + sha256_hex("0") + "\tk=1\\t\n";
  std::string why;
  ASSERT_TRUE(parse_manifest(good, why)) << why;
  for (const std::string& bad :
       {std::string(""), std::string("hello\n"), good.substr(0, good.size() - 1),
        good + "point\t2\t" + sha256_hex("2") + "\tk=3\n",  // point 2 after point 0
        good + "point\t1\tnot-a-hash\tk=2\n", good + "stray\n", std::string("base\t/b\n0\n"),
        std::string("upsim-study 1\nbase\t/b.yaml\n")}) {
    EXPECT_EQ(parse_manifest(bad, why), std::nullopt) << bad;
    EXPECT_EQ(why, "it is not a sweep manifest") << bad;
  }
}

}  // namespace
}  // namespace upsim::cli
