#!/usr/bin/env bash
# Restarting slurmd while egpu jobs run: the jobs continue, and a new step in
# a running job gets its GPU env.
source "$(dirname "$0")/lib.sh"
ensure_testbed
a=$(hold_job --gres=egpu:40)
b=$(hold_job --gres=egpu:40)
wait_state "$a" RUNNING; wait_state "$b" RUNNING
ga=$(job_gpus "$a"); gb=$(job_gpus "$b")
tb restart slurmd n1  # returns once n1's slurmd registered again
for j in $a $b; do [[ $(job_field "$j" JobState) == RUNNING ]] || fail "job $j is $(job_field "$j" JobState)"; done
[[ $(job_gpus "$a") == "$ga" && $(job_gpus "$b") == "$gb" ]] || fail "allocations changed"
step=$(sl srun --jobid="$a" --overlap --gres=egpu:10 env | grep -E '^(EGPU_UNITS|EGPU_GPU_INDICES|CUDA_VISIBLE_DEVICES)=' | sort)
say "new step: $(tr '\n' ' ' <<<"$step")"
[[ $(env_of EGPU_UNITS <<<"$step") == 10 ]] || fail "step EGPU_UNITS"
[[ $(env_of EGPU_GPU_INDICES <<<"$step") == "${ga%%:*}" ]] || fail "step GPU"
[[ $(env_of CUDA_VISIBLE_DEVICES <<<"$step") == "${ga%%:*}" ]] || fail "step CUDA_VISIBLE_DEVICES"
ok "jobs kept running across the slurmd restart; new step on GPU ${ga%%:*}"
clean_jobs
