#!/usr/bin/env python3
"""report.py: the JSON plumbing of tests/gpu/validate (the machine may have no jq).

  report.py get FILE PATH [DEFAULT]   a value from the JSON object on FILE's last
                                      JSON line (PATH: dotted keys); DEFAULT or
                                      exit 1 when absent
  report.py row ROWS --case C [--targets a=70,b=30] [--achieved a=69.8,b=30.1]
                [--tolerance PP] [--status S] [--notes TEXT]
                                      appends one result row to ROWS (JSON lines);
                                      status: ok/off from the tolerance when
                                      targets and achieved are given, else S
  report.py split SHARES NAME...       "split 69.6/30.4 of 96.6% busy": the shares
                                      of a shares.py result normalised to their sum
  report.py split --pairs [--min-busy F] SHARES NAME...
                                      the same split as "NAME=PCT,..." (the form
                                      row's --achieved takes); "?" for each when
                                      the programs kept the device busy less than
                                      F (0..1) of the window
  report.py charged [--pairs] BEFORE AFTER NAME=JOB...
                                      the device time the agent charged each job's
                                      instance between two `egpuctl --json status`
                                      snapshots, in percent of the time between
                                      them, and its decayed achieved shares at the
                                      second; --pairs: only "NAME=PCT,..." (the
                                      form row's --achieved takes, "?" unknown)
  report.py table ROWS [--json OUT] [--env FILE]
                                      prints the table; writes rows (+ the
                                      environment) as JSON to OUT
"""
import argparse
import json
import sys


def last_json(path):
    """The file's JSON object, or the one on its last JSON line (program output)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        whole = json.loads(text)
        if isinstance(whole, dict):
            return whole
    except json.JSONDecodeError:
        pass
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("{")]
    for line in reversed(lines):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def cmd_get(args):
    try:
        value = last_json(args.file)
    except OSError:
        value = None
    for key in args.path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        if args.default is not None:
            print(args.default)
            return 0
        return 1
    print(json.dumps(value) if isinstance(value, (dict, list, bool)) else value)
    return 0


def cmd_split(args):
    shares = last_json(args.shares) or {}
    fractions = [shares.get("programs", {}).get(n, {}).get("fraction") for n in args.names]
    unknown = any(f is None for f in fractions) or sum(fractions) <= 0
    if args.pairs:
        too_idle = not unknown and sum(fractions) < args.min_busy
        print(",".join(f"{n}=?" if unknown or too_idle else f"{n}={f / sum(fractions) * 100:.1f}"
                       for n, f in zip(args.names, fractions)))
        return 0
    if unknown:
        print("split ?")
        return 0
    total = sum(fractions)
    split = "/".join(f"{f / total * 100:.1f}" for f in fractions)
    print(f"split {split} of {total * 100:.1f}% busy")
    return 0


def instance_field(status, job, field):
    for gpu in status.get("gpus", []):
        for inst in gpu.get("instances", []):
            if inst.get("job") == job:
                return inst.get(field)
    return None


def cmd_charged(args):
    try:
        before, after = last_json(args.before) or {}, last_json(args.after) or {}
        dt = after["agent"]["uptime_s"] - before["agent"]["uptime_s"]
    except (OSError, KeyError, TypeError):
        print(",".join(f"{spec.partition('=')[0]}=?" for spec in args.jobs) if args.pairs else "?")
        return 0
    charged, achieved, pairs_out = [], [], []
    for spec in args.jobs:
        name, _, job = spec.partition("=")
        a = instance_field(before, int(job), "device_s")
        b = instance_field(after, int(job), "device_s")
        ok = a is not None and b is not None and dt > 0
        charged.append(f"{name} {(b - a) / dt * 100:.1f}" if ok else f"{name} ?")
        pairs_out.append(f"{name}={(b - a) / dt * 100:.1f}" if ok else f"{name}=?")
        pct = instance_field(after, int(job), "achieved_pct")
        achieved.append(f"{name} {pct:.1f}" if pct is not None else f"{name} ?")
    if args.pairs:
        print(",".join(pairs_out))
        return 0
    print(f"{' / '.join(charged)} % of wall (its decayed shares {' / '.join(achieved)})")
    return 0


def pairs(text):
    out = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            out[key] = None
    return out


def cmd_row(args):
    targets = pairs(args.targets)
    achieved = pairs(args.achieved)
    status = args.status
    if targets and achieved and status is None:
        # An unknown figure on either side ("?": a run that failed) makes
        # the row an error; it never stops the run.
        devs = [abs(achieved[k] - t) for k, t in targets.items()
                if t is not None and achieved.get(k) is not None]
        complete = len(devs) == len(targets)
        status = "ok" if complete and max(devs) <= args.tolerance else "off"
        if not complete:
            status = "error"
    row = {"case": args.case, "targets": targets, "achieved": achieved,
           "status": status or "info", "notes": args.notes or ""}
    if targets and achieved:
        row["tolerance_pp"] = args.tolerance
    with open(args.rows, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return 0


def fmt(values):
    if not values:
        return "-"
    return " / ".join(f"{k} {v:g}" if v is not None else f"{k} ?" for k, v in values.items())


def cmd_table(args):
    rows = []
    with open(args.rows, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    header = ("case", "targets %", "achieved %", "status", "notes")
    table = [header] + [(r["case"], fmt(r["targets"]), fmt(r["achieved"]), r["status"],
                         r["notes"]) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(4)]
    for i, row in enumerate(table):
        cells = [str(row[c]).ljust(widths[c]) for c in range(4)] + [str(row[4])]
        print("  ".join(cells).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  -----")
    if args.json:
        env = {}
        if args.env:
            try:
                env = last_json(args.env) or {}
            except OSError:
                env = {}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=2)
            f.write("\n")
    bad = [r for r in rows if r["status"] in ("off", "error")]
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("get")
    p.add_argument("file")
    p.add_argument("path")
    p.add_argument("default", nargs="?")
    p = sub.add_parser("row")
    p.add_argument("rows")
    p.add_argument("--case", required=True)
    p.add_argument("--targets")
    p.add_argument("--achieved")
    p.add_argument("--tolerance", type=float, default=5.0)
    p.add_argument("--status")
    p.add_argument("--notes")
    p = sub.add_parser("split")
    p.add_argument("--pairs", action="store_true")
    p.add_argument("--min-busy", type=float, default=0.0)
    p.add_argument("shares")
    p.add_argument("names", nargs="+")
    p = sub.add_parser("charged")
    p.add_argument("--pairs", action="store_true")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("jobs", nargs="+")
    p = sub.add_parser("table")
    p.add_argument("rows")
    p.add_argument("--json")
    p.add_argument("--env")
    args = parser.parse_args()
    commands = {"get": cmd_get, "row": cmd_row, "split": cmd_split, "charged": cmd_charged,
                "table": cmd_table}
    return commands[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
