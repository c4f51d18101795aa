# tests/gpu/memory_cases.sh: case (g) of tests/gpu/validate, graph memory
# under the shim. The driver backs a graph's memory nodes (here a
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
# ----------------------------------------------------------- (g) graph memory
# What validate provides (a missing one stops the run here; every other
# variable is this file's, so shellcheck can tell when one is never set):
# shellcheck disable=SC2154
: "${work:?}" "${memprobe:?}" "${#pid_of[@]}"

graph_memory_case() {
  local id quota size big j status=ok why="" launched trimmed reserved child
  id=$(create 121 10)
  ctl --json show "$id" >"$work/gm.show" 2>/dev/null || echo '{}' >"$work/gm.show"
  quota=$(json_get "$work/gm.show" memory_limit_bytes 0)
  if [[ $id == "?" || ! $quota =~ ^[0-9]+$ || $quota -eq 0 ]]; then
    row --case "graph memory counted as the driver's pool" --status error \
      --notes "no instance with a memory quota to run in: $(cat "$work/create-121.err" 2>/dev/null)"
    remove 121
    return
  fi
  size=$((quota * 6 / 10 / 2097152 * 2097152))  # 2 MiB granules
  big=$((quota * 3 / 2))
  say "(g) graph memory: a captured ${size}-byte allocation, then a ${big}-byte graph, quota $quota"
  start gm 121 -- "$memprobe" graph-pool "$size" "$big"
  wait "${pid_of[gm]}" || why="memory-probe failed: $(tail -n 3 "$work/gm.progress" 2>/dev/null | tr '\n' ' '); "
  unset "pid_of[gm]"
  remove 121
  j=$work/gm.json
  reserved=$(json_get "$j" graphs.reserved 0)
  launched=$(json_get "$j" graphs.launched.free 0)
  trimmed=$(json_get "$j" graphs.trimmed.free 0)
  expect() {  # expect WHAT GOT WANTED
    [[ $2 == "$3" ]] || { status=off; why+="$1 $2, wanted $3; "; }
  }
  expect "launch:" "$(json_get "$j" graphs.launch '?')" CUDA_SUCCESS
  ((reserved >= size)) || { status=off; why+="pool $reserved bytes after the launch, under the $size allocated; "; }
  expect "free beside the pool:" "$launched" "$((quota - reserved))"
  expect "relaunch (mapped already):" "$(json_get "$j" graphs.relaunch '?')" CUDA_SUCCESS
  expect "an allocation of $size beside the pool:" "$(json_get "$j" graphs.alloc_beside_pool '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "a second graph from the pool:" "$(json_get "$j" graphs.second_launch '?')" CUDA_SUCCESS
  expect "free after the trim:" "$trimmed" "$quota"
  expect "an allocation after the trim:" "$(json_get "$j" graphs.alloc_after_trim '?')" CUDA_SUCCESS
  expect "the graph of $big:" "$(json_get "$j" graphs.big_launch '?')" CUDA_ERROR_OUT_OF_MEMORY
  expect "its upload:" "$(json_get "$j" graphs.big_upload '?')" CUDA_ERROR_OUT_OF_MEMORY
  child=$(json_get "$j" graphs.child '?')
  if [[ $child == CUDA_SUCCESS ]]; then
    expect "the graph nesting it:" "$(json_get "$j" graphs.child_launch '?')" CUDA_ERROR_OUT_OF_MEMORY
  else
    why+="CUDA refused memory nodes in a child graph ($child); "
  fi
  expect "the pool after them:" "$(json_get "$j" graphs.big_reserved '?')" 0
  expect "free after the context's reset:" "$(json_get "$j" graphs.after_reset.free '?')" "$quota"
  [[ $why == *"memory-probe failed"* && $status == ok ]] && status=error
  row --case "graph memory counted as the driver's pool" --status "$status" \
    --notes "${why}quota $quota; captured $size, the driver's pool then $reserved (cuDeviceGetGraphMemAttribute), $(json_get "$j" graphs.second_reserved '?') after a second graph; cuMemGetInfo free $launched beside it, $trimmed after cuDeviceGraphMemTrim"
}
