#include "tests/agent/control_server_child.h"

#include <event2/event.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

namespace egpu::test {

pid_t start_control_server(const std::string& path, const agent::ControlLimits& limits,
                           agent::ControlServer::Handler handler) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) {
    close(ready[0]);
    close(ready[1]);
    return -1;
  }
  if (pid == 0) {
    close(ready[0]);
    event_base* base = event_base_new();
    auto server = agent::ControlServer::listen(base, path, std::move(handler), limits);
    const char ok = server ? 1 : 0;
    (void)!write(ready[1], &ok, 1);
    if (server) event_base_dispatch(base);
    _exit(0);
  }
  close(ready[1]);
  char ok = 0;
  const bool started = read(ready[0], &ok, 1) == 1 && ok == 1;
  close(ready[0]);
  if (!started) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

}  // namespace egpu::test
