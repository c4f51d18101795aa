/* job_submit/egpu's packed node weights (PackNodes=yes in egpu.conf).
 *
 * A thread in slurmctld keeps each node's weight at
 * egpu_packed_node_weight(the tier of its slurm.conf Weight, its free egpu
 * units) (core/model/node_weight.h), so that Slurm, which tries the lightest
 * nodes first, fills nodes with shares before it opens another. Nodes that
 * are powered down or changing power are left alone.
 *
 * Why a thread: Slurm has no plugin hook where allocations change, and
 * job_submit runs under read locks, where a weight must not be written. Once
 * a second the thread reads the nodes' egpu state under read locks and, only
 * where a weight must change, applies it with update_node() under the locks
 * `scontrol update NodeName=.. Weight=..` takes (update_node splits Slurm's
 * config records as it must). Slurm's scheduler thus sees weights at most a
 * second old; it places many jobs per pass with the weights of its start.
 *
 * The free units of a node, as cons_tres counts them: per GPU, its egpu units
 * not allocated, and none on a GPU that a job holds whole (gres/gpu). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, pthread_timedjoin_np */
#endif
#include "egpu_node_weights.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifdef EGPU_HAVE_TOPO
#include "core/config/egpu_config_c.h"
#endif
#include "core/model/node_weight.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/slurmctld.h"

#define PERIOD_MS 1000
#define JOIN_TIMEOUT_S 5

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static bool wake_ready = false;
/* A thread runs while its generation is the current one: a thread that
 * outlived a stop (blocked on slurmctld's locks) ends on its own later. */
static uint64_t generation = 0;
static bool running = false;
static pthread_t thread;

/* The thread's own state (only it touches these). */
typedef struct {
  bool conf_seen;
  struct stat conf_stat;
  bool pack;             /* PackNodes as last read */
  bool restore_due;      /* PackNodes went from yes to no: put slurm.conf's back */
  time_t failure_logged; /* when an update_node() failure was last logged */
  bool tiers_logged;     /* too many configured weights (logged once) */
} weights_state_t;

static bool current(uint64_t gen) {
  pthread_mutex_lock(&mutex);
  bool cur = gen == generation;
  pthread_mutex_unlock(&mutex);
  return cur;
}

static bool same_file(const struct stat* a, const struct stat* b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Re-reads egpu.conf when it changed. A file with an error keeps the last
 * setting (the agent would refuse it the same way: see the message). */
static void refresh_config(weights_state_t* st) {
#ifdef EGPU_HAVE_TOPO
  const char* path = egpu_conf_path();
  struct stat now;
  memset(&now, 0, sizeof(now));
  if (stat(path, &now) != 0 && errno != ENOENT) return;
  if (st->conf_seen && same_file(&now, &st->conf_stat)) return;
  st->conf_seen = true;
  st->conf_stat = now;
  egpu_conf_t* conf = NULL;
  char err[512] = "";
  if (egpu_conf_load(path, EGPU_CONF_MISSING_IS_DEFAULTS, &conf, err, sizeof(err)) != 0) {
    error("job_submit/egpu: %s; PackNodes stays %s", err, st->pack ? "yes" : "no");
    return;
  }
  bool pack = egpu_conf_pack_nodes(conf) != 0;
  egpu_conf_free(conf);
  if (pack == st->pack) return;
  info("job_submit/egpu: PackNodes=%s (%s): %s", pack ? "yes" : "no", path,
       pack ? "node weights follow free egpu units" : "node weights back to slurm.conf's");
  st->restore_due = !pack;
  st->pack = pack;
#else
  (void)st; /* built without core/config (build-plugins --config-lib): never packs */
#endif
}

static int is_plugin(void* x, void* key) {
  return ((gres_state_t*)x)->plugin_id == *(uint32_t*)key;
}

gres_node_state_t* egpu_node_gres_state(node_record_t* node_ptr, uint32_t egpu_id) {
  if (!node_ptr->gres_list) return NULL;
  gres_state_t* gs = list_find_first(node_ptr->gres_list, is_plugin, &egpu_id);
  return gs ? gs->gres_data : NULL;
}

static uint64_t free_egpu_units(node_record_t* node_ptr, uint32_t egpu_id) {
  gres_node_state_t* ns = egpu_node_gres_state(node_ptr, egpu_id);
  if (!ns) return 0;
  if (ns->topo_cnt == 0 || !ns->topo_gres_cnt_avail || !ns->topo_gres_cnt_alloc)
    return ns->gres_cnt_avail > ns->gres_cnt_alloc ? ns->gres_cnt_avail - ns->gres_cnt_alloc : 0;
  gres_node_state_t* gpu = EGPU_ALT_GRES_NS(ns);
  uint64_t free_units = 0;
  for (int i = 0; i < ns->topo_cnt; i++) {
    if (gpu && gpu->gres_bit_alloc && ns->topo_gres_bitmap && ns->topo_gres_bitmap[i] &&
        bit_overlap_any(ns->topo_gres_bitmap[i], gpu->gres_bit_alloc))
      continue; /* held whole */
    if (ns->topo_gres_cnt_avail[i] > ns->topo_gres_cnt_alloc[i])
      free_units += ns->topo_gres_cnt_avail[i] - ns->topo_gres_cnt_alloc[i];
  }
  return free_units;
}

/* The tiers of one pass: slurm.conf's distinct weights, sorted. */
typedef struct {
  uint32_t* weights;
  int count;
} tiers_t;

static int compare_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}

