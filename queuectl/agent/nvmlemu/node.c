/* nvml-emu: the described node, its clock, and its state at a given emulated time.
 *
 * $QUEUECTL_NVML_EMU names a compiled description (queuectl.agent.nvmlemu writes it from YAML):
 * one record per line, words separated by spaces, a free-text name last:
 *   driver VERSION | nvml VERSION | cuda INT
 *   gpu IDX UUID BUSID PCIDEVID SUBSYSID MEMBYTES CCMAJOR CCMINOR MIGCAPABLE LINKS POWERMW TEMPC NAME
 *   link IDX LINK REMOTETYPE REMOTEBUSID        (an active NVLink; type 0 GPU, 2 NVSwitch)
 *   pair A B PCIELEVEL P2PNVLINK
 *   fabric IDX CLUSTERHEX CLIQUE
 *   mig IDX SLOT GIID PROFILE GISLICES CISLICES MEMMIB SMS START SIZE UUID NAME
 *   at SECONDS GPU KIND A B C D E                (timeline, sorted by SECONDS)
 * Emulated time is (now - epoch) * scale + offset, or the number in $QUEUECTL_NVML_EMU_CLOCK's file
 * (a test moves time by rewriting it). The epoch is $QUEUECTL_NVML_EMU_EPOCH (unix seconds, to
 * share one timeline between processes) or the first nvmlInit of this process.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"

struct emu_node emu;
pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
int emu_refcount;
double emu_t_init;

static int loaded;
static double epoch, scale = 1.0, offset;
static const char *clock_path;
static double clock_last;
static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct { const char *word; enum emu_kind kind; } KINDS[] = {
    {"xid", K_XID}, {"dbe", K_DBE}, {"temperature", K_TEMP}, {"power", K_POWER},
    {"utilization", K_UTIL}, {"utilization-auto", K_UTIL_AUTO}, {"lost", K_LOST},
    {"answer", K_ANSWER}, {"pending", K_PENDING}, {"remap-pending", K_REMAP_PENDING},
    {"remap-failure", K_REMAP_FAILURE}, {"process", K_PROC}, {"process-end", K_PROC_END},
};

double emu_real_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double emu_scale(void) { return scale; }
int emu_uses_clock_file(void) { return clock_path != NULL; }

double emu_now(void) {
    if (clock_path) {
        FILE *f = fopen(clock_path, "r");
        double t, now;
        pthread_mutex_lock(&clock_lock);
        if (f) {
            if (fscanf(f, "%lf", &t) == 1) clock_last = t; /* a half-written file: keep the last */
            fclose(f);
        }
        now = clock_last;
        pthread_mutex_unlock(&clock_lock);
        return now;
    }
    return (emu_real_now() - epoch) * scale + offset;
}

/* A number from the environment, or `fallback`; 0 and a message when it does not parse. */
static int env_number(const char *name, double fallback, double *out) {
    const char *text = getenv(name);
    char *end;
    if (!text || !*text) {
        *out = fallback;
        return 1;
    }
    errno = 0;
    *out = strtod(text, &end);
    if (errno || *end || !isfinite(*out)) {
        fprintf(stderr, "nvml-emu: %s=%s is not a number\n", name, text);
        return 0;
    }
    return 1;
}

static int fail(const char *path, int line, const char *what) {
    fprintf(stderr, "nvml-emu: %s:%d: %s (rebuild it with python -m queuectl.agent.nvmlemu)\n",
            path, line, what);
    return 0;
}

static int hex_bytes(const char *hex, unsigned char *out, int n) {
    for (int i = 0; i < n; i++)
        if (sscanf(hex + 2 * i, "%2hhx", &out[i]) != 1) return 0;
    return 1;
}

