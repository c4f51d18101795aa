#!/usr/bin/env bash
# Hostile tenants (issue 10), end to end: a job of the unprivileged egpuuser
# whose task clears the flags of every descriptor egpu gave it, floods and
# shuts its wake channel, truncates every file it can (its instance page) and
# holds 200 connections to the agent, beside an honest egpu:50 job of another
# user on the same GPU. The agent keeps serving (status answers, the GPU's
# heartbeat advances), repairs the page, and the honest job keeps at least
# its share. A task of that user that unsets LD_PRELOAD is killed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/enforce_lib.sh"
[[ -x $state/bin/hostile-tenant ]] || skip "hostile-tenant not built"

go=$out_dir/go-$tag
secs=300 # a bound: the test stops the workloads
h=$(submit --gres=egpu:50 --wrap "$(gate "$go")exec $(greedy h50-$tag $secs)")
x=$(submit_as_user --gres=egpu:50 --wrap "$(gate "$go")hostile-tenant x50-$tag $secs")
for j in $h $x; do wait_state "$j" RUNNING; wait_instances "$j" 1; done
gh=$(job_gpus "$h"); gx=$(job_gpus "$x")
[[ ${gh%%:*} == "${gx%%:*}" ]] || fail "placement: honest -> $gh, hostile -> $gx (expected one GPU)"
touch "$go"

# The attack comes after 200 kernels (about 0.2 s of device time).
for _ in $(seq 100); do
  grep -q '"files_truncated"' "$out_dir/$x.out" 2>/dev/null && break
  sleep 0.2
done
attack=$(grep -h '"files_truncated"' "$out_dir/$x.out" 2>/dev/null) || fail "the hostile task did not attack"
say "the attack: $attack"
python3 -c '
import json, sys
a = json.loads(sys.argv[1])
sys.exit(0 if a["fds_cleared"] >= 1 and a["channels_shut"] >= 1 and a["files_truncated"] >= 1 else 1)
' "$attack" || fail "the hostile task found nothing to attack: $attack"
sleep 1
shares=$(measure_shares 4 "h50-$tag" "x50-$tag")
sh=$(share_of "h50-$tag" <<<"$shares"); sx=$(share_of "x50-$tag" <<<"$shares")
say "device time over 4 s after the attack: honest egpu:50 $sh%, hostile egpu:50 $sx%"
python3 -c "import sys; sys.exit(0 if float('$sh') >= 47 else 1)" ||
  fail "the honest egpu:50 job got $sh% of its GPU beside the hostile one"

# The agent serves: status answers, and the GPU page's heartbeat advances.
heartbeat_advances() { # GPU
  python3 - "$state/run/agent-n1/gpu$1" <<'PY'
import struct, sys, time
def beat():
    with open(sys.argv[1], "rb") as f:
        f.seek(64)  # GpuPage::heartbeat_ns (core/shm/pages.h)
        return struct.unpack("<q", f.read(8))[0]
first = beat()
for _ in range(400):  # 20 s: for a stalled agent, not a measure
    time.sleep(0.05)
    if beat() != first:
        sys.exit(0)
sys.exit(1)
PY
}
timeout 60 "$root/scripts/testbed" --slurm "$release" --build "$build" exec egpuctl status >/dev/null ||
  fail "egpuctl status does not answer after the attack"
agent_running || fail "the node agent exited"
heartbeat_advances "${gh%%:*}" || fail "the heartbeat of GPU ${gh%%:*} stands still"
grep -q "truncated its page; the page was replaced" "$state/log/agent-n1.out" ||
  fail "the agent did not notice the truncated page (log: $state/log/agent-n1.out)"
ok "the agent serves (status answers, heartbeat advances) and replaced the truncated page"

# A task that unsets LD_PRELOAD reaches its GPU without the shim, outside
# its share and quota: the agent kills it (UnmanagedProcesses=kill, the
# default) and says why; the job's script goes on.
e=$(submit_as_user --gres=egpu:10 --wrap "env -u LD_PRELOAD $(greedy e10-$tag $secs); echo \"greedy ended: \$?\"")
wait_state "$e" COMPLETED 120
grep -q "greedy ended: 137" "$out_dir/$e.out" ||
  fail "the task without the shim was not killed: $(cat "$out_dir/$e.out")"
grep -q "uses the GPU without the egpu shim.*: killed" "$state/log/agent-n1.out" ||
  fail "the agent did not say why it killed the task (log: $state/log/agent-n1.out)"
ok "a task without the shim was killed ($(grep -o 'process [0-9]* ([^)]*) of uid [0-9]*' "$state/log/agent-n1.out" | tail -n 1))"

stop_workloads --batch "$h"
ok "honest $sh% beside the hostile job ($sx%: its own shim's page is no longer the agent's)"
clean_jobs
