#!/usr/bin/env bash
# A job's owner reads and resizes a two-node step from outside the job (the
# testbed's client environment is a login node's: no agent of its own is
# asked), with `egpuctl status --job` and `egpuctl resize JOB.STEP=UNITS`,
# which find the nodes through Slurm and act on each. A refusal on one node
# leaves no node changed. Root acts with the owner's rights (Slurm lets no one
# else start a step in the job), so --force is refused through Slurm with a
# clear message; another user is stopped by Slurm; an unknown job is named.
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

j=$(submit_as_user -N2 --gres=egpu:100 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:40 sleep 300")
wait_state "$j" RUNNING

# The step's instances on both nodes, as the owner sees them from here.
step_units() { # JOB STEP -> "node:units:mode ..." over all nodes, from status --job
  as_user egpuctl --json status --job "$1" | python3 -c '
import json, sys
step = sys.argv[1]
out = []
for n in json.load(sys.stdin)["nodes"]:
    if "error" in n:
        out.append(n["node"] + ":error")
        continue
    for g in n["status"]["gpus"]:
        out += ["%s:%d:%s" % (n["node"], i["units"], i["mode"]) for i in g["instances"] if i["step"] == step]
print(" ".join(sorted(out)))' "$2"
}
for _ in $(seq 240); do
  [[ $(step_units "$j" 0) == "n1:40:burst n2:40:burst" ]] && break
  sleep 0.25
done
[[ $(step_units "$j" 0) == "n1:40:burst n2:40:burst" ]] || fail "status --job $j: step 0 is $(step_units "$j" 0)"
text=$(as_user egpuctl status --job "$j") || fail "egpuctl status --job $j failed: $text"
grep -q "== n1 ==" <<<"$text" && grep -q "== n2 ==" <<<"$text" && grep -q "$j.0" <<<"$text" ||
  fail "egpuctl status --job $j does not show both nodes: $text"
ok "egpuctl status --job $j shows step $j.0 at 40 units on n1 and n2"

out=$(as_user egpuctl resize "$j.0=30" 2>&1) || fail "the owner's resize through Slurm failed: $out"
say "egpuuser: egpuctl resize $j.0=30: $(tr '\n' ' ' <<<"$out")"
[[ $(step_units "$j" 0) == "n1:30:burst n2:30:burst" ]] || fail "after resize $j.0=30: $(step_units "$j" 0)"
ok "the owner resized step $j.0 on both nodes from outside the job"

# A refusal on n2 alone: its instance gets a latency objective there (on
# n2's agent directly), and a step with an objective may not go to cap mode.
id_n2=$(sl egpuctl --local --socket "$state/run/agent-n2.sock" --json status | python3 -c '
import json, sys
print(*[i["id"] for g in json.load(sys.stdin)["gpus"] for i in g["instances"]
        if i["job"] == int(sys.argv[1]) and i["step"] == "0"])' "$j")
[[ -n $id_n2 ]] || fail "no instance of $j.0 on n2"
sl egpuctl --local --socket "$state/run/agent-n2.sock" slo "$id_n2" p99:40ms >/dev/null ||
  fail "could not set an objective on n2's instance $id_n2"
set +e
out=$(as_user egpuctl resize "$j.0=20:cap" 2>&1); rc=$?
set -e
say "egpuuser: egpuctl resize $j.0=20:cap: rc=$rc: $out"
[[ $rc -ne 0 ]] || fail "a resize refused on n2 was reported as done"
grep -q "on n2: .*latency objective" <<<"$out" && grep -q "nothing changed on any node" <<<"$out" ||
  fail "unclear report of a refusal on n2: $out"
[[ $(step_units "$j" 0) == "n1:30:burst n2:30:burst" ]] ||
  fail "a refusal on n2 left step $j.0 at $(step_units "$j" 0) (n1 must be put back)"
ok "refused on n2, put back on n1: step $j.0 still 30 units, burst, on both"
sl egpuctl --local --socket "$state/run/agent-n2.sock" slo "$id_n2" off >/dev/null

# Root: acts as the owner; --force needs the node.
out=$(sl egpuctl resize "$j.0=35" 2>&1) || fail "root's resize through Slurm failed: $out"
[[ $(step_units "$j" 0) == "n1:35:burst n2:35:burst" ]] || fail "after root's resize: $(step_units "$j" 0)"
set +e
forced=$(sl egpuctl resize --force "$j.0=60" 2>&1); rc_forced=$?
other=$(sl runuser -u nobody -- egpuctl resize "$j.0=10" 2>&1); rc_other=$?
gone=$(as_user egpuctl resize "99999.0=10" 2>&1); rc_gone=$?
set -e
say "root: resize --force through Slurm: rc=$rc_forced: $forced"
[[ $rc_forced -eq 2 ]] && grep -q -- "--force works on one node's agent only" <<<"$forced" ||
  fail "root's --force through Slurm: $forced"
say "nobody: resize $j.0=10: rc=$rc_other: $other"
[[ $rc_other -ne 0 ]] && grep -qi "denied\|not permitted" <<<"$other" || fail "another user's resize: $other"
say "unknown job: rc=$rc_gone: $gone"
[[ $rc_gone -ne 0 ]] && grep -q "job 99999 is not known to Slurm" <<<"$gone" || fail "unknown job: $gone"
[[ $(step_units "$j" 0) == "n1:35:burst n2:35:burst" ]] || fail "refused resizes changed step $j.0: $(step_units "$j" 0)"
ok "root resized as the owner; --force, another user and an unknown job were refused clearly"

# From inside a job: the batch script's own Slurm options (-c 2, a labelled
# output) must not shape the steps egpuctl starts.
j2=$(submit_as_user -N2 -c 2 --gres=egpu:50 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:20 sleep 300 &
for i in \$(seq 300); do egpuctl status --job \$SLURM_JOB_ID 2>/dev/null | grep -q ' 20 burst' && break; sleep 0.2; done
SLURM_LABELIO=1 egpuctl resize \$SLURM_JOB_ID.0=25 && echo RESIZED; wait")
wait_state "$j2" RUNNING
for _ in $(seq 240); do
  [[ $(step_units "$j2" 0) == "n1:25:burst n2:25:burst" ]] && break
  sleep 0.25
done
[[ $(step_units "$j2" 0) == "n1:25:burst n2:25:burst" ]] ||
  fail "a resize from inside job $j2 left step 0 at $(step_units "$j2" 0): $(cat "$out_dir/$j2.out")"
grep -q RESIZED "$out_dir/$j2.out" || fail "job $j2's resize did not report success: $(cat "$out_dir/$j2.out")"
ok "from inside job $j2 (-c 2, labelled output) its owner resized step 0 on both nodes"
clean_jobs
