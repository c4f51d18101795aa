#!/bin/bash
# device_work_coverage.sh SHIM DRIVER: every entry point of the CUDA driver
# (DRIVER: the toolkit's libcuda stub, which exports what the real driver
# does) that queues work for the GPU's SMs must be one the shim exports, or a
# job can launch around the gate. A CUDA release that adds such an entry
# point fails here until the shim wraps it (or it is listed below, with why).
set -euo pipefail
shim=$1
driver=$2

# Entry points that queue device work: kernels (every launch API), graphs,
# memsets (a GPU may run them on its SMs).
device_work='^cu(Launch|GraphLaunch|GraphUpload|Memset)'
# In stream order but on the host: a host function occupies no SM.
host_work='^cuLaunchHostFunc(_ptsz)?$'

exports() { nm -D --defined-only "$1" | awk '{print $3}' | sort -u; }

driver_names=$(exports "$driver" | grep -E "$device_work" | grep -Ev "$host_work")
# The pattern must still find what it is for: a driver without cuLaunchKernel
# means nm read nothing useful, not that there is nothing to wrap.
if ! grep -qx cuLaunchKernel <<<"$driver_names"; then
  echo "device_work_coverage: no cuLaunchKernel among $driver's exports" >&2
  exit 2
fi
missing=$(comm -23 <(echo "$driver_names") <(exports "$shim"))
if [[ -n $missing ]]; then
  echo "the driver queues device work through entry points the shim does not wrap:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "all $(wc -l <<<"$driver_names") device-work entry points of $driver are wrapped"
