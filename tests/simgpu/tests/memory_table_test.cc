#include "model/memory_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

namespace egpu::simgpu {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBase = uint64_t{1} << 40;

struct Fixture {
  std::unique_ptr<DeviceMemory> mem = std::make_unique<DeviceMemory>();
  explicit Fixture(uint64_t total = 100 * kMiB) { init_memory(*mem, total, kBase, 2 * kBase); }
};

constexpr AllocOwner kOwnerA{0, 1, 100};
constexpr AllocOwner kOwnerB{1, 1, 200};

TEST(MemoryTable, AccountsUntilOutOfMemory) {
  Fixture f;
  EXPECT_EQ(allocate(*f.mem, 60 * kMiB, AllocationKind::kDevice, kOwnerA).status, AllocStatus::kOk);
  EXPECT_EQ(allocate(*f.mem, 30 * kMiB, AllocationKind::kManaged, kOwnerB).status,
            AllocStatus::kOk);
  EXPECT_EQ(free_bytes(*f.mem), 10 * kMiB);
  const AllocResult too_big = allocate(*f.mem, 10 * kMiB + 1, AllocationKind::kDevice, kOwnerA);
  EXPECT_EQ(too_big.status, AllocStatus::kOutOfMemory);
  EXPECT_EQ(free_bytes(*f.mem), 10 * kMiB);  // a failed allocation changes nothing
  EXPECT_EQ(allocate(*f.mem, 10 * kMiB, AllocationKind::kDevice, kOwnerA).status, AllocStatus::kOk);
  EXPECT_EQ(free_bytes(*f.mem), 0u);
}

TEST(MemoryTable, RejectsEmptyAndHugeRequests) {
  Fixture f;
  EXPECT_EQ(allocate(*f.mem, 0, AllocationKind::kDevice, kOwnerA).status,
            AllocStatus::kInvalidSize);
  EXPECT_EQ(allocate(*f.mem, UINT64_MAX, AllocationKind::kDevice, kOwnerA).status,
            AllocStatus::kOutOfMemory);
}

TEST(MemoryTable, AddressesAreUniqueAndNeverReused) {
  Fixture f;
  std::set<uint64_t> seen;
  for (int i = 0; i < 100; ++i) {
    const AllocResult r = allocate(*f.mem, 1000, AllocationKind::kDevice, kOwnerA);
    ASSERT_EQ(r.status, AllocStatus::kOk);
    EXPECT_TRUE(seen.insert(r.address).second);
    EXPECT_GE(r.address, kBase);
    EXPECT_EQ(r.address % 256, 0u);
    EXPECT_EQ(release_address(*f.mem, r.address, kOwnerA.pid), 1000u);
  }
  EXPECT_EQ(f.mem->used_bytes, 0u);
}

TEST(MemoryTable, ReleaseChecksTheOwningProcess) {
  Fixture f;
  const AllocResult r = allocate(*f.mem, kMiB, AllocationKind::kDevice, kOwnerA);
  EXPECT_EQ(release_address(*f.mem, r.address, kOwnerB.pid), 0u);
  EXPECT_EQ(release_address(*f.mem, r.address + 1, kOwnerA.pid), 0u);
  EXPECT_EQ(release_address(*f.mem, r.address, kOwnerA.pid), kMiB);
  EXPECT_EQ(release_address(*f.mem, r.address, kOwnerA.pid), 0u);  // double free
}

TEST(MemoryTable, ReleasingAnOwnerFreesAllItsAllocations) {
  Fixture f;
  for (int i = 0; i < 5; ++i)
    allocate(*f.mem, kMiB, AllocationKind::kDevice, kOwnerA);
  allocate(*f.mem, 3 * kMiB, AllocationKind::kVmm, kOwnerB);
  EXPECT_EQ(release_owner(*f.mem, kOwnerA.slot, kOwnerA.generation), 5 * kMiB);
  EXPECT_EQ(f.mem->used_bytes, 3 * kMiB);
  // An older generation of the same slot owns nothing any more.
  EXPECT_EQ(release_owner(*f.mem, kOwnerB.slot, kOwnerB.generation + 1), 0u);
}

TEST(MemoryTable, FindsTheAllocationContainingAnAddress) {
  Fixture f;
  const AllocResult r = allocate(*f.mem, 4096, AllocationKind::kPitch, kOwnerA);
  const Allocation* a = find_allocation(*f.mem, r.address + 4095);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->address, r.address);
  EXPECT_EQ(a->kind, static_cast<uint32_t>(AllocationKind::kPitch));
  EXPECT_EQ(find_allocation(*f.mem, r.address + 4096), nullptr);
}

