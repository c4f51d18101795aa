#!/usr/bin/env bash
# Steps share their job's allocation: inside a job with egpu:60, the steps
# `srun --gres=egpu:20` and `srun --gres=egpu:40` run at the same time and get
# 20% and 40% of the GPU (+-3 pp), next to another job's egpu:40 that keeps
# the GPU busy (burst mode hands out only idle time, and there is none).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

go=$out_dir/go-$tag
secs=300 # a bound: the test stops the workloads
job_script="$(gate "$go")
srun --overlap --gres=egpu:20 $(greedy s20-$tag $secs) &
srun --overlap --gres=egpu:40 $(greedy s40-$tag $secs) &
wait"
j=$(submit --gres=egpu:60 --wrap "$job_script")
wait_state "$j" RUNNING
other=$(submit --gres=egpu:40 --wrap "$(gate "$go")exec $(greedy o40-$tag $secs)")
wait_state "$other" RUNNING
gj=$(job_gpus "$j"); go_=$(job_gpus "$other")
[[ ${gj%%:*} == "${go_%%:*}" ]] || fail "egpu:60 on $gj and egpu:40 on $go_: expected one GPU"
touch "$go"
wait_instances "$j" 3 # batch (the job's allocation) and the two steps
while read -r _ step gpu units job_units _; do
  [[ $gpu == "${gj%%:*}" ]] || fail "job $j step $step on GPU $gpu, Slurm placed the job on ${gj%%:*}"
  case $step in
    batch) [[ $units == 60 && $job_units == 60 ]] || fail "batch holds $units units (job $job_units), not 60" ;;
    0 | 1) [[ $units == 20 || $units == 40 ]] || fail "step $step holds $units units" ;;
    *) fail "unexpected step $step" ;;
  esac
done <<<"$(agent_instances "$j")"
ok "the agent holds the job's 60 units on GPU ${gj%%:*} and its steps' 20 and 40"

# Memory is one pool per job too: the steps' quotas are their units' part of
# the job's, and the batch script may hold only what they leave (none here).
read -r pool batch_limit steps_limits <<<"$(sl egpuctl status --json | python3 -c '
import json, sys
job, pool, batch, steps = int(sys.argv[1]), 0, None, 0
for g in json.load(sys.stdin)["gpus"]:
    for i in g["instances"]:
        if i["job"] == job and i["step"] == "batch":
            pool, batch = i["memory_quota_bytes"], i["memory_limit_bytes"]
        elif i["job"] == job:
            steps += i["memory_limit_bytes"]
print(pool, batch, steps)
' "$j")"
[[ $pool -gt 0 && $batch_limit == 0 && $steps_limits == "$pool" ]] ||
  fail "job memory $pool B: the batch script may hold $batch_limit B and its steps $steps_limits B"
ok "the job's $pool B of memory: its steps' quotas hold all of it, the batch script none"

shares=$(split_of_used "$(measure_shares 4 "s20-$tag" "s40-$tag" "o40-$tag")" "s20-$tag" "s40-$tag" "o40-$tag")
s20=$(share_of "s20-$tag" <<<"$shares"); s40=$(share_of "s40-$tag" <<<"$shares"); o40=$(share_of "o40-$tag" <<<"$shares")
say "GPU time over 4 s: step egpu:20 $s20%, step egpu:40 $s40%, other job egpu:40 $o40%"
assert_near "step egpu:20's share of the GPU" "$s20" 20
assert_near "step egpu:40's share of the GPU" "$s40" 40
assert_near "the other job's egpu:40" "$o40" 40
stop_workloads "$j"
stop_workloads --batch "$other"
ok "steps ran concurrently at $s20/$s40 of the GPU (other job $o40)"
clean_jobs
