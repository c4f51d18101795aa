#include "core/slo/slo_controller.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace egpu::slo {
namespace {

constexpr uint32_t kMaxUnits = 100;
constexpr int kCountCap = 1 << 30;  // period counters stop here

// The mean of the last `n` values (fewer if there are not as many).
double mean_of_last(const std::deque<double>& values, std::size_t n) {
  n = std::min(n, values.size());
  if (n == 0) return 0.0;
  return std::accumulate(values.end() - static_cast<std::ptrdiff_t>(n), values.end(), 0.0) /
         static_cast<double>(n);
}

// The largest mean of `n` consecutive values.
double peak_mean(const std::deque<double>& values, std::size_t n) {
  n = std::max<std::size_t>(1, std::min(n, values.size()));
  double best = 0.0;
  for (std::size_t end = n; end <= values.size(); ++end) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(end - n);
    best = std::max(best, std::accumulate(first, first + static_cast<std::ptrdiff_t>(n), 0.0) /
                              static_cast<double>(n));
  }
  return best;
}

// The units the model predicts for `latency_ns` at this demand; nullopt if it
// cannot say.
std::optional<uint32_t> units_for(const LatencyModel& model, double demand, double latency_ns) {
  if (!(demand > 0.0)) return std::nullopt;
  const auto h = model.headroom_for(static_cast<int64_t>(latency_ns));
  if (!h) return std::nullopt;
  const double units = std::ceil(demand * *h * kMaxUnits - 1e-9);
  return static_cast<uint32_t>(std::clamp(units, 1.0, static_cast<double>(kMaxUnits)));
}

// A latency-critical instance's want this period, and its place in the
// order of urgency (latency over target, then id).
struct Want {
  std::size_t index;  // into the inputs
  uint32_t units;
  double urgency;
};

// Shares `pool` units out among the borrowers in `wants` (most urgent
// first) that `eligible` admits: each is first given up to its part, in
// proportion to its own units; what parts leave unused goes by urgency.
// Urgency alone let one borrower take everything: its latencies are its own
// to report, and a forged minute per request put it first for good. `got`
// holds what each has from earlier pools, and gains what this one gives;
// returns what is left of it.
template <typename Eligible>
uint32_t share_out(const std::vector<SloInput>& inputs, const std::vector<Want>& wants,
                   uint32_t pool, Eligible eligible, std::vector<uint32_t>* got) {
  uint64_t wanting_units = 0;
  for (const Want& w : wants) {
    if (eligible(inputs[w.index])) wanting_units += inputs[w.index].units;
  }
  std::vector<uint32_t> here(wants.size(), 0);
  uint32_t left = pool;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t k = 0; k < wants.size(); ++k) {
      const SloInput& in = inputs[wants[k].index];
      if (!eligible(in)) continue;
      const uint32_t room = kMaxUnits > in.units ? kMaxUnits - in.units : 0;
      const uint32_t most = std::min(wants[k].units, room);
      uint32_t cap = most > (*got)[k] ? most - (*got)[k] : 0;
      if (round == 0 && wanting_units > 0) {
        cap = std::min<uint32_t>(
            cap, static_cast<uint32_t>(static_cast<uint64_t>(pool) * in.units / wanting_units));
      }
      const uint32_t more = std::min(cap > here[k] ? cap - here[k] : 0, left);
      here[k] += more;
      left -= more;
    }
  }
  for (std::size_t k = 0; k < wants.size(); ++k)
    (*got)[k] += here[k];
  return left;
}