/* One record into `emu`; 0 on a malformed one. */
static int parse_line(const char *path, int no, char *line) {
    char key[16], word[32], text[96];
    int n = 0, i, j, used = 0;
    struct emu_dev *d;
    line[strcspn(line, "\r\n")] = 0;
    if (!*line || *line == '#') return 1;
    if (sscanf(line, "%15s %n", key, &n) != 1) return 1;
    char *rest = line + n;
    if (!strcmp(key, "nvml-emu")) return 1;
    if (!strcmp(key, "driver")) return snprintf(emu.driver, sizeof emu.driver, "%s", rest), 1;
    if (!strcmp(key, "nvml")) {
        snprintf(emu.nvml_version, sizeof emu.nvml_version, "%s", rest);
        return 1;
    }
    if (!strcmp(key, "cuda")) return sscanf(rest, "%d", &emu.cuda_version) == 1;
    if (!strcmp(key, "gpu")) {
        if (sscanf(rest, "%d", &i) != 1 || i != emu.count || i >= EMU_MAX_GPUS)
            return fail(path, no, "gpu records must count up from 0 (at most 16)");
        d = &emu.gpus[i];
        memset(d, 0, sizeof *d);
        if (sscanf(rest, "%d %95s %31s %x %x %llu %d %d %d %d %u %u %n", &d->index, d->uuid,
                   d->bus_id, &d->pci_device_id, &d->pci_subsystem_id, &d->memory_total,
                   &d->cc_major, &d->cc_minor, &d->mig_capable, &d->link_count, &d->power_mw,
                   &d->temperature_c, &used) < 12 || !used || d->link_count > EMU_MAX_LINKS)
            return fail(path, no, "malformed gpu record");
        snprintf(d->name, sizeof d->name, "%s", rest + used);
        sscanf(d->bus_id, "%*x:%x", &d->bus);
        d->mig_slot = -1;
        d->parent = d;
        emu.count++;
        return 1;
    }
    if (!strcmp(key, "link")) {
        int type;
        if (sscanf(rest, "%d %d %d %31s", &i, &j, &type, word) != 4 || i >= emu.count || i < 0 ||
            j < 0 || j >= emu.gpus[i].link_count)
            return fail(path, no, "malformed link record, or a link the GPU does not have");
        d = &emu.gpus[i];
        d->link_active[j] = 1;
        d->link_remote_type[j] = type;
        snprintf(d->link_remote[j], sizeof d->link_remote[j], "%s", word);
        return 1;
    }
    if (!strcmp(key, "pair")) {
        int level, p2p;
        if (sscanf(rest, "%d %d %d %d", &i, &j, &level, &p2p) != 4 || i < 0 || j < 0 ||
            i >= emu.count || j >= emu.count)
            return fail(path, no, "malformed pair record");
        emu.pcie_level[i][j] = emu.pcie_level[j][i] = level;
        emu.p2p_nvlink[i][j] = emu.p2p_nvlink[j][i] = p2p;
        return 1;
    }
    if (!strcmp(key, "fabric")) {
        if (sscanf(rest, "%d %32s %u", &i, text, &n) != 3 || i < 0 || i >= emu.count ||
            strlen(text) != 32 || !hex_bytes(text, emu.gpus[i].fabric_cluster, 16))
            return fail(path, no, "malformed fabric record");
        emu.gpus[i].has_fabric = 1;
        emu.gpus[i].fabric_clique = (unsigned)n;
        return 1;
    }
    if (!strcmp(key, "mig")) {
        if (sscanf(rest, "%d %d", &i, &j) != 2 || i < 0 || i >= emu.count ||
            j != emu.gpus[i].mig_count || j >= EMU_MAX_MIG || emu.mig_total >= EMU_MAX_GPUS * EMU_MAX_MIG)
            return fail(path, no, "mig records must count up from slot 0 per GPU (at most 7)");
        struct emu_dev *g = &emu.gpus[i];
        unsigned long long mib;
        d = &emu.migs[emu.mig_total];
        memset(d, 0, sizeof *d);
        if (sscanf(rest, "%*d %*d %u %u %u %u %llu %u %u %u %95s %n", &d->gi_id, &d->profile_id,
                   &d->gi_slices, &d->ci_slices, &mib, &d->sms, &d->start, &d->size, d->uuid,
                   &used) < 9 || !used)
            return fail(path, no, "malformed mig record");
        snprintf(d->name, sizeof d->name, "%s", rest + used);
        d->index = i;
        d->mig_slot = j;
        d->parent = g;
        d->memory_total = mib * 1024ULL * 1024ULL;
        memcpy(d->bus_id, g->bus_id, sizeof d->bus_id);
        g->migs[g->mig_count++] = d;
        g->mig_enabled = 1;
        emu.mig_total++;
        return 1;
    }
    if (!strcmp(key, "at")) {
        struct emu_entry e = {0};
        size_t k;
        if (sscanf(rest, "%lf %d %31s %lld %lld %lld %lld %lld", &e.at, &e.gpu, word, &e.a, &e.b,
                   &e.c, &e.d, &e.e) < 3 || e.gpu < 0 || e.gpu >= emu.count)
            return fail(path, no, "malformed at record, or a GPU the node does not have");
        for (k = 0; k < sizeof KINDS / sizeof *KINDS && strcmp(KINDS[k].word, word); k++) {}
        if (k == sizeof KINDS / sizeof *KINDS) return fail(path, no, "unknown timeline kind");
        e.kind = KINDS[k].kind;
        if (emu.entries && emu.timeline[emu.entries - 1].at > e.at)
            return fail(path, no, "timeline out of order");
        struct emu_entry *grown = realloc(emu.timeline, sizeof e * (size_t)(emu.entries + 1));
        if (!grown) return fail(path, no, "out of memory");
        emu.timeline = grown;
        emu.timeline[emu.entries++] = e;
        return 1;
    }
    return fail(path, no, "unknown record");
}

