// RunProgress: the progress line of one `upsim run` on a terminal (stderr): which attempt of the
// steady-state search runs, how many of its graph's tasks are done and the wall time so far,
// redrawn in place at most four times a second and erased when the attempt ends. It observes
// task ends only and reads the clock once every kCheckEvery of them, so that a run with it
// costs a virtual call per task more, not a clock read. `upsim run` attaches it only when
// stderr is a terminal (and not with --quiet); a log file never sees carriage returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>

#include "sim/observer.h"

namespace upsim::cli {

class RunProgress final : public Observer {
 public:
  /// Task ends between two looks at the clock.
  static constexpr uint64_t kCheckEvery = 16384;
  /// Least wall time between two redraws, in seconds.
  static constexpr double kRedrawSeconds = 0.25;

  /// `label` names the attempt ("4 iterations"); `out` must outlive the observer. Tests may
  /// look at the clock more often and redraw at every look.
  RunProgress(std::ostream& out, std::string label, uint64_t check_every = kCheckEvery,
              double redraw_seconds = kRedrawSeconds)
      : out_(out),
        label_(std::move(label)),
        check_every_(check_every),
        redraw_seconds_(redraw_seconds) {}

  void on_run_begin(const TaskGraph& graph) override;
  void on_task_end(TaskId task, Time at) override;
  void on_run_end(Time at) override;

 private:
  void draw(double elapsed_s);

  std::ostream& out_;
  std::string label_;
  uint64_t check_every_;
  double redraw_seconds_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
  double last_draw_s_ = 0.0;
  bool drawn_ = false;
};

}  // namespace upsim::cli
