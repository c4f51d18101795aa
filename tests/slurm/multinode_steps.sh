#!/usr/bin/env bash
# The steps of a two-node job share the job's allocation on the node without
# the batch step too: the agent there learns it from Slurm (EGPU_JOB_UNITS,
# from slurmstepd's record of the job), not from whichever step came first;
# a step on both nodes is marked as spanning nodes, one on n2 alone is not.
# A job's own environment cannot claim a larger allocation.
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

# Instances of JOB on NODE's agent: "step:units:job_units ..." (sorted).
node_instances() { # NODE JOB
  sl egpuctl --local --socket "$state/run/agent-$1.sock" --json status | python3 -c '
import json, sys
job = int(sys.argv[1])
print(" ".join(sorted("%s:%d:%d" % (i["step"], i["units"], i["job_units"])
                      for g in json.load(sys.stdin)["gpus"] for i in g["instances"] if i["job"] == job)))' "$2"
}
wait_node_instances() { # NODE JOB EXPECTED
  for _ in $(seq 240); do
    [[ $(node_instances "$1" "$2") == "$3" ]] && return 0
    sleep 0.25
  done
  cat "$out_dir/$2.out" 2>/dev/null || true
  fail "job $2 on $1: '$(node_instances "$1" "$2")', expected '$3'"
}

# Step 0 on both nodes, then (once step 0 exists, so the numbers hold) step 1
# on n2 only: 40 + 50 of the job's 100 there.
j=$(submit_as_user -N2 --gres=egpu:100 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:40 sleep 300 &
until scontrol show step \$SLURM_JOB_ID.0 >/dev/null 2>&1; do sleep 0.2; done
srun --overlap -w n2 -N1 -n1 --gres=egpu:50 sleep 300 & wait")
wait_state "$j" RUNNING
wait_node_instances n1 "$j" "0:40:100 batch:100:100"
wait_node_instances n2 "$j" "0:40:100 1:50:100"
ok "job $j: on n2 (no batch step) steps 0 and 1 hold 40 + 50 of the job's 100 units"
# Step 0 runs on both nodes: its instances say so (a gang across the nodes
# when gangs are on); step 1 runs on n2 alone.
spans=$(sl egpuctl --local --socket "$state/run/agent-n2.sock" --json status | python3 -c '
import json, sys
job = int(sys.argv[1])
print(" ".join(sorted("%s:%s" % (i["step"], i["spans_nodes"])
                      for g in json.load(sys.stdin)["gpus"] for i in g["instances"] if i["job"] == job)))' "$j")
[[ $spans == "0:True 1:False" ]] || fail "spans_nodes of job $j's steps on n2: $spans"
ok "step 0 (two nodes) spans nodes, step 1 (n2 only) does not"

# A step's environment claiming more for its job changes nothing: Slurm's
# figure replaces it.
j2=$(submit_as_user -N2 --gres=egpu:50 --wrap "EGPU_JOB_UNITS=100 EGPU_UNITS=100 srun -N2 --ntasks-per-node=1 --gres=egpu:30 sleep 300")
wait_state "$j2" RUNNING
wait_node_instances n2 "$j2" "0:30:50"
ok "job $j2: a step's forged EGPU_JOB_UNITS=100 gives it its job's 50 units on n2, not 100"

# Through Slurm, a resize that fits n1 but not n2 (60 + 50 > 100) changes neither.
set +e
out=$(as_user egpuctl resize "$j.0=60" 2>&1); rc=$?
set -e
say "egpuuser: egpuctl resize $j.0=60: rc=$rc: $out"
[[ $rc -ne 0 ]] && grep -q "on n2: .*job $j has 100 units on GPU .*would hold 110" <<<"$out" ||
  fail "a resize past the job's allocation on n2: $out"
wait_node_instances n1 "$j" "0:40:100 batch:100:100"
wait_node_instances n2 "$j" "0:40:100 1:50:100"
ok "resize $j.0=60 refused on n2 (the job has 100 there) and undone on n1"
clean_jobs
