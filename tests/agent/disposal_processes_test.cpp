// DisposalProcesses: a user's process stuck on a close, its feed full, gets
// a successor, up to the bound; past it the user is refused, and another
// user still gets a process. Small feeds and a bound of 2, so a few
// lingering sockets fill them. Each case runs in a child (the processes are
// its children, killed with it).
#include "nodeagent/disposal_processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "tests/agent/lingering_socket.h"

namespace egpu::agent {
namespace {

using test::have_loopback;
using test::lingering_socket;
using test::LingeringSocket;
using test::send_descriptor;

void close_here(UniqueFd) {}

// A unix socket whose last close blocks for an hour: a lingering TCP
// socket is queued in it.
UniqueFd blocking_socket(std::vector<LingeringSocket>* held) {
  held->push_back(lingering_socket());
  int pair[2];
  if (!held->back().socket.valid() ||
      ::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return {};
  }
  UniqueFd outer(pair[0]);
  UniqueFd sender(pair[1]);
  if (!send_descriptor(sender.get(), held->back().socket.get())) return {};
  held->back().socket.reset();
  return outer;
}

// Runs `body` in a child; its exit code (or -1 if it did not finish).
int in_child(const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child == 0) _exit(body());
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Hands `uid` blocking sockets until it is refused: each process blocks on
// the first socket it takes, the rest fill its feed, then its successor's.
// How many were handed; -1 where a socket could not be made or none was
// refused.
int hand_until_refused(DisposalProcesses& processes, uid_t uid,
                       std::vector<LingeringSocket>* held) {
  int handed = 0;
  for (int i = 0; i < 200; ++i) {
    UniqueFd fd = blocking_socket(held);
    if (!fd.valid()) return -1;
    if (!processes.hand(fd, uid, 0)) {
      (void)fd.release();  // its close would block; the exit does not linger
      return handed;
    }
    ++handed;
  }
  return -1;
}

TEST(DisposalProcesses, AStuckUserGetsSuccessorsUpToTheBoundAndNoOneElseWaits) {
  constexpr std::size_t kBound = 2;
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  EXPECT_EQ(in_child([&] {
              DisposalProcesses processes(&close_here, 4096, kBound);
              std::vector<LingeringSocket> held;
              const int handed = hand_until_refused(processes, 1001, &held);
              if (handed < 0) return 4;
              if (processes.alive() != kBound) return 5;
              if (handed <= static_cast<int>(kBound)) return 6;
              // Another user gets a process of its own.
              int ends[2];
              if (::pipe(ends) != 0) return 7;
              UniqueFd other(ends[1]);
              if (!processes.hand(other, 1002, DisposalProcesses::kIdleNs)) return 8;
              // The stuck ones are not taken for idle by the other user's hand.
              if (processes.alive() != kBound + 1) return 9;
              return 0;
            }),
            0)
      << "exit code says which check failed";
}

// A user whose processes are all stuck (their feeds full) has them killed:
// an exiting process's close does not linger, so they end, and the user
// gets new ones for what comes next.
TEST(DisposalProcesses, StuckProcessesThatAreKilledEndAndTheUserGetsNewOnes) {
  constexpr std::size_t kBound = 2;
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  EXPECT_EQ(in_child([&] {
              DisposalProcesses processes(&close_here, 4096, kBound);
              std::vector<LingeringSocket> held;
              // One process, not all stuck: none killed (a start that failed
              // for want of descriptors leaves healthy ones be).
              int ends[2];
              if (::pipe(ends) != 0) return 9;
              UniqueFd write_end(ends[1]);
              UniqueFd read_end(ends[0]);
              if (!processes.hand(write_end, 1001, 0)) return 10;
              if (processes.end_stuck(1001) != 0 || processes.alive() != 1) return 11;
              if (hand_until_refused(processes, 1001, &held) < 0) return 4;
              if (processes.end_stuck(1001) != kBound) return 5;
              // Each waited for an hour's linger; killed, they are gone at once.
              while (processes.alive() != 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
              UniqueFd next = blocking_socket(&held);
              if (!next.valid()) return 6;
              if (!processes.hand(next, 1001, 0)) return 7;
              if (processes.alive() != 1) return 8;
              return 0;
            }),
            0)
      << "exit code says which check failed (-1: the killed processes did not end)";
}

// A process that has closed all it was given, and was given nothing for
// kIdleNs, ends when another user's is needed; one stuck in a close (its
// feed empty) does not, and takes its user's next socket.
TEST(DisposalProcesses, OnlyAProcessThatClosedAllItWasGivenEnds) {
  if (!have_loopback()) GTEST_SKIP() << "no loopback TCP here";
  EXPECT_EQ(in_child([] {
              DisposalProcesses processes(&close_here);
              std::vector<LingeringSocket> held;
              int64_t now = 0;  // each hand a while after the last
              const auto hand_pipe_end = [&](uid_t uid) {
                int ends[2];
                if (::pipe(ends) != 0) return false;
                ::close(ends[0]);
                UniqueFd write_end(ends[1]);
                now += DisposalProcesses::kIdleNs;
                return processes.hand(write_end, uid, now);
              };
              // 1001's process blocks on its socket, its feed empty.
              UniqueFd stuck = blocking_socket(&held);
              if (!stuck.valid() || !processes.hand(stuck, 1001, now)) return 2;
              // 1002's closes a pipe end; others' hands end it once it has.
              if (!hand_pipe_end(1002)) return 3;
              for (int i = 0; i < 3000 && processes.alive() != 2; ++i) {
                if (!hand_pipe_end(1003)) return 4;
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
              }
              if (processes.alive() != 2) return 5;  // 1001's and 1003's
              // 1001's next goes to its stuck process, not a new one: once
              // 1003's has ended, 1001's one and 1004's are all there are.
              UniqueFd again = blocking_socket(&held);
              if (!again.valid() || !processes.hand(again, 1001, now)) return 6;
              for (int i = 0; i < 3000; ++i) {
                if (!hand_pipe_end(1004)) return 7;
                if (processes.alive() == 2) return 0;
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
              }
              return 9;
            }),
            0)
      << "exit code says which check failed";
}

// Two users passing descriptors in turn, a hand each microsecond (100: the
// answers of each process fit its feed, so it can be found idle): each
// user's process stays (the other's hands are within kIdleNs), so two
// processes are started, not one per hand (each a clone of the agent).
// Idle past kIdleNs, the other's ends at the next hand.
TEST(DisposalProcesses, UsersPassingInTurnDoNotStartAProcessEachTime) {
  EXPECT_EQ(in_child([] {
              DisposalProcesses processes(&close_here);
              for (int i = 0; i < 100; ++i) {
                int ends[2];
                if (::pipe(ends) != 0) return 2;
                ::close(ends[0]);
                UniqueFd write_end(ends[1]);
                if (!processes.hand(write_end, i % 2 == 0 ? 1001 : 1002, i * 1000)) return 3;
              }
              if (processes.started() != 2) return 4;
              // 1002's closes what it was given; then, idle for kIdleNs, it ends.
              for (int i = 0; i < 3000 && processes.alive() != 1; ++i) {
                int ends[2];
                if (::pipe(ends) != 0) return 5;
                ::close(ends[0]);
                UniqueFd write_end(ends[1]);
                if (!processes.hand(write_end, 1001, 100'000 + DisposalProcesses::kIdleNs))
                  return 6;
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
              }
              if (processes.started() != 2) return 7;
              return processes.alive() == 1 ? 0 : 10 + static_cast<int>(processes.alive());
            }),
            0)
      << "exit code says which check failed";
}

}  // namespace
}  // namespace egpu::agent
