/*
 * nccl_api.c - NCCL's version, error and communicator functions over ccl's.
 *
 * Communicator handles are ccl's own pointers (nccl_types.h), so most calls
 * forward their arguments; what is left here is what NCCL has and ccl's API
 * does not: the config struct of NCCL's layout, inits inside a group, the
 * CUDA device of a comm (a host comm has none: the layer remembers the
 * device ncclCommInitAll was given), and the calls ccl cannot do yet
 * (ncclCommRevoke), which fail with ncclInvalidUsage and say so.
 */
#include "nccl/nccl_group.h"
#include "nccl/nccl_types.h"

#include <pthread.h>
#include <stdlib.h>

/* ---- the CUDA device of a comm ------------------------------------------- */

typedef struct {
    ccl_comm_t comm;
    int device;
} comm_device_t;

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static comm_device_t *devices;
static size_t ndevices, devices_cap;

/* Only ncclCommInitAll, split and shrink record one: every other comm reports
 * device 0, so the common path never takes the lock to add. */
static void device_remember(ccl_comm_t comm, int device)
{
    if (!comm || device == 0)
        return;
    pthread_mutex_lock(&devices_lock);
    if (ndevices == devices_cap) {
        size_t cap = devices_cap ? 2 * devices_cap : 16;
        comm_device_t *grown = realloc(devices, cap * sizeof *grown);
        if (grown) {
            devices = grown;
            devices_cap = cap;
        }
    }
    if (ndevices < devices_cap) /* out of memory: the comm reports 0 */
        devices[ndevices++] = (comm_device_t){comm, device};
    pthread_mutex_unlock(&devices_lock);
}

/* The recorded device (0 when none); with forget, the record goes too. */
static int device_lookup(ccl_comm_t comm, int forget)
{
    int device = 0;
    pthread_mutex_lock(&devices_lock);
    for (size_t i = 0; i < ndevices; i++) {
        if (devices[i].comm != comm)
            continue;
        device = devices[i].device;
        if (forget)
            devices[i] = devices[--ndevices];
        break;
    }
    pthread_mutex_unlock(&devices_lock);
    return device;
}

/* ---- version and errors --------------------------------------------------- */

NCCL_API nccl_result_t ncclGetVersion(int *version)
{
    if (!version)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "ncclGetVersion: version is NULL");
    *version = NCCL_ABI_VERSION_CODE;
    return NCCL_ABI_SUCCESS;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclGetVersion, (int *version));

NCCL_API const char *ncclGetErrorString(nccl_result_t result)
{
    static const char *const strings[NCCL_ABI_NUM_RESULTS] = {
        [NCCL_ABI_SUCCESS] = "no error",
        [NCCL_ABI_CUDA_ERROR] = "unhandled cuda error (run with CCL_DEBUG=INFO for details)",
        [NCCL_ABI_SYSTEM_ERROR] = "unhandled system error (run with CCL_DEBUG=INFO for details)",
        [NCCL_ABI_INTERNAL_ERROR] = "internal error - please report this issue to the ccl developers",
        [NCCL_ABI_INVALID_ARGUMENT] = "invalid argument (run with CCL_DEBUG=INFO for details)",
        [NCCL_ABI_INVALID_USAGE] = "invalid usage (run with CCL_DEBUG=INFO for details)",
        [NCCL_ABI_REMOTE_ERROR] = "remote process exited or there was a network error",
        [NCCL_ABI_IN_PROGRESS] = "NCCL operation in progress",
    };
    if ((unsigned)result >= NCCL_ABI_NUM_RESULTS)
        return "unknown result code";
    return strings[result];
}
NCCL_PROFILE_ALIAS(const char *, ncclGetErrorString, (nccl_result_t result));

/* As NCCL's, the answer is this thread's last failure whatever comm is;
 * a comm that failed in the background (seen by no call of this thread)
 * still has its own message in ccl. */
NCCL_API const char *ncclGetLastError(ccl_comm_t comm)
{
    const char *msg = nccl_last_message();
    if (msg[0] || !comm)
        return msg;
    return ccl_get_last_error(comm);
}
NCCL_PROFILE_ALIAS(const char *, ncclGetLastError, (ccl_comm_t comm));

/* ccl reads CCL_DEBUG once per process; NCCL's reload is deprecated. */
NCCL_API void ncclResetDebugInit(void) {}
NCCL_PROFILE_ALIAS(void, ncclResetDebugInit, (void));

