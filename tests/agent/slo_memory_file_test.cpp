// The latency control's memory file: what a GPU of latency-critical
// instances whose reports chose every digit leaves is read back whole.
#include "nodeagent/slo_memory_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

namespace egpu::agent {
namespace {

// One instance's memory at its largest: every period's share used with 17
// significant digits, every latency bucket of every window full, every
// model point's windows at 19 digits.
slo::SloController::Memory largest_memory() {
  slo::SloController::Memory m;
  m.objective = slo::LatencyObjective{99'000, 40'000'000};
  m.borrowed = 99;
  for (int i = 0; i < 1200; ++i)
    m.used.push_back(0.12345678901234567 + i * 1e-9);
  for (int w = 0; w < 5; ++w) {
    slo::LatencyHistogram::Counts counts;
    counts.fill(std::numeric_limits<uint64_t>::max() / 1024);
    m.window.push_back(slo::LatencyHistogram::delta(counts, {}));
  }
  slo::LatencyModel::Windows windows;
  for (auto& point : windows)
    point.assign(16, std::numeric_limits<int64_t>::max() - 7);
  m.model = slo::LatencyModel::from_windows(windows);
  return m;
}

TEST(SloMemoryFile, AGpuOfInstancesAtTheirLargestIsReadBack) {
  char tmpl[] = "/tmp/egpu-slo-memory-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  slo::SloMemory memory;
  const auto one = largest_memory();
  for (uint64_t id = 1; id <= 256; ++id) {
    memory.instances[id] = one;
    memory.loans[id] = 99;
  }
  ASSERT_TRUE(SloMemoryFile::save(dir, 0, memory).ok());
  struct stat st {};
  ASSERT_EQ(stat(SloMemoryFile::path(dir, 0).c_str(), &st), 0);
  EXPECT_LT(static_cast<std::size_t>(st.st_size), SloMemoryFile::kMaxBytes / 2)
      << "no room left for what a release may add";
  std::printf("%lld bytes for 256 instances\n", static_cast<long long>(st.st_size));
  auto loaded = SloMemoryFile::load(dir, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  ASSERT_TRUE(loaded->has_value());
  const slo::SloMemory& back = **loaded;
  EXPECT_EQ(back.loans, memory.loans);
  ASSERT_EQ(back.instances.size(), 256u);
  const auto& m = back.instances.at(256);
  EXPECT_TRUE(m.window.empty());  // a restart starts its windows afresh
  EXPECT_EQ(m.model, one.model);
  EXPECT_EQ(m.objective, one.objective);
  ASSERT_EQ(m.used.size(), one.used.size());
  for (std::size_t i = 0; i < m.used.size(); ++i)
    EXPECT_NEAR(m.used[i], one.used[i], 1e-4);
  std::filesystem::remove_all(dir);
}

// Nothing to keep: the file goes, and a file that cannot go is an error
// naming it (a restarted agent would read it back).
TEST(SloMemoryFile, RemovingItSaysWhenTheFileStays) {
  char tmpl[] = "/tmp/egpu-slo-memory-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string file = SloMemoryFile::path(dir, 1);
  EXPECT_TRUE(SloMemoryFile::remove(dir, 1).ok()) << "no file: nothing to remove";
  ASSERT_TRUE(SloMemoryFile::save(dir, 1, slo::SloMemory{}).ok());
  EXPECT_TRUE(SloMemoryFile::remove(dir, 1).ok());
  EXPECT_FALSE(std::filesystem::exists(file));
  std::filesystem::create_directory(file);  // what unlink cannot remove
  const Status s = SloMemoryFile::remove(dir, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find(file + ": cannot remove"), std::string::npos) << s.error();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace egpu::agent
