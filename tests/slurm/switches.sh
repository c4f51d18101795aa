#!/usr/bin/env bash
# Network-aware placement in Slurm's own terms: the four-node testbed has two
# leaf switches (n1-n2 on s1, n3-n4 on s2, topology/tree). With one node of
# each switch busy, a two-node egpu job takes the two free nodes across both
# switches; one that asks --switches=1@5:00 waits instead (delay scheduling),
# and starts on one switch as soon as one has two free nodes, its step's
# instances on those two nodes' agents.
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=4
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"
[[ -f $state/etc/topology.conf ]] || fail "the four-node testbed has no topology.conf"

a1=$(submit_as_user -w n1 --exclusive --wrap "sleep 300")
a3=$(submit_as_user -w n3 --exclusive --wrap "sleep 300")
wait_state "$a1" RUNNING
wait_state "$a3" RUNNING

anywhere=$(submit_as_user -N2 --gres=egpu:50 --wrap "sleep 300")
wait_state "$anywhere" RUNNING
nodes=$(job_field "$anywhere" NodeList)
[[ $nodes == "n[2,4]" ]] || fail "without --switches job $anywhere got $nodes, expected n[2,4]"
ok "without --switches: job $anywhere runs on $nodes, across both switches"
sl scancel "$anywhere"
for _ in $(seq 60); do [[ -z $(sl squeue -h -j "$anywhere" 2>/dev/null) ]] && break; sleep 0.5; done

one=$(submit_as_user -N2 --switches=1@5:00 --gres=egpu:50 \
  --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:50 sleep 300")
# n2 and n4 are free but on two switches: it waits, scheduling pass after
# pass (the testbed schedules every 2 s), while n1 and n3 stay busy.
wait_pending_reason "$one" Resources
for _ in $(seq 6); do
  [[ $(job_field "$one" JobState) == PENDING ]] || fail "job $one started across switches on $(job_field "$one" NodeList)"
  sleep 1
done
ok "with --switches=1@5:00: job $one waits while no switch has two free nodes"

sl scancel "$a1"
wait_state "$one" RUNNING
nodes=$(job_field "$one" NodeList)
[[ $nodes == "n[1-2]" ]] || fail "job $one started on $nodes, expected n[1-2] (switch s1)"
for n in n1 n2; do
  found=""
  for _ in $(seq 240); do
    found=$(sl egpuctl --local --socket "$state/run/agent-$n.sock" --json status | python3 -c '
import json, sys
job = int(sys.argv[1])
print(" ".join("%s:%d" % (i["step"], i["units"]) for g in json.load(sys.stdin)["gpus"] for i in g["instances"]
               if i["job"] == job and i["step"] == "0"))' "$one")
    [[ -n $found ]] && break
    sleep 0.25
  done
  [[ $found == "0:50" ]] || fail "job $one's step 0 on $n: '$found'"
done
ok "once n1 is free job $one starts on $nodes (switch s1), its step at 50 units on both agents"
clean_jobs
