#!/usr/bin/env bash
# The job owner, not root, moves share between two running steps of the same
# job with `egpuctl resize`: 30/70 becomes 70/30 on the GPU, the same
# processes keep running. Growing past the job's allocation, changing the
# allocation itself, or touching another user's job is refused with a clear
# message. Root grows a job past what Slurm granted only with --force.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

secs=300 # a bound: the test cancels the job long before
job_script="srun --overlap --gres=egpu:30 $(greedy r0-$tag $secs) &
srun --overlap --gres=egpu:70 $(greedy r1-$tag $secs) &
wait"
j=$(submit_as_user --gres=egpu:100 --wrap "$job_script")
wait_state "$j" RUNNING
[[ $(job_field "$j" UserId) == egpuuser* ]] || fail "job $j runs as $(job_field "$j" UserId), not egpuuser"
wait_instances "$j" 3
# The two sruns start concurrently: either may be step 0. r0 is the 30-unit one.
read -r id0 step0 < <(agent_instances "$j" | awk '$2 != "batch" && $4 == 30 { print $1, $2 }')
read -r id1 step1 < <(agent_instances "$j" | awk '$2 != "batch" && $4 == 70 { print $1, $2 }')
idb=$(instance_id "$j" batch)
[[ -n $id0 && -n $id1 && -n $idb ]] || fail "instances of job $j: $(agent_instances "$j" | tr '\n' ';')"

# The owner of an instance has a control socket of the agent's that only
# that user may connect to (README), wherever the checkout lies: a path
# longer than a socket address is reached through its directory.
own="$state/run/agent-n1.sock.users/$(sl id -u egpuuser)"
[[ $(sl stat -c '%F %U %a' "$own" 2>&1) == "socket egpuuser 600" ]] ||
  fail "egpuuser's socket $own: $(sl stat -c '%F %U %a' "$own" 2>&1)"
as_user egpuctl --socket "$own" status >/dev/null || fail "egpuuser is not served on $own"
if sl runuser -u nobody -- egpuctl --socket "$own" status >/dev/null 2>&1; then
  fail "user nobody was served on egpuuser's socket $own"
fi
ok "egpuuser's own socket (${#own} bytes of path) serves egpuuser and not nobody"

shares=$(split_of_used "$(measure_shares 3 "r0-$tag" "r1-$tag")" "r0-$tag" "r1-$tag")
b0=$(share_of "r0-$tag" <<<"$shares"); b1=$(share_of "r1-$tag" <<<"$shares")
assert_near "step $step0 (30 units) before the resize" "$b0" 30
assert_near "step $step1 (70 units) before the resize" "$b1" 70
pid0=$(label_pid "r0-$tag"); pid1=$(label_pid "r1-$tag")
[[ -n $pid0 && -n $pid1 ]] || fail "workload processes not found"
ok "before: step $step0 (30 units) $b0%, step $step1 (70 units) $b1% (pids $pid0, $pid1)"

# As the owner: shrink the 70-unit step, grow the 30-unit one (egpuctl orders it so).
out=$(as_user egpuctl resize "$id0=70" "$id1=30" 2>&1) || fail "the owner's resize failed: $out"
say "egpuuser: egpuctl resize $id0=70 $id1=30: $(tr '\n' ' ' <<<"$out")"
sleep 1 # decayed usage settles in a few hundred ms
shares=$(split_of_used "$(measure_shares 3 "r0-$tag" "r1-$tag")" "r0-$tag" "r1-$tag")
a0=$(share_of "r0-$tag" <<<"$shares"); a1=$(share_of "r1-$tag" <<<"$shares")
assert_near "step $step0 (now 70 units) after the resize" "$a0" 70
assert_near "step $step1 (now 30 units) after the resize" "$a1" 30
[[ $(label_pid "r0-$tag") == "$pid0" && $(label_pid "r1-$tag") == "$pid1" ]] || fail "the workloads were restarted"
[[ $(instance_id "$j" "$step0") == "$id0" && $(instance_id "$j" "$step1") == "$id1" ]] || fail "instances were re-created"
[[ $(job_field "$j" JobState) == RUNNING ]] || fail "job $j is $(job_field "$j" JobState)"
ok "after: step $step0 $a0%, step $step1 $a1%, same processes ($pid0, $pid1), job still running"

