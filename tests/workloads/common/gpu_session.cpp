#include "gpu_session.h"

#include <array>

#include "cuda_check.h"
#include "options.h"

namespace egpu::workload {

extern const char kSpinPtx[];  // generated from kernels/spin.cu

namespace {

std::string name_of(CUdevice device) {
  std::array<char, 256> name{};
  cuda_check(cuDeviceGetName(name.data(), static_cast<int>(name.size()), device),
             "cuDeviceGetName");
  return std::string(name.data());
}

}  // namespace

CUdevice GpuSession::open_device(int device_index) {
  cuda_check(cuInit(0), "cuInit");
  int count = 0;
  cuda_check(cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (device_index < 0 || device_index >= count) {
    throw UsageError("--device " + std::to_string(device_index) + ": the driver has " +
                     std::to_string(count) + " device(s)");
  }
  CUdevice device = 0;
  cuda_check(cuDeviceGet(&device, device_index), "cuDeviceGet");
  return device;
}

GpuSession::GpuSession(int device_index)
    : device_index_(device_index),
      device_(open_device(device_index)),
      device_name_(name_of(device_)),
      context_(device_),
      module_(kSpinPtx),
      spin_function_(module_.function("egpu_spin")) {}

}  // namespace egpu::workload
