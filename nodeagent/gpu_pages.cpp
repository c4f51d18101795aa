#include "nodeagent/gpu_pages.h"

#include <sys/stat.h>

#include <atomic>
#include <new>

#include "core/shm/page_paths.h"
#include "core/shm/slot_control_io.h"
#include "core/util/log.h"

namespace egpu::agent {
namespace {

void warn_other_size(const std::string& path, size_t size) {
  if (struct stat st{}; ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                        static_cast<size_t>(st.st_size) != size) {
    // open_page_file replaces it (see below for why not in place).
    EGPU_LOG_ERROR(
        "%s has %lld bytes, not this agent's %zu (another page layout): the "
        "instances it held are not taken over",
        path.c_str(), static_cast<long long>(st.st_size), size);
  }
}

bool takes_over(const shm::GpuPage& page, uint32_t gpu, uint32_t max_slots) {
  // A page of fewer slots is taken over (an agent of an older default
  // MaxInstancesPerGpu, 64): every slot of the layout was made free with
  // the page. Its count is raised only when a slot past it is used
  // (GpuArbiter::add), so going back to that agent keeps the steps while
  // none was.
  return page.magic == shm::kGpuPageMagic && page.version == shm::kLayoutVersion &&
         page.gpu_index == gpu && page.max_slots <= max_slots;
}

bool takes_over(const shm::GpuRecordPage& records, uint32_t gpu) {
  return records.magic == shm::kGpuRecordPageMagic && records.version == shm::kLayoutVersion &&
         records.gpu_index == gpu;
}

void say_not_taken_over(const std::string& path, const shm::GpuPage& page, bool records_ok,
                        const std::string& record_path, uint32_t gpu, uint32_t max_slots) {
  if (page.magic == shm::kGpuPageMagic && page.version != shm::kLayoutVersion) {
    EGPU_LOG_ERROR(
        "%s was written by an agent with page layout %u (this one: %u): the "
        "instances it held are not taken over; their steps run on as with a dead "
        "agent (FailMode) until they end. Drain a node before an upgrade that "
        "changes the layout.",
        path.c_str(), page.version, shm::kLayoutVersion);
  } else if (!takes_over(page, gpu, max_slots)) {
    EGPU_LOG_ERROR(
        "%s is not a page this agent can take over (GPU %u, %u slots; this agent: "
        "GPU %u, %u slots): the instances it held are not taken over",
        path.c_str(), page.gpu_index, page.max_slots, gpu, max_slots);
  } else if (!records_ok) {
    EGPU_LOG_ERROR(
        "%s, the record of the instances on GPU %u, is missing or not this layout's: "
        "the instances %s held are not taken over; their steps run on as with a dead "
        "agent (FailMode) until they end",
        record_path.c_str(), gpu, path.c_str());
  }
}

}  // namespace

Result<GpuPages> GpuPages::open(const std::string& runtime_dir, uint32_t gpu, uint32_t max_slots,
                                std::vector<model::Instance>* recovered) {
  const std::string path = shm::gpu_page_path(runtime_dir, gpu);
  const std::string rpath = shm::gpu_record_page_path(runtime_dir, gpu);
  warn_other_size(path, sizeof(shm::GpuPage));
  // Root only: shims get a read-only descriptor of the GPU page at attach,
  // so a user sees it only while running an egpu job on this GPU; no job
  // ever gets the record page.
  auto file = shm::open_page_file(path, sizeof(shm::GpuPage), 0, 0, 0600);
  if (!file) return Error{file.error()};
  auto records = shm::open_page_file(rpath, sizeof(shm::GpuRecordPage), 0, 0, 0600);
  if (!records) return Error{records.error()};
  GpuPages p;
  p.gpu = std::move(*file);
  p.records = std::move(*records);
  const bool records_ok = !p.records.created && takes_over(*p.record_page(), gpu);
  p.reused = !p.gpu.created && records_ok && takes_over(*p.page(), gpu, max_slots);
  if (!p.gpu.created && !p.reused) {
    // Another agent's page that this one cannot take over. A new file, not
    // this one rewritten: the shims of those steps still map it, and must see
    // their agent gone rather than read this layout as theirs.
    say_not_taken_over(path, *p.page(), records_ok, rpath, gpu, max_slots);
    auto fresh = shm::replace_page_file(path, sizeof(shm::GpuPage), 0, 0, 0600);
    if (!fresh) return Error{fresh.error()};
    p.gpu = std::move(*fresh);
  }
  shm::GpuPage* page = p.page();
  shm::GpuRecordPage* rec = p.record_page();
  if (p.reused) {
    // Keep the files (shims map the GPU page) and the holder until the
    // first decision.
    for (uint32_t s = 0; s < max_slots; ++s) {
      auto slot = shm::read_slot_control(rec->records[s], gpu, s);
      if (!slot) EGPU_LOG_WARN("%s", slot.error().c_str());
      if (!slot || !*slot) {
        // Its grant too, whatever it says: the record is what a restart
        // goes by (a grant without one is damage, as the record is freed
        // after it).
        shm::free_slot_control(rec->records[s], page->slots[s]);
        continue;
      }
      if (!(*slot)->warning.empty()) EGPU_LOG_WARN("%s", (*slot)->warning.c_str());
      if (recovered != nullptr) recovered->push_back((*slot)->instance);
    }
    return p;
  }
  // No process maps the record page: it is rewritten in place.
  new (rec) shm::GpuRecordPage();
  rec->gpu_index = gpu;
  rec->version = shm::kLayoutVersion;
  std::atomic_thread_fence(std::memory_order_release);
  rec->magic = shm::kGpuRecordPageMagic;
  new (page) shm::GpuPage();
  page->gpu_index = gpu;
  page->max_slots = max_slots;
  page->holder.store(shm::kNoHolder);
  return p;
}

void GpuPages::publish_header() const {
  shm::GpuPage* page = this->page();
  if (page->magic == shm::kGpuPageMagic) return;
  page->version = shm::kLayoutVersion;
  std::atomic_thread_fence(std::memory_order_release);
  page->magic = shm::kGpuPageMagic;
}

}  // namespace egpu::agent
