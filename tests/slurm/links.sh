#!/usr/bin/env bash
# Multi-GPU jobs land on NVLink-connected GPUs. On the V100 cube-mesh (DGX-1)
# topology, pairs are joined by 2, 1 or 0 NVLinks; four --gres=gpu:2 jobs on an
# empty node must each get a pair joined by 2 links (Slurm 24.11 picks 1-link
# pairs unless gres/egpu works around its inverted link sort).
source "$(dirname "$0")/lib.sh"
ensure_testbed
grep -q "v100-cubemesh8" "$state/testbed.info" || skip "needs the v100-cubemesh8 topology"
# NVLink counts of tests/data/topologies/v100-cubemesh8.xml (GPU i x GPU j).
links=(
  "-1 1 1 2 2 0 0 0" "1 -1 2 1 0 2 0 0" "1 2 -1 2 0 0 1 0" "2 1 2 -1 0 0 0 1"
  "2 0 0 0 -1 1 1 2" "0 2 0 0 1 -1 2 1" "0 0 1 0 1 2 -1 2" "0 0 0 1 2 1 2 -1")
link() { local row=(${links[$1]}); echo "${row[$2]}"; }
jobs=()
for i in 1 2 3 4; do jobs+=($(hold_job --gres=gpu:2)); done
for j in "${jobs[@]}"; do wait_state "$j" RUNNING; done
for j in "${jobs[@]}"; do
  read -r a b <<<"$(job_gpus "$j")"
  say "gpu:2 job $j -> GPUs $a,$b ($(link "$a" "$b") NVLinks)"
  [[ $(link "$a" "$b") -eq 2 ]] || fail "gpu:2 job $j got GPUs $a,$b joined by $(link "$a" "$b") NVLinks, not 2"
done
ok "every gpu:2 job got a 2-NVLink pair"
clean_jobs
