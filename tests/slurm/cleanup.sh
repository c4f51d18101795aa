#!/usr/bin/env bash
# After a job ends, normally, by scancel, or because its workload crashed
# (SIGSEGV) or was killed (SIGKILL), the agent holds nothing of it: no
# instance, no units, no memory accounted; the simulated GPU's memory is
# free. While a step runs, the memory of a process that died is given back
# at once. Memory quotas hold: a process filling the GPU stops at the quota.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

chunk=$((256 << 20))
fill() { # LABEL HOLD_MS: fills the step's memory quota, holds it, prints a summary
  echo "SIMGPU_LABEL=$1 memory-probe fill $chunk $2"
}
# It ends on its own, when told (not after a guess of how long the checks take).
normal=$(submit --gres=egpu:25 --wrap "PROBE_HOLD_UNTIL=$out_dir/end-m-normal-$tag $(fill m-normal-$tag 60000)")
cancelled=$(submit --gres=egpu:25 --wrap "$(fill m-cancel-$tag 60000)")
# The crashing ones: the batch script lives on after its workload died, so
# the test can look at the agent in between; it ends when told to.
crash_script() { # LABEL
  echo "$(fill "$1" 60000) & p=\$!; wait \$p; echo crashed workload status: \$?; $(gate "$out_dir/end-$1")"
}
segv=$(submit --gres=egpu:25 --wrap "$(crash_script m-segv-$tag)")
killed=$(submit --gres=egpu:25 --wrap "$(crash_script m-kill-$tag)")
for j in $normal $cancelled $segv $killed; do wait_state "$j" RUNNING; done
gpu=$(job_gpus "$normal"); gpu=${gpu%%:*}
for j in $cancelled $segv $killed; do
  g=$(job_gpus "$j"); [[ ${g%%:*} == "$gpu" ]] || fail "the four egpu:25 jobs are not on one GPU ($g)"
done

# Every job's quota is full (the probes stop at it) and accounted.
for j in $normal $cancelled $segv $killed; do
  for _ in $(seq 80); do
    read -r _ _ _ _ _ used quota _ <<<"$(agent_instances "$j")"
    [[ ${used:-0} -gt 0 && $((used + chunk)) -gt $quota ]] && break
    sleep 0.25
  done
  [[ ${used:-0} -gt 0 && $used -le $quota && $((used + chunk)) -gt $quota ]] ||
    fail "job $j: agent accounts ${used:-0} of a $quota B quota, expected the quota filled"
done
ok "4 x egpu:25 on GPU $gpu, each filled its quota ($quota B) and no more"

# Crash and kill the workloads; their memory is reclaimed while the steps run.
kill -SEGV "$(label_pid "m-segv-$tag")"
kill -KILL "$(label_pid "m-kill-$tag")"
for j in $segv $killed; do
  for _ in $(seq 240); do
    read -r _ _ _ _ _ used _ procs <<<"$(agent_instances "$j")"
    [[ $used == 0 && $procs == 0 ]] && break
    sleep 0.25
  done
  [[ $used == 0 && $procs == 0 ]] || fail "job $j: after its workload died the agent still accounts $used B, $procs processes"
done
ok "memory of the crashed (SIGSEGV) and killed (SIGKILL) workloads reclaimed at once"
sl scancel "$cancelled"
touch "$out_dir/end-m-segv-$tag" "$out_dir/end-m-kill-$tag" "$out_dir/end-m-normal-$tag"
wait_state "$normal" COMPLETED 30
for j in $cancelled $segv $killed; do
  for _ in $(seq 60); do
    s=$(job_field "$j" JobState)
    [[ $s == COMPLETED || $s == CANCELLED ]] && break
    sleep 0.5
  done
done
grep -q "crashed workload status: 139" "$out_dir/$segv.out" || fail "the SIGSEGV workload did not die of it: $(cat "$out_dir/$segv.out")"
grep -q "crashed workload status: 137" "$out_dir/$killed.out" || fail "the SIGKILL workload did not die of it"
for j in $normal $cancelled $segv $killed; do
  for _ in $(seq 240); do [[ -z $(agent_instances "$j") ]] && break; sleep 0.25; done
  [[ -z $(agent_instances "$j") ]] || fail "job $j ended ($(job_field "$j" JobState)) but the agent holds $(agent_instances "$j")"
done
units=$(sl egpuctl status --json | python3 -c "import json,sys; print(json.load(sys.stdin)['gpus'][$gpu]['allocated_units'])")
[[ $units == 0 ]] || fail "GPU $gpu still has $units units allocated"
for _ in $(seq 240); do [[ $(gpu_memory_used "$gpu") == 0 ]] && break; sleep 0.25; done
[[ $(gpu_memory_used "$gpu") == 0 ]] || fail "the simulated GPU $gpu still has $(gpu_memory_used "$gpu") B in use"
ok "ended normally, by scancel, crashed, killed: no instance, 0 units, 0 B left on GPU $gpu"
clean_jobs
