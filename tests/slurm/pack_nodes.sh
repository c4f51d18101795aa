#!/usr/bin/env bash
# PackNodes=yes in the controller's egpu.conf: job_submit/egpu keeps each
# node's Slurm weight following its free egpu units (core/model/node_weight.h),
# so Slurm, which tries the lightest node first, puts a share on the node with
# the least left. On two nodes:
# - the weights follow egpu units allocated and GPUs held whole, and go back
#   when the jobs end;
# - an unpinned egpu job goes to the fuller node, where without PackNodes
#   Slurm's own choice is the other one (the control);
# - a bad value is refused with a message naming the line and changes nothing;
# - PackNodes=no puts slurm.conf's weights back.
# shellcheck disable=SC2034 # read by lib.sh (ensure_testbed)
testbed_nodes=2
source "$(dirname "$0")/lib.sh"
ensure_testbed
source "$(dirname "$0")/pack_lib.sh"

log=$state/log/slurmctld.log
gpus=$(sed -n 's/.*gpus=\([0-9]*\).*/\1/p' "$state/testbed.info")
cpus=$(sl scontrol -o show node n2 | grep -o 'CPUTot=[0-9]*' | cut -d= -f2)
[[ -n $gpus && -n $cpus && $cpus -ge 4 ]] || fail "cannot read the nodes' GPUs and CPUs"
units=$((gpus * 100))

node_of() { job_field "$1" NodeList; }

trap 'set_pack' EXIT
set_pack
wait_weight n1 1 "without PackNodes"
set_pack yes
wait_weight n1 "$(packed $units)" "with PackNodes=yes and no jobs"
wait_weight n2 "$(packed $units)" "with PackNodes=yes and no jobs"
ok "PackNodes=yes: idle nodes weigh $(packed $units) ($units egpu units free)"

# n2: 70 units of one GPU and a whole GPU; n1: no GPU work but all CPUs but
# two. Slurm's own choice, the first node by index and the fewest free CPUs
# (topology/tree, then cons_tres best fit), is n1 either way.
hold_job -w n2 -c 1 --gres=egpu:70 >/dev/null
hold_job -w n2 -c 1 --gres=gpu:1 >/dev/null
hold_job -w n1 -c $((cpus - 2)) >/dev/null
free2=$((units - 70 - 100))
wait_weight n2 "$(packed $free2)" "after egpu:70 and gpu:1 there"
wait_weight n1 "$(packed $units)" "with CPU jobs only"
ok "n2 weighs $(packed $free2) with 70 egpu units and a whole GPU taken"

packed_job=$(hold_job -c 1 --gres=egpu:30)
wait_state "$packed_job" RUNNING
[[ $(node_of "$packed_job") == n2 ]] ||
  fail "with PackNodes=yes egpu:30 went to $(node_of "$packed_job"), not the fuller n2"
wait_weight n2 "$(packed $((free2 - 30)))" "after egpu:30 there"
ok "an unpinned egpu:30 went to the fuller node (n2)"

# A bad value: refused with the file, line and value named; nothing changes.
seen=$(wc -l <"$log")
refused() { tail -n +$((seen + 1)) "$log" | grep -aq "egpu.conf:[0-9]*: PackNodes=maybe: must be one of yes|no.*PackNodes stays yes"; }
set_pack maybe
for _ in $(seq 40); do
  refused && break
  sleep 0.25
done
refused || fail "slurmctld did not refuse PackNodes=maybe with a message: $(grep -a 'job_submit/egpu' "$log" | tail -n 3)"
sleep 1.5 # a second pass with the bad file in place
[[ $(weight n2) == "$(packed $((free2 - 30)))" ]] || fail "a bad egpu.conf changed n2's weight to $(weight n2)"
ok "PackNodes=maybe is refused in slurmctld's log; the weights stay"

# The control: the same job with slurm.conf's weights goes to n1.
set_pack no
wait_weight n1 1 "after PackNodes=no"
wait_weight n2 1 "after PackNodes=no"
plain_job=$(hold_job -c 1 --gres=egpu:30)
wait_state "$plain_job" RUNNING
[[ $(node_of "$plain_job") == n1 ]] ||
  fail "without PackNodes egpu:30 went to $(node_of "$plain_job"): the test cannot tell packing from Slurm's own choice"
ok "PackNodes=no: weights back to 1, and Slurm alone puts egpu:30 on n1"

# Packing again, then every job gone: the weights follow.
set_pack yes
wait_weight n1 "$(packed $((units - 30)))" "with egpu:30 there"
clean_jobs
wait_weight n1 "$(packed $units)" "after every job ended"
wait_weight n2 "$(packed $units)" "after every job ended"
ok "with every job gone both nodes weigh $(packed $units) again"
set_pack
wait_weight n1 1 "after PackNodes was removed"
wait_weight n2 1 "after PackNodes was removed"
trap - EXIT
ok "PackNodes removed: slurm.conf's weights are back"
