/* nvml-emu: MIG devices and GPU instances, processes, and XID/ECC events through event sets.
 *
 * A GPU instance handle is the MIG device's own entry (one compute instance per GPU instance).
 * An event set delivers the timeline's xid/dbe entries due from the first nvmlInit on, for the
 * GPUs and event types registered with it; nvmlEventSetWait_v2 sleeps until the next one is due
 * (in real time: the emulated gap divided by the scale; polling when a clock file drives time).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"

typedef struct emu_dev *nvmlDevice_t;
typedef struct emu_dev *nvmlGpuInstance_t;

typedef struct {
    unsigned multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
        sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;
typedef struct { unsigned start, size; } nvmlGpuInstancePlacement_t;
typedef struct {
    nvmlDevice_t device;
    unsigned id, profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
    unsigned pid;
    unsigned long long timeStamp;
    unsigned smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

struct emu_set {
    unsigned long long mask[EMU_MAX_GPUS]; /* registered event types per GPU */
    int next;                              /* first timeline entry not yet looked at */
};
typedef struct emu_set *nvmlEventSet_t;

#define EV_SBE 0x1ULL
#define EV_DBE 0x2ULL
#define EV_PSTATE 0x4ULL
#define EV_XID 0x8ULL
#define EV_CLOCK 0x10ULL
#define EV_SUPPORTED (EV_SBE | EV_DBE | EV_PSTATE | EV_XID | EV_CLOCK)

/* --- MIG ---------------------------------------------------------------------------------- */

NVML_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned *current, unsigned *pending) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!dev->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned)dev->mig_enabled;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned *count) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!dev->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    *count = EMU_MAX_MIG;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned index,
                                                          nvmlDevice_t *mig) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!mig || !dev->mig_enabled) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= (unsigned)dev->mig_count) return NVML_ERROR_NOT_FOUND; /* an empty slot */
    *mig = dev->migs[index];
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned *is_mig) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret == NVML_SUCCESS && !is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *is_mig = dev->mig_slot >= 0;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *dev) {
    nvmlReturn_t ret = emu_check(mig);
    if (ret != NVML_SUCCESS) return ret;
    if (!dev || mig->mig_slot < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *dev = mig->parent;
    return NVML_SUCCESS;
}

/* Only MIG device handles have attributes, as in the driver. */
NVML_API nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t dev, nvmlDeviceAttributes_t *attrs) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!attrs) return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->mig_slot < 0) return NVML_ERROR_NOT_SUPPORTED;
    memset(attrs, 0, sizeof *attrs);
    attrs->multiprocessorCount = dev->sms;
    attrs->sharedCopyEngineCount = dev->gi_slices;
    attrs->gpuInstanceSliceCount = dev->gi_slices;
    attrs->computeInstanceSliceCount = dev->ci_slices;
    attrs->memorySizeMB = dev->memory_total / (1024ULL * 1024ULL);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned *id) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!id || dev->mig_slot < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = dev->gi_id;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned *id) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!id || dev->mig_slot < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = 0;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t dev, unsigned id, nvmlGpuInstance_t *gi) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!gi || !dev->mig_enabled) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < dev->mig_count; i++)
        if (dev->migs[i]->gi_id == id) return *gi = dev->migs[i], NVML_SUCCESS;
    return NVML_ERROR_NOT_FOUND;
}

NVML_API nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info) {
    nvmlReturn_t ret = emu_check(gi);
    if (ret != NVML_SUCCESS) return ret;
    if (!info || gi->mig_slot < 0) return NVML_ERROR_INVALID_ARGUMENT;
    info->device = gi->parent;
    info->id = gi->gi_id;
    info->profileId = gi->profile_id;
    info->placement.start = gi->start;
    info->placement.size = gi->size;
    return NVML_SUCCESS;
}

/* --- processes ---------------------------------------------------------------------------- */

