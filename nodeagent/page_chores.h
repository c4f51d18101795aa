// PageChores: what the agent does to a file a job owns, off the agent's
// thread. An instance page is its user's file, and the operations that
// change it (ftruncate, unlink, rename, chown) take its inode lock, which
// the user can hold for as long as it likes: a write() into the page from a
// buffer on a FUSE file whose daemon never answers holds it in the kernel.
// On the agent's only thread that would stop every GPU's ticks (the shims'
// heartbeat goes stale within a second) and no signal would end it. So
// these run on chore workers (a WorkerPool of kMaxWorkers); each user has
// at most kPerUser chores running (the rest wait their turn), so users'
// held locks take the workers from everyone else's pages only when there
// are kMaxWorkers / kPerUser such users.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

namespace egpu::agent {

class PageChores {
 public:
  static constexpr int kMaxWorkers = 64;
  static constexpr int kPerUser = 2;
  // Chores of one user, running and waiting, past which the agent makes no
  // new page of that user's (each waiting chore holds a page's descriptor).
  static constexpr std::size_t kMaxBacklogPerUser = 64;

  // Starts the first worker (at the agent's start: a failure is a failed
  // start, not an exception in the event loop).
  static bool start();
  // Runs `chore` for a page of `uid` on a worker, after that user's earlier
  // chores if it has kPerUser running; false (and nothing runs) when it
  // cannot be queued (out of memory). Never blocks on a chore.
  template <typename Chore>
  static bool run(uid_t uid, Chore&& chore) noexcept {
    try {
      return queue(uid, std::function<void()>(std::forward<Chore>(chore)));
    } catch (...) {
      return false;
    }
  }
  // Removes a page's name, then its directory `dir` (none: "", a page of
  // the legacy layout, whose name in RuntimeDir stays for the next start). `page` (a descriptor of
  // the page, closed here) is truncated to `size` first, which waits for a lock one write holds
  // without holding any directory's. unlink holds `dir`'s lock while it
  // takes the page's (a user with a second write queued behind the first
  // gets it first): that directory is the page's alone, and it is removed
  // only once the unlink has returned, so RuntimeDir's lock is never held
  // waiting for a page's.
  static bool unlink_page(uid_t uid, int page, size_t size, std::string path,
                          std::string dir) noexcept;
  // Moves a page's directory `dir` (in `runtime_dir`) out of the way, then
  // removes it and its page on a chore. A rename of a directory takes
  // RuntimeDir's lock and the directories', never the page's, so this is
  // how the agent's thread replaces a page whose user may hold its lock:
  // the fresh page can be made at once in a new `dir`. False (and `dir`
  // left as it is) where the rename fails.
  // As unlink_page, the page is first truncated to `size` (the storage of a
  // page grown past it goes; processes that map it keep what they map).
  static bool set_aside(uid_t uid, const std::string& runtime_dir, const std::string& dir,
                        size_t size) noexcept;
  // Names set_aside gives (kSetAsidePrefix...): removed at an agent's start.
  static constexpr const char* kSetAsidePrefix = "gone-";
  // Removes what set_aside left (the directory `dir` and its page), on a chore.
  static bool remove_set_aside(uid_t uid, std::string dir, size_t size) noexcept;
  // Unlinks `path` if it still names the file `page` is a descriptor of
  // (on a chore: unlink takes the file's lock). Only the agent makes names
  // in a page's directory (root's, 0711), so what this checks cannot change
  // under it but by the agent itself: an instance id used again before an
  // earlier chore of that id ran must not lose its page's name.
  static bool unlink_if_named(int page, const std::string& path);
  // Opens the page `path` names, truncates it to `size` and unlinks the
  // name while it still names that page (on a chore); false where it
  // cannot be opened.
  static bool remove_page_at(const std::string& path, size_t size);
  // Chores waiting or running: for tests and the status.
  static std::size_t pending();
  // Those of `uid`.
  static std::size_t backlog(uid_t uid);

 private:
  static bool queue(uid_t uid, std::function<void()> chore);
  // Truncates `page` to `size`, unlinks `path` if `unlink` and it still
  // names `page`, and closes `page`; whether the name went.
  static bool truncate_and_unlink(int page, size_t size, const std::string& path, bool unlink);
};

}  // namespace egpu::agent
