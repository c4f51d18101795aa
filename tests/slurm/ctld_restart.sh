#!/usr/bin/env bash
# Restarting slurmctld while egpu jobs run kills, requeues or re-allocates
# none of them, and the recovered allocations keep counting (new jobs are
# placed around them).
source "$(dirname "$0")/lib.sh"
ensure_testbed
jobs=($(hold_job --gres=egpu:30) $(hold_job --gres=egpu:70) $(hold_job --gres=egpu:50) $(hold_job --gres=gpu:1))
for j in "${jobs[@]}"; do wait_state "$j" RUNNING; done
declare -A before start
for j in "${jobs[@]}"; do before[$j]=$(job_gpus "$j"); start[$j]=$(job_field "$j" StartTime); done
say "before: $(for j in "${jobs[@]}"; do printf '%s=[%s] ' "$j" "${before[$j]}"; done)"
# n1's egpu units as slurmctld counts them (800 configured; 0 on 22.05 until
# the node has registered again after a slurmctld restart: README, Known limits).
egpu_of_node() { sl sinfo -h -N -n n1 -o %G | tr ',' '\n' | sed -n 's/^egpu:\([a-z0-9]*:\)\{0,1\}\([0-9]*\).*/\2/p'; }
tb restart slurmctld
sleep 3 # let the scheduler run once after recovery
for j in "${jobs[@]}"; do
  s=$(job_field "$j" JobState)
  [[ $s == RUNNING ]] || fail "job $j is $s after the slurmctld restart"
  [[ $(job_field "$j" Restarts) == 0 ]] || fail "job $j was requeued"
  [[ $(job_field "$j" StartTime) == "${start[$j]}" ]] || fail "job $j restarted"
  [[ $(job_gpus "$j") == "${before[$j]}" ]] || fail "job $j re-allocated: ${before[$j]} -> $(job_gpus "$j")"
done
ok "all ${#jobs[@]} jobs kept running with the same GPUs"
# The recovered usage still counts: 30+70 filled a GPU, so egpu:60 goes
# elsewhere. Submitted once n1 offers its units again (on 22.05 that takes
# the node's next registration, seconds after the restart; a fixed wait
# here once lost that race on a busy machine).
for _ in $(seq 240); do
  [[ $(egpu_of_node) == 800 ]] && break
  sleep 0.25
done
[[ $(egpu_of_node) == 800 ]] || fail "n1 offers egpu:$(egpu_of_node) 60 s after the restart, not 800"
n=$(hold_job --gres=egpu:60)
wait_state "$n" RUNNING
gn=$(job_gpus "$n")
full=${before[${jobs[0]}]%%:*}
whole=${before[${jobs[3]}]}
[[ ${gn%%:*} != "$full" ]] || fail "egpu:60 placed on the full GPU $full"
[[ ${gn%%:*} != "$whole" ]] || fail "egpu:60 placed on the whole-GPU job's GPU $whole"
ok "new egpu:60 on GPU ${gn%%:*}"
# An admin stops slurmctld; `testbed start` starts what is down and only that,
# with the cluster's state: the jobs run on, on the same GPUs.
# (`status` exits 1 while a daemon is down: read its output, not its status.)
sl scontrol shutdown slurmctld >/dev/null
for _ in $(seq 600); do
  st=$(tb status 2>&1 || true)
  grep -q '^slurmctld: stopped' <<<"$st" && break
  sleep 0.1
done
said=$(tb start 2>&1) || fail "testbed start failed: $said"
grep -q '^slurmctld: stopped' <<<"$st" || fail "slurmctld did not stop: $st"
grep -q ': started slurmctld$' <<<"$said" || fail "testbed start did not start slurmctld alone: $said"
tb status >/dev/null || fail "not every daemon runs after start: $(tb status 2>&1)"
[[ $(job_field "$n" JobState) == RUNNING ]] || fail "job $n is $(job_field "$n" JobState) after start"
[[ $(job_gpus "${jobs[0]}") == "${before[${jobs[0]}]}" ]] || fail "job ${jobs[0]} re-allocated"
ok "testbed start after 'scontrol shutdown slurmctld' started slurmctld alone; jobs kept"
clean_jobs
# The node must still offer its units to new egpu jobs. On 22.05 it offers
# none for a few seconds after every slurmctld restart, until slurmctld has
# asked the node to register and it has: the per-GPU counts of a shared GRES
# are 0 until then (README, Known limits), and egpu jobs submitted meanwhile
# are refused. The window must close by itself; 24.11 has none.
waited=0
for _ in $(seq 120); do
  capacity=$(egpu_of_node)
  [[ $capacity == 800 ]] && break
  if ((waited == 0)); then
    # Meanwhile a submission is refused with a message that says why (or,
    # when the node registered in between, it is accepted).
    if early=$(sl sbatch --parsable --gres=egpu:10 --wrap 'sleep 1' 2>&1); then
      say "n1 registered while the job was submitted: $early"
    else
      grep -q "no node has reported its GPUs yet" <<<"$early" ||
        fail "an egpu job submitted before n1 registered: $early"
      say "submitted before n1 registered: $early"
    fi
  fi
  sleep 0.25
  waited=$((waited + 1))
done
if ((waited > 0)); then
  [[ $release == 22.05 ]] || fail "n1 offered egpu:${capacity:-none} after the restart ($release)"
  say "KNOWN LIMIT (22.05): n1 still offered no egpu units for $((waited / 4)).$((waited % 4 * 25)) s more, until it registered again"
fi
[[ $capacity == 800 ]] || fail "n1 offers egpu:${capacity:-none} after the restarts, not 800"
probe=$(hold_job --gres=egpu:10)
wait_state "$probe" RUNNING
ok "n1 offers its 800 egpu units to a new job"
clean_jobs
