#!/usr/bin/env bash
# The cluster simulator's `weighted` policy against the real slurmctld with
# PackNodes=yes on two nodes: jobs of mixed sizes, each running (and the
# weights updated) before the next is submitted, must land on the node and
# GPU `egpu-clustersim --place-in-order --policies weighted` predicts. The
# sequence holds a job that Slurm's own order (the `first-fit` model) would
# put elsewhere, so the test tells packing from no packing.
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=2
source "$(dirname "$0")/lib.sh"
ensure_testbed
source "$(dirname "$0")/model_lib.sh"
source "$(dirname "$0")/pack_lib.sh"
gpus=$(sed -n 's/.*gpus=\([0-9]*\).*/\1/p' "$state/testbed.info")
cpus=$(sl scontrol -o show node n1 | grep -o 'CPUTot=[0-9]*' | cut -d= -f2)
[[ -n $gpus && -n $cpus ]] || fail "cannot read the nodes' GPUs and CPUs"
((gpus == 8 && cpus > 24)) || skip "the sequence is made for 8 GPUs and more than 24 CPUs per node"
work=$(mktemp -d)
trap 'set_pack; rm -rf "$work"' EXIT

set_pack yes
declare -A free=([n1]=$((gpus * 100)) [n2]=$((gpus * 100)))
wait_weight n1 "$(packed "${free[n1]}")"
wait_weight n2 "$(packed "${free[n2]}")"

# units (0 = no GPU) and CPUs per job: n1 fills with whole-GPU shares, one
# share with most of n2's CPUs must open n2; then a CPU job goes to n1 (the
# lighter) where Slurm alone takes n2 (fewer free CPUs); then shares on n2.
units=(100 100 100 100 100 100 100 100 100 0 30 45)
jcpus=(1 1 1 1 1 1 1 1 $((cpus - 10)) 2 1 1)
printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,%d,0,%d,v100\nn2,%d,0,%d,v100\n' \
  $((cpus * 1000)) "$gpus" $((cpus * 1000)) "$gpus" >"$work/nodes.csv"
echo 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time' >"$work/tasks.csv"
actual=()
for i in "${!units[@]}"; do
  echo "j$i,$((jcpus[i] * 1000)),0,$((units[i] > 0 ? 1 : 0)),$((units[i] * 10)),,BE,$i" >>"$work/tasks.csv"
  if ((units[i] > 0)); then
    job=$(hold_job -c "${jcpus[i]}" --gres=egpu:"${units[i]}")
  else
    job=$(hold_job -c "${jcpus[i]}")
  fi
  wait_state "$job" RUNNING
  node=$(job_field "$job" NodeList)
  gpu=""
  if ((units[i] > 0)); then
    got=$(job_gpus "$job")
    [[ $got =~ ^([0-9]+):${units[i]}$ ]] || fail "egpu:${units[i]} (job $job) got '$got', not one GPU"
    gpu=${BASH_REMATCH[1]}
    free[$node]=$((free[$node] - units[i]))
    wait_weight "$node" "$(packed "${free[$node]}")"
  fi
  actual+=("j$i,$node,$gpu")
done
say "Slurm placed them: ${actual[*]}"

job_label() { echo "egpu:${units[$1]} -c ${jcpus[$1]}"; }
expect_model weighted
ok "the model's weighted policy matches Slurm with PackNodes=yes for all ${#units[@]} jobs"
expect_not_model first-fit "the sequence does not tell packing from Slurm's own order"
ok "Slurm's own order (first-fit) would have placed them differently"
clean_jobs
