// The shim's table of open stream captures, against a scripted driver: what
// it forbids while captures are open, and that captures the program never
// ends (their context destroyed, more than the table holds) do not forbid
// the shim's timing events for the rest of the process.
#include "shim/cuda_api.h"
// after cuda.h:
#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "shim/capture_state.h"

namespace egpu::shim {
namespace {

// The scripted driver: the streams that capture now (a per-thread default
// stream's capture is its thread's own), and every stream's context.
std::mutex& driver_mutex() {
  static std::mutex mu;
  return mu;
}
std::set<std::pair<CUstream, std::thread::id>>& capturing_streams() {
  static std::set<std::pair<CUstream, std::thread::id>> streams;
  return streams;
}
std::thread::id owner_of(CUstream stream) {
  return stream == CU_STREAM_PER_THREAD ? std::this_thread::get_id() : std::thread::id();
}
void set_capturing(CUstream stream, bool on) {
  const std::lock_guard lock(driver_mutex());
  if (on) {
    capturing_streams().insert({stream, owner_of(stream)});
  } else {
    capturing_streams().erase({stream, owner_of(stream)});
  }
}
void driver_forgets_everything() {
  const std::lock_guard lock(driver_mutex());
  capturing_streams().clear();
}

// How many times the table asked the driver about a stream.
int& status_queries() {
  static int n = 0;
  return n;
}

CUstreamCaptureStatus scripted_status(CUstream stream) noexcept {
  const std::lock_guard lock(driver_mutex());
  ++status_queries();
  return capturing_streams().contains({stream, owner_of(stream)}) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                                  : CU_STREAM_CAPTURE_STATUS_NONE;
}

CUstream stream_no(std::uintptr_t n) {
  return reinterpret_cast<CUstream>(0x1000 + n * 16);
}

const CUcontext kContextA = reinterpret_cast<CUcontext>(0xa000);
const CUcontext kContextB = reinterpret_cast<CUcontext>(0xb000);

// Streams numbered from 100 belong to context B, the rest to A.
CUcontext scripted_context(CUstream stream) noexcept {
  return stream != CU_STREAM_PER_THREAD && stream >= stream_no(100) ? kContextB : kContextA;
}

class CaptureStateTest : public ::testing::Test {
 protected:
  void SetUp() override { driver_forgets_everything(); }
  // What the capture wrappers do around the driver's BeginCapture/EndCapture.
  void begin(CUstream s, CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL) {
    const auto ticket = state.begin(s, mode);
    set_capturing(s, true);
    state.confirm(ticket);
  }
  void end(CUstream s, CUresult rc = CUDA_SUCCESS) {
    set_capturing(s, false);
    state.end(s, rc);
  }
  CaptureState state{&scripted_status, &scripted_context};
};

TEST_F(CaptureStateTest, AGlobalCaptureForbidsEventsUntilItEnds) {
  EXPECT_FALSE(state.events_forbidden());
  begin(stream_no(1));
  EXPECT_TRUE(state.events_forbidden());
  EXPECT_TRUE(state.capturing(stream_no(1)));
  EXPECT_FALSE(state.capturing(stream_no(2)));
  end(stream_no(1));
  EXPECT_FALSE(state.events_forbidden());
  EXPECT_FALSE(state.capturing(stream_no(1)));
}

TEST_F(CaptureStateTest, EndCaptureThatLeavesTheCaptureOpenKeepsIt) {
  begin(stream_no(1));
  state.end(stream_no(1), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);  // the driver still captures
  EXPECT_TRUE(state.events_forbidden());
}

TEST_F(CaptureStateTest, ARefusedBeginUndoesOnlyItself) {
  begin(stream_no(1));
  // BeginCapture again on the capturing stream: the driver refuses it.
  state.undo(state.begin(stream_no(1), CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_TRUE(state.events_forbidden());  // the global capture is still open
  end(stream_no(1));
  EXPECT_FALSE(state.events_forbidden());
  EXPECT_FALSE(state.capturing(stream_no(1)));
}

TEST_F(CaptureStateTest, AThreadLocalCaptureForbidsEventsOnlyOnTheThreadThatBeganIt) {
  begin(stream_no(1), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  EXPECT_TRUE(state.events_forbidden());
  bool forbidden_elsewhere = true;
  std::thread([&] { forbidden_elsewhere = state.events_forbidden(); }).join();
  EXPECT_FALSE(forbidden_elsewhere);
  // Its context destroyed from another thread: the capture is gone for the
  // thread that began it too.
  driver_forgets_everything();
  std::thread([&] { state.forget_context(kContextA); }).join();
  EXPECT_FALSE(state.events_forbidden());
}

// Between the table's begin() and the driver's answer, a stream's launches
// pass the gate only if the driver says it captures: a BeginCapture the
// driver refuses, called in a loop, must not let launches on that stream
// run ungated and uncharged.
TEST_F(CaptureStateTest, ACaptureBeingOpenedIsTakenOnTheDriversWord) {
  const auto refused = state.begin(stream_no(1), CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_FALSE(state.capturing(stream_no(1))) << "the driver has not opened it";
  set_capturing(stream_no(1), true);  // the driver opened it; BeginCapture has not returned
  EXPECT_TRUE(state.capturing(stream_no(1)));
  set_capturing(stream_no(1), false);
  state.undo(refused);
  const auto mine = state.begin(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED);
  EXPECT_FALSE(state.capturing(CU_STREAM_PER_THREAD));
  set_capturing(CU_STREAM_PER_THREAD, true);
  EXPECT_TRUE(state.capturing(CU_STREAM_PER_THREAD));  // this thread's: the driver can say
  state.confirm(mine);
  EXPECT_TRUE(state.capturing(CU_STREAM_PER_THREAD));
}

// The driver is not asked about a destroyed context's streams (their
// handles are freed): the context's captures go, the others stay.
TEST_F(CaptureStateTest, CapturesOfADestroyedContextGoWithIt) {
  begin(stream_no(1));
  begin(stream_no(2));
  begin(stream_no(100), CU_STREAM_CAPTURE_MODE_RELAXED);
  const int queries_before = status_queries();
  state.forget_context(kContextA);  // the driver would still say "capturing"
  EXPECT_EQ(status_queries(), queries_before) << "asked the driver about a destroyed context";
  EXPECT_FALSE(state.events_forbidden());
  EXPECT_TRUE(state.capturing(stream_no(100)));
  state.forget_context(kContextB);
  driver_forgets_everything();
  EXPECT_FALSE(state.capturing(stream_no(100)));
  EXPECT_FALSE(state.capturing(stream_no(1)));
}

// A per-thread default stream is each thread's own: one thread ending its
// capture there does not end another thread's.
TEST_F(CaptureStateTest, PerThreadDefaultStreamCapturesAreEachThreadsOwn) {
  begin(CU_STREAM_PER_THREAD);  // global, this thread
  EXPECT_TRUE(state.capturing(CU_STREAM_PER_THREAD));
  std::thread([&] {
    EXPECT_FALSE(state.capturing(CU_STREAM_PER_THREAD));
    begin(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    end(CU_STREAM_PER_THREAD);
  }).join();
  EXPECT_TRUE(state.events_forbidden());  // this thread's global capture is open
  EXPECT_TRUE(state.capturing(CU_STREAM_PER_THREAD));
  end(CU_STREAM_PER_THREAD);
  EXPECT_FALSE(state.events_forbidden());
}

TEST_F(CaptureStateTest, CapturesPastTheTableAreCountedUntilTheyEnd) {
  constexpr std::uintptr_t kMore = CaptureState::kMaxOpen + 3;
  for (std::uintptr_t i = 0; i < kMore; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  // Relaxed captures forbid nothing, but those the table cannot tell apart
  // count as global ones.
  EXPECT_TRUE(state.events_forbidden());
  for (std::uintptr_t i = 0; i < kMore; ++i) {
    EXPECT_TRUE(state.capturing(stream_no(i))) << i;  // the driver says so
    end(stream_no(i));
  }
  EXPECT_FALSE(state.events_forbidden());
}

// EndCapture that failed the capture (an unjoined fork) still ended it; one
// the driver refused (no capture there) ended nothing.
TEST_F(CaptureStateTest, AnEndThatFailedTheCaptureStillEndedIt) {
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i)
    end(stream_no(i), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  EXPECT_FALSE(state.events_forbidden());
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  state.end(stream_no(500), CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_TRUE(state.events_forbidden());
}

TEST_F(CaptureStateTest, AFullTableMakesRoomByDroppingCapturesTheDriverForgot) {
  for (std::uintptr_t i = 0; i < CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  driver_forgets_everything();                            // ended unseen
  begin(stream_no(300), CU_STREAM_CAPTURE_MODE_RELAXED);  // tracked, so not global
  EXPECT_FALSE(state.events_forbidden());
  EXPECT_TRUE(state.capturing(stream_no(300)));
}

// A capture being opened is in the table before the driver knows it; a full
// table's clean-up on another begin must not drop it.
TEST_F(CaptureStateTest, ACaptureBeingOpenedIsNotDroppedBeforeTheDriverKnowsIt) {
  for (std::uintptr_t i = 0; i + 1 < CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  const auto opening = state.begin(stream_no(200), CU_STREAM_CAPTURE_MODE_GLOBAL);
  state.undo(state.begin(stream_no(201), CU_STREAM_CAPTURE_MODE_RELAXED));  // full: cleans up
  set_capturing(stream_no(200), true);                                      // opened now
  state.confirm(opening);
  EXPECT_TRUE(state.events_forbidden());
  EXPECT_TRUE(state.capturing(stream_no(200)));
}

TEST_F(CaptureStateTest, ADestroyedStreamEndsItsCaptureTrackedOrNot) {
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  // forget() runs before the driver destroys the stream.
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i) {
    state.forget(stream_no(i));
    set_capturing(stream_no(i), false);
  }
  EXPECT_FALSE(state.events_forbidden());
  // Destroying a stream that never captured changes nothing.
  begin(stream_no(1));
  state.forget(stream_no(7));
  EXPECT_TRUE(state.events_forbidden());
}

}  // namespace
}  // namespace egpu::shim