TEST(MemoryTable, AddressSpaceExhaustionIsReported) {
  Fixture f(uint64_t{1} << 50);
  f.mem->address_limit = kBase + 10 * kMiB;
  EXPECT_EQ(allocate(*f.mem, 8 * kMiB, AllocationKind::kDevice, kOwnerA).status, AllocStatus::kOk);
  EXPECT_EQ(allocate(*f.mem, 4 * kMiB, AllocationKind::kDevice, kOwnerA).status,
            AllocStatus::kAddressSpaceExhausted);
}

TEST(MemoryTable, TableFullIsReported) {
  Fixture f(uint64_t{1} << 40);
  for (uint32_t i = 0; i < kMaxAllocations; ++i) {
    ASSERT_EQ(allocate(*f.mem, 1, AllocationKind::kDevice, kOwnerA).status, AllocStatus::kOk);
  }
  EXPECT_EQ(allocate(*f.mem, 1, AllocationKind::kDevice, kOwnerA).status, AllocStatus::kTableFull);
}

TEST(MemoryTable, RepairRecomputesUsage) {
  Fixture f;
  allocate(*f.mem, 2 * kMiB, AllocationKind::kDevice, kOwnerA);
  allocate(*f.mem, 3 * kMiB, AllocationKind::kDevice, kOwnerA);
  f.mem->used_bytes = 12345;  // an update cut short
  repair_memory(*f.mem);
  EXPECT_EQ(f.mem->used_bytes, 5 * kMiB);
  EXPECT_EQ(f.mem->high_water, 2u);
}

constexpr AllocOwner kOwnerC{2, 1, 300};

TEST(MemoryTableImport, ImportIsUnchargedAndHasItsOwnAddress) {
  Fixture f;
  const AllocResult r = allocate(*f.mem, 8 * kMiB, AllocationKind::kDevice, kOwnerA);
  const AllocResult i =
      import_allocation(*f.mem, r.address, AllocationKind::kIpcImport, kOwnerB, false);
  ASSERT_EQ(i.status, AllocStatus::kOk);
  EXPECT_NE(i.address, r.address);
  EXPECT_EQ(f.mem->used_bytes, 8 * kMiB);  // counted once, by the exporter's entry
  const Allocation* a = find_allocation(*f.mem, i.address + 8 * kMiB - 1);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->size, 8 * kMiB);
  EXPECT_EQ(a->target, r.address);
  EXPECT_EQ(a->owner_pid, kOwnerB.pid);
  // Only whole allocations can be imported, and no import of an import.
  EXPECT_EQ(
      import_allocation(*f.mem, r.address + 512, AllocationKind::kIpcImport, kOwnerB, false).status,
      AllocStatus::kNotFound);
  EXPECT_EQ(import_allocation(*f.mem, i.address, AllocationKind::kIpcImport, kOwnerC, false).status,
            AllocStatus::kNotFound);
  EXPECT_EQ(import_allocation(*f.mem, r.address, AllocationKind::kDevice, kOwnerB, false).status,
            AllocStatus::kInvalidSize);
}

TEST(MemoryTableImport, ExporterFreeingKeepsTheMemoryUntilTheLastImportEnds) {
  Fixture f;
  const AllocResult r = allocate(*f.mem, 8 * kMiB, AllocationKind::kDevice, kOwnerA);
  const AllocResult b =
      import_allocation(*f.mem, r.address, AllocationKind::kIpcImport, kOwnerB, false);
  const AllocResult c =
      import_allocation(*f.mem, r.address, AllocationKind::kPoolImport, kOwnerC, false);
  EXPECT_EQ(release_address(*f.mem, r.address, kOwnerA.pid), 8 * kMiB);
  EXPECT_EQ(f.mem->used_bytes, 8 * kMiB);  // orphaned, alive for its imports
  EXPECT_EQ(release_address(*f.mem, r.address, kOwnerA.pid), 0u);  // no double free
  // An orphan can no longer be opened through an IPC handle.
  EXPECT_EQ(import_allocation(*f.mem, r.address, AllocationKind::kIpcImport, kOwnerC, false).status,
            AllocStatus::kNotFound);
  EXPECT_EQ(release_address(*f.mem, b.address, kOwnerB.pid, AllocationKind::kIpcImport), 8 * kMiB);
  EXPECT_EQ(f.mem->used_bytes, 8 * kMiB);
  EXPECT_EQ(release_address(*f.mem, c.address, kOwnerC.pid), 8 * kMiB);  // cuMemFree
  EXPECT_EQ(f.mem->used_bytes, 0u);
  EXPECT_EQ(find_allocation(*f.mem, r.address), nullptr);
}

