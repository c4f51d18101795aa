#!/usr/bin/env bash
# More than 100 egpu units on a node. 24.11 with MULTIPLE_SHARING_GRES_PJ: the
# job spans GPUs and every task learns its units per GPU (EGPU_UNITS, in
# EGPU_GPU_INDICES order). 22.05 (no such option): a clear error at submission.
source "$(dirname "$0")/lib.sh"
ensure_testbed
if [[ $release == 22.05 ]]; then
  set +e
  msg=$(sl sbatch -o /dev/null --gres=egpu:150 --wrap true 2>&1); rc=$?
  set -e
  say "sbatch --gres=egpu:150: rc=$rc: $msg"
  [[ $rc -ne 0 ]] || fail "egpu:150 was accepted (it would pend forever)"
  grep -q "exceed one GPU" <<<"$msg" || fail "no clear message"
  ok "egpu:150 refused at submission"
  exit 0
fi
script='env | grep -E "^(CUDA_VISIBLE_DEVICES|EGPU_GPU_INDICES|EGPU_UNITS|EGPU_MEM_QUOTA)=" | sort'
j=$(submit -n2 --gres=egpu:150 --wrap "$script")
out=$(job_output "$j")
echo "$out"
idx=$(env_of EGPU_GPU_INDICES <<<"$out")
units=$(env_of EGPU_UNITS <<<"$out")
[[ $idx =~ ^[0-9]+,[0-9]+$ ]] || fail "EGPU_GPU_INDICES='$idx' (expected two GPUs)"
[[ $(env_of CUDA_VISIBLE_DEVICES <<<"$out") == "$idx" ]] || fail "CUDA_VISIBLE_DEVICES != EGPU_GPU_INDICES"
IFS=, read -r u1 u2 <<<"$units"
[[ $u1 =~ ^[0-9]+$ && $u2 =~ ^[0-9]+$ ]] || fail "EGPU_UNITS='$units'"
(( u1 + u2 == 150 && u1 <= 100 && u2 <= 100 )) || fail "EGPU_UNITS=$units does not split 150 over two GPUs"
ok "batch: GPUs $idx, units $units"
# Tasks of a job that is a single srun step (no batch step holding the GPUs).
tasks=$(sl srun -n2 --gres=egpu:150 sh -c 'echo TASK $SLURM_PROCID $EGPU_GPU_INDICES $EGPU_UNITS $CUDA_VISIBLE_DEVICES' | sort)
echo "$tasks"
[[ $(grep -c '^TASK' <<<"$tasks") -eq 2 ]] || fail "expected 2 tasks"
while read -r _ rank tidx tunits tcvd; do
  [[ $tidx =~ ^[0-9]+,[0-9]+$ && $tcvd == "$tidx" ]] || fail "task $rank: GPUs '$tidx', CUDA_VISIBLE_DEVICES '$tcvd'"
  IFS=, read -r t1 t2 <<<"$tunits"
  (( t1 + t2 == 150 && t1 <= 100 && t2 <= 100 )) || fail "task $rank: EGPU_UNITS=$tunits"
done <<<"$(grep '^TASK' <<<"$tasks")"
ok "both tasks of an srun job see their two GPUs and units per GPU"
clean_jobs
