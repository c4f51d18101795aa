"""shim_counters.py: the egpu shim's per-wrapper call counters (EGPU_DEBUG=1),
read from inside a Python program the shim is preloaded into, for
tests/gpu/validate's torch programs. Every ABI variant of an API is counted:
a program may reach the driver through any of them (_v2, _ptsz, _ptds)."""
import ctypes

_MEMSETS = [f"cuMemset{kind}{width}{suffix}"
            for kind in ("D", "D2D") for width in ("8", "16", "32")
            for suffix in ("", "_v2", "_v2_ptds", "Async", "Async_ptsz")]
FAMILIES = {
    "launch_wrappers_total": ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                              "cuLaunchKernelEx_ptsz", "cuLaunchCooperativeKernel",
                              "cuLaunchCooperativeKernel_ptsz"],
    "graph_launches_total": ["cuGraphLaunch", "cuGraphLaunch_ptsz"],
    "captures_total": ["cuStreamBeginCapture", "cuStreamBeginCapture_ptsz",
                       "cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz",
                       "cuStreamBeginCaptureToGraph", "cuStreamBeginCaptureToGraph_ptsz"],
    "memsets_total": _MEMSETS,
    "proc_address_total": ["cuGetProcAddress", "cuGetProcAddress_v2"],
    "allocations_total": ["cuMemAlloc", "cuMemAlloc_v2", "cuMemAllocPitch", "cuMemAllocPitch_v2",
                          "cuMemAllocManaged", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
                          "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"],
    "vmm_creates_total": ["cuMemCreate"],
    "memory_queries_total": ["cuMemGetInfo", "cuMemGetInfo_v2"],
}


def read():
    """{"loaded": False} without the shim; else the non-zero counters and each
    family's total (zero totals included: a zero is an answer)."""
    try:
        count = ctypes.CDLL(None).egpu_shim_wrapper_calls
    except (AttributeError, OSError):
        return {"loaded": False}
    count.restype = ctypes.c_uint64
    count.argtypes = [ctypes.c_char_p]
    calls = {}
    for family, names in FAMILIES.items():
        total = 0
        for name in names:
            n = int(count(name.encode()))
            if n:
                calls[name] = n
            total += n
        calls[family] = total
    return {"loaded": True, "calls": calls}
