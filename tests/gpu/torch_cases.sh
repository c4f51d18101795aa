# tests/gpu/torch_cases.sh: cases (d), (d') and (e) of tests/gpu/validate, the
# PyTorch programs (torch_mlp.py, torch_serve.py). Sourced by validate, whose
# helpers (say, start, finish, create, remove, ctl, row, json_get, shares,
# pct, agent_view) and settings ($work, $here, $seconds, $simulate, $greedy)
# it uses; not run on its own.
# shellcheck shell=bash
# ------------------------------------------------------------------- (d) torch
torch_ok=0
# What validate provides (a missing one stops the run here; every other
# variable is this file's, so shellcheck can tell when one is never set):
# shellcheck disable=SC2154
: "${work:?}" "${here:?}" "${seconds:?}" "${simulate:?}" "${greedy:?}" "${#pid_of[@]}"
if (( ! simulate )) && timeout 120 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  torch_ok=1
fi
if (( ! torch_ok )); then
  # The torch programs still parse (nothing more can be checked without torch).
  if py -c 'import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]' \
    "$here/torch_mlp.py" "$here/torch_serve.py" 2>"$work/torch-parse.err"; then
    # On a real GPU the torch questions are what the run is for: no torch
    # is an error, not a skip.
    row --case "torch MLP training, torch serving" --status "$( ((simulate)) && echo skipped || echo error)" \
      --notes "$( ((simulate)) && echo "simulated driver" || echo "python3 ($(command -v python3)) has no torch with CUDA"); both programs parse"
  else
    row --case "torch programs" --status error --notes "$(tail -n 1 "$work/torch-parse.err")"
  fi
elif ! have_time $((4 * seconds + 60)); then
  skip_row "torch MLP training"
