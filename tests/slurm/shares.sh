#!/usr/bin/env bash
# Enforced shares: egpu:30 and egpu:70 land on one GPU and ACHIEVE 30/70 (+-3
# pp) with two greedy workloads that would otherwise split the GPU evenly;
# egpu:50 goes to another GPU, where it is alone and may burst. Asserted on
# the simulated GPU's device time (ground truth) and on the workloads' own
# device_time_s; egpuctl status agrees with Slurm's placement.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"

go=$out_dir/go-$tag
secs=300 # a bound: the test stops the workloads
a=$(submit --gres=egpu:30 --wrap "$(gate "$go")exec $(greedy a30-$tag $secs)")
b=$(submit --gres=egpu:70 --wrap "$(gate "$go")exec $(greedy b70-$tag $secs)")
c=$(submit --gres=egpu:50 --wrap "$(gate "$go")exec $(greedy c50-$tag $secs)")
for j in $a $b $c; do wait_state "$j" RUNNING; done
ga=$(job_gpus "$a"); gb=$(job_gpus "$b"); gc=$(job_gpus "$c")
[[ ${ga%%:*} == "${gb%%:*}" && ${gc%%:*} != "${ga%%:*}" ]] || fail "placement: 30 -> $ga, 70 -> $gb, 50 -> $gc"
for j in $a $b $c; do
  g=$(job_gpus "$j")
  wait_instances "$j" 1
  read -r _ step gpu units _ <<<"$(agent_instances "$j")"
  [[ $step == batch && $gpu == "${g%%:*}" && $units == "${g##*:}" ]] ||
    fail "job $j: Slurm placed $g, the agent holds step $step on GPU $gpu with $units units"
done
ok "Slurm and the agent agree: 30 and 70 on GPU ${ga%%:*}, 50 on GPU ${gc%%:*}"

touch "$go"
shares=$(measure_shares 4 "a30-$tag" "b70-$tag" "c50-$tag")
split=$(split_of_used "$shares" "a30-$tag" "b70-$tag")
s30=$(share_of "a30-$tag" <<<"$split"); s70=$(share_of "b70-$tag" <<<"$split"); s50=$(share_of "c50-$tag" <<<"$shares")
say "device time over 4 s (simulated GPU): egpu:30 $s30%, egpu:70 $s70% of GPU ${ga%%:*}'s $(share_of busy <<<"$split")% busy; egpu:50 alone $s50% (GPU ${gc%%:*})"
assert_near "egpu:30's share of its GPU" "$s30" 30
assert_near "egpu:70's share of its GPU" "$s70" 70
# Burst mode is work-conserving: alone on its GPU, egpu:50 takes what is idle.
python3 -c "import sys; sys.exit(0 if float('$s50') >= 90 else 1)" || fail "egpu:50 alone got only $s50% (burst should use idle time)"

stop_workloads --batch "$a" "$b" "$c"
da=$(printf '%.3f' "$(workload_field "$out_dir/$a.out" "a30-$tag" device_time_s)")
db=$(printf '%.3f' "$(workload_field "$out_dir/$b.out" "b70-$tag" device_time_s)")
ratio=$(python3 -c "print('%.1f' % (100.0 * $da / ($da + $db)))")
say "workloads' own device time until stopped: egpu:30 ${da} s, egpu:70 ${db} s -> $ratio% / $(python3 -c "print('%.1f' % (100 - $ratio))")%"
assert_near "egpu:30's part of the device time both workloads measured" "$ratio" 30
ok "30/70 achieved: $s30/$s70 (ground truth), $ratio/$(python3 -c "print('%.1f' % (100 - $ratio))") (workloads)"
clean_jobs
