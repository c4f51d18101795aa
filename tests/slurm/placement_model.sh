#!/usr/bin/env bash
# The cluster simulator's model of Slurm's GPU choice (tools/clustersim,
# slurm_selection.cpp) against the real slurmctld: egpu jobs of mixed sizes on
# one node, each running before the next is submitted; every job must be on
# the GPU `egpu-clustersim --place-in-order` predicts for that sequence, and
# the sequence is one where Slurm's LL_SHARED_GRES order would differ (so the
# test can tell the two apart).
source "$(dirname "$0")/lib.sh"
ensure_testbed
source "$(dirname "$0")/model_lib.sh"
gpus=$(sed -n 's/.*gpus=\([0-9]*\).*/\1/p' "$state/testbed.info")
cpus=$(sl scontrol -o show node n1 | grep -o 'CPUTot=[0-9]*' | cut -d= -f2)
[[ -n $gpus && -n $cpus ]] || fail "cannot read the node's GPUs and CPUs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

units=(60 30 50 20 70 40 10 90 30 45 25)
printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,%d,0,%d,v100\n' $((cpus * 1000)) "$gpus" >"$work/nodes.csv"
echo 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time' >"$work/tasks.csv"
actual=()
for i in "${!units[@]}"; do
  echo "j$i,1000,0,1,$((units[i] * 10)),,BE,$i" >>"$work/tasks.csv"
  job=$(hold_job -c 1 --gres=egpu:"${units[i]}")
  wait_state "$job" RUNNING
  got=$(job_gpus "$job")
  [[ $got =~ ^([0-9]+):${units[i]}$ ]] || fail "egpu:${units[i]} (job $job) got '$got', not one GPU"
  actual+=("j$i,n1,${BASH_REMATCH[1]}")
done
say "Slurm placed egpu:${units[*]} on GPUs: $(printf '%s ' "${actual[@]##*,}")"

job_label() { echo "egpu:${units[$1]}"; }
expect_model first-fit
ok "the model's first fit matches Slurm for all ${#units[@]} jobs"
expect_not_model least-loaded "the sequence does not tell first fit from least loaded"
ok "least loaded would have placed them differently"
clean_jobs
