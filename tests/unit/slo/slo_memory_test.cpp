// What the latency control keeps across an agent restart: the controller's
// memory through its JSON form, restored into a new controller, goes on
// exactly as the controller that never stopped; a damaged memory is refused
// with the field named, or brought into range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/slo/slo_memory_codec.h"

namespace egpu::slo {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kPeriod = 100 * kMs;
const LatencyObjective kP99At40{99'000, 40 * kMs};

// One period of a service whose demand follows a tide and whose latency
// grows as its share nears its demand, beside a lender and a guaranteed
// neighbour; `effective` is what the controller gave the service last.
std::vector<SloInput> period_inputs(int period, uint32_t effective) {
  const double demand = 0.15 + 0.1 * std::sin(period / 40.0);
  const double share = effective / 100.0;
  const double headroom = share / demand;
  SloInput serve;
  serve.id = 7;
  serve.role = SloRole::kLatencyCritical;
  serve.units = 20;
  serve.objective = kP99At40;
  serve.latencies.record(static_cast<int64_t>(5 * kMs / std::max(0.05, headroom - 1.0)), 50);
  serve.device_ns = static_cast<int64_t>(std::min(share, demand) * kPeriod);
  serve.waited_ns = kMs;  // held back by its share
  SloInput lend;
  lend.id = 8;
  lend.role = SloRole::kLend;
  lend.units = 60;
  lend.device_ns = static_cast<int64_t>((1.0 - std::min(share, demand)) * kPeriod);
  SloInput guaranteed;
  guaranteed.id = 9;
  guaranteed.units = 20;
  return {serve, lend, guaranteed};
}

uint32_t effective_of(const std::vector<SloState>& states, uint64_t id) {
  for (const SloState& s : states)
    if (s.id == id) return s.effective_units;
  return 0;
}

TEST(SloMemory, ARestoredControllerGoesOnExactlyAsOneThatNeverStopped) {
  SloController never_stopped;
  uint32_t effective = 20;
  int most_borrowed = 0;
  for (int p = 0; p < 300; ++p) {
    const auto& states = never_stopped.step(period_inputs(p, effective), kPeriod);
    effective = effective_of(states, 7);
    most_borrowed = std::max(most_borrowed, static_cast<int>(effective) - 20);
  }
  ASSERT_GT(most_borrowed, 0) << "the service never borrowed: nothing to keep";
  ASSERT_GT(never_stopped.memory().at(7).model.points(), 2u);

  SloMemory kept;
  kept.instances = never_stopped.memory();
  for (const SloState& s : never_stopped.states())
    if (s.borrowed != 0) kept.loans[s.id] = s.borrowed;
  const std::string text = encode_slo_memory(kept);
  auto back = decode_slo_memory(text);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, kept);
  ASSERT_EQ(back->loans.at(7), static_cast<int32_t>(effective) - 20);

  SloController restored;
  for (const auto& [id, m] : back->instances)
    restored.restore(id, m);
  int differing = 0;
  for (int p = 300; p < 700; ++p) {
    const auto inputs = period_inputs(p, effective);
    const auto& a = never_stopped.step(inputs, kPeriod);
    const auto& b = restored.step(inputs, kPeriod);
    differing += a == b ? 0 : 1;
    effective = effective_of(a, 7);
  }
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(restored.memory(), never_stopped.memory());
}

TEST(SloMemory, TheModelKeepsItsNewestWindowsInOrder) {
  LatencyModel model;
  for (int i = 1; i <= 40; ++i)
    model.observe(LatencyModel::kHeadrooms[static_cast<std::size_t>(i % 3)], i * kMs);
  const LatencyModel again = LatencyModel::from_windows(model.windows());
  EXPECT_EQ(again, model);
  for (double h : {1.0, 1.1, 1.3, 1.5, 3.0})
    EXPECT_EQ(again.predict(h), model.predict(h)) << h;
  // Point 1 saw 1, 4, ..., 40 (14 windows); point 0 the 13 multiples of 3.
  EXPECT_EQ(model.windows()[1].front(), 1 * kMs);
  EXPECT_EQ(model.windows()[1].back(), 40 * kMs);
  // More than a point keeps: the newest stay, oldest first.
  LatencyModel::Windows many;
  for (int i = 1; i <= 20; ++i)
    many[4].push_back(i * kMs);
  many[5] = {-1, 0, 3 * kMs};  // not latencies, but one
  const LatencyModel m = LatencyModel::from_windows(many);
  ASSERT_EQ(m.windows()[4].size(), 16u);
  EXPECT_EQ(m.windows()[4].front(), 5 * kMs);
  EXPECT_EQ(m.windows()[5], std::vector<int64_t>{3 * kMs});
}

TEST(SloMemory, ADamagedMemoryIsRefusedWithTheFieldNamed) {
  SloController::Memory m;
  m.objective = kP99At40;
  m.used = {0.25};
  SloMemory good;
  good.instances[7] = m;
  good.loans = {{7, 5}, {8, -5}};
  const std::string text = encode_slo_memory(good);
  ASSERT_TRUE(decode_slo_memory(text).ok()) << decode_slo_memory(text).error();

  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from << " not in " << text;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  std::string sixty_four_more;  // windows, past the most a memory may have
  for (int i = 0; i < 64; ++i)
    sixty_four_more += ",[]";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"version\"", "not a JSON object"},
      {replaced("\"version\":2", "\"version\":1"), "not version 2 of the format"},
      {replaced("\"7\":5", "\"7\":101"), "loans: instance 7: not a number of units in [-100, 100]"},
      {replaced("\"8\":-5", "\"x8\":-5"), "loans: 'x8' is not an instance id"},
      {replaced("\"8\":-5", "\"0\":-5"), "loans: '0' is not an instance id"},
      {replaced("\"percentile_milli\":99000", "\"percentile_milli\":100000"),
       "instance 7: objective: not {percentile_milli in (0, 100000), target_ns in [1000000, "},
      {replaced("\"target_ns\":40000000", "\"target_ns\":\"40ms\""),
       "instance 7: objective: not {percentile_milli"},
      {replaced("\"window\":[]", "\"window\":[[]" + sixty_four_more + "]"),
       "instance 7: window: more than 64 periods"},
      {replaced("\"used\":[0.25]", "\"used\":[\"a\"]"), "instance 7: used: not a list of numbers"},
      {replaced("\"calm\":0", "\"calm\":-1e3"), "instance 7: calm: missing or not an integer"},
      {replaced("\"idle\":0", "\"idle\":99999999999"),
       "instance 7: idle: missing or not an integer"},
      {replaced("\"window\":[]", "\"window\":[[[240,1]]]"),
       "instance 7: window: a window's bucket is not in [0, 240)"},
      {replaced("\"window\":[]", "\"window\":[[[1]]]"),
       "instance 7: window: a window entry is not [bucket, count]"},
      {replaced("\"model\":[[],", "\"model\":["), "instance 7: model: missing or not 12 lists"},
      {replaced("\"model\":[[]", "\"model\":[[\"1ms\"]"),
       "instance 7: model: a latency is not an integer of nanoseconds"},
      {replaced(",\"windows_met\":0}", "}"), "instance 7: windows_met: missing"},
  };
  for (const auto& [bad, why] : cases) {
    auto r = decode_slo_memory(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find(why), std::string::npos) << r.error() << "\nwanted: " << why;
  }
}