# Past the job's 100 units: refused, and nothing changes.
set +e
over=$(as_user egpuctl resize "$id0=80" 2>&1); rc_over=$?
umb=$(as_user egpuctl resize "$idb=90" 2>&1); rc_umb=$?
other=$(sl runuser -u nobody -- egpuctl resize "$id1=50" 2>&1); rc_other=$?
set -e
say "resize step $step0 to 80 (steps would hold 110): rc=$rc_over: $over"
[[ $rc_over -ne 0 ]] || fail "a resize past the job's allocation was accepted"
grep -q "has 100 units on GPU" <<<"$over" && grep -q "would hold 110" <<<"$over" || fail "unclear refusal: $over"
say "resize the job's allocation (batch) to 90: rc=$rc_umb: $umb"
[[ $rc_umb -ne 0 ]] && grep -q "only root may change it" <<<"$umb" || fail "the owner changed the job's allocation: $umb"
say "user nobody resizes egpuuser's step: rc=$rc_other: $other"
[[ $rc_other -ne 0 ]] && grep -Eq "no instance $id1 that you may see|another user" <<<"$other" || fail "another user resized the step: $other"
read -r units0 < <(agent_instances "$j" | awk -v s="$step0" '$2 == s { print $4 }')
read -r units1 < <(agent_instances "$j" | awk -v s="$step1" '$2 == s { print $4 }')
[[ $units0 == 70 && $units1 == 30 ]] || fail "refused resizes changed the steps to $units0/$units1"
ok "refused: growing past the allocation, changing the allocation, another user's resize"

# The owner may name a step as JOB.STEP (egpuctl's documented selector).
shown=$(as_user egpuctl show "$j.$step1" --json 2>&1 || true)
python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["id"]==int(sys.argv[2]) and j["units"]==30 else 1)' \
  "$shown" "$id1" 2>/dev/null || fail "egpuctl show $j.$step1 does not select step $step1 (instance $id1): $shown"
ok "egpuctl show $j.$step1 selects instance $id1"

# Root grows a job past what Slurm granted only with --force; Slurm's view
# of the job does not change (README: what --force does).
j2=$(submit_as_user --gres=egpu:30 --wrap "sleep $secs")
wait_state "$j2" RUNNING
wait_instances "$j2" 1
id2=$(instance_id "$j2" batch)
[[ -n $id2 ]] || fail "no instance for job $j2: $(agent_instances "$j2" | tr '\n' ';')"
set +e
unforced=$(sl egpuctl resize "$id2=50" 2>&1); rc_unforced=$?
set -e
say "root: egpuctl resize $id2=50 (job $j2 has 30 units from Slurm): rc=$rc_unforced: $unforced"
[[ $rc_unforced -ne 0 ]] && grep -q "30 units on GPU .* from Slurm" <<<"$unforced" && grep -q -- "--force" <<<"$unforced" ||
  fail "root grew job $j2 past its grant without --force: $unforced"
forced=$(sl egpuctl resize --force "$id2=50" 2>&1) || fail "root's forced resize failed: $forced"
say "root: egpuctl resize --force $id2=50: $(tr '\n' ' ' <<<"$forced")"
shown=$(sl egpuctl --json show "$id2")
python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if (j["units"], j["job_units"], j["granted_units"]) == (50, 50, 30) else 1)' \
  "$shown" || fail "after the forced resize egpuctl show says: $shown"
gres=$(sl scontrol -d -o show job "$j2" | grep -o ' GRES=[^ ]*' | head -n 1)
grep -Eq "GRES=egpu(:[A-Za-z0-9_]+)?:30\(" <<<"$gres" || fail "Slurm's view of job $j2 changed:$gres"
ok "root: growing job $j2 past its 30 granted units needs --force; forced, it holds 50 (granted 30) and Slurm still counts it at 30 ($gres)"
clean_jobs
