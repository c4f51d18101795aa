#include "nodeagent/page_chores.h"

#include <utility>

#include "nodeagent/worker_pool.h"

namespace egpu::agent {
namespace {

WorkerPool& workers() {
  static auto* pool = new WorkerPool(PageChores::kMaxWorkers);  // never destroyed (see WorkerPool)
  return *pool;
}

}  // namespace

bool PageChores::start() {
  return workers().start();
}

bool PageChores::run(std::function<void()> chore) noexcept {
  return workers().run(std::move(chore));
}

std::size_t PageChores::pending() {
  return workers().pending();
}

}  // namespace egpu::agent
