#!/usr/bin/env bash
# `scontrol show job -d` shows the egpu allocation with its GPU index, and
# `egpuctl status` on the node agrees (same GPU, same units).
source "$(dirname "$0")/lib.sh"
ensure_testbed
a=$(hold_job --gres=egpu:40)
wait_state "$a" RUNNING
line=$(sl scontrol -d show job "$a" | grep -E '^\s+Nodes=' | head -n 1)
say "scontrol -d: $line"
case $release in
  22.05) [[ $line =~ GRES=egpu(:[a-z0-9_]+)?:40\(IDX:[0-9]+\) ]] || fail "no egpu:40(IDX:n) in '$line'" ;;
  *) [[ $line =~ GRES=egpu(:[a-z0-9_]+)?:40\(([0-9]+/100,?)+\) ]] || fail "no egpu:40(u/100,...) in '$line'" ;;
esac
[[ $(job_gpus "$a") =~ ^[0-9]+:40$ ]] || fail "cannot read a GPU index with 40 units from '$line'"
ok "egpu allocation shows GPU $(job_gpus "$a")"
# The node agent, when part of the testbed, holds the same GPU and units.
if agent_running; then
  g=$(job_gpus "$a")
  for _ in $(seq 240); do
    inst=$(sl egpuctl status --json | python3 -c '
import json, sys
for g in json.load(sys.stdin)["gpus"]:
    for i in g["instances"]:
        if i["job"] == int(sys.argv[1]): print(i["step"], i["gpu"], i["units"])' "$a")
    [[ -n $inst ]] && break
    sleep 0.25
  done
  say "egpuctl status: job $a: ${inst:-nothing}"
  [[ $inst == "batch ${g%%:*} ${g##*:}" ]] || fail "Slurm placed job $a at $g, the agent holds '${inst:-nothing}'"
  ok "egpuctl status agrees: GPU ${g%%:*}, ${g##*:} units"
fi
clean_jobs
