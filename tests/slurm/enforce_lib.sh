# shellcheck shell=bash disable=SC2154 # state, release, out_dir...: from lib.sh
# Helpers for the end-to-end tests WITH enforcement (sourced after lib.sh): the
# node agent (egpuctl, as root or as the job owner egpuuser), workloads on the
# simulated GPUs, and the simulated GPUs' ground truth (egpu-share-monitor,
# simgpu-stat). All run in the cluster's world (`testbed exec`), so the same
# code serves the 24.11 chroot and the 22.05 host.

ensure_testbed
agent_running || skip "no node agent in this testbed (build nodeagent/, spank/, shim/)"
[[ -x $state/bin/greedy && -x $state/bin/egpu-share-monitor ]] || skip "workloads or egpu-share-monitor not built"
[[ -f $state/simgpu/libcuda.so.1 ]] || skip "the simulated GPU driver is not built"

shm=/egpu-tb${release/./}-n1 # node n1's simulated GPUs (the testbed's TaskProlog)
tag=$$                       # labels are unique per run: old contexts stay in the segment

# A greedy workload (1 ms kernels, queued deep) labelled L for at most S
# seconds. S is only a bound against a test that dies: a measurement never
# relies on a workload still running after a guessed time, so tests that
# measure run their workloads until they stop them (stop_workloads).
greedy() { echo "greedy --iters-per-us 1 --duration-s $2 --label $1"; }

# Stops the workloads of JOBs: SIGTERM ends each one cleanly (it prints its
# JSON summary and exits 0), so every job COMPLETES. A batch job must `exec`
# its workload (--batch signals the batch shell, which then is the workload);
# a job whose workloads are srun steps is stopped without --batch, so its
# script sees the steps end and exits 0.
stop_workloads() { # [--batch] JOB...
  local opts=(-s TERM) j
  [[ $1 == --batch ]] && { opts+=(--batch); shift; }
  sl scancel "${opts[@]}" "$@" || fail "scancel ${opts[*]} $* failed"
  for j; do wait_state "$j" COMPLETED 30; done
}

# Shell that waits (at most 30 s) for FILE before going on: workloads of
# several jobs start together, so their device times compare.
gate() { echo "i=0; while [ ! -e $1 ] && [ \$i -lt 600 ]; do sleep 0.05; i=\$((i+1)); done; "; }

# Instances of JOB the agent holds, one line each:
#   id step gpu units job_units memory_used memory_quota processes
agent_instances() {
  sl egpuctl status --json | python3 -c '
import json, sys
job = int(sys.argv[1])
for g in json.load(sys.stdin)["gpus"]:
    for i in g["instances"]:
        if i["job"] == job:
            print(i["id"], i["step"], i["gpu"], i["units"], i["job_units"],
                  i.get("memory_used_bytes", 0), i["memory_quota_bytes"], i.get("processes", 0))
' "$1"
}

# The id of JOB's instance for STEP (0, 1, ..., batch).
instance_id() { agent_instances "$1" | awk -v s="$2" '$2 == s { print $1 }'; }

wait_instances() { # JOB COUNT [seconds]: the agent holds COUNT instances of JOB
  local n
  for _ in $(seq $((${3:-20} * 4))); do
    n=$(agent_instances "$1" | wc -l)
    [[ $n -eq $2 ]] && return 0
    sleep 0.25
  done
  sl egpuctl status >&2 || true
  fail "the agent holds $n instances of job $1, expected $2"
}

# Shares of their GPU that the labelled processes get over SECONDS, from the
# simulated GPU's device time (ground truth), once all of them run. Prints
# "label percent" lines; the monitor's table goes to stderr (the test log).
measure_shares() { # SECONDS LABEL...
  local secs=$1 json=$out_dir/shares-$tag-$RANDOM.json args=() l
  shift
  for l; do args+=(--label "$l"); done
  sl egpu-share-monitor --shm "$shm" "${args[@]}" --duration-s "$secs" --interval-ms 1000 \
    --start-timeout-s 20 --json-out "$json" >&2 || fail "egpu-share-monitor failed (labels $*)"
  python3 -c '
import json, sys
shares = json.load(open(sys.argv[1]))["shares"]
for label in sys.argv[2:]:
    print(label, "%.1f" % (100.0 * shares.get(label, 0.0)))
' "$json" "$@"
}

share_of() { awk -v l="$1" '$1 == l { print $2 }'; } # LABEL < measure_shares output

# The labels' parts of the device time they used together ("label percent"
# lines), for instances sharing one GPU: handovers cost a little idle time
# (the agent drains the old holder's queued work first, so each is charged
# exactly its own), and that time is nobody's share. Fails when the GPU was
# busy less than MIN_BUSY (default 50) percent of the time: then the host, not
# the agent, decided who ran (workloads starved of CPU leave their slices
# unused, and burst mode rightly gives them to whoever can launch), so the
# split says nothing about enforcement. Between that and 100% the split of
# what was used is the measure; the policy under host stalls is tested
# exactly in tests/unit/faa (policy replay).
split_of_used() { # MEASURE_SHARES_OUTPUT LABEL...
  local lines busy
  lines=$(python3 -c '
import sys
values = dict(line.split() for line in sys.argv[1].strip().splitlines())
labels = sys.argv[2:]
used = sum(float(values.get(l, 0)) for l in labels)
for l in labels:
    print(l, "%.1f" % (100.0 * float(values.get(l, 0)) / used if used > 0 else 0.0))
print("busy", "%.1f" % used)
' "$@") || { say "FAIL: cannot split the shares of ${*:2}" >&2; return 1; }
  busy=$(awk '$1 == "busy" { print $2 }' <<<"$lines")
  # Runs inside $(...): the failure goes to stderr, the status ends the test.
  python3 -c "import sys; sys.exit(0 if float('$busy') >= ${MIN_BUSY:-50} else 1)" ||
    { say "FAIL: the GPU was busy only $busy% of the time (${*:2})" >&2; return 1; }
  echo "$lines"
}

# Fails unless ACTUAL is within TOL (default 3) percentage points of WANT.
assert_near() { # WHAT ACTUAL WANT [TOL]
  python3 -c 'import sys; a, w, t = map(float, sys.argv[1:4]); sys.exit(0 if abs(a - w) <= t else 1)' \
    "$2" "$3" "${4:-3}" || fail "$1: $2%, expected $3% +- ${4:-3} pp"
}

# A field of the JSON summary a workload printed into a job's output.
workload_field() { # OUTPUT_FILE LABEL FIELD
  python3 -c '
import json, sys
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("label") == sys.argv[2]:
            print(j.get(sys.argv[3], "")); sys.exit(0)
sys.exit(1)
' "$@" || fail "no summary of workload $2 in $1"
}

# pid of the live process whose simulated-GPU context carries LABEL.
label_pid() {
  sl simgpu-stat --shm "$shm" --json | python3 -c '
import json, sys
for c in json.load(sys.stdin)["contexts"]:
    if c["label"] == sys.argv[1] and c["alive"]:
        print(c["pid"]); break
' "$1"
}

# Device memory in use on GPU N of the simulated node (ground truth).
gpu_memory_used() {
  sl simgpu-stat --shm "$shm" --json | python3 -c '
import json, sys
print(next(d["memory_used_bytes"] for d in json.load(sys.stdin)["devices"] if d["index"] == int(sys.argv[1])))
' "$1"
}