/* Under the caller's node lock. */
static tiers_t build_tiers(void) {
  tiers_t t = {NULL, 0};
  node_record_t* node_ptr;
  int n = 0;
  for (int i = 0; (node_ptr = next_node(&i)); i++)
    n++;
  if (n == 0) return t;
  t.weights = xcalloc(n, sizeof(uint32_t));
  n = 0;
  for (int i = 0; (node_ptr = next_node(&i)); i++)
    t.weights[n++] = node_ptr->weight; /* slurm.conf's: update_node changes the config record's */
  qsort(t.weights, n, sizeof(uint32_t), compare_u32);
  for (int i = 0; i < n; i++)
    if (t.count == 0 || t.weights[t.count - 1] != t.weights[i]) t.weights[t.count++] = t.weights[i];
  return t;
}

static uint32_t tier_of(const tiers_t* t, uint32_t weight) {
  const uint32_t* hit = bsearch(&weight, t->weights, t->count, sizeof(uint32_t), compare_u32);
  return hit ? (uint32_t)(hit - t->weights) : 0;
}

/* Powered down or changing power: left alone. With MaxPoweredUpNodes,
 * update_node() counts the nodes it updates as being powered up and would
 * refuse the update. */
static bool power_saved(node_record_t* node_ptr) {
  return IS_NODE_POWERED_DOWN(node_ptr) || IS_NODE_POWERING_DOWN(node_ptr) ||
         IS_NODE_POWERING_UP(node_ptr);
}

/* The weight the node should have now, or its current one to leave it.
 * node_ptr->config_ptr is not NULL. */
static uint32_t wanted_weight(node_record_t* node_ptr, bool pack, const tiers_t* tiers,
                              uint32_t egpu_id) {
  if (power_saved(node_ptr)) return node_ptr->config_ptr->weight;
  if (!pack) return node_ptr->weight;
  return egpu_packed_node_weight(tier_of(tiers, node_ptr->weight),
                                 free_egpu_units(node_ptr, egpu_id));
}

/* Nodes whose weight must change, under the caller's node lock. */
static int count_changes(bool pack, const tiers_t* tiers, uint32_t egpu_id) {
  node_record_t* node_ptr;
  int changes = 0;
  for (int i = 0; (node_ptr = next_node(&i)); i++) {
    if (node_ptr->config_ptr &&
        node_ptr->config_ptr->weight != wanted_weight(node_ptr, pack, tiers, egpu_id))
      changes++;
  }
  return changes;
}

typedef struct {
  uint32_t weight;
  egpu_hostlist_t nodes;
} weight_group_t;

/* update_node() calls per pass, each under the write locks for a walk over
 * Slurm's config records: a burst of changes (PackNodes turned on, a
 * restart with jobs) is spread over passes instead of holding the locks. */
#define MAX_GROUPS_PER_PASS 64
#define FAILURE_LOG_INTERVAL_S 60

/* Applies the changes, one update_node() per distinct weight, under the
 * caller's write locks. Returns the nodes changed. */
static int apply_changes(weights_state_t* st, bool pack, const tiers_t* tiers, uint32_t egpu_id) {
  weight_group_t* groups = NULL;
  int group_cnt = 0, changed = 0;
  node_record_t* node_ptr;
  for (int i = 0; (node_ptr = next_node(&i)); i++) {
    if (!node_ptr->config_ptr) continue;
    uint32_t want = wanted_weight(node_ptr, pack, tiers, egpu_id);
    if (node_ptr->config_ptr->weight == want) continue;
    int g = 0;
    while (g < group_cnt && groups[g].weight != want)
      g++;
    if (g == group_cnt) {
      if (group_cnt == MAX_GROUPS_PER_PASS) continue; /* the next pass */
      xrecalloc(groups, group_cnt + 1, sizeof(*groups));
      groups[g].weight = want;
      groups[g].nodes = hostlist_create(NULL);
      group_cnt++;
    }
    hostlist_push_host(groups[g].nodes, node_ptr->name);
  }
  for (int g = 0; g < group_cnt; g++) {
    update_node_msg_t msg;
    slurm_init_update_node_msg(&msg);
    msg.node_names = hostlist_ranged_string_xmalloc(groups[g].nodes);
    msg.weight = groups[g].weight;
    int rc = update_node(&msg, slurm_conf.slurm_user_id);
    if (rc == SLURM_SUCCESS) {
      changed += hostlist_count(groups[g].nodes);
    } else if (time(NULL) - st->failure_logged >= FAILURE_LOG_INTERVAL_S) {
      error("job_submit/egpu: cannot set Weight=%u on %s: %s (logged at most once a minute)",
            msg.weight, msg.node_names, slurm_strerror(rc));
      st->failure_logged = time(NULL);
    }
    xfree(msg.node_names);
    FREE_NULL_HOSTLIST(groups[g].nodes);
  }
  xfree(groups);
  return changed;
}

