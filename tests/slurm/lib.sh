# shellcheck shell=bash
# Helpers for the Slurm end-to-end tests (sourced). Each test script takes
#   --slurm 24.11|22.05 --build DIR
# starts (or reuses) that release's testbed, clears its jobs, and exits 0 on
# success, 1 on failure, 77 when skipped (ctest SKIP_RETURN_CODE).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
release=24.11
build=$root/build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --slurm) release=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
test_name=$(basename "$0" .sh)

tb() { "$root/scripts/testbed" --slurm "$release" --build "$build" "$@"; }
sl() { tb exec "$@"; }

state=$(tb path)
out_dir=$state/out
mkdir -p "$out_dir"

say() { echo "[$test_name $release] $*"; }
fail() {
  say "FAIL: $*"
  sl squeue -o '%i %t %r %b' 2>/dev/null || true
  exit 1
}
ok() { say "ok: $*"; }
skip() { say "SKIP: $*"; exit 77; }

# All jobs gone (cancelled and finished, of every user), so each test starts
# from an idle cluster; with the node agent running, it must hold nothing of
# them afterwards either.
clean_jobs() {
  local ids
  ids=$(sl squeue -h -o %i 2>/dev/null || true)
  # shellcheck disable=SC2086
  [[ -n $ids ]] && { sl scancel $ids >/dev/null 2>&1 || true; }
  for _ in $(seq 120); do
    if [[ -z $(sl squeue -h -o %i 2>/dev/null) ]]; then
      agent_running || return 0
      for _ in $(seq 240); do
        [[ $(agent_instance_count) == 0 ]] && return 0
        sleep 0.25
      done
      sl egpuctl status >&2 || true
      fail "the node agent still holds instances after every job ended"
    fi
    sleep 0.5
  done
  fail "jobs did not go away"
}

# The node agent of n1 is part of this testbed (built and running).
agent_running() { [[ -f $state/run/agent-n1.pid && -x $state/bin/egpuctl ]] && kill -0 "$(cat "$state/run/agent-n1.pid")" 2>/dev/null; }

# The node count of the testbed as started ("" before its first start).
testbed_nodes_running() { sed -n 's/.*nodes=\([0-9]*\).*/\1/p' "$state/testbed.info" 2>/dev/null || true; }

# Instances the node agents hold (all users: egpuctl runs as root), on every node.
agent_instance_count() {
  local i n total=0 nodes
  nodes=$(testbed_nodes_running)
  for ((i = 1; i <= ${nodes:-1}; i++)); do
    n=$(sl egpuctl --local --socket "$state/run/agent-n$i.sock" status --json |
      python3 -c 'import json,sys; print(sum(len(g["instances"]) for g in json.load(sys.stdin)["gpus"]))')
    total=$((total + n))
  done
  echo "$total"
}

# Accounting of the testbed as started: 1 with slurmdbd, else 0.
testbed_accounting_running() { sed -n 's/.*accounting=\([01]\).*/\1/p' "$state/testbed.info" 2>/dev/null || true; }

# Starts the testbed with $testbed_nodes nodes (default 1; a test of several
# nodes sets it before sourcing this) and accounting when $testbed_accounting
# is 1, restarting it fresh when it runs otherwise: tests of any kind may
# come in any order.
ensure_testbed() {
  local want=${testbed_nodes:-1} running acct=${testbed_accounting:-0} opts=()
  [[ $acct == 1 ]] && opts+=(--accounting)
  running=$(testbed_nodes_running)
  # A testbed started from packages (tests/slurm/packages.sh) is not the tree's.
  if [[ -n $running && ($running != "$want" || $(testbed_accounting_running) != "$acct" ||
        -f $state/pkgroot/.egpu-packages) ]]; then
    tb start --fresh --nodes "$want" "${opts[@]}"
  else
    tb start --nodes "$want" "${opts[@]}"
  fi
  clean_jobs
}

# sbatch, printing the job id. Jobs sleep long: the tests cancel them.
submit() { sl sbatch --parsable --chdir /tmp -o "$out_dir/%j.out" "$@" | cut -d';' -f1; }
hold_job() { submit "$@" --wrap 'sleep 3600'; }
# The same as the testbed's job owner who is not root.
as_user() { sl runuser -u egpuuser -- "$@"; }
submit_as_user() { as_user sbatch --parsable --chdir /tmp -o "$out_dir/%j.out" "$@" | cut -d';' -f1; }

job_field() { # JOB FIELD -> value (from scontrol -d -o)
  sl scontrol -d -o show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

wait_state() { # JOB STATE [seconds]
  local s
  for _ in $(seq $((${3:-60} * 2))); do
    s=$(job_field "$1" JobState)
    [[ $s == "$2" ]] && return 0
    case $s in
      FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)
        cat "$out_dir/$1.out" 2>/dev/null || true
        fail "job $1 ended $s, expected $2" ;;
    esac
    sleep 0.5
  done
  fail "job $1 is $s, not $2"
}

wait_pending_reason() { # JOB REASON [seconds]: stays pending with that reason
  local r s
  for _ in $(seq $((${3:-30} * 2))); do
    s=$(job_field "$1" JobState)
    r=$(job_field "$1" Reason)
    [[ $s == PENDING && $r == "$2" ]] && return 0
    [[ $s == PENDING ]] || fail "job $1 is $s (reason $r), expected PENDING ($2)"
    sleep 0.5
  done
  fail "job $1 pends with reason $r, not $2"
}

# GPU allocation of a job on its node as "idx:units ..." (egpu), "idx ..."
# (gpu). Reads the per-node GRES detail of `scontrol -d show job`, whose format
# differs: 22.05 "egpu:30(IDX:0)", 24.11 "egpu:30(30/100,0/100,...)" and
# "gpu:2(IDX:0,3)" on both.
job_gpus() {
  local detail
  detail=$(sl scontrol -d -o show job "$1" | grep -o ' GRES=[^ ]*' | head -n 1 | sed 's/^ GRES=//')
  [[ -n $detail ]] || { echo ""; return; }
  python3 - "$detail" <<'EOF'
import re, sys
d = sys.argv[1]
m = re.match(r'(\w+)(?::\w+)?:(\d+)\((.*)\)$', d)
if not m:
    print(""); sys.exit()
name, count, inner = m.group(1), int(m.group(2)), m.group(3)
out = []
if inner.startswith('IDX:'):
    idx = []
    for part in inner[4:].split(','):
        if '-' in part:
            a, b = part.split('-'); idx += range(int(a), int(b) + 1)
        elif part:
            idx.append(int(part))
    if name == 'egpu':
        out = ['%d:%d' % (i, count) for i in idx] if len(idx) == 1 else ['%d:?' % i for i in idx]
    else:
        out = [str(i) for i in idx]
else:
    for i, part in enumerate(inner.split(',')):
        used = int(part.split('/')[0])
        if used:
            out.append('%d:%d' % (i, used))
print(' '.join(out))
EOF
}

# Waits for a job to finish and prints its output file.
job_output() {
  wait_state "$1" COMPLETED "${2:-60}"
  cat "$out_dir/$1.out"
}

env_of() { # VAR < output
  sed -n "s/^$1=//p" | head -n 1
}