else
  torch_args=(--duration-s "$seconds" --warmup-s 3 --progress)
  say "(d) torch MLP alone, without egpu"
  start t-plain - -- python3 "$here/torch_mlp.py" "${torch_args[@]}" --label plain
  finish t-plain || true
  say "(d) torch MLP alone in its instance (50 units, burst)"
  create 61 50 >/dev/null
  start t-alone 61 EGPU_DEBUG=1 -- python3 "$here/torch_mlp.py" "${torch_args[@]}" --label alone
  finish t-alone || true
  remove 61
  plain=$(json_get "$work/t-plain.json" it_per_s 0)
  alone=$(json_get "$work/t-alone.json" it_per_s 0)
  # torch (job $2) at 30 against the driver-API greedy (job $3) at 70 (what
  # the GPU's own time-slicing would not give); $1 names the run, the rest
  # are torch_mlp.py options. Leaves $work/$1.shares and $work/$1.charged
  # (the agent's charges as "torch=P,greedy=P", percent of wall time).
  torch_vs_greedy() {
    local name=$1 torch_job=$2 greedy_job=$3
    shift 3
    create "$torch_job" 30 >/dev/null
    create "$greedy_job" 70 >/dev/null
    start "$name" "$torch_job" EGPU_DEBUG=1 -- python3 "$here/torch_mlp.py" \
      --duration-s $((seconds + 3)) --warmup-s 3 --progress --label "$name" "$@"
    # The greedy starts once torch counts (after its start-up and warm-up).
    for _ in $(seq 600); do
      grep -q 'iterations=' "$work/$name.progress" 2>/dev/null && break
      kill -0 "${pid_of[$name]}" 2>/dev/null || break
      sleep 0.2
    done
    # shellcheck disable=SC2046
    start "$name-greedy" "$greedy_job" -- "$greedy" --duration-s "$seconds" $(greedy_args) \
      --label greedy
    view=$(agent_view "$name" "torch=$torch_job" "greedy=$greedy_job")
    report charged --pairs "$work/$name.status0" "$work/$name.status1" "torch=$torch_job" \
      "greedy=$greedy_job" >"$work/$name.charged"
    finish "$name" "$name-greedy" || true
    remove "$torch_job" "$greedy_job"
    shares "torch:0:$work/$name.progress" "greedy:1000:$work/$name-greedy.progress" \
      >"$work/$name.shares"
  }
  # torch_rows NAME CASE RATE_ALONE LAUNCH_COUNTER: the share row of a
  # torch_vs_greedy run (torch's share = its rate shared over RATE_ALONE; an
  # error when the shim's LAUNCH_COUNTER saw nothing: torch ran unmanaged),
  # and the row that compares what the agent charged each instance with the
  # share each measured (the over-charge the trim of charges to wall time
  # would now hide: the charges must follow the work, within the tolerance).
  torch_rows() {
    local name=$1 label=$2 rate_alone=$3 counter=$4 rate share seen status=""
    rate=$(json_get "$work/$name.shares" programs.torch.rate 0)
    share=$(awk -v s="$rate" -v a="$rate_alone" 'BEGIN { if (a > 0) print s / a; else print "" }')
    seen=$(json_get "$work/$name.json" "shim.calls.$counter" 0)
    (( seen > 0 )) || status=error
    row --case "$label" --targets "torch=30,greedy=70" ${status:+--status "$status"} \
      --achieved "torch=$(pct "$share"),greedy=$(pct "$(json_get "$work/$name.shares" programs.greedy.fraction '')")" \
      --notes "torch $rate it/s shared vs $rate_alone alone (share = the ratio); $(window_note "$work/$name.shares"); $view; $counter via shim: $seen"
    row --case "$label: agent's charges vs work done" \
      --targets "torch=$(pct "$share"),greedy=$(pct "$(json_get "$work/$name.shares" programs.greedy.fraction '')")" \
      --achieved "$(cat "$work/$name.charged")" \
      --notes "targets: the shares measured from the work done; achieved: device time the agent charged, % of wall over the run's middle"
  }
  say "(d) torch MLP at 30 vs driver-API greedy at 70"
  torch_vs_greedy t-shared 71 72
  row --case "torch MLP alone" --status info \
    --notes "$plain it/s without egpu, $alone it/s in its instance alone ($(awk -v p="$plain" -v a="$alone" 'BEGIN { if (p > 0) printf "%.3f", a / p; else print "?" }') of it); launches via shim: $(json_get "$work/t-alone.json" shim.calls.launch_wrappers_total '?')"
  torch_rows t-shared "torch MLP vs greedy 30/70" "$alone" launch_wrappers_total

  # (d') the same training step captured once as a CUDA graph and replayed
  # (torch.compile "reduce-overhead"): capture must work under the shim and
  # each replay be gated and charged like the eager step. Its rate alone is
  # the replay's own (graphs launch less, so they run faster alone).
  if have_time $((2 * seconds + 60)); then
    say "(d') torch MLP as a CUDA graph: alone in its instance, then at 30 vs greedy at 70"
    create 63 50 >/dev/null
    start t-graph-alone 63 EGPU_DEBUG=1 -- python3 "$here/torch_mlp.py" "${torch_args[@]}" \
      --label graph-alone --cuda-graph
    finish t-graph-alone || true
    remove 63
    graph_alone=$(json_get "$work/t-graph-alone.json" it_per_s 0)
    torch_vs_greedy t-graph 73 74 --cuda-graph
    if [[ $(json_get "$work/t-graph.json" cuda_graph false) != true ]]; then
      row --case "torch MLP as a CUDA graph vs greedy 30/70" --status error \
        --notes "no summary from the graph run (capture failed?): $(tail -n 2 "$work/t-graph.progress" 2>/dev/null | tr '\n' ' ')"
    else
      torch_rows t-graph "torch MLP as a CUDA graph vs greedy 30/70" "$graph_alone" graph_launches_total
    fi
  else
    skip_row "torch MLP as a CUDA graph vs greedy 30/70"
  fi
fi

