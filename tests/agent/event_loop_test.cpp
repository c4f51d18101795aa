// The agent's event loop: a data-plane timer that falls due while the loop
// works through a queue of control-plane callbacks (a flood of requests)
// runs after the one in progress, not after the whole queue. Counted in
// callbacks, not timed: each control-plane callback spins until past the
// timer's expiry, so it is due after the first whatever the machine's speed.
#include "nodeagent/event_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace egpu::agent {
namespace {

struct Run {
  std::chrono::steady_clock::time_point due;
  int control_callbacks = 0;
  int control_before_timer = -1;
};

void on_control(evutil_socket_t, short, void* arg) {
  auto* run = static_cast<Run*>(arg);
  ++run->control_callbacks;
  while (std::chrono::steady_clock::now() <= run->due) {
  }
}

void on_timer(evutil_socket_t, short, void* arg) {
  auto* run = static_cast<Run*>(arg);
  run->control_before_timer = run->control_callbacks;
}

// How many of 50 control-plane callbacks ran before the timer.
int control_callbacks_before_a_due_timer(event_base* base, bool timer_on_data_plane) {
  Run run;
  std::vector<EventHandle> control;
  for (int i = 0; i < 50; ++i) {
    control.emplace_back(event_new(base, -1, 0, &on_control, &run));
    EXPECT_TRUE(control.back());
  }
  EventHandle timer(evtimer_new(base, &on_timer, &run));
  if (timer_on_data_plane) {
    EXPECT_TRUE(on_data_plane(timer.get()));
  }
  const timeval in_1ms{0, 1000};
  EXPECT_EQ(evtimer_add(timer.get(), &in_1ms), 0);
  // Past the timer's expiry by libevent's clock, which it read during the
  // add (a slow build, or a busy host, may take a while over it).
  run.due = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
  for (EventHandle& ev : control)
    event_active(ev.get(), EV_TIMEOUT, 0);
  event_base_dispatch(base);
  EXPECT_EQ(run.control_callbacks, 50);
  return run.control_before_timer;
}

TEST(AgentEventLoop, ADueDataPlaneTimerRunsBeforeTheRestOfAControlPlaneFlood) {
  auto base = make_agent_event_base();
  ASSERT_TRUE(base.ok()) << base.error();
  EXPECT_LE(control_callbacks_before_a_due_timer(base->get(), true), 2);
}

// What it guards against: a plain loop works through the whole queue first.
TEST(AgentEventLoop, APlainLoopRunsTheWholeFloodFirst) {
  EventBaseHandle plain(event_base_new());
  ASSERT_TRUE(plain);
  EXPECT_EQ(control_callbacks_before_a_due_timer(plain.get(), false), 50);
}

}  // namespace
}  // namespace egpu::agent