/* ---- creating communicators ------------------------------------------------ */

NCCL_FORWARD(ncclGetUniqueId, (ccl_unique_id_t * unique_id), ccl_get_unique_id(unique_id), NULL);

/* One rank's init; inside a group it starts nonblocking and the group's
 * end waits for it (nccl_group.h). */
static nccl_result_t init_rank(ccl_comm_t *comm, int nranks, ccl_unique_id_t id, int rank, int blocking)
{
    int in_group = nccl_group_open();
    ccl_config_t config = CCL_CONFIG_INITIALIZER;
    config.blocking = in_group ? 0 : blocking;
    ccl_result_t res = ccl_comm_init_rank_config(comm, nranks, id, rank, &config);
    if (in_group && res == CCL_IN_PROGRESS)
        return nccl_group_defer_init(*comm, blocking);
    return nccl_check(res, NULL);
}

NCCL_API nccl_result_t ncclCommInitRank(ccl_comm_t *comm, int nranks, ccl_unique_id_t comm_id, int rank)
{
    return init_rank(comm, nranks, comm_id, rank, 1);
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommInitRank,
                   (ccl_comm_t * comm, int nranks, ccl_unique_id_t comm_id, int rank));

NCCL_API nccl_result_t ncclCommInitRankConfig(ccl_comm_t *comm, int nranks, ccl_unique_id_t comm_id, int rank,
                                              nccl_config_abi_t *config)
{
    int blocking;
    nccl_result_t res = nccl_read_config(config, "ncclCommInitRankConfig", &blocking);
    return res != NCCL_ABI_SUCCESS ? res : init_rank(comm, nranks, comm_id, rank, blocking);
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommInitRankConfig,
                   (ccl_comm_t * comm, int nranks, ccl_unique_id_t comm_id, int rank, nccl_config_abi_t *config));

/* Several ids only spread NCCL's bootstrap over several roots; ccl has one
 * root, and every rank holds the same ids in the same order, so the first
 * one names the same root everywhere. */
NCCL_API nccl_result_t ncclCommInitRankScalable(ccl_comm_t *newcomm, int nranks, int myrank, int nid,
                                                ccl_unique_id_t *comm_ids, nccl_config_abi_t *config)
{
    if (nid < 1 || !comm_ids)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "ncclCommInitRankScalable: nId is %d and commIds %s", nid,
                         comm_ids ? "set" : "NULL");
    int blocking;
    nccl_result_t res = nccl_read_config(config, "ncclCommInitRankScalable", &blocking);
    return res != NCCL_ABI_SUCCESS ? res : init_rank(newcomm, nranks, comm_ids[0], myrank, blocking);
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommInitRankScalable,
                   (ccl_comm_t * newcomm, int nranks, int myrank, int nid, ccl_unique_id_t *comm_ids,
                    nccl_config_abi_t *config));

NCCL_API nccl_result_t ncclCommInitAll(ccl_comm_t *comms, int ndev, const int *devlist)
{
    nccl_result_t res = nccl_check(ccl_comm_init_all(comms, ndev, devlist), NULL);
    if (res != NCCL_ABI_SUCCESS)
        return res;
    for (int i = 0; i < ndev; i++) /* NCCL: devlist order, else devices 0..ndev-1 */
        device_remember(comms[i], devlist ? devlist[i] : i);
    return NCCL_ABI_SUCCESS;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommInitAll, (ccl_comm_t * comms, int ndev, const int *devlist));

/* The end of a split or shrink: the child reports its parent's device. */
static nccl_result_t derived(ccl_result_t made, ccl_comm_t parent, ccl_comm_t *child)
{
    nccl_result_t res = nccl_check(made, parent);
    if (res == NCCL_ABI_SUCCESS && child)
        device_remember(*child, device_lookup(parent, 0));
    return res;
}

/* ccl's split has no config: a valid one is accepted, and the split runs
 * blocking even when config.blocking is 0 (NCCL callers then see
 * ncclSuccess at once, which their polling loops accept). */
