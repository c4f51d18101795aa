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
# The recovered usage still counts: 30+70 filled a GPU, so egpu:60 goes elsewhere.
n=$(hold_job --gres=egpu:60)
wait_state "$n" RUNNING
gn=$(job_gpus "$n")
full=${before[${jobs[0]}]%%:*}
whole=${before[${jobs[3]}]}
[[ ${gn%%:*} != "$full" ]] || fail "egpu:60 placed on the full GPU $full"
[[ ${gn%%:*} != "$whole" ]] || fail "egpu:60 placed on the whole-GPU job's GPU $whole"
ok "new egpu:60 on GPU ${gn%%:*}"
clean_jobs
