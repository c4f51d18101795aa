# tests/gpu/nccl_cases.sh: case (f) of tests/gpu/validate, NCCL under the shim:
# nccl_allreduce.cu (built here with nvcc against the toolkit's NCCL, else
# torch's pip NCCL) and torch_ddp.py (torch.distributed, NCCL backend, DDP).
# Sourced by validate (after torch_cases.sh, which sets torch_ok); it uses
# validate's helpers (say, start, finish, create, remove, ctl, row, skip_row,
# have_time, json_get, report, pct, shares, agent_view, greedy_args,
# window_note, py) and the settings checked in the line below; not run on
# its own.
#
# One GPU, one rank per process: NCCL refuses two ranks on one GPU of one
# host ("Duplicate GPU detected"), so each rank gets its own NCCL_HOSTID and
# they talk as two hosts, over the socket transport on loopback. That proves
# NCCL's kernels are gated and charged, that its init does not hang in the
# shim's cuMemCreate hook, and how its memory is counted against the driver;
# it cannot exercise the same-host paths (P2P, SHM, NVLS) nor cuMem
# export/import between ranks, which only two GPUs (or two hosts) can.
# shellcheck shell=bash
# ------------------------------------------------------------------- (f) NCCL
nccl_bin=""
# What validate provides (a missing one stops the run here; every other
# variable is this file's, so shellcheck can tell when one is never set):
# shellcheck disable=SC2154
: "${work:?}" "${here:?}" "${seconds:?}" "${simulate:?}" "${nvcc:?}" "${compute_cap:?}" \
  "${cuda:?}" "${greedy:?}" "${torch_ok:?}" "${#pid_of[@]}"

# CUDA_MODULE_LOADING=EAGER: NCCL's kernels load with the context, before
# the "before" memory reading (module memory is the driver's, not the
# shim's to count: loaded lazily it would land between the readings).
nccl_env=(NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN NCCL_CUMEM_ENABLE=1
          CUDA_MODULE_LOADING=EAGER)
nccl_scope="one GPU: each rank its own NCCL_HOSTID, socket transport on loopback; not the same-host P2P/SHM/NVLS paths nor cuMem export/import between ranks"

