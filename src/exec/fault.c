/*
 * fault.c - CCL_FAULT: failures on cue for the fault-handling tests
 * (fault.h has the syntax). Kept out of the fast path: every hook starts
 * with one test of fault_armed.
 */
#include "exec/fault.h"
#include "base/err.h"
#include "base/param.h"
#include "transport/shm.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    FAULT_KILL,
    FAULT_DELAY,
    FAULT_DROP,
    FAULT_CORRUPT,
    FAULT_STALL,
    FAULT_FAIL,
    FAULT_CORRUPT_WIRE,
    FAULT_KINDS
} fault_kind_t;

static const char *const fault_names[] = {"kill", "delay", "drop", "corrupt", "stall", "fail", "corrupt_wire"};

typedef struct {
    fault_kind_t kind;
    int rank;      /* -1: every rank */
    uint64_t op;   /* the call it fires at; 0 with delay: every call */
    int64_t ms;
    int64_t slice; /* kill: at the call's slice-th slice instead of after ms; fail: there */
    _Atomic int fired;
} fault_t;

#define FAULT_MAX 16

static fault_t faults[FAULT_MAX];
static int nfaults;
int fault_armed;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static ccl_result_t fault_parse_res;
static char fault_parse_err[256];

static int fault_parse_one(char *text, fault_t *f)
{
    char *save = NULL, *tok = strtok_r(text, ":", &save);
    int k;
    for (k = 0; k < FAULT_KINDS; k++)
        if (tok && strcmp(tok, fault_names[k]) == 0)
            break;
    if (k == FAULT_KINDS) {
        snprintf(fault_parse_err, sizeof fault_parse_err,
                 "unknown action '%s' (kill, delay, drop, corrupt, stall, fail, corrupt_wire)", tok ? tok : "");
        return -1;
    }
    *f = (fault_t){.kind = (fault_kind_t)k, .rank = -1, .op = k == FAULT_DELAY ? 0 : 1, .ms = 0};
    while ((tok = strtok_r(NULL, ":", &save))) {
        char *eq = strchr(tok, '='), *end = NULL;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (!eq || end == eq + 1 || *end) {
            snprintf(fault_parse_err, sizeof fault_parse_err, "field '%s' of %s is not key=integer", tok, fault_names[k]);
            return -1;
        }
        *eq = '\0';
        if (strcmp(tok, "rank") == 0 && v >= -1)
            f->rank = (int)v;
        else if (strcmp(tok, "op") == 0 && v >= 0)
            f->op = (uint64_t)v;
        else if (strcmp(tok, "ms") == 0 && v >= 0)
            f->ms = v;
        else if (strcmp(tok, "slice") == 0 && v >= 1 && (k == FAULT_KILL || k == FAULT_FAIL))
            f->slice = v;
        else {
            snprintf(fault_parse_err, sizeof fault_parse_err, "field %s=%lld of %s: unknown key or bad value "
                     "(rank>=-1, op>=0, ms>=0; slice>=1 with kill or fail)", tok, v, fault_names[k]);
            return -1;
        }
    }
    if (k == FAULT_FAIL && !f->slice) {
        snprintf(fault_parse_err, sizeof fault_parse_err, "fail needs slice>=1");
        return -1;
    }
    if (f->slice && f->ms) {
        snprintf(fault_parse_err, sizeof fault_parse_err, "%s takes ms or slice, not both", fault_names[k]);
        return -1;
    }
    if (f->op == 0 && f->kind != FAULT_DELAY) {
        snprintf(fault_parse_err, sizeof fault_parse_err, "%s needs op>=1", fault_names[k]);
        return -1;
    }
    return 0;
}

