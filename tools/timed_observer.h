// An observer that forwards every event to another and adds the wall time the other spends on
// them to a total (the Chrome trace writer's share of a run, reported apart from the
// simulation's). Two steady_clock reads per timed event are the cost of the measurement, and
// count in the total; GPU enqueues, which the trace writer does not observe, are forwarded
// untimed.
#pragma once

#include <chrono>
#include <span>

#include "sim/observer.h"

namespace upsim::cli {

class TimedObserver final : public Observer {
 public:
  /// `inner` and `seconds` must outlive this observer; `seconds` is added to, never reset.
  TimedObserver(Observer& inner, double& seconds) : inner_(inner), seconds_(seconds) {}

  void on_run_begin(const TaskGraph& graph) override {
    timed([&] { inner_.on_run_begin(graph); });
  }
  void on_task_begin(TaskId task, Time at) override {
    timed([&] { inner_.on_task_begin(task, at); });
  }
  void on_task_end(TaskId task, Time at) override {
    timed([&] { inner_.on_task_end(task, at); });
  }
  void on_gpu_enqueue(TaskId task, Time at) override { inner_.on_gpu_enqueue(task, at); }
  void on_collective_begin(CollectiveId collective, Time at) override {
    timed([&] { inner_.on_collective_begin(collective, at); });
  }
  void on_links_declared(std::span<const LinkInfo> links) override {
    timed([&] { inner_.on_links_declared(links); });
  }
  void on_link_rate(uint32_t link, Time at, Bandwidth rate, uint32_t flows) override {
    timed([&] { inner_.on_link_rate(link, at, rate, flows); });
  }
  void on_link_rates(Time at, std::span<const LinkRateChange> changes) override {
    timed([&] { inner_.on_link_rates(at, changes); });
  }
  void on_run_end(Time at) override {
    timed([&] { inner_.on_run_end(at); });
  }

 private:
  template <typename Call>
  void timed(Call&& call) {
    const auto start = std::chrono::steady_clock::now();
    call();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Observer& inner_;
  double& seconds_;
};

}  // namespace upsim::cli
