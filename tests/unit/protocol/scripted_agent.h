// ScriptedAgent: a stand-in for the node agent's control socket that accepts
// one connection and runs a script on it (answer garbage, refuse, stay silent,
// send descriptors...), for tests of the control client and its callers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace egpu::test {

class ScriptedAgent {
 public:
  // Listens on a fresh path under /tmp and runs `script` on the first
  // connection in a thread of its own; the connection is closed after it.
  explicit ScriptedAgent(std::function<void(int conn)> script);
  ~ScriptedAgent();  // stops listening and waits for the script
  ScriptedAgent(const ScriptedAgent&) = delete;
  ScriptedAgent& operator=(const ScriptedAgent&) = delete;

  const std::string& path() const { return path_; }
  // Waits until the script has run and the connection is closed.
  void wait();

 private:
  std::string path_;
  int listener_ = -1;
  std::thread thread_;
};

// Reads one request and returns its id (0 if unreadable).
uint32_t read_request(int conn);
// Stays silent until the client closes the connection (or 60 s pass): a
// client that times out is then never answered, however late it runs.
void wait_for_close(int conn);
// Sends `bytes` as one message with `fds` (SCM_RIGHTS, at most 8); MSG_NOSIGNAL,
// so a client that gave up is a failed send, not a SIGPIPE. True when all was sent.
bool send_with_fds(int conn, const std::vector<uint8_t>& bytes, const std::vector<int>& fds = {});

}  // namespace egpu::test
