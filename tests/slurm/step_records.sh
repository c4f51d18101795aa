#!/usr/bin/env bash
# What each step achieved on each GPU of each node (device time FAA charged,
# its average share, memory peak, throttled time) is recorded in the job's
# AdminComment when the step ends there, so sacct shows it after the job
# ended: a step on two nodes leaves one record per node (job_submit/egpu
# merges them; neither overwrites the other), the batch step's record goes on
# across an agent restart in its middle, and an admin's own note stays in
# front. While a step runs, checkpoints of its usage so far (running=1) stand
# in for the final record, which replaces them; a step the job's end cuts
# short (scancel) keeps its last checkpoint. Users cannot write records; a
# malformed request is refused whole.
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=2
testbed_accounting=1
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

# Checkpoints every second here (300 s by default), read by each slurmstepd.
for n in 1 2; do
  cp "$state/etc/egpu-n$n.conf" "$state/etc/egpu-n$n.conf.saved"
  echo "StepRecordInterval=1" >>"$state/etc/egpu-n$n.conf"
done
trap 'for n in 1 2; do mv -f "$state/etc/egpu-n$n.conf.saved" "$state/etc/egpu-n$n.conf"; done' EXIT
live_comment() { sl scontrol show job "$1" | sed -n 's/^ *AdminComment=//p'; }

