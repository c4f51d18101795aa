// A socket a user planted where root's egpuctl looks for the agent (a
// SocketPath whose directory is not root's alone, or $EGPU_SOCKET taken
// from a job's environment): root's client talks only to a listener of
// root's (or of its own uid, an agent a test runs), so nothing a user's
// listener says reaches an admin as the agent's answer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "core/protocol/control_client.h"
#include "tests/agent/agent_fixture.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

// Mallory's listener at `path`, until the test kills it.
class PlantedListener {
 public:
  explicit PlantedListener(const std::string& path) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return;
    const pid_t test = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      if (!become(kMallory)) _exit(99);
      (void)prctl(PR_SET_PDEATHSIG, SIGKILL);  // after become(), which clears it
      if (getppid() != test) _exit(0);
      const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
      if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
          listen(fd, 8) != 0) {
        _exit(98);
      }
      (void)!write(ready[1], "r", 1);
      for (;;)
        pause();
    }
    close(ready[1]);
    char byte = 0;
    listening_ = pid_ > 0 && read(ready[0], &byte, 1) == 1;
    close(ready[0]);
  }
  ~PlantedListener() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  bool listening() const { return listening_; }

 private:
  pid_t pid_ = -1;
  bool listening_ = false;
};

TEST(PlantedSocket, RootsClientRefusesAListenerOfAUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "plays another uid: needs root";
  char dir_template[] = "/tmp/egpu-planted-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  ASSERT_NE(dir, nullptr) << std::strerror(errno);
  ASSERT_EQ(chown(dir, kMallory, kMallory), 0) << std::strerror(errno);
  const std::string path = std::string(dir) + "/agent.sock";
  {
    PlantedListener listener(path);
    ASSERT_TRUE(listener.listening()) << "Mallory could not listen at " << path;
    auto client = protocol::ControlClient::connect(path, 3000);
    ASSERT_FALSE(client.ok()) << "root connected to Mallory's listener as if it were the agent";
    EXPECT_EQ(client.failure(), protocol::CallFailure::kRefused);
    EXPECT_NE(client.error().find("served by uid 4242"), std::string::npos) << client.error();
    // Through $EGPU_SOCKET, as egpuctl finds it, the same.
    ASSERT_EQ(setenv("EGPU_SOCKET", path.c_str(), 1), 0);
    auto by_env = protocol::ControlClient::connect(protocol::default_socket_path(), 3000);
    unsetenv("EGPU_SOCKET");
    EXPECT_FALSE(by_env.ok());
  }
  unlink(path.c_str());
  rmdir(dir);
}

// The agent is root's: root's client and a user's both reach it.
TEST(PlantedSocket, TheAgentOfRootsIsReachedByRootAndByUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "plays another uid: needs root";
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  // Bounds for a hung agent, not measures of a busy host.
  auto root = protocol::ControlClient::connect(agent.socket(), 30'000);
  EXPECT_TRUE(root.ok()) << root.error();
  EXPECT_EQ(run_as(kMallory,
                   [&] {
                     auto user = protocol::ControlClient::connect(agent.socket(), 30'000);
                     return user.ok() ? 0 : 1;
                   }),
            0);
}

// A job in a container with a user namespace of its own (Pyxis/enroot,
// rootless Podman), root in it and Mallory outside: the namespace does not
// map root, so the agent's listener shows as the unmapped uid. Its shim
// reaches the agent as before, as Mallory.
TEST(PlantedSocket, AJobInAUserNamespaceOfItsOwnReachesTheAgent) {
  if (geteuid() != 0) GTEST_SKIP() << "maps another uid into a user namespace: needs root";
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  int to_parent[2];
  int to_child[2];
  ASSERT_EQ(pipe2(to_parent, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
  const pid_t child = fork();
  if (child == 0) {
    if (!become(kMallory)) _exit(99);
    const char unshared = unshare(CLONE_NEWUSER) == 0 ? 1 : 0;
    (void)!write(to_parent[1], &unshared, 1);
    char go = 0;
    if (unshared == 0 || read(to_child[0], &go, 1) != 1 || go != 1) _exit(77);
    if (geteuid() != 0) _exit(3);  // the map did not take
    // A bound for a hung agent, not a measure of a busy host.
    auto client = protocol::ControlClient::connect(agent.socket(), 30'000);
    if (!client) {
      std::fprintf(stderr, "%s\n", client.error().c_str());
      _exit(1);
    }
    auto status = client->call(protocol::StatusRequest{0, 0});
    _exit(status && status->status == protocol::ReplyStatus::kOk ? 0 : 2);
  }
  close(to_parent[1]);
  close(to_child[0]);
  char unshared = 0;
  ASSERT_EQ(read(to_parent[0], &unshared, 1), 1);
  const std::string map = "/proc/" + std::to_string(child) + "/uid_map";
  const std::string mapping = "0 " + std::to_string(kMallory) + " 1\n";
  const char go = unshared == 1 && std::ofstream(map) << mapping ? 1 : 0;
  (void)!write(to_child[1], &go, 1);
  int status = 0;
  waitpid(child, &status, 0);
  close(to_parent[0]);
  close(to_child[1]);
  if (unshared == 0) GTEST_SKIP() << "no user namespaces here";
  ASSERT_EQ(go, 1) << "cannot write " << map;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1)
      << " (1: the client refused the agent; 2: no status; 3: not root inside; 99: not Mallory)";
}

}  // namespace
}  // namespace egpu::test