// Takes `amount` (at most what they can give together) from the lenders
// `from`, in proportion to what each can still give (`can`, by input
// index; largest remainder, then id, for the units left over).
void take_from(const std::vector<SloInput>& inputs, const std::vector<std::size_t>& from,
               uint32_t amount, std::vector<uint32_t>* can) {
  uint64_t total = 0;
  for (std::size_t i : from)
    total += (*can)[i];
  if (amount == 0 || total == 0) return;
  std::vector<uint32_t> take(from.size(), 0);
  std::vector<std::pair<uint64_t, std::size_t>> remainders;  // (remainder x total, position)
  uint32_t taken = 0;
  for (std::size_t k = 0; k < from.size(); ++k) {
    const uint64_t exact = static_cast<uint64_t>((*can)[from[k]]) * amount;
    take[k] = static_cast<uint32_t>(exact / total);
    taken += take[k];
    remainders.emplace_back(exact % total, k);
  }
  std::stable_sort(remainders.begin(), remainders.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return inputs[from[a.second]].id < inputs[from[b.second]].id;
  });
  for (std::size_t k = 0; taken < amount && k < remainders.size(); ++k, ++taken)
    ++take[remainders[k].second];
  for (std::size_t k = 0; k < from.size(); ++k)
    (*can)[from[k]] -= take[k];
}

}  // namespace

uint32_t SloController::wanted(const SloInput& in, Memory& t, SloState& s) {
  const uint32_t borrowed = static_cast<uint32_t>(t.borrowed);
  LatencyHistogram merged;
  for (const LatencyHistogram& h : t.window)
    merged.add(h);
  const LatencyObjective& objective = *in.objective;
  const double target = static_cast<double>(objective.target_ns);
  const auto window = static_cast<std::size_t>(params_.window_periods);
  s.demand = mean_of_last(t.used, window);
  s.peak_demand = peak_mean(t.used, window);
  s.window_samples = merged.samples();
  s.recent_latency_ns = merged.quantile_ns(objective.quantile());
  // Saturating: an objective may stay set for years.
  t.since_change = std::min(t.since_change + 1, kCountCap);
  if (merged.samples() == 0) {
    // No requests: nothing to keep a latency for, and idle share goes to
    // whoever asks anyway.
    t.calm = 0;
    t.idle = std::min(t.idle + 1, kCountCap);
    return t.idle >= params_.idle_periods ? 0 : borrowed;
  }
  t.idle = 0;
  if (merged.samples() < params_.min_samples) return borrowed;
  ++t.windows_judged;
  if (s.recent_latency_ns <= objective.target_ns) ++t.windows_met;

  const uint32_t effective = in.units + borrowed;
  const double share = effective / static_cast<double>(kMaxUnits);
  const double q = static_cast<double>(s.recent_latency_ns);
  const bool settled = t.since_change >= params_.settle_periods;
  // Using all it is given in the last period: the work may be more than it
  // gets, and the demand measured is then only a lower bound.
  const bool saturated = !t.used.empty() && t.used.back() >= params_.saturated_at * share;
  if (settled && s.demand > 0.0) t.model.observe(share / s.demand, s.recent_latency_ns);
  // Sized for the busiest window of the recent past, not for this one: the
  // tide comes back sooner than a share could follow it, and share the
  // instance does not use still goes to its lenders (FAA is work-conserving).
  const auto need = units_for(t.model, s.peak_demand, params_.aim * target);
  // The fast tier: this period alone misses the objective while the instance
  // uses all it has (a tide coming in, not a tail's noise), before the
  // window shows it.
  const LatencyHistogram& latest = t.window.back();
  const bool missing_now = saturated && latest.samples() >= params_.min_fast_samples &&
                           latest.quantile_ns(objective.quantile()) > objective.target_ns;
  // Held back by its share: it waited for the GPU within the window.
  const bool waits = unwaited_[in.id] < params_.window_periods;
  if (((q > params_.raise_at * target && settled) || missing_now) && !waits) {
    // Its latency is not the gate's: more share would not lower it, and what
    // it borrowed goes back.
    t.calm = 0;
    return settled ? borrowed / 2 : borrowed;
  }
  if ((q > params_.raise_at * target && settled) || missing_now) {
    t.calm = 0;
    uint32_t goal = saturated ? 0 : need.value_or(0);
    if (goal <= effective) {
      // The model cannot say (or its demand is a lower bound): grow in
      // proportion to how far the latency is off, within [1.25x, 2x].
      const double off = std::max(q, static_cast<double>(latest.quantile_ns(objective.quantile())));
      const double factor = std::clamp(off / (params_.aim * target), 1.25, 2.0);
      goal = std::max(static_cast<uint32_t>(std::ceil(effective * factor)),
                      effective + params_.probe_min_units);
    }
    goal = std::min(goal, kMaxUnits);
    return std::max(borrowed, goal > in.units ? goal - in.units : 0);
  }
  if (!settled) return borrowed;
  if (q < params_.return_at * target) {
    t.calm = std::min(t.calm + 1, kCountCap);
    if (t.calm < params_.calm_periods) return borrowed;
    t.calm = 0;
    if (!need) return borrowed / 2;  // the model cannot say: halve and look again
    if (*need >= effective) return borrowed;
    return std::min(borrowed, *need > in.units ? *need - in.units : 0);
  }
  t.calm = 0;
  return borrowed;
}

