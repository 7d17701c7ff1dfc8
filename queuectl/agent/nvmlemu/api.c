/* nvml-emu: library lifecycle, system and per-device queries, under the names nvidia-ml-py
 * resolves (nvmlInitWithFlags, nvmlDeviceGetCount_v2, nvmlDeviceGetPciInfo_v3, ...).
 * A query on a GPU the timeline has marked lost answers NVML_ERROR_GPU_IS_LOST, as the driver
 * does after an XID 79; a name this file does not export makes pynvml raise FUNCTION_NOT_FOUND.
 */
#include <stdio.h>
#include <string.h>

#include "emu.h"

typedef struct emu_dev *nvmlDevice_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
    unsigned version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct {
    unsigned version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned cliqueId, state, healthMask;
} nvmlGpuFabricInfo_v2_t;

#define MEMORY_V2 0x02000028u
#define FABRIC_V2 0x02000024u
#define FABRIC_COMPLETED 3

static nvmlReturn_t copy_text(char *out, unsigned length, const char *text) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

/* --- lifecycle and system ---------------------------------------------------------------- */

NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    pthread_mutex_lock(&emu_lock);
    nvmlReturn_t ret = emu_load();
    if (ret == NVML_SUCCESS) emu_refcount++;
    pthread_mutex_unlock(&emu_lock);
    return ret;
}

NVML_API nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
NVML_API nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

NVML_API nvmlReturn_t nvmlShutdown(void) {
    nvmlReturn_t ret = NVML_SUCCESS;
    pthread_mutex_lock(&emu_lock);
    if (emu_refcount <= 0) ret = NVML_ERROR_UNINITIALIZED;
    else emu_refcount--;
    pthread_mutex_unlock(&emu_lock);
    return ret;
}

NVML_API const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned length) {
    return emu_refcount > 0 ? copy_text(version, length, emu.driver) : NVML_ERROR_UNINITIALIZED;
}

NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned length) {
    return emu_refcount > 0 ? copy_text(version, length, emu.nvml_version)
                            : NVML_ERROR_UNINITIALIZED;
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    *version = emu.cuda_version;
    return emu_refcount > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return nvmlSystemGetCudaDriverVersion(version);
}

/* --- handles ----------------------------------------------------------------------------- */

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    if (emu_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)emu.count;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device) {
    if (emu_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)emu.count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &emu.gpus[index];
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    if (emu_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < emu.count; i++)
        if (!strcmp(emu.gpus[i].uuid, uuid)) return *device = &emu.gpus[i], NVML_SUCCESS;
    for (int i = 0; i < emu.mig_total; i++)
        if (!strcmp(emu.migs[i].uuid, uuid)) return *device = &emu.migs[i], NVML_SUCCESS;
    return NVML_ERROR_NOT_FOUND;
}

NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned *index) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret == NVML_SUCCESS && !index) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *index = (unsigned)dev->index;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned *minor) {
    return nvmlDeviceGetIndex(dev, minor); /* /dev/nvidiaN follows the index here */
}

/* --- identity ---------------------------------------------------------------------------- */

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned length) {
    nvmlReturn_t ret = emu_check(dev);
    return ret == NVML_SUCCESS ? copy_text(name, length, dev->name) : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned length) {
    nvmlReturn_t ret = emu_check(dev);
    return ret == NVML_SUCCESS ? copy_text(uuid, length, dev->uuid) : ret;
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus_id, unsigned device_id, unsigned sub) {
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    /* the legacy field holds the short spelling: 0000:18:00.0 */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", bus_id + (strlen(bus_id) > 12 ? 4 : 0));
    sscanf(bus_id, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    pci->pciDeviceId = device_id;
    pci->pciSubSystemId = sub;
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(pci, dev->bus_id, dev->parent->pci_device_id, dev->parent->pci_subsystem_id);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t dev, int *major, int *minor) {
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = dev->parent->cc_major;
    *minor = dev->parent->cc_minor;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *memory) {
    struct emu_proc procs[EMU_MAX_PROCS];
    nvmlReturn_t ret = emu_check(dev);
    if (ret != NVML_SUCCESS) return ret;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    int n = emu_procs_at(emu_now(), procs, EMU_MAX_PROCS);
    unsigned long long used = 0;
    for (int i = 0; i < n; i++)
        if (procs[i].gpu == dev->index && (dev->mig_slot < 0 || procs[i].mig_slot == dev->mig_slot))
            used += procs[i].used_bytes;
    if (used > dev->memory_total) used = dev->memory_total;
    memory->total = dev->memory_total;
    memory->used = used;
    memory->free = dev->memory_total - used;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *memory) {
    nvmlMemory_t v1;
    if (memory && memory->version != MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t ret = nvmlDeviceGetMemoryInfo(dev, memory ? &v1 : NULL);
    if (ret != NVML_SUCCESS) return ret;
    memory->total = v1.total;
    memory->reserved = 0;
    memory->free = v1.free;
    memory->used = v1.used;
    return NVML_SUCCESS;
}

/* --- telemetry and health ---------------------------------------------------------------- */

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util) {
    struct emu_state s;
    struct emu_proc procs[EMU_MAX_PROCS];
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!util) return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->mig_enabled) return NVML_ERROR_NOT_SUPPORTED; /* as the driver in MIG mode */
    if (!s.util_set) { /* no explicit figure: the sum of its processes' */
        int n = emu_procs_at(emu_now(), procs, EMU_MAX_PROCS);
        for (int i = 0; i < n; i++)
            if (procs[i].gpu == dev->index) s.util_gpu += procs[i].sm, s.util_mem += procs[i].mem;
    }
    util->gpu = s.util_gpu > 100 ? 100 : s.util_gpu;
    util->memory = s.util_mem > 100 ? 100 : s.util_mem;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *milliwatts) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret == NVML_SUCCESS && !milliwatts) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *milliwatts = s.power_mw;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned *celsius) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (sensor != 0 || !celsius) return NVML_ERROR_INVALID_ARGUMENT; /* NVML_TEMPERATURE_GPU */
    *celsius = s.temperature_c;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t dev, int *current, int *pending) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = 1;
    return NVML_SUCCESS;
}

