#!/usr/bin/env bash
# Restarting slurmctld, then slurmd, while two egpu jobs run greedy workloads
# at 30/70 on one GPU: the jobs keep running (same processes), the agent
# keeps their instances, and the shares are still enforced after each restart.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

secs=60 # a bound: the test cancels the jobs
a=$(submit --gres=egpu:30 --wrap "$(greedy x30-$tag $secs)")
b=$(submit --gres=egpu:70 --wrap "$(greedy x70-$tag $secs)")
for j in $a $b; do wait_state "$j" RUNNING; wait_instances "$j" 1; done
ia=$(instance_id "$a" batch); ib=$(instance_id "$b" batch)

check_shares() { # WHEN
  local shares s30 s70
  shares=$(split_of_used "$(measure_shares 3 "x30-$tag" "x70-$tag")" "x30-$tag" "x70-$tag")
  s30=$(share_of "x30-$tag" <<<"$shares"); s70=$(share_of "x70-$tag" <<<"$shares")
  assert_near "egpu:30 $1" "$s30" 30
  assert_near "egpu:70 $1" "$s70" 70
  echo "$s30/$s70"
}
before=$(check_shares "before the restarts")
pa=$(label_pid "x30-$tag"); pb=$(label_pid "x70-$tag")
ok "before: $before (pids $pa, $pb)"

still_enforced() { # WHAT
  for j in $a $b; do
    [[ $(job_field "$j" JobState) == RUNNING ]] || fail "job $j is $(job_field "$j" JobState) after $1"
  done
  [[ $(instance_id "$a" batch) == "$ia" && $(instance_id "$b" batch) == "$ib" ]] ||
    fail "the agent lost or re-created the instances after $1"
  [[ $(label_pid "x30-$tag") == "$pa" && $(label_pid "x70-$tag") == "$pb" ]] || fail "workloads restarted after $1"
  ok "after $1: $(check_shares "after $1"), same jobs, processes and instances"
}
tb restart slurmctld
still_enforced "a slurmctld restart"
tb restart slurmd n1
still_enforced "a slurmd restart"
clean_jobs
