// Page files: an existing page that is not this agent's (another layout after
// an upgrade, or damaged) is replaced by a new file, never resized or
// rewritten in place, so the processes that still map it (shims of the
// previous agent) keep reading what they read and never take SIGBUS.
#include "core/shm/page_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "core/shm/page_takeover.h"
#include "core/shm/pages.h"

namespace egpu::shm {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/egpu-page-file-XXXXXX";
    path = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

ino_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The previous agent's page: `size` bytes of 0xab, mapped as its shims map it.
Mapping old_page(const std::string& path, size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  const std::vector<unsigned char> bytes(size, 0xab);
  EXPECT_EQ(::write(fd, bytes.data(), size), static_cast<ssize_t>(size));
  auto mapping = map_fd(fd, size, Access::kReadOnly);
  ::close(fd);
  EXPECT_TRUE(mapping) << mapping.error();
  return mapping ? std::move(*mapping) : Mapping();
}

TEST(PageFile, APageOfAnotherSizeIsReplacedAndItsMappersKeepTheirs) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/gpu0";
  const Mapping old = old_page(path, 8192);
  ASSERT_NE(old.get(), nullptr);
  const ino_t before = inode_of(path);

  auto page = open_page_file(path, 4096, ::getuid(), ::getgid(), 0600);
  ASSERT_TRUE(page) << page.error();
  EXPECT_TRUE(page->created);
  EXPECT_NE(inode_of(path), before);
  EXPECT_EQ(page->mapping.as<unsigned char>()[100], 0);  // a fresh, zeroed page
  // Past the new page's end: a resized file would SIGBUS this read.
  EXPECT_EQ(old.as<const unsigned char>()[8000], 0xab);
  EXPECT_EQ(old.as<const unsigned char>()[0], 0xab);

  // The same size again: the same file, as it was.
  page->mapping.as<unsigned char>()[100] = 7;
  auto again = open_page_file(path, 4096, ::getuid(), ::getgid(), 0600);
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->mapping.as<unsigned char>()[100], 7);
}

TEST(PageFile, ReplacingLeavesTheOldFileToThoseWhoMapIt) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/gpu1";
  const Mapping old = old_page(path, 4096);
  const ino_t before = inode_of(path);
  auto page = replace_page_file(path, 4096, ::getuid(), ::getgid(), 0600);
  ASSERT_TRUE(page) << page.error();
  EXPECT_TRUE(page->created);
  EXPECT_NE(inode_of(path), before);
  EXPECT_EQ(page->mapping.as<unsigned char>()[0], 0);
  EXPECT_EQ(old.as<const unsigned char>()[4095], 0xab);
  // Nothing there: simply created.
  auto fresh = replace_page_file(dir.path + "/gpu2", 4096, ::getuid(), ::getgid(), 0600);
  ASSERT_TRUE(fresh) << fresh.error();
  EXPECT_TRUE(fresh->created);
  // A page that cannot be replaced says why.
  auto refused =
      replace_page_file(dir.path + "/no/such/dir/gpu3", 4096, ::getuid(), ::getgid(), 0600);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("no/such/dir/gpu3"), std::string::npos) << refused.error();
}

// `egpu-agentd --check-pages`: which pages a new agent could not take over,
// while instances (their pages) exist.
TEST(PageTakeover, NamesEachPageOfAnotherLayoutWhileInstancesRun) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  constexpr uint32_t kSlots = 64;
  EXPECT_TRUE(check_page_takeover(dir.path, kSlots));  // nothing there yet
  auto current = open_page_file(dir.path + "/gpu0", sizeof(GpuPage), ::getuid(), ::getgid(), 0600);
  ASSERT_TRUE(current) << current.error();
  (void)old_page(dir.path + "/gpu5", 100);
  auto other = open_page_file(dir.path + "/gpu7", sizeof(GpuPage), ::getuid(), ::getgid(), 0600);
  ASSERT_TRUE(other) << other.error();
  other->mapping.as<GpuPage>()->magic = 0x12345678;
  // No instance: an idle node restarts whatever its pages say.
  EXPECT_TRUE(check_page_takeover(dir.path, kSlots));
  const Mapping instance = old_page(dir.path + "/instance-12", 64);
  Status s = check_page_takeover(dir.path, kSlots);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find(dir.path + "/gpu5 has 100 bytes"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find(dir.path + "/gpu7 is not a GPU page"), std::string::npos) << s.error();
  EXPECT_EQ(s.error().find("/gpu0"), std::string::npos) << s.error();  // never finished: magic 0
  ::unlink((dir.path + "/gpu5").c_str());
  ::unlink((dir.path + "/gpu7").c_str());
  auto* page = current->mapping.as<GpuPage>();
  page->magic = kGpuPageMagic;
  page->version = kLayoutVersion;
  page->gpu_index = 0;
  page->max_slots = kSlots;
  // Its instances are recorded beside it: without that record, no takeover.
  s = check_page_takeover(dir.path, kSlots);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find(dir.path + "/gpu0.records is missing"), std::string::npos) << s.error();
  auto records = open_page_file(dir.path + "/gpu0.records", sizeof(GpuRecordPage), ::getuid(),
                                ::getgid(), 0600);
  ASSERT_TRUE(records) << records.error();
  auto* record_page = records->mapping.as<GpuRecordPage>();
  record_page->magic = kGpuRecordPageMagic;
  record_page->version = kLayoutVersion;
  record_page->gpu_index = 1;
  s = check_page_takeover(dir.path, kSlots);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("gpu0.records is not GPU 0's record page"), std::string::npos)
      << s.error();
  record_page->gpu_index = 0;
  EXPECT_TRUE(check_page_takeover(dir.path, kSlots));
  // More slots: the page is taken over and given the rest.
  EXPECT_TRUE(check_page_takeover(dir.path, 256));
  // Fewer: GpuArbiter::open would not reuse it either.
  s = check_page_takeover(dir.path, 32);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("GPU 0 with 64 slots; this agent's is GPU 0 with 32"), std::string::npos)
      << s.error();
}

}  // namespace
}  // namespace egpu::shm
