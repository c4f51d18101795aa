#!/usr/bin/env python3
"""shares.py: GPU shares from the workloads' progress lines, for tests/gpu/validate.

validate stamps every stderr line of a workload with the host's wall clock as
it arrives ("<epoch seconds> <line>"). The programs print their work counter
once a second ("launched=N" for the greedy programs, "iterations=N" for
torch_mlp). A program's share of the GPU over a window is the work it did in
the window times the device time one unit of work takes alone (the kernel
length its iterations were calibrated for), divided by the window. Every
program is measured over the SAME window of host time, so start-up skew does
not bias the comparison.

  shares.py [--skip-start S] [--skip-end S] [--from T] [--to T] [--series S]
            NAME:UNIT_US:FILE ...
UNIT_US is the device time of one unit of work alone in us (0: report the rate
only). Without --from/--to the window is the span every program was running
(from the latest first line to the earliest last line), less --skip-start and
--skip-end. --series S adds consecutive windows of S seconds; with
--settle NAME=FRACTION also "settle_s": the start of the first of those windows
from which on NAME stays within --settle-pp of FRACTION. Prints JSON.
"""
import argparse
import json
import re
import sys

COUNTER = re.compile(r"^(\d+(?:\.\d+)?) \S+\[\d+\] t=\S+ (?:launched|iterations)=(\d+)")


def read_series(path):
    points = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = COUNTER.match(line)
            if m:
                points.append((float(m.group(1)), int(m.group(2))))
    return points


def count_at(points, t):
    """The counter at host time t, interpolated linearly between lines."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, c0), (t1, c1) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
    return points[-1][1]


def window_figures(programs, start, end):
    out = {}
    for name, unit_us, points in programs:
        a, b = count_at(points, start), count_at(points, end)
        if a is None or b is None or end <= start:
            out[name] = {"rate": None, "fraction": None}
            continue
        rate = (b - a) / (end - start)
        out[name] = {"rate": round(rate, 3),
                     "fraction": round(rate * unit_us * 1e-6, 4) if unit_us > 0 else None}
    return out


def settle_time(series, name, target, pp):
    """Start of the first window from which on `name` stays within pp of target."""
    settled = None
    for window in series:
        fraction = window["programs"].get(name, {}).get("fraction")
        if fraction is not None and abs(fraction - target) * 100 <= pp:
            if settled is None:
                settled = window["t"]
        else:
            settled = None
    return settled


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-start", type=float, default=1.0)
    parser.add_argument("--skip-end", type=float, default=0.5)
    parser.add_argument("--from", dest="start", type=float)
    parser.add_argument("--to", dest="end", type=float)
    parser.add_argument("--series", type=float, default=0.0)
    parser.add_argument("--settle", help="NAME=FRACTION")
    parser.add_argument("--settle-pp", type=float, default=5.0)
    parser.add_argument("programs", nargs="+", metavar="NAME:UNIT_US:FILE")
    args = parser.parse_args()

    programs = []
    for spec in args.programs:
        name, unit_us, path = spec.split(":", 2)
        points = read_series(path)
        if len(points) < 2:
            print(json.dumps({"error": f"{name}: fewer than 2 progress lines in {path}"}))
            return 1
        programs.append((name, float(unit_us), points))
    start = args.start if args.start is not None else max(p[0][0] for _, _, p in programs)
    end = args.end if args.end is not None else min(p[-1][0] for _, _, p in programs)
    if args.start is None:
        start += args.skip_start
    if args.end is None:
        end -= args.skip_end
    if end - start < 0.5:
        print(json.dumps({"error": f"common window too short ({end - start:.2f} s)"}))
        return 1
    result = {"from": round(start, 3), "to": round(end, 3), "window_s": round(end - start, 3),
              "programs": window_figures(programs, start, end)}
    if args.series > 0:
        series = []
        t = start
        while t + args.series <= end + 1e-9:
            series.append({"t": round(t - start, 2),
                           "programs": window_figures(programs, t, t + args.series)})
            t += args.series
        result["series"] = series
        if args.settle:
            name, _, target = args.settle.partition("=")
            result["settle_s"] = settle_time(series, name, float(target), args.settle_pp)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
