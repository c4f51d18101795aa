// The two pages of one GPU (core/shm/pages.h), opened at agent start: the
// GPU page that attached shims map read-only, and the record page beside it
// that only the agent reads. A restarted agent takes both over, with the
// instances the records name; anything it cannot take over is started anew.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/instance_registry.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/result.h"

namespace egpu::agent {

struct GpuPages {
  shm::PageFile gpu;      // shm::gpu_page_path
  shm::PageFile records;  // shm::gpu_record_page_path
  // Both were taken over from a previous agent: the GPU page keeps its
  // holder, and the instances recorded were handed back.
  bool reused = false;

  shm::GpuPage* page() const { return gpu.mapping.as<shm::GpuPage>(); }
  shm::GpuRecordPage* record_page() const { return records.mapping.as<shm::GpuRecordPage>(); }

  // Opens or creates GPU `gpu`'s pages in `runtime_dir` (root's, 0600), for
  // an agent of `max_slots` instances per GPU. A taken-over page keeps its
  // header and holder; the instances its records name are appended to
  // `recovered` (when given). A new page's heartbeat and settings are the
  // caller's to write; its header is complete but for the magic, which the
  // caller stores last (publish_header).
  static Result<GpuPages> open(const std::string& runtime_dir, uint32_t gpu, uint32_t max_slots,
                               std::vector<model::Instance>* recovered);
  // Marks a new GPU page as this layout's, once everything else is written.
  void publish_header() const;
};

}  // namespace egpu::agent
