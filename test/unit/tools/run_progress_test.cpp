// RunProgress: the progress line of `upsim run` on a terminal, fed a real scenario's graph.
#include "tools/run_progress.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "sim/config/config_node.h"
#include "tools/scenario.h"

namespace upsim::cli {
namespace {

TEST(RunProgress, DrawsTheShareOfTasksDoneInPlaceAndErasesItAtTheEnd) {
  ConfigDocument doc =
      ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) / "dlrm_4gpu.yaml");
  doc.apply_override("simulation.iterations=2");
  doc.apply_override("simulation.warmup_iterations=1");
  const Scenario scenario = build_scenario(doc);
  const auto tasks = static_cast<uint32_t>(scenario.graph.task_count());
  ASSERT_GT(tasks, 100u);
  std::ostringstream err;
  // A look at the clock every 10 tasks, a redraw at every look.
  RunProgress progress(err, "2 iterations", 10, 0.0);
  progress.on_run_begin(scenario.graph);
  for (uint32_t t = 0; t < tasks / 2; ++t)
    progress.on_task_end(t, Time::zero());
  const std::string half = err.str();
  EXPECT_EQ(half.rfind("\r\x1b[Ksimulating 2 iterations: ", 0), 0u) << half;
  const size_t last = half.rfind("\r\x1b[K");
  EXPECT_NE(half.find("50% of", last), std::string::npos) << half.substr(last);
  EXPECT_EQ(half.find('\n'), std::string::npos) << "one line, redrawn in place";
  progress.on_run_end(Time::zero());
  EXPECT_EQ(err.str().substr(err.str().size() - 4), "\r\x1b[K") << "erased at the end";
}

TEST(RunProgress, DrawsNothingBeforeItsFirstLookAtTheClock) {
  ConfigDocument doc =
      ConfigDocument::load_file(std::filesystem::path(UPSIM_CONFIGS_DIR) / "dlrm_4gpu.yaml");
  const Scenario scenario = build_scenario(doc);
  std::ostringstream err;
  RunProgress progress(err, "x");  // the defaults: every 16384 tasks, 4 redraws a second
  progress.on_run_begin(scenario.graph);
  for (uint32_t t = 0; t < 100; ++t)
    progress.on_task_end(t, Time::zero());
  progress.on_run_end(Time::zero());
  EXPECT_EQ(err.str(), "");
}

}  // namespace
}  // namespace upsim::cli
