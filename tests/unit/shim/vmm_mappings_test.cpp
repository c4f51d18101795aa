// VmmMappings: a VMM allocation is dead (its bytes go back to the quota) only
// at the last of its handle references and mappings, like the driver frees it.
#include "shim/vmm_mappings.h"

#include <gtest/gtest.h>

namespace egpu::shim {
namespace {

TEST(VmmMappings, ReleasedWhileMappedDiesAtTheUnmap) {
  VmmMappings v;
  const uint64_t serial = v.add_handle(7, 0, 1024, false);
  v.add_mapping(serial, 0x1000, 512, 0);
  v.add_mapping(serial, 0x2000, 512, 0);
  EXPECT_TRUE(v.begin_release(7).dead.empty());  // still mapped twice
  EXPECT_FALSE(v.find_handle(7));                // but the handle value is gone
  EXPECT_TRUE(v.begin_unmap(0x1000, 512).dead.empty());
  const auto last = v.begin_unmap(0x2000, 512);
  ASSERT_EQ(last.dead.size(), 1u);
  EXPECT_EQ(last.dead[0].serial, serial);
  EXPECT_EQ(last.dead[0].bytes, 1024u);
  EXPECT_EQ(v.size(), 0u);
}

TEST(VmmMappings, RetainedHandleIsOneMoreReference) {
  VmmMappings v;
  const uint64_t serial = v.add_handle(7, 0, 1024, false);
  v.add_mapping(serial, 0x1000, 1024, 0);
  ASSERT_TRUE(v.retain(7, 0x1200));  // any address inside the mapping
  EXPECT_TRUE(v.begin_release(7).dead.empty());
  EXPECT_TRUE(v.begin_unmap(0x1000, 1024).dead.empty());  // retained reference left
  EXPECT_EQ(v.begin_release(7).dead.size(), 1u);
  EXPECT_FALSE(v.retain(8, 0x1000));  // nothing mapped there any more
}

TEST(VmmMappings, AFailedReleaseOrUnmapIsUndone) {
  VmmMappings v;
  const uint64_t serial = v.add_handle(7, 0, 1024, false);
  v.add_mapping(serial, 0x1000, 1024, 0);
  const auto unmap = v.begin_unmap(0x1000, 1024);
  v.undo(unmap);
  const auto release = v.begin_release(7);
  EXPECT_TRUE(release.dead.empty());  // the mapping is back
  v.undo(release);
  ASSERT_TRUE(v.find_handle(7));
  EXPECT_EQ(v.find_handle(7)->refs, 1u);
  EXPECT_EQ(v.find_mapped(0x1100)->serial, serial);
}

// cuMemUnmap with a size past the end of the address space: the driver
// refuses it, and the shim's table, looked at first, must take only the
// mappings at or above its start (the end once wrapped below the start, and
// the erase walked past the map's end).
TEST(VmmMappings, AnUnmapPastTheAddressSpaceTakesOnlyWhatIsAboveItsStart) {
  VmmMappings v;
  v.add_mapping(v.add_handle(7, 0, 1024, false), 0x1000, 1024, 0);
  v.add_mapping(v.add_handle(8, 0, 1024, false), 0x3000, 1024, 0);
  const auto p = v.begin_unmap(0x2000, ~0ull - 0xFFF);
  ASSERT_EQ(p.ranges.size(), 1u);
  EXPECT_EQ(p.ranges[0].first, 0x3000u);
  v.undo(p);
  EXPECT_EQ(v.begin_unmap(0x1000, 1024).ranges.size(), 1u);
  EXPECT_EQ(v.begin_unmap(0x3000, 1024).ranges.size(), 1u);
}

TEST(VmmMappings, AnImportGrowsToWhatIsMappedFromIt) {
  VmmMappings v;
  const uint64_t serial = v.add_handle(9, 1, 0, true);
  EXPECT_EQ(v.add_mapping(serial, 0x1000, 512, 512), 512u);
  EXPECT_EQ(v.add_mapping(serial, 0x4000, 512, 1024), 512u);  // offset 512
  EXPECT_EQ(v.add_mapping(serial, 0x8000, 256, 256), 0u);     // already counted
  EXPECT_EQ(v.find_handle(9)->bytes, 1024u);
  const uint64_t created = v.add_handle(10, 1, 4096, false);
  EXPECT_EQ(v.add_mapping(created, 0x10000, 8192, 8192), 0u);  // created: size known
}

}  // namespace
}  // namespace egpu::shim
