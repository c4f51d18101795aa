// NoCancelScope: the shim's own waits (attach, the gate, the in-flight bound,
// the fail mode's duty cycle) are no cancellation points. The driver call the
// program made has none, and a pthread_cancel acted on inside the shim would
// unwind through its catch-all and noexcept exports (std::terminate: the
// program aborts) and leave `busy` set on the page. The request stays
// pending and is acted on at the program's next cancellation point.
#pragma once

#include <pthread.h>

namespace egpu::shim {

class NoCancelScope {
 public:
  NoCancelScope() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_); }
  ~NoCancelScope() { pthread_setcancelstate(old_, nullptr); }
  NoCancelScope(const NoCancelScope&) = delete;
  NoCancelScope& operator=(const NoCancelScope&) = delete;

 private:
  int old_ = PTHREAD_CANCEL_ENABLE;
};

}  // namespace egpu::shim