/* Volatile and aggregate counts are both the DBEs the timeline has raised so far; SBEs stay 0. */
NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter,
                                                   unsigned long long *count) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!count || type < 0 || type > 1 || counter < 0 || counter > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = type == 1 ? s.dbe : 0;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret == NVML_SUCCESS && !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *pending = s.pending;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned *corrected,
                                                 unsigned *uncorrected, unsigned *pending,
                                                 unsigned *failure) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!corrected || !uncorrected || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
    *corrected = 0;
    *uncorrected = (unsigned)s.dbe;
    *pending = (unsigned)s.remap_pending;
    *failure = (unsigned)s.remap_failure;
    return NVML_SUCCESS;
}

/* --- interconnect ------------------------------------------------------------------------ */

static nvmlReturn_t link_check(nvmlDevice_t dev, unsigned link) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (dev->link_count == 0) return NVML_ERROR_NOT_SUPPORTED;
    return link < (unsigned)dev->link_count ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned link, int *active) {
    nvmlReturn_t ret = link_check(dev, link);
    if (ret == NVML_SUCCESS && !active) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *active = dev->link_active[link];
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned link,
                                                          nvmlPciInfo_t *pci) {
    nvmlReturn_t ret = link_check(dev, link);
    if (ret != NVML_SUCCESS) return ret;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    if (!dev->link_active[link]) return NVML_ERROR_NOT_SUPPORTED;
    fill_pci(pci, dev->link_remote[link], dev->link_remote_type[link] == 2 ? 0x22a310de : 0, 0);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned link, int *type) {
    nvmlReturn_t ret = link_check(dev, link);
    if (ret != NVML_SUCCESS) return ret;
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = dev->link_active[link] ? dev->link_remote_type[link] : 0xFF;
    return NVML_SUCCESS;
}

static nvmlReturn_t pair_check(nvmlDevice_t a, nvmlDevice_t b) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(a, &s);
    return ret == NVML_SUCCESS ? emu_check_gpu(b, &s) : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) {
    nvmlReturn_t ret = pair_check(a, b);
    if (ret == NVML_SUCCESS && !level) return NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) *level = a == b ? 0 : emu.pcie_level[a->index][b->index];
    return ret;
}

/* P2P over NVLink (caps index 2) where the description says so; read/write always OK. */
NVML_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status) {
    nvmlReturn_t ret = pair_check(a, b);
    if (ret != NVML_SUCCESS) return ret;
    if (!status || index < 0 || index > 4) return NVML_ERROR_INVALID_ARGUMENT;
    *status = (index != 2 || emu.p2p_nvlink[a->index][b->index]) ? 0 : 5; /* OK / NOT_SUPPORTED */
    return NVML_SUCCESS;
}

/* Fabric registration (NVL72-class systems): only GPUs the description puts in a fabric. */
NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, nvmlGpuFabricInfo_v2_t *info) {
    struct emu_state s;
    nvmlReturn_t ret = emu_check_gpu(dev, &s);
    if (ret != NVML_SUCCESS) return ret;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != FABRIC_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!dev->has_fabric) return NVML_ERROR_NOT_SUPPORTED;
    memcpy(info->clusterUuid, dev->fabric_cluster, sizeof info->clusterUuid);
    info->status = NVML_SUCCESS;
    info->cliqueId = dev->fabric_clique;
    info->state = FABRIC_COMPLETED;
    info->healthMask = 0;
    return NVML_SUCCESS;
}
