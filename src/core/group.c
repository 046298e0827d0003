/*
 * group.c - ccl_group_start / ccl_group_end.
 *
 * The group is per thread, as NCCL's: calls made between start and end are
 * checked at once (their errors are returned at once, and again by
 * ccl_group_end), queued here, and run together by the outermost
 * ccl_group_end through coll_run, which progresses them all at the same
 * time. Each queued call holds its comm's pending count, so a comm cannot
 * be freed under a queued call.
 */
#include "core/comm_state.h"
#include "core/coll_run.h"
#include "core/dev_stream.h"
#include "core/group.h"
#include "core/stream.h"
#include "core/tuner.h"
#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int depth;
    coll_args_t *calls;
    int ncalls, cap;
    ccl_stream_t stream;
    int has_stream;          /* stream set by the first call */
    ccl_result_t error;      /* first failure inside the group */
    char error_msg[COMM_ERR_MAX];
} group_t;

static _Thread_local group_t group;

int group_active(void) { return group.depth > 0; }

static void group_fail(ccl_result_t res)
{
    if (group.error == CCL_SUCCESS) {
        group.error = res;
        snprintf(group.error_msg, sizeof group.error_msg, "%s", err_message());
    }
}

ccl_result_t group_add(const coll_args_t *a, ccl_result_t checked, ccl_stream_t stream, const char *name)
{
    ccl_result_t res = checked;
    if (res != CCL_SUCCESS) /* the call failed its checks: remember, return its error */
        goto out;
    if (group.has_stream && stream != group.stream)
        CCL_FAIL(CCL_ERR_GROUP, "%s: stream %p differs from stream %p of the group's first call; "
                 "a group runs on one stream", name, stream, group.stream);
    if (group.ncalls == group.cap) {
        int cap = group.cap ? 2 * group.cap : 16;
        coll_args_t *calls = realloc(group.calls, (size_t)cap * sizeof *calls);
        if (!calls)
            CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for a group of %d calls", cap);
        group.calls = calls;
        group.cap = cap;
    }
    group.stream = stream;
    group.has_stream = 1;
    group.calls[group.ncalls++] = *a;
    comm_pending_add(a->comm);
out:
    if (res != CCL_SUCCESS) {
        group_fail(res);
        if (comm_is_live(a->comm))
            comm_record_error(a->comm);
    }
    return res;
}

int group_holds(const struct ccl_comm *comm)
{
    for (int i = 0; i < group.ncalls; i++)
        if (group.calls[i].comm == comm)
            return 1;
    return 0;
}

void group_drop(struct ccl_comm *comm)
{
    int kept = 0;
    for (int i = 0; i < group.ncalls; i++) {
        if (group.calls[i].comm == comm)
            comm_pending_done(comm);
        else
            group.calls[kept++] = group.calls[i];
    }
    group.ncalls = kept;
}

static void group_reset(void)
{
    for (int i = 0; i < group.ncalls; i++)
        comm_pending_done(group.calls[i].comm);
    group.ncalls = 0;
    group.has_stream = 0;
    group.stream = NULL;
    group.error = CCL_SUCCESS;
    group.error_msg[0] = '\0';
    /* Freed at every outermost end: the state is thread-local and a thread
     * that exits would otherwise leak it (one malloc per group is noise
     * next to running the group). */
    free(group.calls);
    group.calls = NULL;
    group.cap = 0;
}

CCL_API ccl_result_t ccl_group_start(void)
{
    err_clear();
    if (group.depth == 0)
        group_reset();
    group.depth++;
    return CCL_SUCCESS;
}

/* Closes one level of the group: 1 when it was the outermost and every
 * call in it passed its checks (the caller then runs or simulates it);
 * else 0 with *res set (an inner level: CCL_SUCCESS; no group, or a
 * failed call: the error, the group dropped). */
static int group_close(const char *who, ccl_result_t *res)
{
    *res = CCL_SUCCESS;
    if (group.depth == 0) {
        *res = err_set(CCL_ERR_GROUP, "%s without a matching ccl_group_start", who);
        return 0;
    }
    if (--group.depth > 0)
        return 0;
    if (group.error != CCL_SUCCESS) {
        *res = err_set(group.error, "%s: the group ran nothing because a call in it failed: %s", who,
                       group.error_msg);
        for (int i = 0; i < group.ncalls; i++)
            comm_record_error(group.calls[i].comm);
        group_reset();
        return 0;
    }
    return 1;
}

/* Sums the modelled time of the group's calls per comm; the slowest comm
 * is the group's time. */
static double group_estimate_us(void)
{
    double worst = 0;
    for (int i = 0; i < group.ncalls; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = group.calls[j].comm != group.calls[i].comm;
        if (!first)
            continue; /* this comm was summed with its first call */
        double sum = 0;
        int grouped = 0;
        for (int j = i; j < group.ncalls; j++)
            grouped += group.calls[j].comm == group.calls[i].comm;
        for (int j = i; j < group.ncalls; j++)
            if (group.calls[j].comm == group.calls[i].comm)
                sum += tuner_estimate_us(&group.calls[j], grouped > 1);
        if (sum > worst)
            worst = sum;
    }
    return worst;
}

CCL_API ccl_result_t ccl_group_simulate_end(ccl_sim_info_t *info)
{
    err_clear();
    if (!info || info->magic != CCL_SIM_INFO_MAGIC ||
        info->size < offsetof(ccl_sim_info_t, estimated_time_us) + sizeof info->estimated_time_us)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_group_simulate_end: info is NULL or not made with "
                       "CCL_SIM_INFO_INITIALIZER (the group stays open)");
    ccl_result_t res;
    if (!group_close("ccl_group_simulate_end", &res))
        return res;
    info->estimated_time_us = (float)group_estimate_us();
    group_reset(); /* nothing runs */
    return CCL_SUCCESS;
}

CCL_API ccl_result_t ccl_group_end(void)
{
    err_clear();
    ccl_result_t res;
    if (!group_close("ccl_group_end", &res))
        return res;
    if (group.ncalls == 0)
        return CCL_SUCCESS;
    if (group.stream) {
        /* The stream's worker calls pending_done for each call. */
        if (dstream_is_cuda(group.stream))
            res = dstream_enqueue(group.stream, group.calls, group.ncalls);
        else
            res = stream_enqueue(group.stream, group.calls, group.ncalls);
        group.ncalls = 0; /* the stream (or, failing, enqueue) released them */
    } else {
        res = dstream_run(group.calls, group.ncalls);
    }
    group_reset();
    return res;
}
