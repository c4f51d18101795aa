#include "shim/graph_exec_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace egpu::shim {
namespace {

const int kExecA = 1;
const int kExecB = 2;

TEST(GraphExecTable, NotesGraphsWithMemoryUntilForgotten) {
  GraphExecTable t;
  EXPECT_TRUE(t.empty());
  t.note(&kExecA, {});  // no memory nodes: nothing to note
  EXPECT_TRUE(t.empty());
  t.note(&kExecA, {{0, 100}, {1, 50}});
  EXPECT_FALSE(t.empty());
  auto entry = t.find(&kExecA);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->allocations, (GraphAllocations{{0, 100}, {1, 50}}));
  EXPECT_FALSE(entry->mapped);
  EXPECT_FALSE(t.find(&kExecB).has_value());
  t.set_mapped(&kExecA);
  EXPECT_TRUE(t.find(&kExecA)->mapped);
  t.set_mapped(&kExecB);  // unknown: nothing
  EXPECT_FALSE(t.find(&kExecB).has_value());
  t.forget(&kExecA);
  EXPECT_TRUE(t.empty());
}

TEST(GraphExecTable, AHandleInstantiatedAgainIsUnmapped) {
  GraphExecTable t;
  t.note(&kExecA, {{0, 100}});
  t.set_mapped(&kExecA);
  t.note(&kExecA, {{0, 300}});  // the driver handed the handle out again
  EXPECT_FALSE(t.find(&kExecA)->mapped);
  EXPECT_EQ(t.find(&kExecA)->allocations, (GraphAllocations{{0, 300}}));
}

// Two launches in flight never both count on the same free part of a pool.
TEST(GraphExecTable, FreePoolIsPromisedOnce) {
  GraphExecTable t;
  EXPECT_EQ(t.promise(0, 100, 70), 70u);
  EXPECT_EQ(t.promise(0, 100, 70), 30u);  // what the first left
  EXPECT_EQ(t.promise(0, 100, 70), 0u);
  EXPECT_EQ(t.promise(1, 100, 70), 70u);  // another device's pool
  t.unpromise(0, 70);
  EXPECT_EQ(t.promise(0, 100, 200), 70u);
  t.unpromise(0, 1000);  // never below nothing
  EXPECT_EQ(t.promise(0, 100, 200), 100u);
  t.unpromise(0, 100);
  EXPECT_EQ(t.promise(0, 40, 200), 40u);  // the pool shrank meanwhile
}

TEST(GraphExecTable, ConcurrentPromisesNeverExceedTheFreePart) {
  GraphExecTable t;
  std::atomic<uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k)
        granted += t.promise(0, 5000, 7);
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(granted.load(), 5000u);
}

}  // namespace
}  // namespace egpu::shim
