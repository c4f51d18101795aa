// BuiltOnce (shim/built_once.h): a thread never waits for another thread's
// build of a table. The shim's builder calls dlsym, which needs the loader's
// lock; a thread in a library's constructor holds that lock and may ask for
// the same table.
#include "shim/built_once.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace egpu::shim {
namespace {

TEST(BuiltOnce, AThreadArrivingDuringABuildIsToldSoAndDoesNotWait) {
  BuiltOnce<int> table;
  std::atomic<bool> building{false};
  std::atomic<bool> release{false};
  int builds = 0;
  std::thread builder([&] {
    const int* v = table.get([&](int& out) {
      ++builds;
      building = true;
      while (!release)
        std::this_thread::yield();  // the builder's dlsym, held up by the loader's lock
      out = 42;
    });
    EXPECT_NE(v, nullptr);
  });
  while (!building)
    std::this_thread::yield();
  // Waiting here would be waiting for ever if the builder waited for us.
  EXPECT_EQ(table.get([&](int& out) { out = -1, ++builds; }), nullptr);
  release = true;
  builder.join();
  const int* v = table.get([&](int& out) { out = -1, ++builds; });
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, 42);
  EXPECT_EQ(builds, 1);
}

TEST(BuiltOnce, ItsOwnThreadInsideTheBuildIsToldSoToo) {
  // A signal handler, or a call the build makes back into the shim.
  BuiltOnce<int> table;
  bool inner_null = false;
  const int* v = table.get([&](int& out) {
    inner_null = table.get([](int& o) { o = -1; }) == nullptr;
    out = 7;
  });
  EXPECT_TRUE(inner_null);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, 7);
}

}  // namespace
}  // namespace egpu::shim
