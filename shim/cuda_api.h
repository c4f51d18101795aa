// cuda.h as the shim sees it: every ABI name declared (versioned, unversioned,
// _ptsz/_ptds) so each wrapper is defined under its exact exported name, with
// default visibility for the CUDA API while the rest of the shim is hidden.
// Include this before anything else that includes cuda.h.
#pragma once

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#ifndef __CUDA_API_PUSH_VISIBILITY_DEFAULT
#define __CUDA_API_PUSH_VISIBILITY_DEFAULT 1
#endif
#include <cuda.h>

// Per-thread ABI names cuda.h's internal view does not declare.
extern "C" CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                                         CUstreamCaptureMode mode);
extern "C" CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                             const CUgraphNode* dependencies,
                                                             const CUgraphEdgeData* dependencyData,
                                                             size_t numDependencies,
                                                             CUstreamCaptureMode mode);
extern "C" CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph);

// The versioned name cuda.h only #defines (the internal view declares the old one).
extern "C" CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                                  unsigned int Flags);
