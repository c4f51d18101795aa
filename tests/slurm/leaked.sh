#!/usr/bin/env bash
# A step that ends while the node agent cannot be reached (stopped here) left
# its instance behind for good: SPANK's remove failed, and the units stayed
# taken. Now the agent frees the instances whose slurmstepd ended (it watches
# the process that asked for them): once it runs again, the GPU is free and
# a job that needs all of it runs.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

agent_pid=$(cat "$state/run/agent-n1.pid")
# All 8 GPUs of n1 taken by one job each, so the next egpu:100 job can only
# run where a freed instance was.
jobs=()
for _ in $(seq 8); do jobs+=("$(hold_job --gres=egpu:100)"); done
for j in "${jobs[@]}"; do wait_state "$j" RUNNING; wait_instances "$j" 1; done
victim=${jobs[0]}
gpu=$(job_gpus "$victim"); gpu=${gpu%%:*}

cont() { kill -CONT "$agent_pid" 2>/dev/null || true; }
trap cont EXIT
kill -STOP "$agent_pid"
sl scancel "$victim"
# SPANK's remove times out (5 s) against the stopped agent; the step ends.
for _ in $(seq 120); do
  s=$(job_field "$victim" JobState)
  [[ $s == CANCELLED || $s == COMPLETED ]] && break
  sleep 0.5
done
[[ $s == CANCELLED || $s == COMPLETED ]] || { cont; fail "job $victim did not end while the agent was stopped ($s)"; }
sleep 1
cont
ok "job $victim ended while the agent was stopped"

for _ in $(seq 240); do
  [[ -z $(agent_instances "$victim") ]] && break
  sleep 0.25
done
[[ -z $(agent_instances "$victim") ]] || fail "the agent still holds job $victim's instance: $(agent_instances "$victim")"
grep -q "ended without removing it" "$state/log/agent-n1.out" ||
  fail "the agent did not say why it freed job $victim's instance"
next=$(hold_job --gres=egpu:100)
wait_state "$next" RUNNING 60
g=$(job_gpus "$next")
[[ ${g%%:*} == "$gpu" ]] || fail "the next egpu:100 job runs on GPU ${g%%:*}, expected the freed GPU $gpu"
wait_instances "$next" 1
ok "job $victim's instance freed once the agent ran again; job $next got GPU $gpu"
clean_jobs
