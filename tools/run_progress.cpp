#include "tools/run_progress.h"

#include <fmt/format.h>

#include "sim/task_graph.h"

namespace upsim::cli {

void RunProgress::on_run_begin(const TaskGraph& graph) {
  total_ = graph.task_count();
  done_ = 0;
  start_ = std::chrono::steady_clock::now();
  last_draw_s_ = 0.0;
  drawn_ = false;
}

void RunProgress::on_task_end(TaskId /*task*/, Time /*at*/) {
  if (++done_ % check_every_ != 0) return;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (drawn_ && elapsed - last_draw_s_ < redraw_seconds_) return;
  last_draw_s_ = elapsed;
  draw(elapsed);
}

void RunProgress::on_run_end(Time /*at*/) {
  // Erase the line: the summary follows on stdout, the run's closing line on stderr.
  if (drawn_) out_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

void RunProgress::draw(double elapsed_s) {
  const double share = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 0.0;
  out_ << fmt::format("\r\x1b[Ksimulating {}: {:.0f}% of {:.2f} M tasks, {:.1f} s", label_,
                      100.0 * share, static_cast<double>(total_) * 1e-6, elapsed_s)
       << std::flush;
  drawn_ = true;
}

}  // namespace upsim::cli
