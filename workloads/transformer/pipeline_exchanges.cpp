#include "workloads/transformer/pipeline_exchanges.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace upsim {
namespace {

/// What one exchange moves before its consumers are known: the sends' steps and whether it
/// receives either way.
struct ExchangeFlags {
  int64_t send_next = -1;
  int64_t send_prev = -1;
  bool recv_prev = false;
  bool recv_next = false;
};

class PlanBuilder {
 public:
  void forward(int64_t index) { actions_.push_back({index, true, {}}); }
  void backward(int64_t index) { actions_.push_back({index, false, {}}); }
  void exchange(const ExchangeFlags& flags) { actions_.push_back({-1, false, flags}); }

  /// Matches each receive to the next step consuming that direction's input, in step order, and
  /// checks that every consumer's input arrives before it runs.
  std::vector<PipelineAction> finish(const std::vector<PipelineStep>& steps, int64_t stage,
                                     int64_t stages, int64_t chunks) const {
    const int64_t last_vs = stages * chunks - 1;
    std::deque<int64_t> from_prev;  // forwards whose input the previous stage sends
    std::deque<int64_t> from_next;  // backwards whose gradient the next stage sends
    for (size_t i = 0; i < steps.size(); ++i) {
      const int64_t vs = virtual_stage_of(steps[i].chunk, stages, stage);
      if (steps[i].forward && vs != 0) from_prev.push_back(static_cast<int64_t>(i));
      if (!steps[i].forward && vs != last_vs) from_next.push_back(static_cast<int64_t>(i));
    }
    std::vector<bool> received(steps.size(), false);
    std::vector<PipelineAction> plan;
    plan.reserve(actions_.size());
    for (const Action& a : actions_) {
      PipelineAction out;
      out.step = a.step;
      if (a.step >= 0) {
        if (a.step >= static_cast<int64_t>(steps.size()) ||
            steps[static_cast<size_t>(a.step)].forward != a.forward) {
          throw std::logic_error(fmt::format(
              "synchronous pipeline plan: stage {}'s step {} is not the {} Megatron runs there",
              stage, a.step, a.forward ? "forward" : "backward"));
        }
        const PipelineStep& s = steps[static_cast<size_t>(a.step)];
        const int64_t vs = virtual_stage_of(s.chunk, stages, stage);
        const bool needs = s.forward ? vs != 0 : vs != last_vs;
        if (needs && !received[static_cast<size_t>(a.step)]) {
          throw std::logic_error(fmt::format(
              "synchronous pipeline plan: stage {} runs step {} before receiving its input", stage,
              a.step));
        }
      } else {
        out.exchange.send_next = a.flags.send_next;
        out.exchange.send_prev = a.flags.send_prev;
        if (a.flags.recv_prev) out.exchange.recv_prev = take(from_prev, stage, "activation");
        if (a.flags.recv_next) out.exchange.recv_next = take(from_next, stage, "gradient");
        for (int64_t r : {out.exchange.recv_prev, out.exchange.recv_next}) {
          if (r >= 0) received[static_cast<size_t>(r)] = true;
        }
      }
      plan.push_back(out);
    }
    if (!from_prev.empty() || !from_next.empty()) {
      throw std::logic_error(fmt::format(
          "synchronous pipeline plan: stage {} leaves {} activations and {} gradients unreceived",
          stage, from_prev.size(), from_next.size()));
    }
    return plan;
  }

 private:
  struct Action {
    int64_t step;
    bool forward;
    ExchangeFlags flags;
  };

  static int64_t take(std::deque<int64_t>& queue, int64_t stage, const char* what) {
    if (queue.empty()) {
      throw std::logic_error(fmt::format(
          "synchronous pipeline plan: stage {} receives an {} no step consumes", stage, what));
    }
    const int64_t step = queue.front();
    queue.pop_front();
    return step;
  }