nvmlReturn_t emu_load(void) {
    const char *path = getenv("QUEUECTL_NVML_EMU");
    char line[512];
    int no = 0, ok = 1;
    double epoch_env;
    if (loaded) return NVML_SUCCESS;
    if (!path || !*path) {
        fprintf(stderr, "nvml-emu: QUEUECTL_NVML_EMU is not set: point it at a compiled node "
                        "description (python -m queuectl.agent.nvmlemu run NODE.yaml -- CMD)\n");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nvml-emu: cannot read %s: %s\n", path, strerror(errno));
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    free(emu.timeline); /* what an earlier, failed load left */
    memset(&emu, 0, sizeof emu);
    snprintf(emu.driver, sizeof emu.driver, "550.54.15");
    snprintf(emu.nvml_version, sizeof emu.nvml_version, "12.550.54.15");
    emu.cuda_version = 12040;
    while (ok && fgets(line, sizeof line, f)) ok = parse_line(path, ++no, line);
    fclose(f);
    clock_path = getenv("QUEUECTL_NVML_EMU_CLOCK");
    if (clock_path && !*clock_path) clock_path = NULL;
    if (!ok || !env_number("QUEUECTL_NVML_EMU_SCALE", 1.0, &scale) ||
        !env_number("QUEUECTL_NVML_EMU_OFFSET", 0.0, &offset) ||
        !env_number("QUEUECTL_NVML_EMU_EPOCH", emu_real_now(), &epoch_env))
        return NVML_ERROR_UNKNOWN;
    if (scale <= 0) {
        fprintf(stderr, "nvml-emu: QUEUECTL_NVML_EMU_SCALE must be more than 0\n");
        return NVML_ERROR_UNKNOWN;
    }
    epoch = epoch_env;
    emu_t_init = emu_now();
    loaded = 1;
    return NVML_SUCCESS;
}

/* Fold the timeline up to `t` for one GPU. Entry arguments: xid A; temperature A (C);
 * power A (mW); utilization A (gpu %) B (memory %); pending/remap-* A (0/1). */
void emu_state_at(double t, int gpu, struct emu_state *s) {
    memset(s, 0, sizeof *s);
    s->temperature_c = emu.gpus[gpu].temperature_c;
    s->power_mw = emu.gpus[gpu].power_mw;
    for (int i = 0; i < emu.entries && emu.timeline[i].at <= t; i++) {
        const struct emu_entry *e = &emu.timeline[i];
        if (e->gpu != gpu) continue;
        switch (e->kind) {
        case K_DBE: s->dbe++; break;
        case K_TEMP: s->temperature_c = (unsigned)e->a; break;
        case K_POWER: s->power_mw = (unsigned)e->a; break;
        case K_UTIL: s->util_set = 1, s->util_gpu = (unsigned)e->a, s->util_mem = (unsigned)e->b; break;
        case K_UTIL_AUTO: s->util_set = 0; break;
        case K_LOST: s->lost = 1; break;
        case K_ANSWER: s->lost = 0; break;
        case K_PENDING: s->pending = e->a != 0; break;
        case K_REMAP_PENDING: s->remap_pending = e->a != 0; break;
        case K_REMAP_FAILURE: s->remap_failure = e->a != 0; break;
        default: break;
        }
    }
}

/* Processes alive at `t`. process: A pid, B MIG slot (-1 whole GPU), C used bytes, D sm %, E
 * memory %; a later process entry for the same pid updates it; process-end: A pid. */
int emu_procs_at(double t, struct emu_proc *out, int max) {
    int n = 0;
    for (int i = 0; i < emu.entries && emu.timeline[i].at <= t; i++) {
        const struct emu_entry *e = &emu.timeline[i];
        int k;
        if (e->kind != K_PROC && e->kind != K_PROC_END) continue;
        for (k = 0; k < n && (out[k].pid != (unsigned)e->a || out[k].gpu != e->gpu); k++) {}
        if (e->kind == K_PROC_END) {
            if (k < n) out[k] = out[--n];
            continue;
        }
        if (k == n) {
            if (n == max) continue;
            n++;
        }
        out[k] = (struct emu_proc){(unsigned)e->a, e->gpu, (int)e->b, (unsigned long long)e->c,
                                   (unsigned)e->d, (unsigned)e->e};
    }
    return n;
}

static int is_ours(struct emu_dev *dev) {
    return (dev >= emu.gpus && dev < emu.gpus + emu.count) ||
           (dev >= emu.migs && dev < emu.migs + emu.mig_total);
}

nvmlReturn_t emu_check(struct emu_dev *dev) {
    if (emu_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!dev || !is_ours(dev)) return NVML_ERROR_INVALID_ARGUMENT;
    struct emu_state s;
    emu_state_at(emu_now(), dev->index, &s);
    return s.lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

/* A whole GPU (not a MIG device) that answers; fills its current state. */
nvmlReturn_t emu_check_gpu(struct emu_dev *dev, struct emu_state *state) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (dev->mig_slot >= 0) return NVML_ERROR_NOT_SUPPORTED;
    emu_state_at(emu_now(), dev->index, state);
    return NVML_SUCCESS;
}
