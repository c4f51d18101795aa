#!/usr/bin/env bash
# --gres=egpu:0 is refused at submission with a message that says why.
source "$(dirname "$0")/lib.sh"
ensure_testbed
set +e
msg=$(sl sbatch -o /dev/null --gres=egpu:0 --wrap true 2>&1)
rc=$?
set -e
say "sbatch --gres=egpu:0: rc=$rc: $msg"
[[ $rc -ne 0 ]] || fail "egpu:0 was accepted"
grep -q "0 egpu units is invalid" <<<"$msg" || fail "no clear message"
[[ -z $(sl squeue -h -o %i) ]] || fail "a job was queued"
ok "egpu:0 refused"
