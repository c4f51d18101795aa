#!/usr/bin/env python3
"""torch_serve: a PyTorch inference server loop for tests/gpu/validate.

Requests arrive open-loop (Poisson, seeded) at --rate per second; each is one
forward pass of a ReLU MLP on a --batch of inputs, answered when its result is
on the host. A request's latency runs from its arrival to its answer, so time
spent queued behind earlier requests, or waiting for egpu's slice, counts.
With the egpu shim preloaded it reports every request to egpu
(egpu_report_latency, as etc/examples/egpu_latency.py does), which is what
an objective set with `egpuctl slo` is judged on.

--calibrate serves requests back to back instead and prints the service time
alone (service_ms: the median), from which validate sizes the rate. Otherwise
the first --warmup-s seconds run the open loop uncounted, so that egpu's
latency control has found the share the load needs.
Prints one JSON object on stdout: requests, p50/p99, the 1 s windows (by
arrival) whose p99 met --objective-ms, and how many reports egpu counted.
Requests that arrived before the end are served after it, for a while; any
left then count as missed. With --progress a line
"torch-serve[pid] t=<s>s requests=<n>" on stderr every second.
"""
import argparse
import ctypes
import json
import math
import os
import random
import sys
import time


def egpu_reporter():
    """egpu_report_latency from the preloaded shim, or None without it."""
    try:
        fn = ctypes.CDLL(None).egpu_report_latency
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


def percentile(values, q):
    """The smallest value with at least q of the values at or below it."""
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def ms(seconds):
    """Milliseconds for JSON (a missed request is infinitely late: 1e9 ms)."""
    return round(min(seconds, 1e6) * 1e3, 3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--duration-s", type=float, default=10.0, help="counted run time")
    parser.add_argument("--warmup-s", type=float, default=2.0, help="uncounted run time first")
    parser.add_argument("--objective-ms", type=float, default=0.0, help="p99 per 1 s window")
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--label", default="serve")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()

    import torch  # imported late: --help works without torch

    if not torch.cuda.is_available():
        print("torch_serve: torch sees no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda", 0)
    gen = torch.Generator(device=device).manual_seed(2)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(device).eval()
    x = torch.randn(args.batch, args.width, device=device, generator=gen)

    def serve():
        with torch.no_grad():
            return model(x)[0, 0].item()  # the answer on the host

    # Warm-up (cuBLAS set-up, the allocator, and egpu's latency control
    # finding the share the load needs): back to back when calibrating, else
    # the open loop itself, served and reported but not counted.
    if args.calibrate:
        warm_end = time.monotonic() + args.warmup_s
        while time.monotonic() < warm_end:
            serve()
    report = None if args.calibrate else egpu_reporter()
    accepted = 0  # reports the shim counted (it returns 0 for those)
    arrivals = random.Random(7)
    begin = time.monotonic()
    start = begin if args.calibrate else begin + args.warmup_s  # counting starts
    deadline = start + args.duration_s  # no arrivals from here on
    # What arrived before the deadline is still served (a queue that grew
    # must not hide its worst windows), until this; what is left then counts
    # as missed.
    give_up = deadline + max(5.0, args.duration_s / 2)
    next_arrival = begin
    next_progress = start + 1.0
    samples = []  # (arrival offset s, latency s), counted requests only
    while True:
        now = time.monotonic()
        if args.calibrate:
            if now >= deadline:
                break
            next_arrival = now
        elif next_arrival >= deadline or now >= give_up:
            break
        elif now < next_arrival:
            time.sleep(next_arrival - now)
        arrived = next_arrival
        serve()
        done = time.monotonic()
        if report is not None and report(int((done - arrived) * 1e9)) == 0:
            accepted += 1
        if arrived >= start:
            samples.append((arrived - start, done - arrived))
        if not args.calibrate:
            next_arrival += arrivals.expovariate(args.rate)
        if args.progress and done >= next_progress:
            next_progress += 1.0
            print(f"torch-serve[{os.getpid()}] t={done - start:.1f}s requests={len(samples)}",
                  file=sys.stderr, flush=True)
    unserved = 0
    while not args.calibrate and next_arrival < deadline:
        if next_arrival >= start:
            samples.append((next_arrival - start, math.inf))
            unserved += 1
        next_arrival += arrivals.expovariate(args.rate)

    latencies = [lat for _, lat in samples]
    windows = {}
    for at, lat in samples:
        windows.setdefault(int(at), []).append(lat)
    judged = [w for w in windows.values() if len(w) >= 20]
    objective_s = args.objective_ms / 1e3
    met = sum(1 for w in judged if objective_s > 0 and percentile(w, 0.99) <= objective_s)
    summary = {
        "workload": "torch-serve",
        "label": args.label,
        "device_name": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "width": args.width, "depth": args.depth, "batch": args.batch,
        "rate": args.rate,
        "requests": len(samples),
        "unserved": unserved,
        "service_ms" if args.calibrate else "p50_ms": ms(percentile(latencies, 0.5)),
        "p99_ms": ms(percentile(latencies, 0.99)),
        "objective_ms": args.objective_ms,
        "windows_judged": len(judged),
        "windows_met": met,
        "attainment": round(met / len(judged), 4) if judged else None,
        "reports_accepted": accepted,
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
