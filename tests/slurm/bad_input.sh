#!/usr/bin/env bash
# Requests that can never be right are refused at submission (sbatch exits
# non-zero, nothing is queued) with a message that says why: zero units and
# egpu named twice (job_submit/egpu), an unknown --egpu-mode and an --egpu-mem larger than
# any GPU of the cluster (the SPANK plugin, when it is configured).
source "$(dirname "$0")/lib.sh"
ensure_testbed
refused() { # MESSAGE_PATTERN SBATCH_ARGS...
  local pattern=$1 msg rc
  shift
  set +e
  msg=$(sl sbatch -o /dev/null --chdir /tmp "$@" --wrap true 2>&1)
  rc=$?
  set -e
  say "sbatch $*: rc=$rc: $msg"
  [[ $rc -ne 0 ]] || fail "sbatch $* was accepted"
  grep -q "$pattern" <<<"$msg" || fail "no clear message for $*"
  [[ -z $(sl squeue -h -o %i) ]] || fail "a job was queued"
}
refused "0 egpu units is invalid" --gres=egpu:0
ok "egpu:0 refused"
# Slurm would allocate only the last entry and refuse every srun of the job.
refused "names egpu more than once; Slurm would allocate only the last entry" --gres=egpu:v100:10,egpu:v100:20
refused "names egpu more than once" --gres=egpu:10,gpu:1,egpu:20
ok "egpu named twice in one --gres refused"
[[ -f $state/plugins/spank_egpu.so ]] || skip "spank_egpu.so not built: --egpu-* options do not exist"
refused "egpu-mode must be burst, cap or lend, got 'fast'" --gres=egpu:10 --egpu-mode=fast
refused "egpu-mem=1PB is more than a GPU of this cluster has" --gres=egpu:10 --egpu-mem=1PB
refused "egpu-mem=lots: size 'lots' does not start with a number" --gres=egpu:10 --egpu-mem=lots
# Slurm's --mem reads a bare number as megabytes; bytes would fail the job later.
refused "egpu-mem=16000 has no unit: give one, e.g. 16000M or 16000G" --gres=egpu:10 --egpu-mem=16000
ok "--egpu-mode=fast, --egpu-mem=1PB, --egpu-mem=lots and --egpu-mem=16000 refused"
refused "egpu-slo=p101:5ms: the percentile 'p101' is out of range" --gres=egpu:10 --egpu-slo=p101:5ms
refused "egpu-slo=p99:0ms: the latency target '0ms' is below 1ms" --gres=egpu:10 --egpu-slo=p99:0ms
refused "egpu-slo needs burst mode: cap never goes above its share" --gres=egpu:10 --egpu-slo=p99:40ms --egpu-mode=cap
refused "egpu-slo and --egpu-mode=lend do not go together" --gres=egpu:10 --egpu-slo=p99:40ms --egpu-mode=lend
ok "--egpu-slo=p101:5ms, p99:0ms, and an objective with cap or lend refused"

# Wrong only for the step's share (checked on the node): the job fails with
# the message in its output; it is not requeued and the node is not drained
# (a failing SPANK plugin stack in slurmstepd would do both).
j=$(submit --gres=egpu:10 --egpu-mem=12G --wrap 'echo RAN')
for _ in $(seq 240); do [[ $(job_field "$j" JobState) == FAILED ]] && break; sleep 0.5; done
say "egpu:10 --egpu-mem=12G: $(job_field "$j" JobState), output: $(head -n 1 "$out_dir/$j.out")"
[[ $(job_field "$j" JobState) == FAILED && $(job_field "$j" Restarts) == 0 ]] ||
  fail "job $j is $(job_field "$j" JobState) (restarts $(job_field "$j" Restarts)), expected FAILED once"
grep -q "more than this step's share of GPU" "$out_dir/$j.out" || fail "no message in the job's output"
! grep -q '^RAN' "$out_dir/$j.out" || fail "the job ran"
# Idle once the job has completed there (a busy host may still show it
# completing); a drain is the failure, at once.
for _ in $(seq 240); do
  state=$(sl sinfo -h -n n1 -o %t)
  [[ $state == idle* || $state == drain* || $state == drng* ]] && break
  sleep 0.5
done
[[ $state == idle* ]] || fail "node n1 is $state"
ok "--egpu-mem above the step's share: job FAILED with a message, node n1 still idle"

# An egpu option on a job without egpu does nothing: the job runs, and its
# output says so instead of nothing.
j=$(submit --egpu-mem=1G --wrap 'echo RAN')
wait_state "$j" COMPLETED
grep -q '^RAN' "$out_dir/$j.out" || fail "job $j did not run: $(cat "$out_dir/$j.out")"
grep -q "egpu: warning: --egpu-mem given to a step without egpu units" "$out_dir/$j.out" ||
  fail "job $j's output does not say its --egpu-mem was ignored: $(cat "$out_dir/$j.out")"
ok "--egpu-mem without egpu: the job runs with a warning"
clean_jobs