  std::vector<Action> actions_;
};

void plan_1f1b(PlanBuilder& plan, int64_t stages, int64_t micro_batches, int64_t stage) {
  const bool first = stage == 0;
  const bool last = stage == stages - 1;
  const int64_t warmup = std::min(stages - stage - 1, micro_batches);
  const int64_t remaining = micro_batches - warmup;
  for (int64_t i = 0; i < warmup; ++i) {
    if (!first) plan.exchange({.recv_prev = true});  // recv_forward
    plan.forward(i);
    if (!last) plan.exchange({.send_next = i});  // send_forward
  }
  if (remaining > 0 && !first) plan.exchange({.recv_prev = true});
  for (int64_t i = 0; i < remaining; ++i) {
    const int64_t f = warmup + 2 * i;
    const int64_t b = f + 1;
    plan.forward(f);
    if (!last) plan.exchange({.send_next = f, .recv_next = true});  // send_forward_recv_backward
    plan.backward(b);
    // The last steady backward only sends; the others also receive the next forward's input
    // (send_backward / send_backward_recv_forward).
    if (!first) plan.exchange({.send_prev = b, .recv_prev = i + 1 < remaining});
  }
  for (int64_t i = 0; i < warmup; ++i) {
    const int64_t b = warmup + 2 * remaining + i;
    if (!last) plan.exchange({.recv_next = true});  // recv_backward
    plan.backward(b);
    if (!first) plan.exchange({.send_prev = b});  // send_backward
  }
}

void plan_interleaved(PlanBuilder& plan, int64_t stages, int64_t chunks, int64_t micro_batches,
                      int64_t stage) {
  const bool first = stage == 0;
  const bool last = stage == stages - 1;
  const int64_t total = micro_batches * chunks;
  int64_t warmup = (stages - stage - 1) * 2 + (chunks - 1) * stages;
  const bool all_warmup = warmup >= total;
  warmup = std::min(warmup, total);
  const int64_t remaining = total - warmup;
  // get_model_chunk_id with microbatch_group_size_per_vp_stage = pipeline.
  const auto chunk_of = [&](int64_t k, bool forward) {
    const int64_t c = k % (stages * chunks) / stages;
    return forward ? c : chunks - 1 - c;
  };
  // recv_tensor_from_previous_stage: the leading stage (first forward, last backward) receives
  // what the ending stage produced pipeline - 1 virtual micro-batches earlier, nothing before.
  const auto receives = [&](int64_t k, bool forward) {
    if (!(forward ? first : last)) return true;
    if (k < stages - 1) return false;
    return chunk_of(k - (stages - 1), forward) != (forward ? chunks - 1 : 0);
  };
  const auto sends_forward = [&](int64_t k) { return !(last && chunk_of(k, true) == chunks - 1); };
  const auto sends_backward = [&](int64_t k) { return !(first && chunk_of(k, false) == 0); };

  if (!first) plan.exchange({.recv_prev = true});  // recv_forward of the first forward
  for (int64_t k = 0; k < warmup; ++k) {
    plan.forward(k);
    ExchangeFlags x;
    x.send_next = sends_forward(k) ? k : -1;
    x.recv_prev = receives(k, true) && k != total - 1;
    // The last warm-up step also receives the first backward's gradient.
    if (k == warmup - 1 && !all_warmup) x.recv_next = !last;
    plan.exchange(x);
  }
  for (int64_t k = 0; k < remaining; ++k) {
    const int64_t forward_k = k + warmup;
    const int64_t f = warmup + 2 * k;
    const int64_t b = f + 1;
    plan.forward(f);
    plan.backward(b);
    ExchangeFlags x;
    x.send_next = sends_forward(forward_k) ? f : -1;
    x.send_prev = sends_backward(k) ? b : -1;
    x.recv_prev = receives(forward_k, true) && k != remaining - 1;
    x.recv_next = receives(k, false);
    plan.exchange(x);
  }
  if (all_warmup && !last) plan.exchange({.recv_next = true});  // recv_backward
  for (int64_t k = remaining; k < total; ++k) {
    const int64_t b = warmup + 2 * remaining + (k - remaining);
    plan.backward(b);
    ExchangeFlags x;
    x.send_prev = sends_backward(k) ? b : -1;
    x.recv_next = receives(k, false) && k != total - 1;
    plan.exchange(x);
  }
}

}  // namespace

std::vector<PipelineAction> synchronous_pipeline_plan(const std::vector<PipelineStep>& steps,
                                                      PipelineSchedule schedule, int64_t stages,
                                                      int64_t chunks, int64_t micro_batches,
                                                      int64_t stage) {
  if (stages < 2 || schedule == PipelineSchedule::kGpipe) {
    throw std::invalid_argument(
        "synchronous pipeline plan: needs a pipeline and Megatron's 1F1B or interleaved 1F1B "
        "schedule");
  }
  if (static_cast<int64_t>(steps.size()) != 2 * micro_batches * chunks) {
    throw std::invalid_argument(
        fmt::format("synchronous pipeline plan: {} steps for {} micro-batches over {} chunks",
                    steps.size(), micro_batches, chunks));
  }
  PlanBuilder plan;
  if (schedule == PipelineSchedule::k1F1B || chunks == 1) {
    plan_1f1b(plan, stages, micro_batches, stage);
  } else {
    plan_interleaved(plan, stages, chunks, micro_batches, stage);
  }
  return plan.finish(steps, stage, stages, chunks);
}

}  // namespace upsim
