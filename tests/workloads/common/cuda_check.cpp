#include "cuda_check.h"

namespace egpu::workload {

std::string describe_cuda_result(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  std::string out;
  if (cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
    out = name;
  } else {
    out = "CUresult " + std::to_string(static_cast<int>(result));
  }
  if (cuGetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr) {
    out += " (" + std::string(text) + ")";
  }
  return out;
}

CudaError::CudaError(std::string_view call, CUresult result)
    : std::runtime_error(std::string(call) + " failed: " + describe_cuda_result(result)),
      result_(result) {}

}  // namespace egpu::workload
