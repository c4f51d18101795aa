"""Reporting request latency to egpu from a Python server (ctypes).

The functions live in libegpu-shim.so, which Slurm preloads into egpu steps;
without it (a laptop, a step without egpu) `report` does nothing. Report
each request from its arrival to its answer, on any thread:

    from egpu_latency import request
    with request():
        answer = model(batch)

See shim/include/egpu/latency.h for when to report instead of relying on the
shim's own burst measurement.
"""
import contextlib
import ctypes
import time

try:
    _egpu = ctypes.CDLL(None)  # the process itself: the preloaded shim's exports
    _report = _egpu.egpu_report_latency
    _report.argtypes = [ctypes.c_int64]
    _report.restype = ctypes.c_int
except (OSError, AttributeError):
    _report = None


def report(seconds: float) -> bool:
    """One request took `seconds`; True if egpu counted it."""
    if _report is None:
        return False
    return _report(int(seconds * 1e9)) == 0


@contextlib.contextmanager
def request():
    """Times the block as one request."""
    start = time.monotonic()
    try:
        yield
    finally:
        report(time.monotonic() - start)


if __name__ == "__main__":
    with request():
        time.sleep(0.01)
    print("egpu latency reporting:", "available" if _report else "not loaded (no egpu shim)")