TEST(SloMemory, ValuesOutOfRangeAreBroughtIntoItWhenRestored) {
  SloController::Memory m;
  m.objective = kP99At40;
  m.borrowed = 500;
  m.since_change = -3;
  m.windows_judged = 4;
  m.windows_met = 9;
  m.used.assign(5000, 7.0);
  m.used.front() = -1.0;
  m.window.assign(50, LatencyHistogram{});
  SloController c;
  c.restore(1, m);
  const SloController::Memory& r = c.memory().at(1);
  EXPECT_EQ(r.borrowed, 100);
  EXPECT_EQ(r.since_change, 0);
  EXPECT_EQ(r.windows_met, 4u);
  EXPECT_EQ(r.used.size(), static_cast<std::size_t>(c.params().demand_periods));
  EXPECT_TRUE(std::all_of(r.used.begin(), r.used.end(), [](double u) { return u == 1.0; }));
  EXPECT_EQ(r.window.size(), static_cast<std::size_t>(c.params().window_periods));
  // And it is used within them: no more than the lender can give.
  SloInput serve;
  serve.id = 1;
  serve.role = SloRole::kLatencyCritical;
  serve.units = 20;
  serve.objective = kP99At40;
  SloInput lend;
  lend.id = 2;
  lend.role = SloRole::kLend;
  lend.units = 30;
  const auto& s = c.step({serve, lend}, kPeriod);
  EXPECT_EQ(effective_of(s, 1), 49u);
  EXPECT_EQ(effective_of(s, 2), 1u);
}

}  // namespace
}  // namespace egpu::slo