/* The processes on `dev` now: a whole GPU sees all of its own, a MIG device those in it. */
static int procs_on(nvmlDevice_t dev, struct emu_proc *out) {
    struct emu_proc all[EMU_MAX_PROCS];
    int n = emu_procs_at(emu_now(), all, EMU_MAX_PROCS), k = 0;
    for (int i = 0; i < n; i++)
        if (all[i].gpu == dev->index && (dev->mig_slot < 0 || all[i].mig_slot == dev->mig_slot))
            out[k++] = all[i];
    return k;
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned *count,
                                                             nvmlProcessInfo_t *infos) {
    struct emu_proc procs[EMU_MAX_PROCS];
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    int n = procs_on(dev, procs);
    if (*count < (unsigned)n || (n && !infos)) return *count = (unsigned)n, NVML_ERROR_INSUFFICIENT_SIZE;
    for (int i = 0; i < n; i++) {
        struct emu_dev *mig = procs[i].mig_slot >= 0 && procs[i].mig_slot < dev->parent->mig_count
                                  ? dev->parent->migs[procs[i].mig_slot] : NULL;
        infos[i].pid = procs[i].pid;
        infos[i].usedGpuMemory = procs[i].used_bytes;
        infos[i].gpuInstanceId = mig ? mig->gi_id : EMU_NO_INSTANCE;
        infos[i].computeInstanceId = mig ? 0 : EMU_NO_INSTANCE;
    }
    *count = (unsigned)n;
    return NVML_SUCCESS;
}

/* One sample per running process, stamped now (microseconds); none newer than `last_seen`:
 * NOT_FOUND. Not supported in MIG mode, as the driver. */
NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                                      nvmlProcessUtilizationSample_t *samples,
                                                      unsigned *count, unsigned long long last_seen) {
    struct emu_state s;
    struct emu_proc procs[EMU_MAX_PROCS];
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    unsigned long long stamp = (unsigned long long)(emu_real_now() * 1e6);
    int n = stamp > last_seen ? procs_on(dev, procs) : 0;
    if (n == 0) return NVML_ERROR_NOT_FOUND;
    if (!samples || *count < (unsigned)n) return *count = (unsigned)n, NVML_ERROR_INSUFFICIENT_SIZE;
    for (int i = 0; i < n; i++)
        samples[i] = (nvmlProcessUtilizationSample_t){procs[i].pid, stamp, procs[i].sm,
                                                      procs[i].mem, 0, 0};
    *count = (unsigned)n;
    return NVML_SUCCESS;
}

/* --- events ------------------------------------------------------------------------------- */

NVML_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (emu_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    struct emu_set *created = calloc(1, sizeof *created);
    if (!created) return NVML_ERROR_UNKNOWN;
    while (created->next < emu.entries && emu.timeline[created->next].at < emu_t_init)
        created->next++;
    *set = created;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    free(set);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long *types) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret == NVML_SUCCESS && !types) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *types = EV_SUPPORTED;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                               nvmlEventSet_t set) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    if (types & ~EV_SUPPORTED) return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&emu_lock);
    set->mask[dev->index] |= types;
    pthread_mutex_unlock(&emu_lock);
    return NVML_SUCCESS;
}

/* The next registered event due at `now`, consuming the entries it looks at; 0 if none. */
static int take_due(struct emu_set *set, double now, nvmlEventData_t *data) {
    while (set->next < emu.entries && emu.timeline[set->next].at <= now) {
        const struct emu_entry *e = &emu.timeline[set->next++];
        unsigned long long type = e->kind == K_XID ? EV_XID : e->kind == K_DBE ? EV_DBE : 0;
        if (!type || !(set->mask[e->gpu] & type)) continue;
        data->device = &emu.gpus[e->gpu];
        data->eventType = type;
        data->eventData = e->kind == K_XID ? (unsigned long long)e->a : 0;
        data->gpuInstanceId = data->computeInstanceId = EMU_NO_INSTANCE;
        return 1;
    }
    return 0;
}

NVML_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms) {
    if (emu_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    double deadline = emu_real_now() + timeout_ms / 1000.0;
    for (;;) {
        double now = emu_now(), next_at = -1;
        pthread_mutex_lock(&emu_lock);
        int found = take_due(set, now, data);
        if (set->next < emu.entries) next_at = emu.timeline[set->next].at;
        pthread_mutex_unlock(&emu_lock);
        if (found) return NVML_SUCCESS;
        double left = deadline - emu_real_now();
        if (left <= 0) return NVML_ERROR_TIMEOUT;
        double nap = 0.02; /* a clock file can move at any time: poll it */
        if (!emu_uses_clock_file()) nap = next_at < 0 ? left : (next_at - now) / emu_scale();
        if (nap > left) nap = left;
        if (nap < 0.001) nap = 0.001;
        struct timespec ts = {(time_t)nap, (long)((nap - (double)(time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
    }
}