TEST(MemoryTableImport, IpcAndVmmImportsEndOnlyThroughTheirOwnCalls) {
  Fixture f;
  const AllocResult r = allocate(*f.mem, kMiB, AllocationKind::kVmm, kOwnerA);
  const AllocResult i =
      import_allocation(*f.mem, r.address, AllocationKind::kVmmImport, kOwnerB, true);
  EXPECT_EQ(release_address(*f.mem, i.address, kOwnerB.pid), 0u);  // not by cuMemFree
  EXPECT_EQ(release_address(*f.mem, i.address, kOwnerB.pid, AllocationKind::kIpcImport), 0u);
  EXPECT_EQ(release_address(*f.mem, i.address, kOwnerB.pid, AllocationKind::kVmmImport), kMiB);
  EXPECT_EQ(release_address(*f.mem, r.address, kOwnerA.pid), kMiB);
  EXPECT_EQ(f.mem->used_bytes, 0u);
}

TEST(MemoryTableImport, OwnersEndingReleaseImportsAndOrphans) {
  Fixture f;
  const AllocResult r = allocate(*f.mem, 4 * kMiB, AllocationKind::kVmm, kOwnerA);
  import_allocation(*f.mem, r.address, AllocationKind::kVmmImport, kOwnerB, true);
  // The exporter's context ends: nothing freed, the importer keeps it.
  EXPECT_EQ(release_owner(*f.mem, kOwnerA.slot, kOwnerA.generation), 0u);
  EXPECT_EQ(f.mem->used_bytes, 4 * kMiB);
  // A VMM shareable handle can still be imported while the memory lives.
  EXPECT_EQ(import_allocation(*f.mem, r.address, AllocationKind::kVmmImport, kOwnerC, true).status,
            AllocStatus::kOk);
  EXPECT_EQ(release_owner(*f.mem, kOwnerB.slot, kOwnerB.generation), 0u);
  EXPECT_EQ(release_owner(*f.mem, kOwnerC.slot, kOwnerC.generation), 4 * kMiB);
  EXPECT_EQ(f.mem->used_bytes, 0u);
}

TEST(MemoryTableImport, RepairRecountsImportsAndFreesUnreferencedOrphans) {
  Fixture f;
  const AllocResult kept = allocate(*f.mem, 2 * kMiB, AllocationKind::kDevice, kOwnerA);
  const AllocResult lost = allocate(*f.mem, 3 * kMiB, AllocationKind::kDevice, kOwnerA);
  import_allocation(*f.mem, kept.address, AllocationKind::kIpcImport, kOwnerB, false);
  const AllocResult gone =
      import_allocation(*f.mem, lost.address, AllocationKind::kIpcImport, kOwnerB, false);
  release_owner(*f.mem, kOwnerA.slot, kOwnerA.generation);  // both orphaned
  // A holder died after freeing the import entry but before dropping its reference.
  for (uint32_t i = 0; i < f.mem->high_water; ++i) {
    if (f.mem->entries[i].address == gone.address) {
      f.mem->entries[i].kind = static_cast<uint32_t>(AllocationKind::kFree);
    }
  }
  repair_memory(*f.mem);
  EXPECT_EQ(f.mem->used_bytes, 2 * kMiB);
  EXPECT_EQ(find_allocation(*f.mem, lost.address), nullptr);
  ASSERT_NE(find_allocation(*f.mem, kept.address), nullptr);
  EXPECT_EQ(find_allocation(*f.mem, kept.address)->import_refs, 1u);
}

}  // namespace
}  // namespace egpu::simgpu
