// RAII owners of driver objects: the device's primary context, a module, a
// stream, an event and device memory. Each releases its object in the
// destructor.
#pragma once

#include <cuda.h>

namespace egpu::workload {

// Retains the device's primary context and makes it current on this thread.
class PrimaryContext {
 public:
  explicit PrimaryContext(CUdevice device);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  CUcontext get() const { return context_; }

 private:
  CUdevice device_;
  CUcontext context_ = nullptr;
};

class Module {
 public:
  explicit Module(const char* image);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction function(const char* name) const;

 private:
  CUmodule module_ = nullptr;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

class Event {
 public:
  // Timing events for measurements; others skip the timestamp.
  explicit Event(bool timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(CUstream stream) const;
  void synchronize() const;
  CUevent get() const { return event_; }

 private:
  CUevent event_ = nullptr;
};

// Device memory of the current context (cuMemAlloc).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr get() const { return pointer_; }
  size_t bytes() const { return bytes_; }

 private:
  CUdeviceptr pointer_ = 0;
  size_t bytes_;
};

// Device milliseconds between two recorded, completed timing events.
double elapsed_ms(const Event& start, const Event& end);

}  // namespace egpu::workload
