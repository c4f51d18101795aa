/* Node-side state of gres/egpu: loading (slurmd) and shipping to slurmstepd. */
#include "egpu_node.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "gres_c_s.h"
#include "gres_common.h"
#include "src/common/hostlist.h"
#include "src/slurmd/slurmd/slurmd.h"

#ifdef EGPU_HAVE_TOPO
#include "core/config/egpu_config_c.h"
#include "core/topo/topo_c.h"
#endif

/* slurmd and slurmstepd export their config; slurmctld and the clients have
 * none, hence weak (the plugin is loaded by all of them). */
extern slurmd_conf_t* conf __attribute__((weak));

#ifdef EGPU_HAVE_TOPO
/* libslurmfull's hook to slurmd's abstract->machine CPU mapping (gres.c keeps
 * the type private; same layout in 22.05 and 24.11). */
extern struct xcpuinfo_funcs { int (*xcpuinfo_abs_to_mac)(char* abs, char** mac); } xcpuinfo_ops;
#endif

egpu_list_t egpu_node_gres_devices = NULL;
uint32_t egpu_node_env_flags = 0;

typedef struct {
  char* uuid;
  char* type; /* short model name, e.g. "v100" */
  uint64_t memory;
} egpu_gpu_info_t;

static egpu_gpu_info_t* gpu_info = NULL; /* indexed by device number */
static uint32_t gpu_info_cnt = 0;
static char* node_name = NULL;

static void clear_gpu_info(void) {
  for (uint32_t i = 0; i < gpu_info_cnt; i++) {
    xfree(gpu_info[i].uuid);
    xfree(gpu_info[i].type);
  }
  xfree(gpu_info);
  gpu_info_cnt = 0;
}

void egpu_node_fini(void) {
  FREE_NULL_LIST(egpu_node_gres_devices);
  clear_gpu_info();
  xfree(node_name);
  gres_c_s_fini();
}

const char* egpu_node_gpu_uuid(int dev_num) {
  if (dev_num < 0 || (uint32_t)dev_num >= gpu_info_cnt) return NULL;
  return gpu_info[dev_num].uuid;
}

uint64_t egpu_node_gpu_memory(int dev_num) {
  if (dev_num < 0 || (uint32_t)dev_num >= gpu_info_cnt) return 0;
  return gpu_info[dev_num].memory;
}

const char* egpu_node_name(void) {
  if (!node_name && &conf && conf && conf->node_name) node_name = xstrdup(conf->node_name);
  return node_name;
}

/* "/dev/nvidia12" -> 12; -1 when the name does not end in digits. */
static int device_number(const char* file) {
  if (!file) return -1;
  size_t len = strlen(file);
  size_t start = len;
  while (start > 0 && isdigit((unsigned char)file[start - 1]))
    start--;
  if (start == len) return -1;
  return atoi(file + start);
}

/* Total number of GPU device files named by the gpu records. */
static int count_gpu_devices(egpu_list_t gres_conf_list) {
  int gpus = 0;
  egpu_list_itr_t itr = list_iterator_create(gres_conf_list);
  gres_slurmd_conf_t* rec;
  while ((rec = list_next(itr))) {
    if (xstrcmp(rec->name, "gpu") || !rec->file || !rec->count) continue;
    egpu_hostlist_t hl = hostlist_create(rec->file);
    gpus += hostlist_count(hl);
    hostlist_destroy(hl);
  }
  list_iterator_destroy(itr);
  return gpus;
}

/* egpu capacity is not configurable: 100 units per GPU. Keep one egpu record
 * without File= (Slurm splits it evenly over the GPUs) and size it. */
static void size_egpu_record(egpu_list_t gres_conf_list, int gpus) {
  uint64_t want = (uint64_t)gpus * EGPU_UNITS_PER_GPU;
  gres_slurmd_conf_t* first = NULL;
  egpu_list_itr_t itr = list_iterator_create(gres_conf_list);
  gres_slurmd_conf_t* rec;
  while ((rec = list_next(itr))) {
    if (xstrcmp(rec->name, "egpu")) continue;
    if (rec->file) {
      error(
          "gres/egpu: gres.conf must not give egpu a File= (ignored: %s); egpu follows the gpu "
          "records",
          rec->file);
      list_delete_item(itr);
      continue;
    }
    if (!first) {
      first = rec;
    } else {
      list_delete_item(itr);
    }
  }
  list_iterator_destroy(itr);

  if (!first) {
    first = xmalloc(sizeof(*first));
    first->name = xstrdup("egpu");
    first->plugin_id = gres_build_id("egpu");
    list_append(gres_conf_list, first);
  }
  if (first->count != want)
    info("gres/egpu: %d GPUs -> egpu count %" PRIu64 " (configured %" PRIu64 ")", gpus, want,
         first->count);
  first->count = want;
}

#ifdef EGPU_HAVE_TOPO
/* Cores= from topology: keep the abstract core list (sent to slurmctld) and
 * the machine-local CPU bitmap (used by slurmd), like gres.conf parsing does. */
