/* nvml-emu: NVML's ABI over a described node (no GPU, no driver).
 *
 * The structs below are the subset of nvml.h that nvidia-ml-py passes by pointer, laid out
 * exactly as its ctypes classes; the handles are pointers into the emulator's own tables.
 * node.c loads the description and answers "what is true at emulated time t"; api.c and
 * events.c are the exported NVML functions.
 */
#ifndef NVMLEMU_H
#define NVMLEMU_H

#include <pthread.h>

#define NVML_API __attribute__((visibility("default")))

/* nvmlReturn_t values (the ones the emulator answers). */
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};
typedef int nvmlReturn_t;

#define EMU_MAX_GPUS 16
#define EMU_MAX_MIG 7       /* MIG devices per GPU (A100/H100: 7) */
#define EMU_MAX_LINKS 36    /* NVML_NVLINK_MAX_LINKS */
#define EMU_MAX_PROCS 64    /* processes alive at once, node-wide */
#define EMU_NO_INSTANCE 0xFFFFFFFFu

/* One device: a whole GPU (mig_slot < 0) or a MIG device of `parent`. */
struct emu_dev {
    int index;                  /* the GPU's index (a MIG device: its parent's) */
    int mig_slot;               /* -1: a whole GPU */
    struct emu_dev *parent;     /* MIG device: the GPU; whole GPU: itself */
    char uuid[96], name[96], bus_id[32];
    unsigned bus, pci_device_id, pci_subsystem_id;
    unsigned long long memory_total;
    int cc_major, cc_minor;
    int mig_capable, mig_enabled, mig_count;
    struct emu_dev *migs[EMU_MAX_MIG];
    unsigned gi_id, profile_id, gi_slices, ci_slices, sms, start, size; /* MIG only */
    int link_count;             /* links the model has; active ones have a remote */
    int link_active[EMU_MAX_LINKS], link_remote_type[EMU_MAX_LINKS];
    char link_remote[EMU_MAX_LINKS][32];
    int has_fabric;
    unsigned char fabric_cluster[16];
    unsigned fabric_clique;
    unsigned power_mw, temperature_c; /* at t=0 */
};

/* Timeline entry kinds (the compiled description's `at` lines). */
enum emu_kind {
    K_XID, K_DBE, K_TEMP, K_POWER, K_UTIL, K_UTIL_AUTO, K_LOST, K_ANSWER, K_PENDING,
    K_REMAP_PENDING, K_REMAP_FAILURE, K_PROC, K_PROC_END,
};

struct emu_entry {
    double at;                  /* emulated seconds */
    int gpu;
    enum emu_kind kind;
    long long a, b, c, d, e;    /* kind-specific, see node.c */
};

struct emu_proc {
    unsigned pid;
    int gpu, mig_slot;          /* mig_slot -1: the whole GPU */
    unsigned long long used_bytes;
    unsigned sm, mem;           /* percent */
};

/* What is true of one GPU at an emulated time: the timeline folded up to it. */
struct emu_state {
    int lost, pending, remap_pending, remap_failure, util_set;
    unsigned temperature_c, power_mw, util_gpu, util_mem;
    unsigned long long dbe;
};

struct emu_node {
    int count;
    struct emu_dev gpus[EMU_MAX_GPUS];
    struct emu_dev migs[EMU_MAX_GPUS * EMU_MAX_MIG];
    int mig_total;
    int pcie_level[EMU_MAX_GPUS][EMU_MAX_GPUS];
    int p2p_nvlink[EMU_MAX_GPUS][EMU_MAX_GPUS];
    char driver[80], nvml_version[80];
    int cuda_version;
    struct emu_entry *timeline;  /* sorted by `at` */
    int entries;
};

extern struct emu_node emu;
extern pthread_mutex_t emu_lock;
extern int emu_refcount;
extern double emu_t_init;        /* emulated time of the first nvmlInit */

nvmlReturn_t emu_load(void);     /* reads $QUEUECTL_NVML_EMU once per process */
double emu_now(void);            /* emulated seconds */
double emu_real_now(void);       /* wall-clock seconds */
double emu_scale(void);          /* emulated seconds per real second */
int emu_uses_clock_file(void);
void emu_state_at(double t, int gpu, struct emu_state *out);
int emu_procs_at(double t, struct emu_proc *out, int max);

/* Handle checks: a valid device (whole or MIG) of an initialized library, else an error. */
nvmlReturn_t emu_check(struct emu_dev *dev);
nvmlReturn_t emu_check_gpu(struct emu_dev *dev, struct emu_state *state);

#endif
