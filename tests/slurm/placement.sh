#!/usr/bin/env bash
# egpu:30 and egpu:70 share one GPU; egpu:50 goes to another; when every GPU
# is full the next egpu job pends with reason Resources (it is not rejected).
source "$(dirname "$0")/lib.sh"
ensure_testbed
gpus=$(sed -n 's/.*gpus=\([0-9]*\).*/\1/p' "$state/testbed.info")

a=$(hold_job --gres=egpu:30)
b=$(hold_job --gres=egpu:70)
c=$(hold_job --gres=egpu:50)
for j in $a $b $c; do wait_state "$j" RUNNING; done
ga=$(job_gpus "$a"); gb=$(job_gpus "$b"); gc=$(job_gpus "$c")
say "egpu:30 -> $ga, egpu:70 -> $gb, egpu:50 -> $gc"
[[ $ga =~ ^[0-9]+:30$ && $gb =~ ^[0-9]+:70$ && $gc =~ ^[0-9]+:50$ ]] || fail "unexpected allocations"
[[ ${ga%%:*} == "${gb%%:*}" ]] || fail "egpu:30 and egpu:70 are on different GPUs"
[[ ${gc%%:*} != "${ga%%:*}" ]] || fail "egpu:50 shares the full GPU"
ok "30+70 packed on GPU ${ga%%:*}, 50 on GPU ${gc%%:*}"

# Fill every GPU: the 50-unit GPU gets 50 more, the others 100 each.
fill=($(hold_job --gres=egpu:50))
for ((i = 2; i < gpus; i++)); do fill+=($(hold_job --gres=egpu:100)); done
for j in "${fill[@]}"; do wait_state "$j" RUNNING; done
extra=$(hold_job --gres=egpu:10)
wait_pending_reason "$extra" Resources 60
sleep 3 # a scheduling pass later it still pends, and was never rejected
[[ $(job_field "$extra" JobState) == PENDING ]] || fail "egpu:10 on a full node did not stay pending"
ok "egpu:10 pends (Resources) with all $gpus GPUs full"

# Freeing units lets it run on the freed GPU.
sl scancel "$a"
wait_state "$extra" RUNNING 30
ge=$(job_gpus "$extra")
[[ ${ge%%:*} == "${ga%%:*}" ]] || fail "egpu:10 ran on GPU ${ge%%:*}, expected the freed GPU ${ga%%:*}"
ok "egpu:10 runs on the freed GPU ${ge%%:*}"
clean_jobs
