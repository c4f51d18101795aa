#!/usr/bin/env bash
# A whole-GPU job (--gres=gpu:1) never shares a GPU with egpu jobs, and keeps
# the CUDA_VISIBLE_DEVICES gres/gpu gives it; on a freshly started cluster
# (slurmctld has never seen a node register before the first jobs).
source "$(dirname "$0")/lib.sh"
tb stop >/dev/null
ensure_testbed
gpus=$(sed -n 's/.*gpus=\([0-9]*\).*/\1/p' "$state/testbed.info")
e=$(hold_job --gres=egpu:10)
wait_state "$e" RUNNING
eg=$(job_gpus "$e"); eg=${eg%%:*}
script='echo CVD=$CUDA_VISIBLE_DEVICES; echo JOBGPUS=$SLURM_JOB_GPUS; sleep 3600'
whole=()
for ((i = 1; i < gpus; i++)); do whole+=($(submit --gres=gpu:1 --wrap "$script")); done
for j in "${whole[@]}"; do wait_state "$j" RUNNING; done
declare -A seen
for j in "${whole[@]}"; do
  g=$(job_gpus "$j")
  [[ $g =~ ^[0-9]+$ ]] || fail "gpu:1 job $j has GPUs '$g'"
  [[ $g != "$eg" ]] || fail "gpu:1 job $j placed on GPU $g, which runs an egpu job"
  [[ -z ${seen[$g]:-} ]] || fail "GPU $g given to two gpu:1 jobs"
  seen[$g]=1
  for _ in $(seq 120); do [[ -s $out_dir/$j.out ]] && break; sleep 0.5; done
  cvd=$(sed -n 's/^CVD=//p' "$out_dir/$j.out")
  [[ $cvd == "$g" ]] || fail "gpu:1 job $j on GPU $g has CUDA_VISIBLE_DEVICES='$cvd'"
done
ok "$((gpus - 1)) gpu:1 jobs on the GPUs without egpu jobs, each with its CUDA_VISIBLE_DEVICES"
last=$(hold_job --gres=gpu:1)
wait_pending_reason "$last" Resources 60
ok "the next gpu:1 pends (only GPU $eg is left and it runs egpu jobs)"
sl scancel "$last" # out of the queue, so the egpu jobs below are not behind it
big=$(hold_job --gres=egpu:95)
wait_pending_reason "$big" Resources 60
sl scancel "$big"
small=$(hold_job --gres=egpu:20)
wait_state "$small" RUNNING
[[ $(job_gpus "$small") == "$eg:20" ]] || fail "egpu:20 went to $(job_gpus "$small"), not GPU $eg"
ok "egpu jobs stay off whole-GPU jobs' GPUs (egpu:95 pends, egpu:20 joins GPU $eg)"
clean_jobs
