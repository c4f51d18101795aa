# tests/gpu/memory_cases.sh: case (g) of tests/gpu/validate, memory the
# driver keeps for a process beyond its live allocations, under the shim.
# Graph memory: the driver backs a graph's memory nodes (here a
# cuMemAllocAsync captured into a graph, freed in it) at launch from the
# process's graph pool and keeps that memory until cuDeviceGraphMemTrim:
# the instance must hold exactly the pool's size as the driver reports it,
# a relaunch (its memory stays mapped) and a second graph the pool's free
# part backs need no more, a plain allocation past the quota beside the
# pool is refused, and so is a graph larger than the quota (nested or not),
# before the driver backs it. On a real GPU this also answers whether the
# driver's figures move as the shim assumes.
# Sourced by validate; it uses validate's helpers (say, start, create,
# remove, ctl, row, json_get) and the settings checked in the line below;
# not run on its own.
# shellcheck shell=bash
# ------------------------------------------------- (g) memory the driver keeps
# What validate provides (a missing one stops the run here; every other
# variable is this file's, so shellcheck can tell when one is never set):
# shellcheck disable=SC2154
: "${work:?}" "${memprobe:?}" "${#pid_of[@]}"

# instance_quota JOB CASE: an instance of 10 units for JOB; its memory
# quota on stdout, or CASE's error row and false.
instance_quota() {
  local id quota
  id=$(create "$1" 10)
  ctl --json show "$id" >"$work/quota-$1.show" 2>/dev/null || echo '{}' >"$work/quota-$1.show"
  quota=$(json_get "$work/quota-$1.show" memory_limit_bytes 0)
  if [[ $id == "?" || ! $quota =~ ^[0-9]+$ || $quota -eq 0 ]]; then
    row --case "$2" --status error \
      --notes "no instance with a memory quota to run in: $(cat "$work/create-$1.err" 2>/dev/null)" >&2
    remove "$1"
    return 1
  fi
  echo "$quota"
}

# probe NAME JOB ARGS...: memory-probe in JOB's instance, which is then
# removed; a case's verdict starts here (case_status, case_why).
probe() {
  local name=$1 job=$2
  shift 2
  case_status=ok case_why=""
  start "$name" "$job" -- "$memprobe" "$@"
  wait "${pid_of[$name]}" ||
    case_why="memory-probe failed: $(tail -n 3 "$work/$name.progress" 2>/dev/null | tr '\n' ' '); "
  unset "pid_of[$name]"
  remove "$job"
}

# expect WHAT GOT WANTED: the case is off unless GOT is WANTED.
expect() {
  [[ $2 == "$3" ]] || { case_status=off; case_why+="$1 $2, wanted $3; "; }
}
# at_least WHAT GOT MIN
at_least() {
  (($2 >= $3)) || { case_status=off; case_why+="$1 $2, under $3; "; }
}
# verdict: error if the probe failed, else what expect found.
verdict() {
  if [[ $case_why == *"memory-probe failed"* && $case_status == ok ]]; then echo error; else echo "$case_status"; fi
}

