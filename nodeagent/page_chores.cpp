#include "nodeagent/page_chores.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "core/util/clock.h"
#include "nodeagent/worker_pool.h"

namespace egpu::agent {
namespace {

WorkerPool& workers() {
  static auto* pool = new WorkerPool(PageChores::kMaxWorkers);  // never destroyed (see WorkerPool)
  return *pool;
}

// Chores of each user: running (at most kPerUser) and waiting their turn.
class UserTurns {
 public:
  bool queue(uid_t uid, std::function<void()> chore) {
    {
      std::lock_guard lock(mu_);
      User& u = users_[uid];
      if (u.running >= PageChores::kPerUser) {
        u.waiting.push_back(std::move(chore));
        return true;
      }
      ++u.running;
    }
    return submit(uid, std::move(chore));
  }

  std::size_t waiting() {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& [uid, u] : users_)
      n += u.waiting.size();
    return n;
  }

  std::size_t backlog(uid_t uid) {
    std::lock_guard lock(mu_);
    const auto it = users_.find(uid);
    return it == users_.end()
               ? 0
               : it->second.waiting.size() + static_cast<std::size_t>(it->second.running);
  }

 private:
  struct User {
    int running = 0;
    std::deque<std::function<void()>> waiting;
  };

  // Out of memory a chore may be dropped (what it holds stays open); the
  // agent's thread and the workers never see an exception from here.
  bool submit(uid_t uid, std::function<void()> chore) noexcept {
    bool queued = false;
    try {
      queued = workers().run([this, uid, chore = std::move(chore)] {
        chore();
        finished(uid);
      });
    } catch (...) {
      queued = false;
    }
    if (!queued) finished(uid);  // its turn passes on
    return queued;
  }

  // A chore of `uid` ended: the user's next one takes its turn.
  void finished(uid_t uid) noexcept {
    std::function<void()> next;
    try {
      std::lock_guard lock(mu_);
      User& u = users_[uid];
      if (u.waiting.empty()) {
        if (--u.running == 0) users_.erase(uid);
        return;
      }
      next = std::move(u.waiting.front());
      u.waiting.pop_front();
    } catch (...) {
      return;
    }
    (void)submit(uid, std::move(next));
  }

  std::mutex mu_;
  std::unordered_map<uid_t, User> users_;
};

UserTurns& turns() {
  static auto* t = new UserTurns();  // never destroyed: chores end on detached workers
  return *t;
}

}  // namespace

bool PageChores::start() {
  return workers().start();
}

bool PageChores::queue(uid_t uid, std::function<void()> chore) {
  return turns().queue(uid, std::move(chore));
}

bool PageChores::unlink_if_named(int page, const std::string& path) {
  struct stat held {
  }, named{};
  if (::fstat(page, &held) != 0 || ::lstat(path.c_str(), &named) != 0) return false;
  if (held.st_dev != named.st_dev || held.st_ino != named.st_ino) return false;
  return ::unlink(path.c_str()) == 0;
}

bool PageChores::truncate_and_unlink(int page, size_t size, const std::string& path, bool unlink) {
  (void)!::ftruncate(page, static_cast<off_t>(size));
  const bool unlinked = unlink && unlink_if_named(page, path);
  ::close(page);
  return unlinked;
}

bool PageChores::remove_page_at(const std::string& path, size_t size) {
  // Blocking is the worker's to bear here (a lease the job holds breaks
  // in lease-break-time; a held lock waits).
  const int page = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (page < 0) return false;
  (void)truncate_and_unlink(page, size, path, true);
  return true;
}

bool PageChores::unlink_page(uid_t uid, int page, size_t size, std::string path,
                             std::string dir) noexcept {
  const bool queued = run(uid, [page, size, path = std::move(path), dir = std::move(dir)] {
    // A legacy page's name is in RuntimeDir: an unlink stuck on its lock
    // would hold RuntimeDir's, which every create takes. It stays, for the
    // next start's cleanup. The directory goes with the name, only (one
    // whose name went another way is left to the next start's cleanup).
    if (truncate_and_unlink(page, size, path, !dir.empty())) ::rmdir(dir.c_str());
  });
  if (!queued) ::close(page);
  return queued;
}

bool PageChores::set_aside(uid_t uid, const std::string& runtime_dir, const std::string& dir,
                           size_t size) noexcept {
  try {
    // Unique across restarts of the agent (its clock does not go back) and
    // within one (the count).
    static std::atomic<uint64_t> count{0};
    const std::string aside = runtime_dir + "/" + kSetAsidePrefix + std::to_string(monotonic_ns()) +
                              "-" + std::to_string(count.fetch_add(1)) + ".d";
    if (::rename(dir.c_str(), aside.c_str()) != 0) return false;
    (void)remove_set_aside(uid, aside, size);  // else left to the next start
    return true;
  } catch (...) {
    return false;
  }
}

bool PageChores::remove_set_aside(uid_t uid, std::string dir, size_t size) noexcept {
  return run(uid, [dir = std::move(dir), size] {
    const std::string path = dir + "/page";
    // Not a regular file of the agent's (never mapped): only its name goes.
    if (!remove_page_at(path, size)) ::unlink(path.c_str());
    ::rmdir(dir.c_str());
  });
}

std::size_t PageChores::backlog(uid_t uid) {
  return turns().backlog(uid);
}

std::size_t PageChores::pending() {
  return workers().pending() + turns().waiting();
}

}  // namespace egpu::agent