# ------------------------------------------------------------------ (e) serving
# A PyTorch server (20 units, burst) with open-loop Poisson requests that need
# about 40% of the GPU, beside PyTorch training (80 units, lend): with a p99
# objective the server borrows from the trainer (issue 12); without one it
# has its 20 units and its queue grows. The objective is 10 x the service
# time alone, at least 20 ms: slices must fit in it.
serving_case() {
  say "(e) torch serving: service time alone"
  start s-cal - -- python3 "$here/torch_serve.py" --calibrate --duration-s 3 --warmup-s 2 --label calibrate
  finish s-cal || true
  local service rate objective serve_s=$((seconds + 4)) control serve_id
  service=$(json_get "$work/s-cal.json" service_ms 0)
  if ! awk -v s="$service" 'BEGIN { exit !(s > 0) }'; then
    row --case "torch serving" --status error --notes "calibration failed: $(tail -n 1 "$work/s-cal.progress" 2>/dev/null)"
    return
  fi
  rate=$(awk -v s="$service" 'BEGIN { printf "%.1f", 400 / s }')
  objective=$(awk -v s="$service" 'BEGIN { o = 10 * s; if (o < 20) o = 20; printf "%d", o + 0.999 }')
  for control in slo none; do
    say "(e) torch serving at $rate req/s (service ${service} ms), objective ${objective} ms: $control"
    serve_id=$(create 85 20)
    ctl create --job 86 --step 0 --gpu 0 --units 80 --mode lend >/dev/null 2>"$work/create-86.err" ||
      say "egpuctl create --job 86 --mode lend failed: $(cat "$work/create-86.err")"
    if [[ $control == slo && $serve_id != "?" ]]; then
      ctl slo "$serve_id" "p99:${objective}ms" >/dev/null 2>"$work/slo.err" ||
        say "egpuctl slo failed: $(cat "$work/slo.err")"
    fi
    start "s-$control" 85 -- python3 "$here/torch_serve.py" --rate "$rate" --objective-ms "$objective" \
      --duration-s "$serve_s" --warmup-s 6 --progress --label "serve-$control"
    start "tr-$control" 86 -- python3 "$here/torch_mlp.py" --duration-s "$serve_s" --warmup-s 6 \
      --progress --label "train-$control"
    # The snapshot of the loan: halfway through the counted part (the first
    # progress line comes a second into it, after torch's start-up).
    for _ in $(seq 600); do
      grep -q 'requests=' "$work/s-$control.progress" 2>/dev/null && break
      kill -0 "${pid_of[s-$control]}" 2>/dev/null || break
      sleep 0.2
    done
    sleep $((serve_s / 2))
    ctl --json show "$serve_id" >"$work/s-$control.show" 2>/dev/null || echo '{}' >"$work/s-$control.show"
    finish "s-$control" "tr-$control" || true
    remove 85 86
  done
  local train_plain att train_rate notes f borrowed
  train_plain=$(json_get "$work/t-plain.json" it_per_s 0)
  for control in slo none; do
    f=$work/s-$control.json
    att=$(json_get "$f" attainment '')
    train_rate=$(json_get "$work/tr-$control.json" it_per_s 0)
    borrowed=$(json_get "$work/s-$control.show" borrowed_units 0)
    notes="p99 $(json_get "$f" p99_ms '?') ms (objective $objective ms), $(json_get "$f" windows_met '?')/$(json_get "$f" windows_judged '?') 1 s windows met, $(json_get "$f" requests '?') requests ($(json_get "$f" unserved '?') unserved), $(json_get "$f" reports_accepted 0) reported to egpu; borrowed $borrowed units mid-run; training $train_rate it/s ($(awk -v t="$train_rate" -v p="$train_plain" 'BEGIN { if (p > 0) printf "%.2f", t / p; else print "?" }') of its rate alone)"
    if [[ $control == none ]]; then
      row --case "torch serving without objective" --status info --notes "$notes"
    elif (( $(json_get "$f" reports_accepted 0) == 0 )); then
      # The objective is judged on the reports: none counted, nothing judged.
      row --case "torch serving p99 objective, training lends" --status error \
        --notes "egpu counted no latency report (shim not attached?); $notes"
    elif ! awk -v b="$borrowed" 'BEGIN { exit !(b > 0) }'; then
      # Its load needs about twice its 20 units: an objective met without
      # borrowing means the load or the control is not what this case is.
      row --case "torch serving p99 objective, training lends" --status error \
        --notes "the server borrowed nothing mid-run; $notes"
    else
      row --case "torch serving p99 objective, training lends" --targets "windows_met=100" \
        --achieved "windows_met=$(pct "$att")" --notes "$notes"
    fi
  done
}
# (validate runs serving_case after the NCCL cases: see there.)
