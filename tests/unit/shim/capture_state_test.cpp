// The shim's table of open stream captures, against a scripted driver: what
// it forbids while captures are open, and that captures the program never
// ends (their context destroyed, more than the table holds) do not forbid
// the shim's timing events for the rest of the process.
#include "shim/cuda_api.h"
// after cuda.h:
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <thread>

#include "shim/capture_state.h"

namespace egpu::shim {
namespace {

// The scripted driver: the streams that capture now.
std::set<CUstream>& capturing_streams() {
  static std::set<CUstream> streams;
  return streams;
}

CUstreamCaptureStatus scripted_status(CUstream stream) noexcept {
  return capturing_streams().contains(stream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                              : CU_STREAM_CAPTURE_STATUS_NONE;
}

CUstream stream_no(std::uintptr_t n) {
  return reinterpret_cast<CUstream>(0x1000 + n * 16);
}

class CaptureStateTest : public ::testing::Test {
 protected:
  void SetUp() override { capturing_streams().clear(); }
  // What the capture wrappers do around the driver's BeginCapture/EndCapture.
  void begin(CUstream s, CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL) {
    state.begin(s, mode);
    capturing_streams().insert(s);
  }
  void end(CUstream s) {
    capturing_streams().erase(s);
    state.end(s, CUDA_SUCCESS);
  }
  CaptureState state{&scripted_status};
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
  capturing_streams().erase(stream_no(1));
  std::thread([&] { state.revalidate(); }).join();
  EXPECT_FALSE(state.events_forbidden());
}

TEST_F(CaptureStateTest, CapturesOfADestroyedContextAreDroppedOnRevalidation) {
  begin(stream_no(1));
  begin(stream_no(2));
  capturing_streams().clear();  // cuCtxDestroy: the driver knows neither
  EXPECT_TRUE(state.events_forbidden());
  state.revalidate();
  EXPECT_FALSE(state.events_forbidden());
  EXPECT_FALSE(state.capturing(stream_no(1)));
}

TEST_F(CaptureStateTest, RevalidationKeepsCapturesTheDriverStillHas) {
  begin(stream_no(1));
  state.revalidate();
  EXPECT_TRUE(state.events_forbidden());
  EXPECT_TRUE(state.capturing(stream_no(1)));
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

TEST_F(CaptureStateTest, AFullTableMakesRoomByDroppingCapturesTheDriverForgot) {
  for (std::uintptr_t i = 0; i < CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  capturing_streams().clear();                            // their context went away unseen
  begin(stream_no(100), CU_STREAM_CAPTURE_MODE_RELAXED);  // tracked, so not global
  EXPECT_FALSE(state.events_forbidden());
  EXPECT_TRUE(state.capturing(stream_no(100)));
}

TEST_F(CaptureStateTest, ADestroyedStreamEndsItsCaptureTrackedOrNot) {
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i)
    begin(stream_no(i), CU_STREAM_CAPTURE_MODE_RELAXED);
  // forget() runs before the driver destroys the stream.
  for (std::uintptr_t i = 0; i <= CaptureState::kMaxOpen; ++i) {
    state.forget(stream_no(i));
    capturing_streams().erase(stream_no(i));
  }
  EXPECT_FALSE(state.events_forbidden());
  // Destroying a stream that never captured changes nothing.
  begin(stream_no(1));
  state.forget(stream_no(7));
  EXPECT_TRUE(state.events_forbidden());
}

}  // namespace
}  // namespace egpu::shim