/* Too many distinct configured weights to keep them apart below 2^24
 * (core/model/node_weight.h): the cluster is not packed. */
static bool too_many_tiers(weights_state_t* st, const tiers_t* tiers) {
  if (tiers->count <= (int)EGPU_NODE_WEIGHT_TIERS) return false;
  if (!st->tiers_logged)
    error(
        "job_submit/egpu: %d distinct node weights in slurm.conf, more than the %u that "
        "PackNodes can keep in order; node weights stay slurm.conf's",
        tiers->count, (unsigned)EGPU_NODE_WEIGHT_TIERS);
  st->tiers_logged = true;
  return true;
}

static void run_pass(weights_state_t* st, uint64_t gen, uint32_t egpu_id) {
  if (!st->pack && !st->restore_due) return;
  const slurmctld_lock_t read_lock = {.node = READ_LOCK};
  /* The locks of `scontrol update NodeName=..` (_slurm_rpc_update_node). */
  const slurmctld_lock_t write_lock = {
      .job = WRITE_LOCK, .node = WRITE_LOCK, .part = WRITE_LOCK, .fed = READ_LOCK};
  lock_slurmctld(read_lock);
  bool stop = slurmctld_config.shutdown_time || !current(gen);
  int changes = 0;
  if (!stop) {
    tiers_t tiers = build_tiers();
    bool pack = st->pack && !too_many_tiers(st, &tiers);
    changes = count_changes(pack, &tiers, egpu_id);
    xfree(tiers.weights);
  }
  unlock_slurmctld(read_lock);
  if (changes == 0) {
    if (!stop) st->restore_due = false;
    return;
  }
  lock_slurmctld(write_lock);
  int changed = 0;
  if (!slurmctld_config.shutdown_time && current(gen)) {
    tiers_t tiers = build_tiers();
    bool pack = st->pack && !too_many_tiers(st, &tiers);
    changed = apply_changes(st, pack, &tiers, egpu_id);
    xfree(tiers.weights);
  }
  unlock_slurmctld(write_lock);
  debug("job_submit/egpu: %d node weight(s) updated", changed);
}

static void* weights_main(void* arg) {
  const uint64_t gen = (uint64_t)(uintptr_t)arg;
  weights_state_t st;
  memset(&st, 0, sizeof(st));
  uint32_t egpu_id = gres_build_id("egpu");
  while (current(gen)) {
    refresh_config(&st);
    run_pass(&st, gen, egpu_id);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += PERIOD_MS / 1000;
    pthread_mutex_lock(&mutex);
    while (gen == generation) {
      if (pthread_cond_timedwait(&wake, &mutex, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&mutex);
  }
  return NULL;
}

/* A thread that outlives egpu_node_weights_stop() (blocked on slurmctld's
 * locks while they are held across the plugin's unload, as 22.05's
 * reconfigure does) must still find its code mapped. */
static void pin_library(void) {
  Dl_info self;
  if (dladdr(&generation, &self) && self.dli_fname)
    (void)dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

void egpu_node_weights_start(void) {
#ifndef EGPU_HAVE_TOPO
  info("job_submit/egpu: built without core/config, so PackNodes is not read");
  return;
#endif
  pthread_mutex_lock(&mutex);
  if (!wake_ready) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
    wake_ready = true;
  }
  if (running) {
    pthread_mutex_unlock(&mutex);
    return;
  }
  generation++;
  pin_library();
  int rc = pthread_create(&thread, NULL, weights_main, (void*)(uintptr_t)generation);
  running = rc == 0;
  pthread_mutex_unlock(&mutex);
  if (rc != 0) error("job_submit/egpu: no node weight thread: %s", strerror(rc));
}

void egpu_node_weights_stop(void) {
  pthread_mutex_lock(&mutex);
  if (!running) {
    pthread_mutex_unlock(&mutex);
    return;
  }
  running = false;
  generation++;
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&mutex);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += JOIN_TIMEOUT_S;
  if (pthread_timedjoin_np(thread, NULL, &until) != 0) {
    error(
        "job_submit/egpu: the node weight thread is still waiting for slurmctld's locks; it "
        "ends when it gets them");
    pthread_detach(thread);
  }
}
