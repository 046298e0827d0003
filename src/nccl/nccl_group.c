/*
 * nccl_group.c - ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd.
 *
 * Collectives and sends queued in a group are ccl's business: these calls
 * open and close ccl's group. The layer keeps its own depth only for the
 * inits NCCL allows inside a group (nccl_group.h): they are waited for at
 * the outermost end, before ccl runs the group's calls.
 */
#include "nccl/nccl_group.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    ccl_comm_t comm;
    int blocking;
} deferred_init_t;

static __thread int depth;
static __thread deferred_init_t *inits;
static __thread int ninits, inits_cap;

int nccl_group_open(void) { return depth > 0; }

nccl_result_t nccl_group_defer_init(ccl_comm_t comm, int blocking)
{
    if (ninits == inits_cap) {
        int cap = inits_cap ? 2 * inits_cap : 8;
        deferred_init_t *grown = realloc(inits, (size_t)cap * sizeof *grown);
        if (!grown)
            return nccl_fail(NCCL_ABI_SYSTEM_ERROR, "ncclCommInitRank in a group: out of memory");
        inits = grown;
        inits_cap = cap;
    }
    inits[ninits++] = (deferred_init_t){comm, blocking};
    return NCCL_ABI_SUCCESS;
}

/* Waits for one deferred init; ccl bounds an init by CCL_TIMEOUT, so this
 * ends. A short sleep between polls leaves the cores to the init threads. */
static ccl_result_t wait_init(ccl_comm_t comm)
{
    const struct timespec pause = {0, 50 * 1000};
    ccl_result_t state;
    for (;;) {
        ccl_result_t res = ccl_comm_get_async_error(comm, &state);
        if (res != CCL_SUCCESS)
            return res;
        if (state != CCL_IN_PROGRESS)
            return state;
        sched_yield();
        nanosleep(&pause, NULL);
    }
}

/* Settles the group's inits: the first failure of a blocking one is the
 * result; a nonblocking one still running makes it ncclInProgress. */
static nccl_result_t finish_inits(void)
{
    nccl_result_t result = NCCL_ABI_SUCCESS;
    for (int i = 0; i < ninits; i++) {
        ccl_result_t state = CCL_IN_PROGRESS;
        if (inits[i].blocking)
            state = wait_init(inits[i].comm);
        else if (ccl_comm_get_async_error(inits[i].comm, &state) != CCL_SUCCESS)
            state = CCL_ERR_NULL_COMM;
        nccl_result_t r = nccl_check(state, inits[i].comm);
        if (result == NCCL_ABI_SUCCESS || (result == NCCL_ABI_IN_PROGRESS && r != NCCL_ABI_SUCCESS))
            result = r;
    }
    /* Inits in groups are rare: free the list rather than leave it to
     * leak when the thread exits. */
    free(inits);
    inits = NULL;
    ninits = inits_cap = 0;
    return result;
}

NCCL_API nccl_result_t ncclGroupStart(void)
{
    ccl_result_t res = ccl_group_start();
    if (res == CCL_SUCCESS)
        depth++;
    return nccl_check(res, NULL);
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclGroupStart, (void));

/* Closes one level; the outermost settles the inits, then runs ccl's
 * group through end (ccl_group_end or ccl_group_simulate_end). */
static nccl_result_t group_close(ccl_result_t (*end)(void *), void *arg)
{
    if (depth == 0) /* refused here: ccl would also log it as a runtime warning */
        return nccl_fail(NCCL_ABI_INVALID_USAGE, "ncclGroupEnd without a matching ncclGroupStart on this thread");
    nccl_result_t inits_res = NCCL_ABI_SUCCESS;
    if (--depth == 0)
        inits_res = finish_inits();
    nccl_result_t res = nccl_check(end(arg), NULL);
    return res != NCCL_ABI_SUCCESS ? res : inits_res;
}

static ccl_result_t plain_end(void *arg)
{
    (void)arg;
    return ccl_group_end();
}

static ccl_result_t simulate_end(void *arg) { return ccl_group_simulate_end(arg); }

NCCL_API nccl_result_t ncclGroupEnd(void) { return group_close(plain_end, NULL); }
NCCL_PROFILE_ALIAS(nccl_result_t, ncclGroupEnd, (void));

NCCL_API nccl_result_t ncclGroupSimulateEnd(nccl_sim_info_abi_t *sim_info)
{
    if (!sim_info || sim_info->magic != NCCL_ABI_SIM_INFO_MAGIC ||
        sim_info->size < offsetof(nccl_sim_info_abi_t, estimated_time) + sizeof(float))
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT,
                         "ncclGroupSimulateEnd: simInfo is NULL or not set up with NCCL_SIM_INFO_INITIALIZER");
    ccl_sim_info_t info = CCL_SIM_INFO_INITIALIZER;
    nccl_result_t res = group_close(simulate_end, &info);
    if (res == NCCL_ABI_SUCCESS)
        sim_info->estimated_time = info.estimated_time_us;
    return res;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclGroupSimulateEnd, (nccl_sim_info_abi_t * sim_info));
