// The agent's state as JSON for `egpuctl status` / `show` and as Prometheus
// text for the metrics endpoint. Callers see their own instances in detail and
// only totals of other users' (SO_PEERCRED decides who is who).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace egpu::agent {

class Agent;

std::string status_json(const Agent& agent, uid_t caller);
// One instance in detail; empty when not found or not the caller's.
std::string instance_json(const Agent& agent, uint64_t instance_id, uid_t caller);
std::string metrics_text(const Agent& agent);

}  // namespace egpu::agent
