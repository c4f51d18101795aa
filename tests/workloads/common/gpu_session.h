// Everything a workload needs on its device: the driver initialised, the
// primary context current, the spin kernel loaded and one stream to launch on.
#pragma once

#include <cuda.h>

#include <string>

#include "cuda_handles.h"

namespace egpu::workload {

class GpuSession {
 public:
  // Throws UsageError for a device index the driver does not have, CudaError
  // for any driver failure.
  explicit GpuSession(int device_index);

  int device_index() const { return device_index_; }
  const std::string& device_name() const { return device_name_; }
  CUstream stream() const { return stream_.get(); }
  CUfunction spin_function() const { return spin_function_; }
  // Another kernel of the embedded image (kernels/spin.cu), by name.
  CUfunction function(const char* name) const { return module_.function(name); }
  void synchronize() const { stream_.synchronize(); }

 private:
  static CUdevice open_device(int device_index);

  int device_index_;
  CUdevice device_;
  std::string device_name_;
  PrimaryContext context_;
  Module module_;
  Stream stream_;
  CUfunction spin_function_;
};

}  // namespace egpu::workload
