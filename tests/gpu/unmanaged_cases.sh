# tests/gpu/unmanaged_cases.sh: case (h) of tests/gpu/validate, a process
# that uses the GPU without the shim. A user (nobody) owns an instance; its
# greedy workload runs twice at once, with the shim (attached: it must run
# to its end) and with LD_PRELOAD empty (the agent must kill it, within its
# 2 s grace and a few scans). On a real GPU the notes also say whether the
# driver holds /dev/nvidia0 open and maps it, which is what the agent looks
# for (UnmanagedProcesses=, GpuDeviceFiles=).
# Sourced by validate; it uses validate's helpers (say, start, create,
# remove, ctl, row, json_get) and the settings checked in the line below;
# not run on its own.
# shellcheck shell=bash
# What validate provides (a missing one stops the run here):
# shellcheck disable=SC2154
: "${work:?}" "${greedy:?}" "${seconds:?}" "${device_files:?}" "${shim:?}" "${sock:?}" "${#pid_of[@]}"

# device_use PID: "open N, mapped M" for the GPU's device file in PID.
device_use() {
  local file=${device_files//%d/0} open=0 mapped=0 fd
  for fd in /proc/"$1"/fd/*; do
    [[ $(readlink "$fd" 2>/dev/null) == "$file" ]] && open=$((open + 1))
  done
  mapped=$(grep -c -F " $file" "/proc/$1/maps" 2>/dev/null || true)
  echo "open ${open}, mapped ${mapped:-0}"
}

unmanaged_case() {
  local name="a process without the shim is killed" user=65534 job=81
  if [[ $(id -u) -ne 0 ]] || ! command -v setpriv >/dev/null; then
    row --case "$name" --status skipped --notes "needs root and setpriv (runs a job as nobody)"
    return 0
  fi
  # What nobody must reach: else the loader skips the preload unsaid, and the
  # row would fault the agent for a folder's mode.
  if ! setpriv --reuid="$user" --regid="$user" --clear-groups \
    test -r "$shim" -a -x "$greedy" -a -w "$sock" 2>/dev/null; then
    row --case "$name" --status skipped \
      --notes "nobody cannot read the shim, run greedy or reach the agent's socket here"
    return 0
  fi
  say "(h) nobody's greedy with and without the shim, one instance"
  if ! ctl create --job "$job" --step 0 --gpu 0 --units 50 --uid "$user" --gid "$user" \
    >/dev/null 2>"$work/create-$job.err"; then
    row --case "$name" --status error --notes "no instance: $(cat "$work/create-$job.err")"
    return 0
  fi
  local as_nobody=(setpriv --reuid="$user" --regid="$user" --clear-groups)
  # shellcheck disable=SC2046
  start unm-shim "$job" -- "${as_nobody[@]}" "$greedy" --duration-s $((seconds + 8)) \
    $(greedy_args) --label shimmed
  # Attached first: a shimmed process seen twice between its cuInit and its
  # attach, while its user's streak runs, would be judged unattached.
  local _
  for _ in $(seq 300); do
    ctl --json show "$job.0" >"$work/unmanaged.show" 2>/dev/null &&
      [[ $(json_get "$work/unmanaged.show" processes 0) -ge 1 ]] && break
    sleep 0.2
  done
  # shellcheck disable=SC2046
  start unm-none "$job" LD_PRELOAD= -- "${as_nobody[@]}" "$greedy" --duration-s $((seconds + 8)) \
    $(greedy_args) --label unshimmed
  local t0=$EPOCHREALTIME use_shim="" use_none="" pid
  sleep 2
  for pid in $(pgrep -u "$user" -x greedy); do
    if grep -q -F libegpu-shim "/proc/$pid/maps" 2>/dev/null; then
      use_shim=$(device_use "$pid")
    else
      use_none=$(device_use "$pid")
    fi
  done
  local none_rc=0 shim_rc=0
  wait "${pid_of[unm-none]}" || none_rc=$?
  local killed_after
  killed_after=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  wait "${pid_of[unm-shim]}" || shim_rc=$?
  unset "pid_of[unm-none]" "pid_of[unm-shim]"
  ctl --json status >"$work/unmanaged.status" 2>/dev/null || echo '{}' >"$work/unmanaged.status"
  remove "$job"
  local killed
  killed=$(json_get "$work/unmanaged.status" agent.unmanaged_processes.killed_total 0)
  local status=ok why=""
  [[ $none_rc -eq 137 ]] || { status=off; why+="the unshimmed one ended with $none_rc, not 137 (SIGKILL); "; }
  [[ $shim_rc -eq 0 ]] || { status=off; why+="the shimmed one ended with $shim_rc; "; }
  [[ $killed -ge 1 ]] || { status=off; why+="agent killed_total $killed; "; }
  row --case "$name" --status "$status" \
    --notes "${why}unshimmed killed after ${killed_after} s (rc $none_rc), shimmed rc $shim_rc; device file ${device_files//%d/0} in the shimmed: ${use_shim:-not seen}, in the unshimmed: ${use_none:-not seen}; agent killed_total $killed"
}