graph_memory_case() {
  local name="graph memory counted as the driver's pool" quota size big j reserved child
  quota=$(instance_quota 121 "$name") || return 0
  size=$((quota * 6 / 10 / 2097152 * 2097152))  # 2 MiB granules
  big=$((quota * 3 / 2))
  say "(g) graph memory: a captured ${size}-byte allocation, then a ${big}-byte graph, quota $quota"
  probe gm 121 graph-pool "$size" "$big"
  j=$work/gm.json
  reserved=$(json_get "$j" graphs.reserved 0)
  expect "launch:" "$(json_get "$j" graphs.launch '?')" CUDA_SUCCESS
  at_least "the pool after the launch:" "$reserved" "$size"
  expect "free beside the pool:" "$(json_get "$j" graphs.launched.free '?')" "$((quota - reserved))"
  expect "relaunch (mapped already):" "$(json_get "$j" graphs.relaunch '?')" CUDA_SUCCESS
  expect "an allocation of $size beside the pool:" "$(json_get "$j" graphs.alloc_beside_pool '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "a second graph from the pool:" "$(json_get "$j" graphs.second_launch '?')" CUDA_SUCCESS
  expect "free after the trim:" "$(json_get "$j" graphs.trimmed.free '?')" "$quota"
  expect "an allocation after the trim:" "$(json_get "$j" graphs.alloc_after_trim '?')" CUDA_SUCCESS
  expect "the graph of $big:" "$(json_get "$j" graphs.big_launch '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "its upload:" "$(json_get "$j" graphs.big_upload '?')" CUDA_ERROR_OUT_OF_MEMORY
  child=$(json_get "$j" graphs.child '?')
  if [[ $child == CUDA_SUCCESS ]]; then
    expect "the graph nesting it:" "$(json_get "$j" graphs.child_launch '?')" CUDA_ERROR_OUT_OF_MEMORY
  else
    case_why+="CUDA refused memory nodes in a child graph ($child); "
  fi
  expect "the pool after them:" "$(json_get "$j" graphs.big_reserved '?')" 0
  expect "free after the context's reset:" "$(json_get "$j" graphs.after_reset.free '?')" "$quota"
  row --case "$name" --status "$(verdict)" \
    --notes "${case_why}quota $quota; captured $size, the driver's pool then $reserved (cuDeviceGetGraphMemAttribute), $(json_get "$j" graphs.second_reserved '?') after a second graph; cuMemGetInfo free $(json_get "$j" graphs.launched.free '?') beside it"
}

# Stream-ordered pools keep freed memory up to their release threshold
# (PyTorch's cudaMallocAsync backend: all of it) until trimmed, and at
# threshold 0 until a synchronisation: the instance must hold the pool's
# size as the driver reports it, an allocation from what the pool keeps
# needs no quota, one beside it past the quota is refused.
pool_memory_case() {
  local name="memory pools counted as what they keep" quota size big j reserved
  quota=$(instance_quota 122 "$name") || return 0
  size=$((quota * 6 / 10 / 2097152 * 2097152))
  big=$((quota * 3 / 2))
  say "(g) memory pools: a pool that keeps ${size} bytes, quota $quota"
  probe pm 122 pool-keep "$size" "$big"
  j=$work/pm.json
  reserved=$(json_get "$j" pools.reserved 0)
  expect "allocation:" "$(json_get "$j" pools.alloc '?')" CUDA_SUCCESS
  at_least "the pool after the free:" "$reserved" "$size"
  expect "free beside the pool:" "$(json_get "$j" pools.kept.free '?')" "$((quota - reserved))"
  expect "an allocation of $size beside the pool:" "$(json_get "$j" pools.alloc_beside_pool '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "one from what the pool keeps:" "$(json_get "$j" pools.realloc '?')" CUDA_SUCCESS
  expect "free after the trim:" "$(json_get "$j" pools.trimmed.free '?')" "$quota"
  expect "an allocation after the trim:" "$(json_get "$j" pools.alloc_after_trim '?')" CUDA_SUCCESS
  expect "free after a synchronisation at threshold 0:" "$(json_get "$j" pools.synced.free '?')" "$quota"
  expect "a pool allocation of $big:" "$(json_get "$j" pools.too_big '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "free after destroying a pool that kept $size:" "$(json_get "$j" pools.own_destroyed.free '?')" "$quota"
  expect "an allocation beside a destroyed pool's live one:" "$(json_get "$j" pools.alloc_beside_live '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "free after the context's reset:" "$(json_get "$j" pools.after_reset.free '?')" "$quota"
  row --case "$name" --status "$(verdict)" \
    --notes "${case_why}quota $quota; the pool kept $reserved of $size freed (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), cuMemGetInfo free $(json_get "$j" pools.kept.free '?') beside it, $(json_get "$j" pools.freed_unsynced.free '?') freed at threshold 0 before a synchronisation; without opportunistic reuse $(json_get "$j" pools.growth_rounds '?') rounds of $((big / 4)) took the pool to $(json_get "$j" pools.growth_reserved '?')"
}
