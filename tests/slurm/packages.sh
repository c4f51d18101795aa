#!/usr/bin/env bash
# The testbed installed from the Debian packages (scripts/package of this
# build tree, then `testbed start --packages`): the agent, egpuctl, the shim
# and this release's plugins it runs are the packages' files (stripped, so
# not the tree's), and they work together: an egpu job's process attaches
# to the agent through the packaged shim and the job completes.
source "$(dirname "$0")/lib.sh"
for f in nodeagent/egpu-agentd shim/libegpu-shim.so tests/workloads/bin/greedy tests/simgpu/lib/libcuda.so.1; do
  [[ -e $build/$f ]] || skip "$f is not built"
done
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
"$root/scripts/package" --build "$build" --no-build --out "$debs" >/dev/null 2>"$debs/package.log" ||
  { cat "$debs/package.log" >&2; fail "scripts/package failed"; }
tb start --fresh --packages "$debs"
grep -q 'packages=1' "$state/testbed.info" || fail "the testbed does not say it runs from packages"

# What runs is the packages' (and differs from the tree's: stripped).
lib=$state/pkgroot/usr/lib/x86_64-linux-gnu
same() { # INSTALLED PACKAGED TREE
  cmp -s "$1" "$2" || fail "$1 is not the package's $(basename "$2")"
  ! cmp -s "$1" "$3" || fail "$1 is the build tree's $(basename "$3"), not a packaged (stripped) one"
}
same "$state/plugins/egpu-agentd" "$state/pkgroot/usr/sbin/egpu-agentd" "$build/nodeagent/egpu-agentd"
same "$state/bin/egpuctl" "$state/pkgroot/usr/bin/egpuctl" "$build/nodeagent/egpuctl"
same "$state/plugins/libegpu-shim.so" "$lib/egpu/libegpu-shim.so" "$build/shim/libegpu-shim.so"
same "$state/plugins/gres_egpu.so" "$lib/slurm-wlm/gres_egpu.so" "$build/gres/$release/gres_egpu.so"
same "$state/plugins/job_submit_egpu.so" "$lib/slurm-wlm/job_submit_egpu.so" \
  "$build/gres/$release/job_submit_egpu.so"
tree_spank=$build/spank/$release/spank_egpu.so
[[ -f $tree_spank ]] || tree_spank=$build/spank/spank_egpu.so
same "$state/plugins/spank_egpu.so" "$lib/slurm-wlm/spank_egpu.so" "$tree_spank"
agent_pid=$(cat "$state/run/agent-n1.pid")
[[ $(tr '\0' ' ' <"/proc/$agent_pid/cmdline") == *"$state/plugins/egpu-agentd"* ]] ||
  fail "the agent of n1 is not $state/plugins/egpu-agentd"
ok "agent, egpuctl, shim and the $release plugins are the packages' files"

# They work together: the job's process attaches to the agent (processes 1).
job=$(submit --gres=egpu:30 --wrap "exec greedy --iters-per-us 1 --duration-s 60 --label pkg")
wait_state "$job" RUNNING
attached=""
for _ in $(seq 240); do
  attached=$(sl egpuctl status --json 2>/dev/null | python3 -c '
import json, sys
job = int(sys.argv[1])
print(" ".join("%s:%d:%d" % (i["step"], i["units"], i.get("processes", 0))
               for g in json.load(sys.stdin)["gpus"] for i in g["instances"] if i["job"] == job))' "$job" || true)
  [[ $attached == *:30:1* ]] && break
  sleep 0.25
done
[[ $attached == *:30:1* ]] || fail "job $job's instance has no attached process: '$attached'"
ok "an egpu:30 job's process attached through the packaged shim ($attached)"
sl scancel -s TERM --batch "$job"
wait_state "$job" COMPLETED 30
ok "the job completed"
clean_jobs
