#include "sim/engine.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace upsim {
namespace {

TEST(Engine, EqualTimesRunByPriorityThenSchedulingOrder) {
  Engine engine;
  std::vector<std::string> order;
  const Time t = Time::from_ps(1000);
  engine.schedule_at(t, EventPriority::kStart, [&] { order.push_back("start-a"); });
  engine.schedule_at(t, EventPriority::kCompletion, [&] { order.push_back("completion-a"); });
  engine.schedule_at(t, EventPriority::kStart, [&] { order.push_back("start-b"); });
  engine.schedule_at(t, EventPriority::kNetwork, [&] { order.push_back("network"); });
  engine.schedule_at(t, EventPriority::kCompletion, [&] { order.push_back("completion-b"); });
  engine.schedule_at(Time::from_ps(999), EventPriority::kStart,
                     [&] { order.push_back("earlier"); });
  EXPECT_EQ(engine.run(), 6u);
  EXPECT_EQ(order, (std::vector<std::string>{"earlier", "completion-a", "completion-b", "network",
                                             "start-a", "start-b"}));
  EXPECT_EQ(engine.now(), t);
}

TEST(Engine, EventsScheduledByHandlersAtTheSameTimeRunAfterQueuedOnes) {
  Engine engine;
  std::vector<int> order;
  engine.schedule_at(Time::from_ps(5), EventPriority::kCompletion, [&] {
    order.push_back(1);
    engine.schedule_in(Duration::zero(), EventPriority::kCompletion, [&] { order.push_back(3); });
  });
  engine.schedule_at(Time::from_ps(5), EventPriority::kCompletion, [&] { order.push_back(2); });
  engine.run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(Engine, CancelledEventNeverRuns) {
  Engine engine;
  int ran = 0;
  const EventHandle h =
      engine.schedule_at(Time::from_ps(10), EventPriority::kStart, [&] { ran += 1; });
  engine.schedule_at(Time::from_ps(20), EventPriority::kStart, [&] { ran += 10; });
  EXPECT_TRUE(engine.cancel(h));
  EXPECT_FALSE(engine.cancel(h)) << "second cancel of the same event";
  EXPECT_EQ(engine.run(), 1u);
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(engine.now(), Time::from_ps(20));
}

TEST(Engine, CancelAfterRunIsANoOpAndDoesNotHitAReusedSlot) {
  Engine engine;
  int ran = 0;
  const EventHandle h = engine.schedule_at(Time::from_ps(1), EventPriority::kStart, [&] { ++ran; });
  engine.run();
  // The slot is free again; a new event may reuse it. The old handle must not cancel it.
  engine.schedule_at(Time::from_ps(2), EventPriority::kStart, [&] { ran += 100; });
  EXPECT_FALSE(engine.cancel(h));
  engine.run();
  EXPECT_EQ(ran, 101);
}

TEST(Engine, SchedulingInThePastThrows) {
  Engine engine;
  engine.schedule_at(Time::from_ps(100), EventPriority::kStart, [] {});
  engine.run();
  EXPECT_THROW(engine.schedule_at(Time::from_ps(99), EventPriority::kStart, [] {}),
               std::logic_error);
}

TEST(Engine, RunUntilStopsAtTheBoundaryInclusive) {
  Engine engine;
  int ran = 0;
  engine.schedule_at(Time::from_ps(10), EventPriority::kStart, [&] { ++ran; });
  engine.schedule_at(Time::from_ps(11), EventPriority::kStart, [&] { ++ran; });
  EXPECT_EQ(engine.run_until(Time::from_ps(10)), 1u);
  EXPECT_EQ(engine.queued(), 1u);
  EXPECT_EQ(engine.run(), 1u);
  EXPECT_EQ(ran, 2);
}

TEST(Engine, TwoEnginesAreIndependent) {
  Engine a;
  Engine b;
  a.schedule_at(Time::from_ps(7), EventPriority::kStart, [] {});
  b.schedule_at(Time::from_ps(3), EventPriority::kStart, [] {});
  b.run();
  EXPECT_EQ(b.now(), Time::from_ps(3));
  EXPECT_EQ(a.now(), Time::zero());
  EXPECT_EQ(a.queued(), 1u);
}

}  // namespace
}  // namespace upsim
