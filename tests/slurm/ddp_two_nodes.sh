#!/usr/bin/env bash
# Two ranks of ddp-like on two nodes, one per node at 50 units of a GPU,
# each beside a greedy co-tenant at 50: every all-reduce waits for the other
# node's rank (simulated collectives meet across nodes, SIMGPU_FABRIC). The
# step is a gang on both nodes (the testbed's multi-node agents run
# GangPeriodMs=20 on the clock the simulated nodes share), so its ranks hold
# their GPUs at the same time: its iteration rate is most of what its share
# allows (the rate alone on whole GPUs times 0.5), and the co-tenants keep
# theirs. Bars are those of enforce.Gang on a loaded host (ratio >= 0.6,
# co-tenants >= 44% of the device time used); sliced independently the ratio
# is about 0.15 (scripts/bench --only gang).
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=2
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"
[[ -x $state/bin/ddp-like ]] || skip "ddp-like is not built"
grep -q "^GangClock=shared" "$state/etc/egpu-n2.conf" || fail "the two-node testbed runs without gangs"

comm=$((tag % 100000 + 1))
ddp() { # COMM ITERATIONS LABEL
  echo "ddp-like --iters-per-us 1 --ranks 2 --comm $1 --iterations $2 --duration-s 0 --device 0 --label $3"
}
# The slowest rank's iterations per second, from the ranks' JSON summaries.
rate_of() { # JOB
  python3 -c '
import json, sys
rates = [json.loads(l)["throughput"] for l in open(sys.argv[1]) if l.startswith("{") and "\"ddp-like\"" in l]
if len(rates) != 2: sys.exit("expected 2 rank summaries, got %d" % len(rates))
print("%.2f" % min(rates))' "$out_dir/$1.out"
}

# Alone, on whole GPUs: the rate the share is measured against.
ja=$(submit_as_user -N2 --gres=egpu:100 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:100 $(ddp "$comm" 150 alone-$tag)")
job_output "$ja" 120 >/dev/null
alone=$(rate_of "$ja") || fail "job $ja: $(cat "$out_dir/$ja.out")"
ok "alone on two whole GPUs: $alone iterations/s"

# Shared: greedy co-tenants at 50 on both nodes, then the ranks at 50.
jg=$(submit_as_user -N2 --gres=egpu:50 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:50 $(greedy g-$tag 300)")
wait_state "$jg" RUNNING
# 400 iterations at the share's rate take ~14 s: the 4 s measurement below
# starts as soon as both run, and ends long before.
jd=$(submit_as_user -N2 --gres=egpu:50 --wrap "srun -N2 --ntasks-per-node=1 --gres=egpu:50 $(ddp $((comm + 1)) 400 ddp-$tag)")
wait_state "$jd" RUNNING
cotenant() { # NODE: the co-tenant's part of the device time used on NODE's GPU
  local shares
  shares=$(shm=/egpu-tb${release/./}-$1 measure_shares 4 "g-$tag" "ddp-$tag")
  split_of_used "$shares" "g-$tag" "ddp-$tag" | share_of "g-$tag"
}
g1=$(cotenant n1)
g2=$(cotenant n2)
job_output "$jd" 240 >/dev/null
shared=$(rate_of "$jd") || fail "job $jd: $(cat "$out_dir/$jd.out")"
ratio=$(python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) / (float(sys.argv[2]) * 0.5)))' "$shared" "$alone")
say "ddp-like at 50 units per rank: $shared iterations/s, ratio $ratio of its share's rate; co-tenants $g1% (n1), $g2% (n2)"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.6 else 1)' "$ratio" ||
  fail "the two-node gang reached $ratio of its share's iteration rate (bar 0.6)"
for g in "$g1" "$g2"; do
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 44 else 1)' "$g" ||
    fail "a co-tenant of the gang kept $g% of the device time used (bar 44%)"
done
ok "two-node gang: ratio $ratio (>= 0.6), co-tenants $g1% and $g2% (>= 44%)"
stop_workloads "$jg"
clean_jobs