chunk=$((64 << 20))
note="ops note; ticket 17"
# Step 0 on both nodes (a short greedy run), then the batch step holds memory
# until the test says so.
j=$(submit_as_user --hold -N2 --gres=egpu:60 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:30 $(greedy "r-$tag" 2)
PROBE_HOLD_UNTIL=$out_dir/end-$tag SIMGPU_LABEL=m-$tag memory-probe fill $chunk 280000")
sl scontrol update JobId="$j" AdminComment="$note"
sl scontrol release "$j"
wait_state "$j" RUNNING

# The batch step's usage as n1's agent has it now: "memory_peak_bytes agent_restarts".
batch_usage() {
  sl egpuctl --local --socket "$state/run/agent-n1.sock" --json status | python3 -c '
import json, sys
for g in json.load(sys.stdin)["gpus"]:
    for i in g["instances"]:
        if i["job"] == int(sys.argv[1]) and i["step"] == "batch" and "usage" in i:
            print(i["usage"]["memory_peak_bytes"], i["usage"]["agent_restarts"])' "$j"
}
for _ in $(seq 240); do
  read -r peak _ <<<"$(batch_usage)"
  [[ ${peak:-0} -ge $chunk ]] && break
  sleep 0.25
done
[[ ${peak:-0} -ge $chunk ]] || fail "job $j's batch step never held $chunk B (usage: '$(batch_usage)'); output: $(cat "$out_dir/$j.out")"
tb restart agent n1
for _ in $(seq 80); do
  read -r _ restarts <<<"$(batch_usage)"
  [[ ${restarts:-0} == 1 ]] && break
  sleep 0.25
done
[[ ${restarts:-0} == 1 ]] || fail "the restarted agent did not take over job $j's batch step: '$(batch_usage)'"
ok "job $j: the batch step held $peak B; the restarted agent goes on with its totals"
# The running batch step's checkpoint, with the restart in it, stands in the job now.
for _ in $(seq 240); do
  live=$(live_comment "$j")
  [[ $live == *"step=$j.batch node=n1 "*"agent_restarts=1 running=1"* ]] && break
  sleep 0.25
done
[[ $live == *"step=$j.batch node=n1 "*"agent_restarts=1 running=1"* ]] ||
  fail "no checkpoint of job $j's running batch step after its agent's restart: '$live'"
ok "job $j's running batch step has a checkpoint: $(tr ';' '\n' <<<"$live" | grep -o "egpu step=$j.batch .*")"
touch "$out_dir/end-$tag"
wait_state "$j" COMPLETED 60

# The job's AdminComment in the database, once slurmdbd has the job's end.
comment=""
for _ in $(seq 60); do
  comment=$(sl sacct -n -P -X -j "$j" -o AdminComment)
  [[ $comment == *"step=$j.batch "* ]] && break
  sleep 0.5
done
say "sacct AdminComment of job $j: $comment"
python3 - "$j" "$note" "$comment" "$chunk" <<'PY' || fail "job $j's records in sacct are not what its steps did"
import sys
job, note, comment, chunk = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
assert comment.startswith(note + "; "), "the admin's note is not kept in front"
records = {}
for part in comment[len(note) + 2:].split("; "):
    fields = part.split(" ")
    assert fields[0] == "egpu", part
    assert not part.endswith(" running=1"), "a checkpoint outlived its step's final record: " + part
    kv = dict(f.split("=", 1) for f in fields[1:])
    records[(kv["step"], kv["node"])] = kv
want = {(job + ".0", "n1"), (job + ".0", "n2"), (job + ".batch", "n1")}
assert set(records) == want, "records of %s, expected %s" % (sorted(records), sorted(want))
for node in ("n1", "n2"):
    r = records[(job + ".0", node)]
    assert r["units"] == "30", r
    assert float(r["device_s"]) > 0, "step 0 on %s ran kernels: %s" % (node, r)
    assert 0 < float(r["share"]) <= 1 and float(r["elapsed_s"]) > 0, r
    assert "agent_restarts" not in r, r
b = records[(job + ".batch", "n1")]
assert b.get("agent_restarts") == "1" and "partial" not in b, b
assert int(b["mem_peak_mib"]) >= chunk >> 20, b
PY
ok "sacct: the admin's note, then step 0's records from n1 and n2 (device time > 0) and the batch step's (peak >= $((chunk >> 20)) MiB, 1 agent restart), all final"

# scancel ends the job first: slurmctld refuses the step's final record, and
# its last checkpoint stands in sacct.
cut=$(submit_as_user -w n1 --gres=egpu:20 --wrap "srun --gres=egpu:20 $(greedy "c-$tag" 600)")
for _ in $(seq 120); do
  live=$(live_comment "$cut")
  [[ $live == *"step=$cut.0 node=n1 "*" running=1"* && $live != *"step=$cut.0 node=n1 gpu=0 units=20 elapsed_s=0.000 "* ]] && break
  sleep 0.25
done
[[ $live == *"step=$cut.0 node=n1 "*" running=1"* ]] || fail "job $cut's step 0 has no checkpoint: '$live'"
sl scancel "$cut"
for _ in $(seq 60); do
  cancelled=$(sl sacct -n -P -X -j "$cut" -o State,AdminComment)
  [[ $cancelled == CANCELLED*"|"*"step=$cut.0 node=n1 "* ]] && break
  sleep 0.5
done
python3 - "$cut" "$cancelled" <<'PY' || fail "job $cut, cancelled: its step's checkpoint is not in sacct: '$cancelled'"
import sys
job, line = sys.argv[1], sys.argv[2]
state, comment = line.split("|", 1)
assert state.startswith("CANCELLED"), state
step = [p for p in comment.split("; ") if p.startswith("egpu step=%s.0 node=n1 " % job)]
assert len(step) == 1, comment
kv = dict(f.split("=", 1) for f in step[0].split(" ")[1:])
assert kv["units"] == "20" and kv.get("running") == "1", kv
assert float(kv["device_s"]) > 0 and float(kv["elapsed_s"]) > 0, kv
PY
cut_table=$(as_user egpuctl usage "$cut") || fail "egpuctl usage $cut failed: $cut_table"
grep -Eq "^$cut\.0 +n1 +[0-9]+ +20 .*running at last checkpoint" <<<"$cut_table" ||
  fail "egpuctl usage $cut does not say the step was cut short: $cut_table"
ok "job $cut, cancelled while its step ran: sacct keeps the step's last checkpoint: ${cancelled#*|}"

# egpuctl usage JOB: the same records as a table (and JSON), for the job's owner.
table=$(as_user egpuctl usage "$j") || fail "egpuctl usage $j failed: $table"
say "egpuctl usage $j:"$'\n'"$table"
grep -Eq "^$j\.0 +n1 +[0-9]+ +30 " <<<"$table" && grep -Eq "^$j\.0 +n2 +[0-9]+ +30 " <<<"$table" &&
  grep -Eq "^$j\.batch +n1 .*1 agent restart" <<<"$table" || fail "egpuctl usage $j: $table"
as_user egpuctl --json usage "$j" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["job"] == int(sys.argv[1]) and d["dropped"] == 0, d
steps = sorted((r["step"], r["node"]) for r in d["records"])
want = sorted([(sys.argv[1] + ".0", "n1"), (sys.argv[1] + ".0", "n2"), (sys.argv[1] + ".batch", "n1")])
assert steps == want, steps
assert all(r["device_s"] > 0 for r in d["records"] if r["step"].endswith(".0")), d
' "$j" || fail "egpuctl --json usage $j"
ok "egpuctl usage $j: 3 records, as a table and as JSON"

# A job srun allocates itself ends as soon as srun hears its tasks are done:
# the record is in before slurmstepd tells it. The node in it is slurmd's
# name, whatever the job's environment says.
as_user env EGPU_NODE=forged srun -J "rec-$tag" -w n1 --gres=egpu:20 $(greedy "s-$tag" 1) >/dev/null 2>&1 ||
  fail "srun --gres=egpu:20 greedy failed"
solo=""
for _ in $(seq 60); do
  solo=$(sl sacct -n -P -X --name "rec-$tag" -o JobID,State,AdminComment)
  [[ $solo == *"|COMPLETED|egpu step="*".0 node=n1 gpu="*" units=20 "* ]] && break
  sleep 0.5
done
[[ $solo == *"|COMPLETED|egpu step="*".0 node=n1 gpu="*" units=20 "* ]] ||
  fail "the srun job's record is not in sacct: '$solo'"
ok "a job srun allocated itself: $solo"

# StepRecords=no in a node's egpu.conf (read by each slurmstepd): no record.
conf=$state/etc/egpu-n1.conf
cp "$conf" "$conf.records"
echo "StepRecords=no" >>"$conf"
as_user srun -J "norec-$tag" -w n1 --gres=egpu:20 $(greedy "q-$tag" 2) >/dev/null 2>&1 ||
  fail "srun --gres=egpu:20 greedy failed with StepRecords=no"
mv -f "$conf.records" "$conf"
norec=""
for _ in $(seq 60); do
  norec=$(sl sacct -n -P -X --name "norec-$tag" -o JobID,State,AdminComment)
  [[ $norec == *"|COMPLETED|"* ]] && break
  sleep 0.5
done
[[ $norec == *"|COMPLETED|" ]] || fail "with StepRecords=no the job's AdminComment is '$norec'"
ok "StepRecords=no: $norec (no record)"

# The tasks of an array: each task's records in its own comment only. (The
# task that keeps the array's id is "every task" to a bare scontrol JobId.)
arr=$(submit_as_user --array=0-2 --gres=egpu:10 --wrap "srun --gres=egpu:10 $(greedy "a-$tag" 1); sleep 4")
for _ in $(seq 120); do
  states=$(sl sacct -n -P -X -j "$arr" -o State | sort -u)
  [[ $states == COMPLETED ]] && break
  sleep 0.5
done
[[ $states == COMPLETED ]] || fail "array job $arr: $(sl sacct -n -P -X -j "$arr" -o JobID,State)"
for _ in $(seq 120); do
  tasks=$(sl sacct -n -P -X -j "$arr" -o JobIDRaw,AdminComment)
  [[ $(grep -c 'batch node=' <<<"$tasks") == 3 ]] && break
  sleep 0.5
done
python3 - "$tasks" <<'PY' || fail "array job $arr: records in the wrong tasks: $tasks"
import sys
lines = [l for l in sys.argv[1].splitlines() if l]
assert len(lines) == 3, lines
for line in lines:
    raw, comment = line.split("|", 1)
    steps = sorted(p.split(" ")[1] for p in comment.split("; "))
    assert steps == ["step=%s.0" % raw, "step=%s.batch" % raw], (raw, steps)
PY
ok "array job $arr: each of its 3 tasks has its own step 0 and batch records, no other's"
# `srun` as the user with environment VAR=VALUE... (one step of job NAME-$tag on
# n1), whose step record must reach that job's own AdminComment; WHAT names
# the case.
srun_keeps_record() {
  local name=$1 what=$2; shift 2
  as_user env "$@" srun -J "$name-$tag" -w n1 --gres=egpu:10 $(greedy "$name-g-$tag" 1) \
    >/dev/null 2>&1 || fail "srun with $what failed"
  local got
  for _ in $(seq 60); do
    got=$(sl sacct -n -P -X --name "$name-$tag" -o JobID,State,AdminComment)
    [[ $got == *"|COMPLETED|egpu step="*".0 node=n1 "* ]] && break
    sleep 0.5
  done
  [[ $got == *"|COMPLETED|egpu step=${got%%|*}.0 node=n1 "* ]] ||
    fail "a job run with $what lost its record: '$got'"
  ok "a job run with $what keeps its record"
}
# A job started from inside an array task inherits SLURM_ARRAY_JOB_ID and
# SLURM_ARRAY_TASK_ID, from which slurmstepd takes its steps' array ids: its
# records still go to it.
srun_keeps_record inarr "an array task's environment" SLURM_ARRAY_JOB_ID="$arr" SLURM_ARRAY_TASK_ID=0
# SLURM_ARRAY_TASK_ID alone, in a job that is no array: slurmstepd takes the
# job's own id for the array's, and the records went to a task that does
# not exist (lost, the step's usage in slurmd's log only).
srun_keeps_record forged "a forged SLURM_ARRAY_TASK_ID" SLURM_ARRAY_TASK_ID=1

# Nobody else writes records: the job's owner may not set AdminComment at
# all, and root's malformed request is refused whole. (No checkpoints from
# here on: the job's comment must stay empty.)
for n in 1 2; do cp -f "$state/etc/egpu-n$n.conf.saved" "$state/etc/egpu-n$n.conf"; done
other=$(submit_as_user --gres=egpu:10 --wrap 'sleep 300')
wait_state "$other" RUNNING
set +e
out=$(as_user scontrol update JobId="$other" AdminComment="egpu-append:egpu step=$other.0 node=n1 gpu=0 units=100 elapsed_s=1.000 device_s=1.000 share=1.000 mem_peak_mib=0 throttled_s=0.000" 2>&1)
rc=$?
out_root=$(sl scontrol update JobId="$other" AdminComment="egpu-append:hello" 2>&1)
rc_root=$?
set -e
[[ $rc -ne 0 ]] || fail "egpuuser could write an egpu record into job $other"
[[ $rc_root -ne 0 ]] || fail "a malformed append request was taken: $out_root"
[[ -z $(live_comment "$other") ]] || fail "job $other's AdminComment changed: $(live_comment "$other")"
# 24.11 hands job_submit's message to the client; 22.05 has no channel for it.
if [[ $release == 24.11 ]]; then
  grep -q "not an egpu record" <<<"$out_root" || fail "the refusal does not say why: $out_root"
fi
ok "egpuuser's record refused ($out); root's malformed request refused ($out_root)"

# A job whose name (or work directory) holds a line "AdminComment=<record>":
# egpuctl usage read scontrol's text, where those come on lines of their own
# before the real AdminComment, and showed the forged record as the job's.
forged="egpu step=999999.0 node=n1 gpu=0 units=100 elapsed_s=9.000 device_s=9.000 share=1.000 mem_peak_mib=0 throttled_s=0.000"
named=$(submit_as_user -J $'x\n   AdminComment='"$forged" --wrap 'sleep 300')
wait_state "$named" RUNNING
set +e
usage=$(as_user egpuctl usage "$named" 2>&1)
set -e
[[ $usage != *999999* ]] || fail "egpuctl usage $named shows a record its name forged: $usage"
grep -q "has no egpu records" <<<"$usage" || fail "egpuctl usage $named: $usage"
ok "a job named after a record has none in egpuctl usage ($usage)"
clean_jobs
