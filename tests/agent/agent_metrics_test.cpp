// The agent's metrics as Prometheus and Grafana take them: the exposition of a
// real agent holding every kind of instance passes `promtool check metrics`
// (Debian's prometheus package, scripts/install-deps), and the dashboard in
// etc/grafana/egpu.json asks only for families and labels that exposition has,
// in queries that parse, so neither can drift from the agent unnoticed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/shm/pages.h"
#include "core/slo/latency_histogram.h"
#include "nodeagent/instance_runtime.h"
#include "tests/agent/agent_fixture.h"
#include "tests/agent/latency_report.h"

namespace egpu::test {
namespace {

using nlohmann::json;
using protocol::ReplyStatus;
constexpr uid_t kAlice = 4242;
constexpr uid_t kBob = 4343;
// Ports of their own: agent_control_test and agent_latency_test use 19466
// and 19467 (the latter also tests/security).
constexpr uint16_t kPromtoolPort = 19468;
constexpr uint16_t kDashboardPort = 19469;

// Metrics on `port`, and gang windows (off by default) so that step 4.1 on
// both GPUs holds one.
std::string agent_config(uint16_t port) {
  return "MetricsAddress=127.0.0.1:" + std::to_string(port) + "\nGangPeriodMs=100\n";
}

// The body of GET /metrics (headers stripped); empty when nothing answered.
std::string fetch_metrics_body(uint16_t port) {
  const std::string reply = fetch_metrics(port);
  const size_t body = reply.find("\r\n\r\n");
  return body == std::string::npos ? "" : reply.substr(body + 4);
}

uint64_t create(const AgentProcess& agent, uint64_t job, uint32_t step, uint32_t gpu,
                uint32_t units, uid_t owner, Mode mode) {
  protocol::CreateRequest r = create_request(job, units, owner);
  r.step_id = step;
  r.gpu_index = gpu;
  r.mode = mode_value(mode);
  auto reply = agent.call(r);
  EXPECT_TRUE(reply.ok());
  EXPECT_EQ(reply->status, ReplyStatus::kOk) << reply->text;
  return reply->instance_id;
}

// An agent holding one instance of every kind, so that every family has
// samples: a latency-critical instance (objective, judged windows, a loan)
// and its lender on GPU 0, a capped one on GPU 1, and a step on both GPUs
// (a gang). Returns the exposition once the judged windows show.
std::string populated_metrics(const AgentProcess& agent, uint16_t port) {
  const uint64_t serve = create(agent, 1, 0, 0, 20, kAlice, Mode::kBurst);
  create(agent, 2, 0, 0, 50, kBob, Mode::kLend);
  create(agent, 3, 0, 1, 30, kBob, Mode::kCap);
  create(agent, 4, 1, 0, 20, kAlice, Mode::kBurst);
  create(agent, 4, 1, 1, 20, kAlice, Mode::kBurst);
  const auto objective = agent.call(protocol::ObjectiveRequest{serve, 99'000, 0, 40'000'000});
  EXPECT_EQ(objective->status, ReplyStatus::kOk) << objective->text;
  std::string body;
  // The deadline only ends a failing case (a busy host may take a while).
  for (const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < end;) {
    report_latency(agent.dir() + "/run", serve, 10'000'000, 50);  // within 40 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    body = fetch_metrics_body(port);
    if (body.find("\negpu_instance_slo_attainment_ratio{") != std::string::npos) break;
  }
  return body;
}

// Exposition and PromQL are read by small scanners, not std::regex: GCC 12
// cannot build <regex> without -Wmaybe-uninitialized under the sanitizers.
bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool name_part(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}
size_t name_end(std::string_view text, size_t from) {
  while (from < text.size() && name_part(text[from]))
    ++from;
  return from;
}

// "# TYPE name kind" lines: the families of an exposition.
std::set<std::string> families(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// Label names on the samples of an exposition (`name="value"` inside braces).
std::set<std::string> sample_labels(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t i = line.find('{');
    while (i != std::string::npos && i < line.size() && line[i] != '}') {
      const size_t end = name_end(line, i + 1);
      if (end + 1 >= line.size() || line[end] != '=' || line[end + 1] != '"') break;
      names.insert(line.substr(i + 1, end - i - 1));
      for (i = end + 2; i < line.size() && line[i] != '"'; ++i)
        if (line[i] == '\\') ++i;  // an escaped quote stays in the value
      ++i;                         // now at ',' or '}'
    }
  }
  return names;
}

// The value of the first sample whose line starts with `prefix`.
std::optional<double> sample_value(const std::string& exposition, const std::string& prefix) {
  const size_t at = exposition.find("\n" + prefix);
  if (at == std::string::npos) return std::nullopt;
  const size_t value = exposition.find("} ", at);
  if (value == std::string::npos) return std::nullopt;
  return std::strtod(exposition.c_str() + value + 2, nullptr);
}

// What a PromQL query (or Grafana's label_values(SELECTOR, LABEL)) names:
// egpu metrics, and labels in matchers, by/without lists and label_values.
struct QueryNames {
  std::vector<std::string> metrics;
  std::vector<std::string> labels;
};

QueryNames names_in(std::string_view q) {
  QueryNames out;
  auto skip_spaces = [&](size_t i) {
    while (i < q.size() && q[i] == ' ')
      ++i;
    return i;
  };
  for (size_t i = 0; i < q.size();) {
    if (q[i] == '"') {  // a string: its text names nothing
      for (++i; i < q.size() && q[i] != '"'; ++i)
        if (q[i] == '\\') ++i;
      ++i;
      continue;
    }
    if (!name_start(q[i]) || (i > 0 && (name_part(q[i - 1]) || q[i - 1] == '$'))) {
      ++i;
      continue;
    }
    const size_t end = name_end(q, i);
    const std::string word(q.substr(i, end - i));
    const size_t next = skip_spaces(end);
    const char after = next < q.size() ? q[next] : '\0';
    if (word.rfind("egpu_", 0) == 0) {
      out.metrics.push_back(word);
    } else if (after == '=' || after == '!') {  // name="..", name=~"..", name!=".."
      out.labels.push_back(word);
    } else if ((word == "by" || word == "without") && after == '(') {
      for (size_t n = skip_spaces(next + 1); n < q.size() && q[n] != ')';) {
        const size_t e = name_end(q, n);
        if (e == n) break;
        out.labels.emplace_back(q.substr(n, e - n));
        n = skip_spaces(e);
        if (n < q.size() && q[n] == ',') n = skip_spaces(n + 1);
      }
    } else if (word == "label_values" && after == '(') {
      const size_t close = q.rfind(')');
      const size_t comma = q.rfind(',', close);
      if (close != std::string_view::npos && comma != std::string_view::npos && comma > next) {
        const size_t n = skip_spaces(comma + 1);
        out.labels.emplace_back(q.substr(n, name_end(q, n) - n));
      }
    }
    i = end;
  }
  return out;
}

// A Grafana query as Prometheus sees it: its variables replaced by what they
// stand for ($__rate_interval a duration, the others "all").
std::string with_variables_replaced(std::string_view q) {
  std::string out;
  for (size_t i = 0; i < q.size();) {
    if (q[i] != '$') {
      out += q[i++];
      continue;
    }
    const size_t end = name_end(q, i + 1);
    out += q.substr(i + 1, end - i - 1) == "__rate_interval" ? "5m" : ".*";
    i = end;
  }
  return out;
}

// Runs promtool with `args` on `text`, put in a file that follows the
// arguments (e.g. "check rules") or comes on stdin ("check metrics <");
// its exit status (127: promtool is missing) and output.
std::pair<int, std::string> promtool(const std::string& args, const std::string& text) {
  char path[] = "/tmp/egpu-promtool-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {-1, "mkstemp failed"};
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  std::string output;
  int status = -1;
  if (written) {
    const std::string cmd = "promtool " + args + " " + path + " 2>&1";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
        output.append(buf, n);
      status = pclose(p);
    }
  }
  unlink(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

constexpr const char* kPromtoolMissing =
    "promtool is missing: scripts/install-deps installs Debian's prometheus package\n";

TEST(AgentMetricsLint, ExpositionPassesPromtool) {
  AgentProcess agent(agent_config(kPromtoolPort));
  ASSERT_TRUE(agent.start()) << agent.log();
  const std::string body = populated_metrics(agent, kPromtoolPort);
  // Every family has samples, so promtool sees each one's values and labels.
  const std::set<std::string> names = families(body);
  EXPECT_GE(names.size(), 17u) << body;
  for (const std::string& name : names) {
    EXPECT_TRUE(body.find("\n" + name + "{") != std::string::npos ||
                body.find("\n" + name + " ") != std::string::npos)
        << name << " has no sample in:\n"
        << body;
  }
  EXPECT_GT(
      sample_value(body, "egpu_instance_gang_window_share{gpu=\"1\",slurm_job=\"4\",step=\"1\",")
          .value_or(0),
      0)
      << "no gang window for step 4.1:\n"
      << body;
  const auto [rc, output] = promtool("check metrics <", body);
  ASSERT_NE(rc, 127) << kPromtoolMissing << output;
  EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << output << "\non:\n" << body;
  EXPECT_EQ(output, "") << body;
}

// The strings of a dashboard that Prometheus evaluates: panel targets' expr
// and template variables' queries, at any depth (rows nest panels).
void promql_of(const json& node, std::vector<std::string>& out) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if ((key == "expr" || key == "query" || key == "definition") && value.is_string())
        out.push_back(value.get<std::string>());
      else
        promql_of(value, out);
    }
  } else if (node.is_array()) {
    for (const json& item : node)
      promql_of(item, out);
  }
}

// The panels that show something: rows' panels instead of the rows.
std::vector<const json*> leaf_panels(const json& panels) {
  std::vector<const json*> out;
  for (const json& p : panels) {
    if (p.value("type", "") == "row") {
      if (!p.contains("panels")) continue;
      for (const json* inner : leaf_panels(p.at("panels")))  // pointers into `panels`
        out.push_back(inner);
    } else {
      out.push_back(&p);
    }
  }
  return out;
}

json read_dashboard() {
  std::ifstream file(EGPU_GRAFANA_DASHBOARD);
  EXPECT_TRUE(file) << EGPU_GRAFANA_DASHBOARD;
  json dash = json::parse(file, nullptr, false);
  EXPECT_FALSE(dash.is_discarded()) << EGPU_GRAFANA_DASHBOARD << " is not valid JSON";
  return dash.is_object() ? dash : json::object();
}

TEST(AgentMetricsLint, GrafanaDashboardAsksOnlyForWhatTheAgentExports) {
  const json dash = read_dashboard();
  ASSERT_FALSE(HasFailure());
  EXPECT_GE(dash.value("schemaVersion", 0), 36);
  ASSERT_TRUE(dash.contains("__inputs"));
  EXPECT_EQ(dash["__inputs"][0]["name"], "DS_PROMETHEUS");
  std::set<std::string> variables;
  for (const json& v : dash["templating"]["list"])
    variables.insert(v["name"].get<std::string>());
  EXPECT_TRUE(variables.count("node") && variables.count("gpu")) << dash["templating"].dump();

  AgentProcess agent(agent_config(kDashboardPort));
  ASSERT_TRUE(agent.start()) << agent.log();
  const std::string body = populated_metrics(agent, kDashboardPort);
  const std::set<std::string> exported = families(body);
  ASSERT_GT(exported.size(), 10u) << body;
  // Prometheus adds its own `job` and `instance` (the scrape job and the
  // node); the agent uses neither name, so nothing of its is renamed
  // (exported_*) and the dashboard's node variable is `instance`.
  std::set<std::string> labels{"instance", "job"};
  for (const std::string& l : sample_labels(body)) {
    EXPECT_NE(l, "job") << "a label Prometheus keeps for the scrape job";
    EXPECT_NE(l, "instance") << "a label Prometheus keeps for the target";
    labels.insert(l);
  }

  const auto panels = leaf_panels(dash.at("panels"));
  EXPECT_GE(panels.size(), 8u);
  for (const json* p : panels) {
    const std::string title = p->value("title", "?");
    EXPECT_EQ(p->at("datasource").value("uid", ""), "${DS_PROMETHEUS}") << title;
    EXPECT_FALSE(p->value("targets", json::array()).empty()) << title << " has no query";
  }
  std::vector<std::string> queries;
  promql_of(dash.at("panels"), queries);
  promql_of(dash.at("templating"), queries);
  int metric_uses = 0;
  int label_uses = 0;
  for (const std::string& q : queries) {
    const QueryNames names = names_in(q);
    for (const std::string& name : names.metrics) {
      // A histogram's series name its family with a suffix.
      std::string family = name;
      for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
        if (!exported.count(family) && family.ends_with(suffix))
          family.resize(family.size() - suffix.size());
      }
      EXPECT_TRUE(exported.count(family)) << name << " (in `" << q << "`) is not exported";
      ++metric_uses;
    }
    label_uses += static_cast<int>(names.labels.size());
    for (const std::string& label : names.labels)
      EXPECT_TRUE(labels.count(label))
          << "label " << label << " (in `" << q
          << "`) is not on the agent's samples as Prometheus stores them";
  }
  EXPECT_GE(metric_uses, 10);
  EXPECT_GE(label_uses, 20);  // the scanner finds what the queries name
}

// Each panel's queries parse: promtool reads them as recording rules, with
// Grafana's variables replaced by what they stand for.
TEST(AgentMetricsLint, GrafanaDashboardQueriesParse) {
  const json dash = read_dashboard();
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(dash.contains("panels"));
  const auto panels = leaf_panels(dash["panels"]);
  ASSERT_FALSE(panels.empty());
  std::string rules = "groups:\n  - name: egpu_dashboard\n    rules:\n";
  int n = 0;
  for (const json* p : panels) {
    for (const json& target : p->value("targets", json::array())) {
      std::string expr;
      for (const char c : with_variables_replaced(target.value("expr", "")))
        expr += c == '\'' ? std::string("''") : std::string(1, c);  // YAML single quotes
      rules += "      - record: egpu_dashboard_expr_" + std::to_string(n++) + "\n        expr: '" +
               expr + "'\n";
    }
  }
  const auto [rc, output] = promtool("check rules", rules);
  ASSERT_NE(rc, 127) << kPromtoolMissing << output;
  EXPECT_EQ(rc, 0) << output << "\non:\n" << rules;
}

}  // namespace
}  // namespace egpu::test
