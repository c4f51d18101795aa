// Turns CUDA driver error codes into exceptions with readable messages.
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace egpu::workload {

// A failed driver call: what was called, the error's name and its description.
class CudaError : public std::runtime_error {
 public:
  CudaError(std::string_view call, CUresult result);
  CUresult result() const { return result_; }

 private:
  CUresult result_;
};

// "CUDA_ERROR_INVALID_VALUE (invalid argument)", or the number when the driver
// cannot name it.
std::string describe_cuda_result(CUresult result);

// Throws CudaError unless `result` is CUDA_SUCCESS.
inline void cuda_check(CUresult result, std::string_view call) {
  if (result != CUDA_SUCCESS) throw CudaError(call, result);
}

}  // namespace egpu::workload
