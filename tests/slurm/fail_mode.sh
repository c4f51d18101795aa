#!/usr/bin/env bash
# No node agent on the node. FailMode=closed: an egpu step fails at once with
# a message saying why (srun and batch), the node stays up. FailMode=open:
# the step runs, unenforced, and its output says so. Never a hang: every
# wait is bounded. Jobs without egpu are not affected either way.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

conf=$state/etc/egpu-n1.conf
cp "$conf" "$out_dir/egpu-n1.conf.$tag"
restore() {
  cp "$out_dir/egpu-n1.conf.$tag" "$conf"
  tb restart agent n1 >/dev/null || echo "fail_mode: could not restart the agent" >&2
}
trap restore EXIT
set_fail_mode() { sed -i '/^FailMode=/d' "$conf"; echo "FailMode=$1" >>"$conf"; }
tb stop-agent n1
! agent_running || fail "the agent still runs"

bounded() { timeout 60 "$@"; } # a hang fails the test instead of ctest's timeout

set_fail_mode closed
set +e
msg=$(bounded "$root/scripts/testbed" --slurm "$release" exec srun --chdir /tmp --gres=egpu:10 echo RAN 2>&1); rc=$?
set -e
say "FailMode=closed, srun --gres=egpu:10: rc=$rc: $msg"
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "srun did not fail (rc $rc)"
! grep -q '^RAN' <<<"$msg" || fail "the step ran unenforced"
grep -q "no egpu node agent answers" <<<"$msg" && grep -q "FailMode=closed" <<<"$msg" || fail "no clear message"
j=$(submit --gres=egpu:10 --wrap 'echo RAN')
for _ in $(seq 60); do [[ $(job_field "$j" JobState) == FAILED ]] && break; sleep 0.5; done
[[ $(job_field "$j" JobState) == FAILED ]] || fail "batch job $j is $(job_field "$j" JobState), expected FAILED"
[[ $(job_field "$j" Restarts) == 0 ]] || fail "batch job $j was requeued"
grep -q "no egpu node agent answers.*FailMode=closed" "$out_dir/$j.out" || fail "no message in the job's output: $(cat "$out_dir/$j.out")"
! grep -q '^RAN' "$out_dir/$j.out" || fail "batch job $j ran unenforced"
plain=$(bounded "$root/scripts/testbed" --slurm "$release" exec srun --chdir /tmp echo PLAIN 2>&1) || fail "a job without egpu failed: $plain"
[[ $(sl sinfo -h -n n1 -o %t) == idle* ]] || fail "node n1 is $(sl sinfo -h -n n1 -o %t)"
ok "FailMode=closed: srun and batch refused with a message, job without egpu runs, node stays idle"

set_fail_mode open
set +e
read -ra workload <<<"$(greedy "open-$tag" 1)"
msg=$(bounded "$root/scripts/testbed" --slurm "$release" exec srun --chdir /tmp --gres=egpu:10 "${workload[@]}" 2>&1); rc=$?
set -e
say "FailMode=open, srun --gres=egpu:10 greedy: rc=$rc: $(grep -v '^{' <<<"$msg")"
[[ $rc -eq 0 ]] || fail "the step failed: $msg"
grep -q "WITHOUT GPU share enforcement (FailMode=open)" <<<"$msg" || fail "no warning in the step's output"
# Unenforced: the lone egpu:10 workload is not gated (it runs at full speed).
read -r dt wall < <(python3 -c 'import json,sys; j=next(json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")); print(j["device_time_s"], "%.2f" % j["wall_s"])' "$msg")
python3 -c "import sys; sys.exit(0 if $dt >= 0.9 * $wall else 1)" || fail "the workload got ${dt} s of device time in $wall s"
j=$(submit --gres=egpu:10 --wrap 'echo RAN')
wait_state "$j" COMPLETED 30
grep -q '^RAN' "$out_dir/$j.out" && grep -q "WITHOUT GPU share enforcement" "$out_dir/$j.out" ||
  fail "batch job output: $(cat "$out_dir/$j.out")"
ok "FailMode=open: srun and batch run unenforced (alone: ${dt} s device time in $wall s) and say so"

trap - EXIT
restore
agent_running || fail "the agent did not come back"
j=$(submit --gres=egpu:10 --wrap "$(greedy back-$tag 1)")
wait_state "$j" COMPLETED 30
! grep -q "WITHOUT GPU share enforcement" "$out_dir/$j.out" || fail "still unenforced after the agent came back"
ok "the agent is back; egpu steps are enforced again"
clean_jobs
