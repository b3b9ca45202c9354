// Megatron's synchronous pipeline exchanges (pipeline_exchanges.h): the exchanges of small
// schedules worked out by hand from schedules.py's calls, and over many pipelines that every
// stage receives what its neighbours send, and that under interleaving every message of a link
// meets its receive a fixed number of exchanges away (the lockstep in which a synchronize waits
// for the sends too).
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "workloads/transformer/pipeline_exchanges.h"
#include "workloads/transformer/pipeline_schedule.h"

namespace upsim {
namespace {

/// A stage's plan as text: "F0" / "B1" for steps (their index in the schedule) and
/// "X(sn0 sp1 rp2 rn3)" for an exchange (send next / send prev / receive prev / receive next,
/// each with the step it carries).
std::string describe(PipelineSchedule schedule, int64_t stages, int64_t chunks,
                     int64_t micro_batches, int64_t stage) {
  const std::vector<PipelineStep> steps =
      pipeline_schedule(schedule, stages, chunks, micro_batches, stage);
  std::ostringstream out;
  const char* separator = "";
  for (const PipelineAction& a :
       synchronous_pipeline_plan(steps, schedule, stages, chunks, micro_batches, stage)) {
    out << separator;
    separator = " ";
    if (a.step >= 0) {
      out << (steps[static_cast<size_t>(a.step)].forward ? 'F' : 'B') << a.step;
      continue;
    }
    out << "X(";
    const char* inner = "";
    for (const auto& [name, step] :
         {std::pair{"sn", a.exchange.send_next}, std::pair{"sp", a.exchange.send_prev},
          std::pair{"rp", a.exchange.recv_prev}, std::pair{"rn", a.exchange.recv_next}}) {
      if (step < 0) continue;
      out << inner << name << step;
      inner = " ";
    }
    out << ')';
  }
  return out.str();
}

TEST(SynchronousPipelinePlan, OneFOneBIsMegatronsSequenceOfCalls) {
  // PP 2, 3 micro-batches. Stage 0: one warm-up forward and its send_forward; each steady
  // forward's send_forward_recv_backward (its backward's send has no previous stage); the
  // cool-down's recv_backward.
  EXPECT_EQ(describe(PipelineSchedule::k1F1B, 2, 1, 3, 0),
            "F0 X(sn0) F1 X(sn1 rn2) B2 F3 X(sn3 rn4) B4 X(rn5) B5");
  // Stage 1: recv_forward before the steady state; each backward's send_backward_recv_forward,
  // the last one's send_backward.
  EXPECT_EQ(describe(PipelineSchedule::k1F1B, 2, 1, 3, 1),
            "X(rp0) F0 B1 X(sp1 rp2) F2 B3 X(sp3 rp4) F4 B5 X(sp5)");
}

TEST(SynchronousPipelinePlan, InterleavedIsMegatronsSequenceOfCalls) {
  // PP 2 x 2 chunks, 4 micro-batches. Stage 0 (warm-up 4): the last stage's chunk-0 outputs
  // arrive one step ahead of the chunk-1 forwards that take them; the last warm-up exchange
  // also receives the first backward's gradient; chunk-0 backwards send nothing.
  EXPECT_EQ(describe(PipelineSchedule::kInterleaved1F1B, 2, 2, 4, 0),
            "F0 X(sn0) F1 X(sn1 rp2) F2 X(sn2 rp3) F3 X(sn3 rn5) "
            "F4 B5 X(sn4 sp5 rn7) F6 B7 X(sn6 sp7 rp8 rn9) F8 B9 X(sn8 rp10 rn11) "
            "F10 B11 X(sn10 rn12) B12 X(sp12 rn13) B13 X(sp13 rn14) B14 X(rn15) B15 X()");
  // Stage 1 (warm-up 2): the first forward's recv_forward; its chunk-1 forwards send nothing;
  // the first stage's gradients arrive ahead of the chunk-0 backwards.
  EXPECT_EQ(describe(PipelineSchedule::kInterleaved1F1B, 2, 2, 4, 1),
            "X(rp0) F0 X(sn0 rp1) F1 X(sn1 rp2) "
            "F2 B3 X(sp3 rp4) F4 B5 X(sp5 rp6 rn7) F6 B7 X(sn6 sp7 rp8 rn9) "
            "F8 B9 X(sn8 sp9 rp10) F10 B11 X(sp11 rp12) F12 B13 X(sp13 rn14) "
            "B14 X(sp14 rn15) B15 X(sp15)");
}

/// Per stage, the exchange index (among its exchanges) of every send and receive, per link.
struct Traffic {
  std::vector<int64_t> send_next, send_prev, recv_prev, recv_next;
};
Traffic traffic(PipelineSchedule schedule, int64_t stages, int64_t chunks, int64_t micro_batches,
                int64_t stage) {
  const std::vector<PipelineStep> steps =
      pipeline_schedule(schedule, stages, chunks, micro_batches, stage);
  Traffic t;
  int64_t index = 0;
  for (const PipelineAction& a :
       synchronous_pipeline_plan(steps, schedule, stages, chunks, micro_batches, stage)) {
    if (a.step >= 0) continue;
    if (a.exchange.send_next >= 0) t.send_next.push_back(index);
    if (a.exchange.send_prev >= 0) t.send_prev.push_back(index);
    if (a.exchange.recv_prev >= 0) t.recv_prev.push_back(index);
    if (a.exchange.recv_next >= 0) t.recv_next.push_back(index);
    ++index;
  }
  return t;
}

/// Whether the i-th entries of `a` and `b` differ by the same amount for every i.
bool fixed_lag(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 1; i < a.size(); ++i) {
    if (b[i] - a[i] != b[0] - a[0]) return false;
  }
  return true;
}

TEST(SynchronousPipelinePlan, EveryStageReceivesWhatItsNeighboursSendInStep) {
  int plans = 0;
  for (const PipelineSchedule schedule :
       {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B}) {
    for (int64_t stages : {2, 3, 4, 8}) {
      for (int64_t chunks : {1, 2, 3, 4}) {
        if ((schedule == PipelineSchedule::k1F1B) != (chunks == 1)) continue;
        for (int64_t groups : {1, 2, 3}) {
          // Interleaving takes micro-batches in groups of the pipeline's size; 1F1B any count.
          for (int64_t micro_batches :
               {groups * stages, groups * stages + (chunks == 1 ? 1 : 0), int64_t{1}}) {
            if (chunks > 1 && micro_batches % stages != 0) continue;
            std::vector<Traffic> all;
            for (int64_t s = 0; s < stages; ++s)
              all.push_back(traffic(schedule, stages, chunks, micro_batches, s));
            ++plans;
            std::ostringstream where_text;
            where_text << "PP " << stages << " x " << chunks << ", " << micro_batches
                       << " micro-batches";
            const std::string where = where_text.str();
            for (int64_t s = 0; s < stages; ++s) {
              const Traffic& here = all[static_cast<size_t>(s)];
              const bool wraps = s == stages - 1;
              if (chunks == 1 && wraps) {
                EXPECT_TRUE(here.send_next.empty()) << where;
                continue;
              }
              const Traffic& next = all[static_cast<size_t>((s + 1) % stages)];
              EXPECT_EQ(here.send_next.size(), next.recv_prev.size()) << where << " stage " << s;
              EXPECT_EQ(here.recv_next.size(), next.send_prev.size()) << where << " stage " << s;
              // Interleaved: each message meets its receive a fixed number of exchanges later
              // or earlier on the neighbour, the same for every message of the link.
              if (chunks > 1) {
                EXPECT_TRUE(fixed_lag(here.send_next, next.recv_prev)) << where << " stage " << s;
                EXPECT_TRUE(fixed_lag(here.recv_next, next.send_prev)) << where << " stage " << s;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(plans, 40);
}

TEST(SynchronousPipelinePlan, RefusesSchedulesMegatronDoesNotRun) {
  const std::vector<PipelineStep> gpipe = pipeline_schedule(PipelineSchedule::kGpipe, 2, 1, 2, 0);
  EXPECT_THROW(synchronous_pipeline_plan(gpipe, PipelineSchedule::kGpipe, 2, 1, 2, 0),
               std::invalid_argument);
  const std::vector<PipelineStep> one = pipeline_schedule(PipelineSchedule::k1F1B, 1, 1, 2, 0);
  EXPECT_THROW(synchronous_pipeline_plan(one, PipelineSchedule::k1F1B, 1, 1, 2, 0),
               std::invalid_argument);
  // The combined 1F1B schedule's extra warm-up forward is another schedule.
  const std::vector<PipelineStep> extra = pipeline_schedule(PipelineSchedule::k1F1B, 2, 1, 4, 0, 1);
  EXPECT_THROW(synchronous_pipeline_plan(extra, PipelineSchedule::k1F1B, 2, 1, 4, 0),
               std::logic_error);
}

}  // namespace
}  // namespace upsim
