#include "cuda_handles.h"

#include <utility>

#include "cuda_check.h"

namespace egpu::workload {

PrimaryContext::PrimaryContext(CUdevice device) : device_(device) {
  cuda_check(cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  CUresult current = cuCtxSetCurrent(context_);
  if (current != CUDA_SUCCESS) {
    cuDevicePrimaryCtxRelease(device_);
    throw CudaError("cuCtxSetCurrent", current);
  }
}

PrimaryContext::~PrimaryContext() {
  cuCtxSetCurrent(nullptr);
  cuDevicePrimaryCtxRelease(device_);
}

Module::Module(const char* image) {
  cuda_check(cuModuleLoadData(&module_, image), "cuModuleLoadData");
}

Module::~Module() {
  cuModuleUnload(module_);
}

CUfunction Module::function(const char* name) const {
  CUfunction function = nullptr;
  cuda_check(cuModuleGetFunction(&function, module_, name), "cuModuleGetFunction");
  return function;
}

Stream::Stream() {
  cuda_check(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

Stream::~Stream() {
  cuStreamDestroy(stream_);
}

void Stream::synchronize() const {
  cuda_check(cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  cuda_check(cuMemAlloc(&pointer_, bytes), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  cuMemFree(pointer_);
}

Event::Event(bool timing) {
  unsigned flags = CU_EVENT_BLOCKING_SYNC;
  if (!timing) flags |= CU_EVENT_DISABLE_TIMING;
  cuda_check(cuEventCreate(&event_, flags), "cuEventCreate");
}

Event::~Event() {
  if (event_ != nullptr) cuEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cuEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(CUstream stream) const {
  cuda_check(cuEventRecord(event_, stream), "cuEventRecord");
}

void Event::synchronize() const {
  cuda_check(cuEventSynchronize(event_), "cuEventSynchronize");
}

double elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  cuda_check(cuEventElapsedTime(&ms, start.get(), end.get()), "cuEventElapsedTime");
  return ms;
}

}  // namespace egpu::workload