NCCL_API nccl_result_t ncclCommSplit(ccl_comm_t comm, int color, int key, ccl_comm_t *newcomm,
                                     nccl_config_abi_t *config)
{
    int blocking;
    nccl_result_t res = nccl_read_config(config, "ncclCommSplit", &blocking);
    return res != NCCL_ABI_SUCCESS ? res : derived(ccl_comm_split(comm, color, key, newcomm), comm, newcomm);
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommSplit,
                   (ccl_comm_t comm, int color, int key, ccl_comm_t *newcomm, nccl_config_abi_t *config));

/* ccl's shrink never waits for calls in flight on comm, which covers both
 * of NCCL's flags; the caller aborts or destroys comm afterwards. */
NCCL_API nccl_result_t ncclCommShrink(ccl_comm_t comm, int *exclude_ranks, int nexclude, ccl_comm_t *newcomm,
                                      nccl_config_abi_t *config, int shrink_flags)
{
    if (shrink_flags != NCCL_ABI_SHRINK_DEFAULT && shrink_flags != NCCL_ABI_SHRINK_ABORT)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT,
                         "ncclCommShrink: shrinkFlags 0x%x is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT",
                         (unsigned)shrink_flags);
    int blocking;
    nccl_result_t res = nccl_read_config(config, "ncclCommShrink", &blocking);
    if (res != NCCL_ABI_SUCCESS)
        return res;
    return derived(ccl_comm_shrink(comm, exclude_ranks, nexclude, newcomm), comm, newcomm);
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommShrink,
                   (ccl_comm_t comm, int *exclude_ranks, int nexclude, ccl_comm_t *newcomm,
                    nccl_config_abi_t *config, int shrink_flags));

/* ---- ending communicators -------------------------------------------------- */

NCCL_FORWARD(ncclCommFinalize, (ccl_comm_t comm), ccl_comm_finalize(comm), comm);

/* Destroy and abort: NCCL takes a NULL comm as nothing to do; the comm's
 * device record goes with it. */
static nccl_result_t end_comm(ccl_result_t (*end)(ccl_comm_t), ccl_comm_t comm)
{
    if (!comm)
        return NCCL_ABI_SUCCESS;
    device_lookup(comm, 1); /* first: once freed, the address may be a new comm's */
    return nccl_check(end(comm), comm);
}

NCCL_API nccl_result_t ncclCommDestroy(ccl_comm_t comm) { return end_comm(ccl_comm_destroy, comm); }
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommDestroy, (ccl_comm_t comm));

NCCL_API nccl_result_t ncclCommAbort(ccl_comm_t comm) { return end_comm(ccl_comm_abort, comm); }
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommAbort, (ccl_comm_t comm));

NCCL_API nccl_result_t ncclCommRevoke(ccl_comm_t comm, int revoke_flags)
{
    int count;
    ccl_result_t live = ccl_comm_count(comm, &count);
    if (live != CCL_SUCCESS)
        return nccl_check(live, comm);
    return nccl_fail(NCCL_ABI_INVALID_USAGE,
                     "ncclCommRevoke: not supported by ccl; use ncclCommAbort, or ncclCommShrink on the survivors");
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommRevoke, (ccl_comm_t comm, int revoke_flags));

/* ---- questions about a communicator ---------------------------------------- */

NCCL_API nccl_result_t ncclCommGetAsyncError(ccl_comm_t comm, nccl_result_t *async_error)
{
    if (!async_error)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "ncclCommGetAsyncError: asyncError is NULL");
    ccl_result_t state;
    nccl_result_t res = nccl_check(ccl_comm_get_async_error(comm, &state), comm);
    if (res == NCCL_ABI_SUCCESS) /* the failure's message, for ncclGetLastError */
        *async_error = nccl_check(state, comm);
    return res;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommGetAsyncError, (ccl_comm_t comm, nccl_result_t *async_error));

NCCL_FORWARD(ncclCommCount, (const ccl_comm_t comm, int *count), ccl_comm_count(comm, count), comm);
NCCL_FORWARD(ncclCommUserRank, (const ccl_comm_t comm, int *rank), ccl_comm_user_rank(comm, rank), comm);

NCCL_API nccl_result_t ncclCommCuDevice(const ccl_comm_t comm, int *device)
{
    int count;
    if (!device)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "ncclCommCuDevice: device is NULL");
    nccl_result_t res = nccl_check(ccl_comm_count(comm, &count), comm); /* is comm live? */
    if (res == NCCL_ABI_SUCCESS)
        *device = device_lookup(comm, 0);
    return res;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommCuDevice, (const ccl_comm_t comm, int *device));
