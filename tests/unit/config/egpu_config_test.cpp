#include "core/config/egpu_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/config/byte_size.h"
#include "core/config/key_value_file.h"

namespace egpu::config {
namespace {

TEST(KeyValueFile, ParsesPairsCommentsQuotesAndSeveralPerLine) {
  auto r = parse_key_values(
      "# comment\n\nSliceMs=5  WindowMs=400 # trailing\nName=\"a b\"\r\n  Key=v=w\n", "t.conf");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].key, "SliceMs");
  EXPECT_EQ((*r)[0].value, "5");
  EXPECT_EQ((*r)[0].line, 3);
  EXPECT_EQ((*r)[1].key, "WindowMs");
  EXPECT_EQ((*r)[2].value, "a b");
  EXPECT_EQ((*r)[2].line, 4);
  EXPECT_EQ((*r)[3].value, "v=w");
}

// The error parse_key_values gives `text` as x.conf (a failure if it gives none).
std::string error_of(const char* text) {
  auto parsed = parse_key_values(text, "x.conf");
  EXPECT_FALSE(parsed.ok()) << "accepted: " << text;
  return parsed.ok() ? std::string() : parsed.error();
}

TEST(KeyValueFile, RejectsMalformedLinesNamingTheLine) {
  auto no_eq = parse_key_values("SliceMs=5\nSliceMs\n", "x.conf");
  ASSERT_FALSE(no_eq.ok());
  EXPECT_NE(no_eq.error().find("x.conf:2:"), std::string::npos) << no_eq.error();
  EXPECT_NE(no_eq.error().find("no '='"), std::string::npos);

  // Blanks separate pairs: what follows one is read as a key of its own.
  EXPECT_NE(
      error_of("SliceMs=10 ms\n")
          .find("key 'ms' has no '=' after it: write Key=Value, no blanks around '=' (pairs are "
                "separated by blanks; quote a value that has any)"),
      std::string::npos);
  // Bytes no terminal should be sent are named by number; a BOM as a BOM.
  EXPECT_NE(error_of("\xEF\xBB\xBFSliceMs=5\n")
                .find("x.conf:1: unexpected byte 0xEF where a key was expected (a UTF-8 byte "
                      "order mark"),
            std::string::npos);
  EXPECT_NE(error_of("SliceMs=5\n\x1b[2J=1\n").find("x.conf:2: unexpected byte 0x1B where"),
            std::string::npos);

  auto quote = parse_key_values("A=\"open\n", "x.conf");
  ASSERT_FALSE(quote.ok());
  EXPECT_NE(quote.error().find("unterminated quote"), std::string::npos);

  auto bad = parse_key_values("=5\n", "x.conf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("where a key was expected"), std::string::npos);

  std::string nul("A=1\0", 4);
  EXPECT_FALSE(parse_key_values(nul, "x").ok());
  EXPECT_FALSE(parse_key_values(std::string(5000, 'a'), "x").ok());
}

TEST(EgpuConfig, DefaultsWhenEmpty) {
  auto c = parse_egpu_config("", "egpu.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->slice_ms, 10);
  EXPECT_EQ(c->window_ms, 500);
  EXPECT_EQ(c->default_mode, Mode::kBurst);
  EXPECT_EQ(c->fail_mode, FailMode::kOpen);
  EXPECT_TRUE(c->metrics_address.empty());
  EXPECT_EQ(c->socket_path, "/run/egpu/agent.sock");
  EXPECT_EQ(c->inflight_us, 2000);
  EXPECT_EQ(c->inflight_alone_us, 20000);
  EXPECT_EQ(c->gang_period_ms, 0);  // gangs are the site's choice
  EXPECT_EQ(c->gang_clock, GangClock::kAdjtimex);
  EXPECT_FALSE(c->pack_nodes);  // node weights are the admin's unless asked
  EXPECT_TRUE(c->step_records);
  EXPECT_EQ(c->step_record_interval_s, 300);
  EXPECT_TRUE(c->monitor_group.empty());  // nobody without an instance counts alone
  EXPECT_EQ(c->unmanaged_processes, UnmanagedAction::kKill);  // an escape is stopped
  EXPECT_EQ(c->gpu_device_file(3), "/dev/nvidia3");
}

TEST(EgpuConfig, ParsesEveryKindOfValueCaseInsensitiveKeys) {
  auto c = parse_egpu_config(
      "slicems=5\nDefaultMode=CAP\nFailMode=closed\nMetricsAddress=127.0.0.1:9464\n"
      "GpuMemory=80G\nTopologyXml=/etc/egpu/topo.xml\nPreemptThresholdPct=2.5\n"
      "LogTarget=syslog LogLevel=debug GpuCount=8 HandoverTailUs=200\n"
      "InflightUs=1000 InflightAloneUs=0 GangPeriodMs=40 GangClock=shared PackNodes=Yes\n"
      "StepRecords=no StepRecordInterval=0 MonitorGroup=egpu-mon.1\n"
      "UnmanagedProcesses=report GpuDeviceFiles=/dev/shm/sim.gpu%d\n",
      "egpu.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->slice_ms, 5);
  EXPECT_EQ(c->default_mode, Mode::kCap);
  EXPECT_EQ(c->fail_mode, FailMode::kClosed);
  EXPECT_EQ(c->metrics_host(), "127.0.0.1");
  EXPECT_EQ(c->metrics_port(), 9464);
  EXPECT_EQ(c->gpu_memory_bytes, 80ull << 30);
  EXPECT_EQ(c->topology_xml, "/etc/egpu/topo.xml");
  EXPECT_DOUBLE_EQ(c->preempt_threshold_pct, 2.5);
  EXPECT_EQ(c->log_target, LogTarget::kSyslog);
  EXPECT_EQ(c->log_level, LogLevel::kDebug);
  EXPECT_EQ(c->gpu_count, 8);
  EXPECT_EQ(c->handover_tail_us, 200);
  EXPECT_EQ(c->inflight_us, 1000);
  EXPECT_EQ(c->inflight_alone_us, 0);
  EXPECT_EQ(c->gang_period_ms, 40);
  EXPECT_EQ(c->gang_clock, GangClock::kShared);
  EXPECT_TRUE(c->pack_nodes);
  EXPECT_FALSE(c->step_records);
  EXPECT_EQ(c->step_record_interval_s, 0);
  EXPECT_EQ(c->monitor_group, "egpu-mon.1");
  EXPECT_EQ(c->unmanaged_processes, UnmanagedAction::kReport);
  EXPECT_EQ(c->gpu_device_file(12), "/dev/shm/sim.gpu12");
}

struct BadCase {
  const char* text;
  const char* expect;  // substring of the error
};

class EgpuConfigRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(EgpuConfigRejects, WithAClearMessage) {
  auto c = parse_egpu_config(GetParam().text, "egpu.conf");
  ASSERT_FALSE(c.ok()) << "accepted: " << GetParam().text;
  EXPECT_NE(c.error().find(GetParam().expect), std::string::npos) << c.error();
  EXPECT_EQ(c.error().rfind("egpu.conf:", 0), 0u) << c.error();
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, EgpuConfigRejects,
    ::testing::Values(
        BadCase{"SliceMsec=5", "unknown key 'SliceMsec'; did you mean SliceMs?"},
        BadCase{"MontiorGroup=x", "unknown key 'MontiorGroup'; did you mean MonitorGroup?"},
        BadCase{"SliceMs=0", "between 1 and 50"}, BadCase{"SliceMs=51", "between 1 and 50"},
        BadCase{"SliceMs=ten", "not an integer"}, BadCase{"SliceMs=5\nSliceMs=6", "set twice"},
        // lend is no default either (below): not offered as one.
        BadCase{"DefaultMode=fast", "must be burst or cap, got 'fast'"},
        BadCase{"DefaultMode=lend", "lend is each step's own choice"},
        BadCase{"FailMode=maybe", "open|closed"},
        BadCase{"MetricsAddress=0.0.0.0:9464", "loopback"},
        BadCase{"MetricsAddress=10.1.2.3:80", "loopback"},
        BadCase{"MetricsAddress=127.0.0.1", "HOST:PORT"},
        BadCase{"MetricsAddress=127.0.0.1:99999", "port"},
        BadCase{"SocketPath=relative/sock", "absolute path"},
        // What no address could reach (root's socket adds ".root").
        BadCase{"SocketPath=/run/egpu/dddddddddddddddddddddddddddddd/aaaaaaaaaaaaaaaaaaaaaaaa"
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock",
                "names a socket of 71 bytes in a path of 112; a socket's name may have 70"},
        BadCase{"GpuMemory=12XB", "unknown unit"}, BadCase{"GpuMemory=0", "more than 0"},
        BadCase{"HeartbeatMs=500 HeartbeatTimeoutMs=600", "at least twice"},
        BadCase{"PreemptThresholdPct=-1", "between 0 and 100"},
        BadCase{"InflightUs=4000 InflightAloneUs=3000", "at least InflightUs"},
        BadCase{"InflightAloneUs=-5", "between 0 and 1000000"},
        BadCase{"GangPeriodMs=3", "at least twice InflightUs"},
        BadCase{"GangPeriodMs=2000", "between 0 and 1000"}, BadCase{"GangClock=ntp", "adjtimex"},
        BadCase{"PackNodes=1", "must be one of yes|no"},
        BadCase{"StepRecords=adminComment", "must be one of yes|no"},
        BadCase{"StepRecordInterval=5m", "StepRecordInterval"},
        BadCase{"StepRecordInterval=-1", "between 0 and 86400"},
        BadCase{"MonitorGroup=-wheel", "must be a group name or number, got '-wheel'"},
        BadCase{"MonitorGroup=\"a b\"", "must be a group name or number, got 'a b'"},
        BadCase{"UnmanagedProcesses=stop", "must be one of kill|report|off"},
        BadCase{"GpuDeviceFiles=/dev/nvidia0", "must hold one %d for the GPU's index"},
        BadCase{"GpuDeviceFiles=/dev/nvidia%u", "must hold one %d"},
        BadCase{"GpuDeviceFiles=/dev/gpu%d/%d", "must hold one %d"},
        BadCase{"GpuDeviceFiles=nvidia%d", "must be an absolute path"}));

// A rule between two keys names where each was set, or that it was not.
TEST(EgpuConfig, ARuleBetweenTwoKeysNamesTheirLines) {
  auto c = parse_egpu_config("# timing\nHeartbeatMs=500\n\nHeartbeatTimeoutMs=600\n", "egpu.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(),
            "egpu.conf: HeartbeatTimeoutMs=600 (line 4) must be at least twice HeartbeatMs=500 "
            "(line 2)");
  c = parse_egpu_config("GangPeriodMs=3\n", "egpu.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("GangPeriodMs=3 (line 1) must be 0 or at least twice InflightUs="),
            std::string::npos)
      << c.error();
  EXPECT_NE(c.error().find(" (the default): "), std::string::npos) << c.error();
}

// etc/egpu.conf documents "Empty = none", as MetricsAddress= is.
TEST(EgpuConfig, AnEmptyMonitorGroupIsNone) {
  auto c = parse_egpu_config("MonitorGroup=\nMetricsAddress=\n", "egpu.conf");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_TRUE(c->monitor_group.empty());
}

// Deeper than an address holds: the socket is reached through its
// directory, and its name of 70 bytes still fits there. A path that fits
// an address may have a longer name.
TEST(EgpuConfig, ADeepSocketPathIsAccepted) {
  for (const std::string& path :
       {"/run/egpu/" + std::string(200, 'd') + "/" + std::string(70 - 5, 'a') + ".sock",
        "/run/egpu/" + std::string(92 - 5, 'a') + ".sock"}) {
    auto c = parse_egpu_config("SocketPath=" + path + "\n", "egpu.conf");
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c->socket_path, path);
  }
}

// A directory opens and reads as nothing: the agent started on the defaults.
TEST(EgpuConfig, LoadFileRefusesADirectory) {
  auto c = load_egpu_config("/tmp");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("configuration file /tmp is not a regular file (a directory)"),
            std::string::npos)
      << c.error();
}

TEST(EgpuConfig, LoadFileReportsMissingPath) {
  auto c = load_egpu_config("/nonexistent/egpu.conf");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("/nonexistent/egpu.conf"), std::string::npos);
}

