#include "shim/graph_exec_table.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace egpu::shim