void SloController::restore(uint64_t id, Memory m) {
  m.borrowed = std::clamp<int32_t>(m.borrowed, 0, static_cast<int32_t>(kMaxUnits));
  m.since_change = std::clamp(m.since_change, 0, kCountCap);
  m.calm = std::clamp(m.calm, 0, kCountCap);
  m.idle = std::clamp(m.idle, 0, kCountCap);
  // Counters far from wrapping (they count 100 ms periods).
  m.windows_judged = std::min<uint64_t>(m.windows_judged, uint64_t{1} << 62);
  m.windows_met = std::min(m.windows_met, m.windows_judged);
  unwaited_[id] = 0;  // as one that just waited: its next window says
  for (double& u : m.used)
    u = std::isfinite(u) ? std::clamp(u, 0.0, 1.0) : 0.0;
  const auto keep_used =
      static_cast<std::size_t>(std::max(params_.demand_periods, params_.window_periods));
  while (m.used.size() > keep_used)
    m.used.pop_front();
  while (m.window.size() > static_cast<std::size_t>(params_.window_periods))
    m.window.pop_front();
  tracked_[id] = std::move(m);
}

const std::vector<SloState>& SloController::step(const std::vector<SloInput>& inputs,
                                                 int64_t period_ns) {
  // Forget instances that left.
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    const bool present = std::any_of(inputs.begin(), inputs.end(),
                                     [&](const SloInput& in) { return in.id == it->first; });
    it = present ? std::next(it) : tracked_.erase(it);
  }
  std::erase_if(unwaited_, [&](const auto& u) { return !tracked_.contains(u.first); });
  states_.assign(inputs.size(), SloState{});
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const SloInput& in = inputs[i];
    SloState& s = states_[i];
    s.id = in.id;
    s.role = in.role;
    s.units = in.units;
    s.objective = in.role == SloRole::kLatencyCritical ? in.objective : std::nullopt;
    Memory& t = tracked_[in.id];
    if (in.role != SloRole::kLatencyCritical || !in.objective) {
      t = Memory{};  // nothing to keep: it may become latency-critical later
      unwaited_.erase(in.id);
      continue;
    }
    int& unwaited = unwaited_.try_emplace(in.id, params_.window_periods).first->second;
    unwaited = in.waited_ns > 0 ? 0 : std::min(unwaited + 1, kCountCap);
    if (t.objective != in.objective) {  // a new objective is judged afresh
      t.window.clear();
      t.calm = 0;
      t.objective = in.objective;
    }
    // The first period after a change is the transition (a backlog
    // draining): not judged.
    if (t.since_change == 1) t.window.clear();
    t.window.push_back(in.latencies);
    // Device time comes from the instance's own page: a lie may say
    // anything, but no more than the whole GPU.
    const double used =
        period_ns > 0 ? static_cast<double>(in.device_ns) / static_cast<double>(period_ns) : 0.0;
    t.used.push_back(std::clamp(used, 0.0, 1.0));
    while (t.window.size() > static_cast<std::size_t>(params_.window_periods))
      t.window.pop_front();
    while (t.used.size() >
           static_cast<std::size_t>(std::max(params_.demand_periods, params_.window_periods)))
      t.used.pop_front();
  }

  // What each latency-critical instance wants, then the lendable units shared
  // out (below), in the order of urgency (latency over target, then id).
  std::vector<Want> wants;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].role != SloRole::kLatencyCritical || !inputs[i].objective) continue;
    Memory& t = tracked_[inputs[i].id];
    const uint32_t units = wanted(inputs[i], t, states_[i]);
    const double urgency = static_cast<double>(states_[i].recent_latency_ns) /
                           static_cast<double>(inputs[i].objective->target_ns);
    wants.push_back({i, units, urgency});
  }
  std::stable_sort(wants.begin(), wants.end(), [&](const Want& a, const Want& b) {
    if (a.urgency != b.urgency) return a.urgency > b.urgency;
    return inputs[a.index].id < inputs[b.index].id;
  });
  const auto lendable_units = [&](const SloInput& in) {
    return in.units > params_.lend_floor_units ? in.units - params_.lend_floor_units : 0u;
  };
  // Each job's lenders serve its own borrowers first; what is left of all
  // of them is then shared out among every borrower.
  std::map<uint64_t, uint32_t> lendable_of_job;
  for (const SloInput& in : inputs) {
    if (in.role == SloRole::kLend) lendable_of_job[in.job] += lendable_units(in);
  }
  std::vector<uint32_t> got(wants.size(), 0);
  std::map<uint64_t, uint32_t> own_lent;  // by job: what its lenders gave its own borrowers
  uint32_t pooled = 0;
  for (const auto& [of_job, can] : lendable_of_job) {
    const uint64_t job = of_job;  // a structured binding is not captured before C++20's clang 16
    const uint32_t left = share_out(
        inputs, wants, can, [&](const SloInput& in) { return in.job == job; }, &got);
    own_lent[job] = can - left;
    pooled += left;
  }
  const uint32_t pooled_left = share_out(
      inputs, wants, pooled, [](const SloInput&) { return true; }, &got);
  uint32_t lent = 0;
  for (std::size_t k = 0; k < wants.size(); ++k) {
    const SloInput& in = inputs[wants[k].index];
    Memory& t = tracked_[in.id];
    lent += got[k];
    if (static_cast<int32_t>(got[k]) != t.borrowed) {
      t.borrowed = static_cast<int32_t>(got[k]);
      t.since_change = 0;
      t.calm = 0;
      t.window.clear();
    }
    SloState& st = states_[wants[k].index];
    st.borrowed = t.borrowed;
    st.effective_units = in.units + got[k];
    st.windows_judged = t.windows_judged;
    st.windows_met = t.windows_met;
    st.model_points = t.model.points();
  }

  // The lenders give what was lent.
  std::vector<std::size_t> lenders;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    SloState& s = states_[i];
    if (inputs[i].role == SloRole::kLatencyCritical && inputs[i].objective) continue;
    s.effective_units = inputs[i].units;
    if (inputs[i].role == SloRole::kLend) lenders.push_back(i);
  }
  if (lent == 0) return states_;
  // Each job's own loans from its lenders, then the pooled ones from every
  // lender's rest, each in proportion to what each can give.
  std::vector<uint32_t> can(inputs.size(), 0);
  for (std::size_t i : lenders)
    can[i] = lendable_units(inputs[i]);
  for (const auto& [job, amount] : own_lent) {
    std::vector<std::size_t> of_job;
    for (std::size_t i : lenders) {
      if (inputs[i].job == job) of_job.push_back(i);
    }
    take_from(inputs, of_job, amount, &can);
  }
  take_from(inputs, lenders, pooled - pooled_left, &can);
  for (std::size_t i : lenders) {
    states_[i].borrowed = -static_cast<int32_t>(lendable_units(inputs[i]) - can[i]);
    states_[i].effective_units =
        static_cast<uint32_t>(static_cast<int32_t>(inputs[i].units) + states_[i].borrowed);
  }
  return states_;
}

}  // namespace egpu::slo
