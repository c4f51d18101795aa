# shellcheck shell=bash disable=SC2154 # state: from lib.sh
# Helpers of the PackNodes tests (sourced after lib.sh): the controller's
# egpu.conf and the node weights job_submit/egpu keeps.

pack_conf=$state/etc/egpu.conf # slurmctld's EGPU_CONF

# PackNodes=VALUE in the controller's egpu.conf, or no line without VALUE.
# The file is replaced whole: slurmctld never reads it half-written.
set_pack() { # [VALUE]
  { grep -v '^PackNodes=' "$pack_conf" || true; [[ -z ${1:-} ]] || echo "PackNodes=$1"; } >"$pack_conf.new"
  mv "$pack_conf.new" "$pack_conf"
}

weight() { sl scontrol -o show node "$1" | grep -o ' Weight=[0-9]*' | cut -d= -f2; }

wait_weight() { # NODE WEIGHT [WHY]
  for _ in $(seq 60); do
    [[ $(weight "$1") == "$2" ]] && return 0
    sleep 0.25
  done
  fail "$1 has Weight=$(weight "$1")${3:+ $3}, expected $2"
}

# The packed weight of a node with FREE units (egpu_packed_node_weight): the
# testbed's nodes all have slurm.conf's Weight=1, one tier (0).
packed() { echo $(($1 + 1)); }