static void fault_parse(void)
{
    const char *spec = param_str(PARAM_FAULT);
    if (!spec[0])
        return;
    char *copy = strdup(spec), *save = NULL;
    if (!copy) {
        fault_parse_res = CCL_ERR_SYSTEM;
        snprintf(fault_parse_err, sizeof fault_parse_err, "out of memory");
        return;
    }
    for (char *item = strtok_r(copy, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        if (nfaults == FAULT_MAX) {
            snprintf(fault_parse_err, sizeof fault_parse_err, "more than %d faults", FAULT_MAX);
            fault_parse_res = CCL_ERR_INVALID_ARGUMENT;
            break;
        }
        if (fault_parse_one(item, &faults[nfaults]) != 0) {
            fault_parse_res = CCL_ERR_INVALID_ARGUMENT;
            break;
        }
        nfaults++;
    }
    free(copy);
    if (fault_parse_res == CCL_SUCCESS)
        fault_armed = nfaults > 0;
    else
        nfaults = 0;
}

ccl_result_t fault_init(void)
{
    pthread_once(&fault_once, fault_parse);
    if (fault_parse_res != CCL_SUCCESS)
        return err_set(fault_parse_res, "CCL_FAULT='%s': %s", param_str(PARAM_FAULT), fault_parse_err);
    return CCL_SUCCESS;
}

static void fault_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A kill or failure at a slice: the comm whose call it waits in, and the
 * slices that call still moves before it. A timed kill can miss a call
 * that ends early (on a fast machine); this one always lands inside it. */
static const void *_Atomic fault_slice_comm;
static _Atomic int64_t fault_slices_left;
static _Atomic int fault_slice_fails; /* fail, not kill */

ccl_result_t fault_on_slice(const void *comm, int rank)
{
    if (atomic_load_explicit(&fault_slice_comm, memory_order_relaxed) != comm)
        return CCL_SUCCESS;
    if (atomic_fetch_sub(&fault_slices_left, 1) != 1)
        return CCL_SUCCESS;
    if (atomic_load(&fault_slice_fails)) {
        atomic_store(&fault_slice_comm, NULL);
        return err_set(CCL_ERR_INTERNAL, "CCL_FAULT: failure injected on rank %d at this slice", rank);
    }
    LOG_WARN(SUB_ALL, "CCL_FAULT: kill on rank %d now, inside the call", rank);
    raise(SIGKILL);
    return CCL_SUCCESS;
}

void fault_run_done(const void *comm, int rank)
{
    const void *armed = comm;
    if (atomic_compare_exchange_strong(&fault_slice_comm, &armed, NULL))
        LOG_WARN(SUB_ALL, "CCL_FAULT: the %s armed on rank %d did not fire: its call moved %lld slices fewer",
                 atomic_load(&fault_slice_fails) ? "fail" : "kill", rank,
                 (long long)atomic_load(&fault_slices_left));
}

static void *fault_killer(void *arg)
{
    fault_sleep_ms((int64_t)(intptr_t)arg);
    raise(SIGKILL);
    return NULL;
}

/* Whether f fires for this rank at this call; claims it (once) if so. */
static int fault_claim(fault_t *f, int rank, uint64_t seq)
{
    if (f->rank >= 0 && f->rank != rank)
        return 0;
    if (f->kind == FAULT_DELAY && f->op == 0)
        return 1;
    if (f->op != seq)
        return 0;
    int expected = 0;
    return atomic_compare_exchange_strong(&f->fired, &expected, 1);
}

void fault_before_call(const void *comm, int rank, net_t *net, uint64_t seq)
{
    if (!fault_armed)
        return;
    for (int i = 0; i < nfaults; i++) {
        fault_t *f = &faults[i];
        if (f->kind == FAULT_CORRUPT || !fault_claim(f, rank, seq))
            continue;
        /* A delay of every call says so once, not once per call. */
        if (f->kind != FAULT_DELAY || f->op != 0 || atomic_exchange(&f->fired, 1) == 0)
            LOG_WARN(SUB_ALL, "CCL_FAULT: %s on rank %d at call #%llu (%s=%lld)%s", fault_names[f->kind],
                     rank, (unsigned long long)seq, f->slice ? "slice" : "ms", (long long)(f->slice ? f->slice : f->ms),
                     f->kind == FAULT_DELAY && f->op == 0 ? ", and at every call after it" : "");
        switch (f->kind) {
        case FAULT_FAIL:
        case FAULT_KILL: {
            if (f->slice) {
                atomic_store(&fault_slices_left, f->slice);
                atomic_store(&fault_slice_fails, f->kind == FAULT_FAIL);
                atomic_store(&fault_slice_comm, comm);
                break;
            }
            pthread_t t;
            if (f->ms == 0 || pthread_create(&t, NULL, fault_killer, (void *)(intptr_t)f->ms) != 0)
                raise(SIGKILL);
            pthread_detach(t);
            break;
        }
        case FAULT_DELAY:
            fault_sleep_ms(f->ms);
            break;
        case FAULT_DROP:
            if (net)
                net_fault_drop(net);
            else
                LOG_WARN(SUB_ALL, "CCL_FAULT: drop has no network connection to drop on a single-host communicator");
            break;
        case FAULT_CORRUPT_WIRE:
            if (net)
                net_fault_corrupt_wire(net);
            else
                shm_fault_corrupt(); /* shared-memory FIFOs, checksummed with CCL_CHECKSUM=2 */
            break;
        case FAULT_STALL:
            if (net)
                net_fault_stall(net, f->ms);
            else
                LOG_WARN(SUB_ALL, "CCL_FAULT: stall needs a net progress thread (a communicator across hosts)");
            break;
        default:
            break;
        }
    }
}

void fault_after_call(int rank, uint64_t seq, void *recvbuf, size_t bytes)
{
    if (!fault_armed || !recvbuf || bytes == 0)
        return;
    for (int i = 0; i < nfaults; i++) {
        fault_t *f = &faults[i];
        if (f->kind != FAULT_CORRUPT || !fault_claim(f, rank, seq))
            continue;
        LOG_WARN(SUB_ALL, "CCL_FAULT: corrupting byte %zu of rank %d's result of call #%llu", bytes / 2, rank,
                 (unsigned long long)seq);
        ((volatile unsigned char *)recvbuf)[bytes / 2] ^= 0x5a;
    }
}
