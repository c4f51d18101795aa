#include "shim/attachment.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace egpu::shim {

Result<std::unique_ptr<Attachment>> make_attachment(protocol::AttachReply reply,
                                                    uint32_t gpu_index) {
  const protocol::Reply& r = reply.reply;
  auto gpu_map = shm::map_fd(reply.gpu_page.get(), sizeof(shm::GpuPage), shm::Access::kReadOnly);
  if (!gpu_map) return Error{"GPU page: " + gpu_map.error()};
  // A page another user can write is not used (an older agent handed root
  // its users' pages): this process would run that user's robust-lock list
  // pointers (InstanceRegistry::authorize_attach).
  struct stat owner {};
  if (::fstat(reply.instance_page.get(), &owner) != 0)
    return Error{"instance page: " + std::string(std::strerror(errno))};
  if (owner.st_uid != ::geteuid()) {
    return Error{"instance page belongs to uid " + std::to_string(owner.st_uid) +
                 ", not to this process's uid " + std::to_string(::geteuid())};
  }
  auto inst_map =
      shm::map_fd(reply.instance_page.get(), sizeof(shm::InstancePage), shm::Access::kReadWrite);
  if (!inst_map) return Error{"instance page: " + inst_map.error()};

  const auto* gpu = gpu_map->as<const shm::GpuPage>();
  auto* inst = inst_map->as<shm::InstancePage>();
  if (gpu->magic != shm::kGpuPageMagic || gpu->version != shm::kLayoutVersion) {
    return Error{"GPU page has magic " + std::to_string(gpu->magic) + " version " +
                 std::to_string(gpu->version) + ", not an egpu GPU page of layout " +
                 std::to_string(shm::kLayoutVersion)};
  }
  if (gpu->gpu_index != gpu_index) {
    return Error{"GPU page is for GPU " + std::to_string(gpu->gpu_index) + ", asked for " +
                 std::to_string(gpu_index)};
  }
  if (inst->magic != shm::kInstancePageMagic || inst->version != shm::kLayoutVersion) {
    return Error{"instance page is not an egpu instance page of layout " +
                 std::to_string(shm::kLayoutVersion)};
  }
  if (r.instance_id == 0 || inst->instance_id != r.instance_id) {
    return Error{"instance page is for instance " + std::to_string(inst->instance_id) +
                 ", the reply names " + std::to_string(r.instance_id)};
  }
  if (inst->gpu_index != gpu_index || inst->gpu_slot != r.gpu_slot) {
    return Error{"instance page is for GPU " + std::to_string(inst->gpu_index) + " slot " +
                 std::to_string(inst->gpu_slot) + ", the reply names slot " +
                 std::to_string(r.gpu_slot)};
  }
  if (r.gpu_slot >= shm::kMaxSlotsPerGpu || r.gpu_slot >= gpu->max_slots) {
    return Error{"GPU slot " + std::to_string(r.gpu_slot) + " out of range"};
  }
  if (r.proc_slot >= shm::kMaxProcsPerInstance) {
    return Error{"process slot " + std::to_string(r.proc_slot) + " out of range"};
  }
  if (shm::slot_instance(gpu->slots[r.gpu_slot]) != r.instance_id) {
    return Error{"GPU slot " + std::to_string(r.gpu_slot) + " does not hold instance " +
                 std::to_string(r.instance_id)};
  }

  auto a = std::make_unique<Attachment>();
  a->gpu = gpu;
  a->instance = inst;
  a->me = shm::ProcSlotWriter(&inst->procs[r.proc_slot]);
  a->gpu_slot = r.gpu_slot;
  a->proc_slot = r.proc_slot;
  a->instance_id = r.instance_id;
  a->epoch = shm::agent_epoch(*gpu);
  a->gpu_mapping = std::move(*gpu_map);
  a->instance_mapping = std::move(*inst_map);
  a->wake = std::move(reply.wake);
  return a;
}

void kick_agent(const Attachment& a) {
  const uint64_t one = 1;
  // Per call, not per descriptor: O_NONBLOCK is shared by every process the
  // descriptor was passed to, MSG_DONTWAIT is this call's own.
  (void)::send(a.wake.get(), &one, sizeof one, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace egpu::shim
