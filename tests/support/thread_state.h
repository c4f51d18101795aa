// Whether a thread of this process sleeps in the kernel (its /proc state is
// 'S'): how tests and benches know their sleepers wait in a futex before they
// wake them, without guessing a delay.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <iterator>
#include <string>

namespace egpu::test {

inline bool thread_asleep(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'S';
}

}  // namespace egpu::test
