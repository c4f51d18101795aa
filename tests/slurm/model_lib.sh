# shellcheck shell=bash disable=SC2154 # build, work, actual: from lib.sh and the test
# Helpers of the tests that hold Slurm's placements against the cluster
# simulator (sourced after lib.sh and ensure_testbed). The test writes
# $work/nodes.csv and $work/tasks.csv, fills the array `actual` with Slurm's
# placements ("task,node,gpus", in order) and defines job_label I.

sim=$build/tools/clustersim/egpu-clustersim
if [[ ! -x $sim ]]; then
  grep -q '^EGPU_CLUSTERSIM:BOOL=OFF' "$build/CMakeCache.txt" 2>/dev/null &&
    skip "the build has no cluster simulator (-DEGPU_CLUSTERSIM=OFF)"
  fail "$sim is missing: build the tree first"
fi

# What the model's POLICY does with the same tasks, one "task,node,gpus" a line.
predict() { # POLICY
  "$sim" --nodes "$work/nodes.csv" --tasks "$work/tasks.csv" --place-in-order --policies "$1" |
    tail -n +2
}

# Slurm placed every job where POLICY says.
expect_model() { # POLICY
  local expected i
  mapfile -t expected < <(predict "$1")
  [[ ${#expected[@]} == "${#actual[@]}" ]] || fail "egpu-clustersim printed ${#expected[@]} placements"
  for i in "${!actual[@]}"; do
    [[ ${expected[i]} == "${actual[i]}" ]] ||
      fail "job $i ($(job_label "$i")): Slurm chose ${actual[i]#*,}, the model ($1) says ${expected[i]#*,}"
  done
}

# POLICY would have placed them otherwise: the sequence tells the two apart.
expect_not_model() { # POLICY MESSAGE
  local other
  mapfile -t other < <(predict "$1")
  [[ ${other[*]} != "${actual[*]}" ]] || fail "$2"
}