# nccl_locate: sets nccl_include, nccl_lib and nccl_from, or nccl_missing.
nccl_locate() {
  local arch pair d
  arch=$(uname -m)
  for pair in "$cuda/include:$cuda/lib" "$cuda/include:$cuda/lib64" \
    "$cuda/targets/$arch-linux/include:$cuda/targets/$arch-linux/lib" "/usr/include:/usr/lib/$arch-linux-gnu"; do
    if [[ -f ${pair%%:*}/nccl.h && -e ${pair#*:}/libnccl.so.2 ]]; then
      nccl_include=${pair%%:*} nccl_lib=${pair#*:} nccl_from="NCCL at ${pair#*:}"
      return 0
    fi
  done
  d=$(py -c 'import os, nvidia
for base in nvidia.__path__:
    d = os.path.join(base, "nccl")
    if os.path.isfile(os.path.join(d, "lib", "libnccl.so.2")):
        print(d)
        break' 2>/dev/null) || d=""
  if [[ -n $d && -f $d/include/nccl.h ]]; then
    nccl_include=$d/include nccl_lib=$d/lib nccl_from="torch's pip NCCL ($d)"
    return 0
  fi
  nccl_missing="NCCL: no nccl.h + libnccl.so.2 in $cuda (include, lib, lib64), /usr, nor python3's nvidia.nccl (torch's pip NCCL)"
  [[ -n $d ]] && nccl_missing="NCCL's nccl.h: torch's pip NCCL at $d has the library but no include/nccl.h"
  return 1
}

# nccl_build: 0 built ($nccl_bin), 1 nvcc or NCCL missing, 2 nvcc failed; $nccl_note says which.
nccl_build() {
  local cc=${compute_cap/./}
  if [[ ! -x $nvcc ]]; then nccl_note="no nvcc at $nvcc"; return 1; fi
  if ! nccl_locate; then nccl_note="no $nccl_missing"; return 1; fi
  say "(f) nvcc: nccl_allreduce.cu for sm_$cc against $nccl_from"
  if timeout 300 "$nvcc" -O2 -std=c++17 -gencode "arch=compute_$cc,code=[sm_$cc,compute_$cc]" \
    -I"$nccl_include" -o "$work/nccl_allreduce" "$here/nccl_allreduce.cu" -L"$nccl_lib" \
    -l:libnccl.so.2 -lcuda -ldl -Xlinker -rpath="$nccl_lib" >"$work/nvcc-nccl.log" 2>&1; then
    nccl_bin=$work/nccl_allreduce
    nccl_note="nccl_allreduce.cu compiled against $nccl_from"
    return 0
  fi
  nccl_note="nvcc failed on nccl_allreduce.cu: $(tail -n 3 "$work/nvcc-nccl.log" | tr '\n' ' ')"
  return 2
}

ddp_parses() {
  py -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$here/torch_ddp.py" \
    2>"$work/ddp-parse.err" && echo "torch_ddp.py parses" ||
    echo "torch_ddp.py does not parse: $(tail -n 1 "$work/ddp-parse.err")"
}

# nccl_counting NAME...: waits (60 s at most) until each counts (a progress line) or ends.
nccl_counting() {
  local name
  for name in "$@"; do
    for _ in $(seq 300); do
      grep -q 'iterations=' "$work/$name.progress" 2>/dev/null && break
      kill -0 "${pid_of[$name]}" 2>/dev/null || break
      sleep 0.2
    done
  done
}
# nccl_why NAME...: for each that printed no summary, its own error line (or its last line).
nccl_why() {
  local name line out=""
  for name in "$@"; do
    json_get "$work/$name.json" workload >/dev/null 2>&1 && continue
    line=$(grep -h -E '(nccl_allreduce|torch_ddp)\[rank|Error' "$work/$name.progress" 2>/dev/null |
      tail -n 1 | cut -d' ' -f2-)
    [[ -n $line ]] || line=$(tail -n 1 "$work/$name.progress" 2>/dev/null | cut -d' ' -f2-)
    out+="${out:+; }$name: ${line:-no output}"
  done
  echo "$out"
}
# mib BYTES [SIGN]: in MiB, "?" when unknown; SIGN "+" shows it as a change.
mib() { awk -v b="$1" -v f="%${2:-}.1f" 'BEGIN { if (b == "") print "?"; else printf f, b / 1048576 }'; }
# mem_delta FILE SIDE: memory.SIDE_used_after - memory.SIDE_used_before, SIDE egpu or driver
# ("" when one is unknown).
mem_delta() {
  local a b
  a=$(json_get "$1" "memory.$2_used_after" '') b=$(json_get "$1" "memory.$2_used_before" '')
  if [[ -n $a && -n $b ]]; then echo $((a - b)); else echo ""; fi
}
# mem_within EGPU DRIVER: |EGPU - DRIVER| <= max(4 MiB, 2% of DRIVER).
mem_within() {
  awk -v e="$1" -v d="$2" 'BEGIN { if (e == "" || d == "") exit 1
    t = 0.02 * (d < 0 ? -d : d); if (t < 4194304) t = 4194304
    x = e - d; exit !((x < 0 ? -x : x) <= t) }'
}
calls() { json_get "$work/$1.json" "shim.calls.$2" 0; }

# nccl_ranks NAME JOB0 JOB1 DURATION WARMUP: the two ranks of nccl_allreduce, NAME-r0/-r1.
nccl_ranks() {
  local name=$1 duration=$4 warmup=$5 r
  local -a jobs=("$2" "$3")
  for r in 0 1; do
    start "$name-r$r" "${jobs[r]}" EGPU_DEBUG=1 NCCL_HOSTID="egpu-validate-$name-r$r" "${nccl_env[@]}" -- \
      "$nccl_bin" --rank "$r" --nranks 2 --id-file "$work/$name.id" --mib 32 --duration-s "$duration" \
      --warmup-s "$warmup" --timeout-s 30 --progress --label "$name-r$r"
  done
}
# nccl_beside_greedy NAME GREEDY_JOB NAME=JOB: the greedy (NAME-g) beside NAME-r0 once that
# counts; the agent's view of the run in NAME.agent and its charges ("NAME=PCT,greedy=PCT",
# percent of wall time) in NAME.charged. No greedy when NAME-r0 never counted.
nccl_beside_greedy() {
  echo "agent charged ? (no greedy run: the ranks never counted)" >"$work/$1.agent"
  echo "${3%%=*}=?,greedy=?" >"$work/$1.charged"
  grep -q 'iterations=' "$work/$1-r0.progress" 2>/dev/null || return 0
  # shellcheck disable=SC2046
  start "$1-g" "$2" -- "$greedy" --duration-s "$seconds" $(greedy_args) --label greedy
  agent_view "$1" "$3" "greedy=$2" >"$work/$1.agent"
  report charged --pairs "$work/$1.status0" "$work/$1.status1" "$3" "greedy=$2" >"$work/$1.charged"
  finish "$1-g" || true
}
# ddp_ranks NAME JOB DURATION: the two ranks of torch_ddp.py, both in JOB's instance ('-': no egpu).
ddp_ranks() {
  local name=$1 r
  for r in 0 1; do
    start "$name-r$r" "$2" EGPU_DEBUG=1 NCCL_HOSTID="egpu-validate-$name-r$r" "${nccl_env[@]}" \
      RANK="$r" WORLD_SIZE=2 -- python3 "$here/torch_ddp.py" --work-dir "$work" --run-id "$name" \
      --duration-s "$3" --warmup-s 2 --timeout-s 30 --progress --label "$name-r$r"
  done
}

# nccl_memory_row CASE EGPU DRIVER CUMEMCREATE_CALLS FIGURES NVML_STATUS: ok when what egpu
# counted is within max(4 MiB, 2%) of what the driver did, and NCCL used cuMemCreate.
nccl_memory_row() {
  local status=error why=""
  if [[ -z $3 ]]; then
    # No per-process figure (NVML missing, or this pid not in its list: a
    # PID namespace): nothing to compare, which is not egpu's error.
    status=info
    why="the driver's view is missing ($6); "
  elif (($4 == 0)); then
    why="NCCL made no cuMemCreate call (NCCL_CUMEM_ENABLE=1): the VMM path was not exercised; "
  elif mem_within "$2" "$3"; then
    status=ok
  fi
  row --case "$1" --status "$status" \
    --notes "${why}init + 2 all-reduces of 32 MiB took: $5; within max(4 MiB, 2%) wanted; cuMemCreate calls $4"
}

# (i) both ranks in one instance (50) beside the greedy (50): no hang, right
# results, launches through the shim and charged, memory counted.
nccl_one_instance() {
  local id ok=1 r f note charged status inst driver e0 e1 b0 b1 d0 d1
  id=$(create 101 50)
  create 102 50 >/dev/null
  say "(f) NCCL all-reduce: 2 ranks in one instance (50) beside greedy (50)"
  nccl_ranks nf 101 101 $((seconds + 3)) 2
  nccl_counting nf-r0 nf-r1
  ctl --json show "$id" >"$work/nf.show" 2>/dev/null || echo '{}' >"$work/nf.show"
  nccl_beside_greedy nf 102 "nccl=101"
  finish nf-r0 nf-r1 || ok=0
  remove 101 102
  if ((!ok)); then
    row --case "NCCL all-reduce, 2 ranks in one instance vs greedy 50/50" --status error \
      --notes "failed or hung: $(nccl_why nf-r0 nf-r1)"
    return
  fi
  shares "nccl:0:$work/nf-r0.progress" "greedy:1000:$work/nf-g.progress" >"$work/nf.shares"
  note=""
  for r in 0 1; do
    f=$work/nf-r$r.json
    note+="${note:+, }r$r $(json_get "$f" iterations '?') it, $(json_get "$f" it_per_s '?') it/s (init $(json_get "$f" init_s '?') s)"
  done
  row --case "NCCL all-reduce, 2 ranks in one instance vs greedy 50/50" --status ok \
    --notes "no hang, every result checked: $note; NCCL $(json_get "$work/nf-r0.json" nccl_version '?'); $nccl_scope"
  # Gated and charged: the launches went through the shim's wrappers (NCCL
  # finds them with cuGetProcAddress) and the agent charged the instance.
  charged=$(sed -n 's/^nccl=\([^,]*\),.*/\1/p' "$work/nf.charged")
  status=error
  (($(calls nf-r0 launch_wrappers_total) > 0 && $(calls nf-r1 launch_wrappers_total) > 0)) &&
    awk -v c="$charged" 'BEGIN { exit !(c ~ /^[0-9]+([.][0-9]+)?$/ && c + 0 > 0) }' && status=ok
  row --case "NCCL launches gated and charged (EGPU_DEBUG=1)" --status "$status" \
    --notes "launch wrappers r0 $(calls nf-r0 launch_wrappers_total) / r1 $(calls nf-r1 launch_wrappers_total) (cuLaunchKernelEx $(calls nf-r0 cuLaunchKernelEx)), cuGetProcAddress $(calls nf-r0 proc_address_total); $(cat "$work/nf.agent"); greedy $(pct "$(json_get "$work/nf.shares" programs.greedy.fraction '')")% of the GPU, nccl $(json_get "$work/nf.shares" programs.nccl.rate '?') it/s; $(window_note "$work/nf.shares")"
  # Memory: cuMemGetInfo answers for the instance, both ranks together, so
  # its growth is set against the sum of the driver's per-process deltas.
  e0=$(json_get "$work/nf-r0.json" memory.egpu_used_after 0) e1=$(json_get "$work/nf-r1.json" memory.egpu_used_after 0)
  b0=$(json_get "$work/nf-r0.json" memory.egpu_used_before 0) b1=$(json_get "$work/nf-r1.json" memory.egpu_used_before 0)
  inst=$(((e0 > e1 ? e0 : e1) - (b0 < b1 ? b0 : b1)))
  d0=$(mem_delta "$work/nf-r0.json" driver) d1=$(mem_delta "$work/nf-r1.json" driver)
  driver=""
  if [[ -n $d0 && -n $d1 ]]; then driver=$((d0 + d1)); fi
  nccl_memory_row "NCCL memory, 2 ranks in one instance: egpu vs driver" "$inst" "$driver" \
    "$(($(calls nf-r0 vmm_creates_total) + $(calls nf-r1 vmm_creates_total)))" \
    "egpu $(mib "$inst" +) MiB for the instance (cuMemGetInfo inside it; the agent showed $(mib "$(json_get "$work/nf.show" memory_used_bytes '')") MiB in use), driver $(mib "$driver" +) MiB (NVML: r0 $(mib "$d0" +), r1 $(mib "$d1" +))" \
    "$(json_get "$work/nf-r0.json" memory.nvml '?')"
}

# (ii) the ranks in two instances (50 + 50): each rank's kernel spins until
# its peer's runs, whose launch waits for its own instance's slice: only the
# agent's drain limit ends the holder's turn. It must complete. Each rank is
# alone in its instance, so its memory is set against the driver's per rank.
nccl_two_instances() {
  local duration=$((seconds / 2 < 4 ? 4 : seconds / 2)) ok=1 rate base rel r f
  create 103 50 >/dev/null
  create 104 50 >/dev/null
  say "(f) NCCL all-reduce: the ranks in two instances (50 + 50)"
  nccl_ranks nt 103 104 "$duration" 1
  finish nt-r0 nt-r1 || ok=0
  remove 103 104
  if ((!ok)); then
    row --case "NCCL all-reduce, ranks in two instances (50 + 50)" --status error \
      --notes "failed or hung: $(nccl_why nt-r0 nt-r1)"
    return
  fi
  rate=$(json_get "$work/nt-r0.json" it_per_s 0)
  base=$(json_get "$work/nf-r0.json" it_per_s 0)
  rel=$(awk -v a="$rate" -v b="$base" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
  row --case "NCCL all-reduce, ranks in two instances (50 + 50)" --status info \
    --notes "no hang, every result checked: $rate it/s, $rel x the rate in one instance beside the greedy ($base it/s); each rank's kernel waits for its peer's, which waits for the other instance's slice: only the agent's drain limit hands the GPU over"
  for r in 0 1; do
    f=$work/nt-r$r.json
    nccl_memory_row "NCCL memory, rank $r alone in its instance: egpu vs driver" \
      "$(mem_delta "$f" egpu)" "$(mem_delta "$f" driver)" "$(calls "nt-r$r" vmm_creates_total)" \
      "egpu $(mib "$(mem_delta "$f" egpu)" +) MiB (cuMemGetInfo), driver $(mib "$(mem_delta "$f" driver)" +) MiB (NVML)" \
      "$(json_get "$f" memory.nvml '?')"
  done
}

# (iii) torch DDP, 2 ranks: alone without egpu, then in one instance (50)
# beside the greedy (50); its share is the rate shared over the rate alone,
# and the agent's charges are set against the shares the work measured.
ddp_case() {
  local alone rate share greedy_share notes status="" ok=1
  say "(f) torch DDP (NCCL), 2 ranks, without egpu"
  ddp_ranks nd-a - $((seconds - 2))
  finish nd-a-r0 nd-a-r1 || ok=0
  if ((!ok)); then
    row --case "torch DDP (NCCL) vs greedy 50/50" --status error \
      --notes "the run without egpu failed: $(nccl_why nd-a-r0 nd-a-r1)"
    return
  fi
  alone=$(json_get "$work/nd-a-r0.json" it_per_s 0)
  create 105 50 >/dev/null
  create 106 50 >/dev/null
  say "(f) torch DDP (NCCL), 2 ranks in one instance (50) beside greedy (50)"
  ddp_ranks nd-s 105 $((seconds + 2))
  nccl_counting nd-s-r0 nd-s-r1
  nccl_beside_greedy nd-s 106 "ddp=105"
  finish nd-s-r0 nd-s-r1 || ok=0
  remove 105 106
  if ((!ok)); then
    row --case "torch DDP (NCCL) vs greedy 50/50" --status error \
      --notes "failed or hung under egpu: $(nccl_why nd-s-r0 nd-s-r1)"
    return
  fi
  shares "ddp:0:$work/nd-s-r0.progress" "greedy:1000:$work/nd-s-g.progress" >"$work/nd-s.shares"
  rate=$(json_get "$work/nd-s.shares" programs.ddp.rate '')
  share=$(awk -v s="$rate" -v a="$alone" 'BEGIN { if (s != "" && a > 0) print s / a; else print "" }')
  greedy_share=$(pct "$(json_get "$work/nd-s.shares" programs.greedy.fraction '')")
  (($(calls nd-s-r0 launch_wrappers_total) > 0 && $(calls nd-s-r1 launch_wrappers_total) > 0)) || status=error
  notes="ddp ${rate:-?} it/s shared vs $alone alone without egpu (share = the ratio); greedy $greedy_share% of the GPU; $(window_note "$work/nd-s.shares"); $(cat "$work/nd-s.agent"); launch wrappers r0 $(calls nd-s-r0 launch_wrappers_total) / r1 $(calls nd-s-r1 launch_wrappers_total), cuMemCreate $(calls nd-s-r0 vmm_creates_total); NCCL $(json_get "$work/nd-s-r0.json" nccl_version '?'); $nccl_scope"
  # Over loopback sockets DDP waits on the network, and its NCCL kernels run
  # on while greedy holds the GPU: its rate does not follow its share, so
  # the row informs; the charges row below judges.
  row --case "torch DDP (NCCL) vs greedy 50/50" --status "${status:-info}" \
    --achieved "ddp=$(pct "$share")" --notes "$notes"
  row --case "torch DDP (NCCL) vs greedy 50/50: agent's charges vs work done" \
    --targets "ddp=$(pct "$share"),greedy=$greedy_share" --achieved "$(cat "$work/nd-s.charged")" \
    --notes "targets: the shares measured from the work done; achieved: device time the agent charged, % of wall over the run's middle"
}

# ------------------------------------------------------------------ the case
nccl_note=""
if ((simulate)); then
  # The NCCL program still compiles (when nvcc and NCCL are here) and the
  # DDP program parses: nothing more runs without NVIDIA's runtime.
  nccl_rc=0
  nccl_build || nccl_rc=$?
  if ((nccl_rc == 2)); then
    row --case "NCCL all-reduce program" --status error --notes "$nccl_note"
  else
    row --case "NCCL all-reduce, torch DDP (NCCL)" --status skipped \
      --notes "simulated driver: NCCL needs NVIDIA's runtime; ${nccl_note/#no /not compiled: no }; $(ddp_parses)"
  fi
else
  if ! nccl_build; then
    row --case "NCCL all-reduce program" --status error --notes "$nccl_note"
  else
    if have_time $((seconds + 30)); then nccl_one_instance
    else skip_row "NCCL all-reduce, 2 ranks in one instance vs greedy 50/50"; fi
    if have_time 30; then nccl_two_instances
    else skip_row "NCCL all-reduce, ranks in two instances (50 + 50)"; fi
  fi
  if ((!torch_ok)); then
    # The torch rows already say, as an error, that python3 has no torch.
    row --case "torch DDP (NCCL)" --status skipped --notes "python3 has no torch with CUDA; $(ddp_parses)"
  elif have_time $((2 * seconds + 60)); then
    ddp_case
  else
    skip_row "torch DDP (NCCL) vs greedy 50/50"
  fi
fi
