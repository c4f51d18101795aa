#!/usr/bin/env bash
# `scontrol show job -d` shows the egpu allocation with its GPU index.
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
clean_jobs