TEST(EgpuConfig, LoadFileNamesItInErrors) {
  char path[] = "/tmp/egpu-conf-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "SliceMs=3\nBogus=1\n";
  auto c = load_egpu_config(path);
  std::remove(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find(std::string(path) + ":2: unknown key 'Bogus'"), std::string::npos)
      << c.error();
}

TEST(ByteSize, ParsesUnits) {
  EXPECT_EQ(*parse_byte_size("1073741824"), 1073741824ull);
  EXPECT_EQ(*parse_byte_size("512M"), 512ull << 20);
  EXPECT_EQ(*parse_byte_size("16G"), 16ull << 30);
  EXPECT_EQ(*parse_byte_size("16GB"), 16ull << 30);
  EXPECT_EQ(*parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parse_byte_size("1PB"), 1ull << 50);
  EXPECT_EQ(*parse_byte_size("2k"), 2048ull);
}

TEST(ByteSize, RejectsGarbage) {
  EXPECT_FALSE(parse_byte_size("").ok());
  EXPECT_FALSE(parse_byte_size("G").ok());
  EXPECT_FALSE(parse_byte_size("1.2.3G").ok());
  EXPECT_FALSE(parse_byte_size("-1G").ok());
  EXPECT_FALSE(parse_byte_size("12 G").ok());
  EXPECT_FALSE(parse_byte_size("1ZB").ok());
  EXPECT_FALSE(parse_byte_size("99999999999E").ok());
}

TEST(ByteSize, Formats) {
  EXPECT_EQ(format_byte_size(100), "100 B");
  EXPECT_EQ(format_byte_size(16ull << 30), "16.0 GiB");
  EXPECT_EQ(format_byte_size(1536ull << 20), "1.5 GiB");
}

}  // namespace
}  // namespace egpu::config
