#!/usr/bin/env bash
# What gres/egpu puts in a job's and a step's environment: CUDA_VISIBLE_DEVICES
# and the EGPU_* variables (see gres/egpu_env.h).
source "$(dirname "$0")/lib.sh"
ensure_testbed
script='env | grep -E "^(CUDA_VISIBLE_DEVICES|EGPU_[A-Z_]*|SLURM_JOB_GPUS|SLURM_STEP_GPUS)=" | sort
echo STEP
srun --gres=egpu:20 env | grep -E "^(CUDA_VISIBLE_DEVICES|EGPU_[A-Z_]*|SLURM_STEP_GPUS)=" | sort'
j=$(submit --gres=egpu:25 --wrap "$script")
out=$(job_output "$j")
say "job env:"; echo "$out"
batch=$(sed '/^STEP$/q' <<<"$out")
step=$(sed -n '/^STEP$/,$p' <<<"$out")
idx=$(env_of EGPU_GPU_INDICES <<<"$batch")
[[ $idx =~ ^[0-9]+$ ]] || fail "EGPU_GPU_INDICES='$idx'"
[[ $(env_of CUDA_VISIBLE_DEVICES <<<"$batch") == "$idx" ]] || fail "CUDA_VISIBLE_DEVICES != EGPU_GPU_INDICES"
[[ $(env_of EGPU_UNITS <<<"$batch") == 25 ]] || fail "EGPU_UNITS != 25"
[[ $(env_of EGPU_NODE <<<"$batch") == n1 ]] || fail "EGPU_NODE != n1"
uuid=$(env_of EGPU_GPU_UUIDS <<<"$batch")
[[ $uuid =~ ^GPU-[0-9a-f-]+$ ]] || fail "EGPU_GPU_UUIDS='$uuid'"
quota=$(env_of EGPU_MEM_QUOTA <<<"$batch")
# V100-SXM2-32GB in the test topology: 25% of its memory, within a MiB.
[[ $quota =~ ^[0-9]+$ ]] && (( quota > 8000000000 && quota < 8600000000 )) || fail "EGPU_MEM_QUOTA='$quota'"
[[ $(env_of EGPU_UNITS <<<"$step") == 20 ]] || fail "step EGPU_UNITS != 20"
# The job's allocation on the GPU, in the job and in its steps (Slurm's own figure).
[[ $(env_of EGPU_JOB_UNITS <<<"$batch") == 25 ]] || fail "EGPU_JOB_UNITS != 25"
[[ $(env_of EGPU_JOB_UNITS <<<"$step") == 25 ]] || fail "step EGPU_JOB_UNITS != 25"
[[ $(env_of EGPU_GPU_INDICES <<<"$step") == "$idx" ]] || fail "step runs on another GPU"
[[ $(env_of SLURM_STEP_GPUS <<<"$step") == "$idx" ]] || fail "step SLURM_STEP_GPUS"
ok "batch and step env: GPU $idx, 25 and 20 units of the job's 25, quota $quota, uuid $uuid"

# A user's own LD_PRELOAD, however long, is kept after the shim (it was
# dropped past 4 KiB).
long=$(printf '/lib/x86_64-linux-gnu/libm.so.6 %.0s' $(seq 160))
j=$(submit --gres=egpu:10 --wrap "LD_PRELOAD='$long' srun --gres=egpu:10 sh -c 'echo PRELOAD \${#LD_PRELOAD} \${LD_PRELOAD%% *}'")
read -r _ len first < <(job_output "$j" | grep '^PRELOAD ')
[[ $first == */libegpu-shim.so ]] || fail "the step's LD_PRELOAD starts with '$first', not the shim"
(( len == ${#long} + ${#first} + 1 )) ||
  fail "the step's LD_PRELOAD is $len bytes: not the shim and the user's ${#long}"
ok "a user's LD_PRELOAD of ${#long} bytes is kept after the shim"
clean_jobs