static void set_cores(gres_slurmd_conf_t* rec, const char* cores, uint32_t cpu_cnt) {
  char* local = NULL;
  if (xcpuinfo_ops.xcpuinfo_abs_to_mac) {
    if ((xcpuinfo_ops.xcpuinfo_abs_to_mac)((char*)cores, &local) != SLURM_SUCCESS) {
      error("gres/egpu: topology Cores=%s of %s not valid on this node", cores, rec->file);
      xfree(local);
      return;
    }
  } else {
    local = xstrdup(cores);
  }
  bitstr_t* bits = bit_alloc(cpu_cnt);
  if (!cpu_cnt || bit_unfmt(bits, local)) {
    error("gres/egpu: topology Cores=%s of %s exceeds the node's %u CPUs", cores, rec->file,
          cpu_cnt);
    FREE_NULL_BITMAP(bits);
    xfree(local);
    return;
  }
  xfree(local);
  xfree(rec->cpus);
  rec->cpus = xstrdup(cores);
  FREE_NULL_BITMAP(rec->cpus_bitmap);
  rec->cpus_bitmap = bits;
  rec->cpu_cnt = cpu_cnt;
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
/* Slurm 24.11's per-node and per-socket GPU picker (--gres=gpu:N,
 * --gpus-per-node) sorts candidates by summed Links= ascending although it
 * means "most linked first" (its comparator is a - b), so it picks the least
 * connected GPUs. Hand it C - links instead (C above any NVLink count): the
 * ascending sort then prefers NVLink peers. Links are used for nothing but
 * this ordering (and the per-job picker, --gpus=N, which reads them the right
 * way round and is inverted by this; see README). */
#define EGPU_LINKS_INVERT 1
#define EGPU_LINKS_CEILING 64

static char* slurm_links(const char* links) {
  char *out = NULL, *copy = xstrdup(links), *save = NULL;
  const char* sep = "";
  for (char* tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    long v = strtol(tok, NULL, 10);
    if (v >= 0 && v < EGPU_LINKS_CEILING) v = EGPU_LINKS_CEILING - v;
    xstrfmtcat(out, "%s%ld", sep, v);
    sep = ",";
  }
  xfree(copy);
  return out;
}
#else
/* 22.05 reads Links= the right way round (most connected first). */
static char* slurm_links(const char* links) {
  return xstrdup(links);
}
#endif

/* Fills the gpu records' Cores=/Links= that gres.conf left out, per device
 * number. */
static void fill_from_topology(egpu_list_t gres_conf_list, const egpu_topo_t* topo,
                               uint32_t cpu_cnt) {
  int gpus = egpu_topo_gpu_count(topo);
  egpu_list_itr_t itr = list_iterator_create(gres_conf_list);
  gres_slurmd_conf_t* rec;
  while ((rec = list_next(itr))) {
    if (xstrcmp(rec->name, "gpu")) continue;
    int dev = device_number(rec->file);
    if (dev < 0 || dev >= gpus) continue;
    const char* cores = egpu_topo_gpu_cores(topo, dev);
    if (!rec->cpus && cores && cores[0]) set_cores(rec, cores, cpu_cnt);
    const char* links = egpu_topo_gpu_links(topo, dev);
    if (!rec->links && links && links[0]) rec->links = slurm_links(links);
  }
  list_iterator_destroy(itr);
}

/* "Tesla V100-SXM2-32GB" -> "v100", "NVIDIA H100 80GB HBM3" -> "h100": the
 * model without vendor words, up to the first '-' or blank, lower case. */
static char* short_model(const char* model) {
  if (!model) return NULL;
  static const char* const vendor_words[] = {"NVIDIA ", "Tesla ", "GeForce ", "Quadro "};
  bool stripped = true;
  while (stripped) {
    stripped = false;
    for (size_t i = 0; i < sizeof(vendor_words) / sizeof(vendor_words[0]); i++) {
      size_t n = strlen(vendor_words[i]);
      if (!strncasecmp(model, vendor_words[i], n)) {
        model += n;
        stripped = true;
      }
    }
  }
  size_t len = strcspn(model, " -_/");
  if (!len) return NULL;
  char* type = xstrndup(model, len);
  for (char* c = type; *c; c++)
    *c = isalnum((unsigned char)*c) ? tolower((unsigned char)*c) : '_';
  return type;
}

static void remember_gpu_info(const egpu_topo_t* topo) {
  clear_gpu_info();
  int gpus = egpu_topo_gpu_count(topo);
  if (gpus <= 0) return;
  gpu_info = xcalloc(gpus, sizeof(*gpu_info));
  gpu_info_cnt = gpus;
  for (int i = 0; i < gpus; i++) {
    const char* uuid = egpu_topo_gpu_uuid(topo, i);
    if (uuid && uuid[0]) gpu_info[i].uuid = xstrdup(uuid);
    gpu_info[i].type = short_model(egpu_topo_gpu_model(topo, i));
    gpu_info[i].memory = egpu_topo_gpu_memory_bytes(topo, i);
  }
}

/* TopologyXml= of egpu.conf, read by the agent's parser; a missing file is
 * the defaults (live discovery), as for the agent. A file the agent would
 * refuse loads no topology: guessing the live machine where the admin named
 * an XML would give Slurm the wrong Cores= and Links=. */
static egpu_topo_t* load_topology(void) {
  char err[512] = "";
  egpu_conf_t* egpu_conf = NULL;
  if (egpu_conf_load(egpu_conf_path(), EGPU_CONF_MISSING_IS_DEFAULTS, &egpu_conf, err,
                     sizeof(err)) != 0) {
    error("gres/egpu: %s; GPU topology not loaded, using gres.conf as written", err);
    return NULL;
  }
  const char* xml = egpu_conf_topology_xml(egpu_conf);
  const char* source = xml[0] ? xml : "live";
  egpu_topo_t* topo = NULL;
  if (egpu_topo_load(xml[0] ? xml : NULL, &topo, err, sizeof(err)) != 0) {
    error("gres/egpu: GPU topology (%s) not loaded: %s; using gres.conf as written", source, err);
    topo = NULL;
  } else {
    info("gres/egpu: topology %s: %d GPUs", source, egpu_topo_gpu_count(topo));
  }
  egpu_conf_free(egpu_conf);
  return topo;
}
#endif

/* egpu records: no CPU affinity, so slurmctld packs units onto GPUs in index
 * order (first fit) instead of following the socket of the job's cores,
 * which spreads small shares over every GPU and leaves no GPU whole. A Type
 * (the gpu record's, else the short model name, else "gpu") still makes slurmctld track egpu per
 * GPU, which it does only for records with Cores= or Type=. */
static void detach_egpu_from_cores(egpu_list_t gres_conf_list) {
  egpu_list_itr_t itr = list_iterator_create(gres_conf_list);
  gres_slurmd_conf_t* rec;
  while ((rec = list_next(itr))) {
    if (xstrcmp(rec->name, "egpu")) continue;
    xfree(rec->cpus);
    FREE_NULL_BITMAP(rec->cpus_bitmap);
    int dev = device_number(rec->file);
    if (!rec->type_name && dev >= 0 && (uint32_t)dev < gpu_info_cnt && gpu_info[dev].type)
      rec->type_name = xstrdup(gpu_info[dev].type);
    if (!rec->type_name) rec->type_name = xstrdup("gpu");
    rec->config_flags |= GRES_CONF_HAS_TYPE;
  }
  list_iterator_destroy(itr);
}

int egpu_node_config_load(egpu_list_t gres_conf_list, node_config_load_t* config) {
  xfree(node_name);
  (void)egpu_node_name();

  int gpus = count_gpu_devices(gres_conf_list);
  size_egpu_record(gres_conf_list, gpus);

#if EGPU_SLURM_NEW_GRES_API
  int rc = gres_c_s_init_share_devices(gres_conf_list, &egpu_node_gres_devices, config, "gpu");
#else
  int rc =
      gres_c_s_init_share_devices(gres_conf_list, &egpu_node_gres_devices, config, "gpu", "egpu");
#endif
  if (rc != SLURM_SUCCESS) return rc;

#ifdef EGPU_HAVE_TOPO
  egpu_topo_t* topo = load_topology();
  if (topo) {
    fill_from_topology(gres_conf_list, topo, config->cpu_cnt);
    remember_gpu_info(topo);
    egpu_topo_free(topo);
  }
#endif

  detach_egpu_from_cores(gres_conf_list);

  egpu_node_env_flags = 0;
  (void)list_for_each(gres_conf_list, gres_common_set_env_types_on_node_flags,
                      &egpu_node_env_flags);
  return SLURM_SUCCESS;
}

void egpu_node_pack(buf_t* buffer) {
  pack32(gpu_info_cnt, buffer);
  for (uint32_t i = 0; i < gpu_info_cnt; i++) {
    packstr(gpu_info[i].uuid, buffer);
    pack64(gpu_info[i].memory, buffer);
  }
  packstr((char*)egpu_node_name(), buffer);
}

int egpu_node_unpack(buf_t* buffer) {
  uint32_t cnt = 0, len = 0;
  clear_gpu_info();
  xfree(node_name);
  safe_unpack32(&cnt, buffer);
  if (cnt > 4096) goto unpack_error;
  gpu_info = xcalloc(cnt ? cnt : 1, sizeof(*gpu_info));
  gpu_info_cnt = cnt;
  for (uint32_t i = 0; i < cnt; i++) {
    safe_unpackstr_xmalloc(&gpu_info[i].uuid, &len, buffer);
    safe_unpack64(&gpu_info[i].memory, buffer);
  }
  safe_unpackstr_xmalloc(&node_name, &len, buffer);
  return SLURM_SUCCESS;

unpack_error:
  clear_gpu_info();
  return SLURM_ERROR;
}
