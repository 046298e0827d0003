/*
 * host.h - what the files of the host executor share, and nothing else
 * includes: the per-call context every slice reads, and the single-copy
 * functions (host_single_copy.c) that the run loop (host.c) calls at the
 * points of a slice where data may go by reference instead of through a
 * slot.
 */
#ifndef CCL_EXEC_HOST_H
#define CCL_EXEC_HOST_H

#include "base/mem.h"
#include "core/communicator.h"
#include "transport/shm.h"
#include "transport/shm_help.h"

#include <stddef.h>

/* One slice into the reader's destination and the poster's twin, read
 * once (two memcpy calls took 1.1-1.25x the time of one pass with two
 * stores, 2 threads at 4-8 MiB); visible to the other side before it is
 * counted as done (the slice's completion is published with a release
 * store: enough for plain stores, a fence for streamed ones). Streamed
 * from CCL_STREAM_THRESHOLD, but at most from EXEC_TWIN_STREAM_MAX: below
 * both the buffers stay in the cache for the next call. Streaming always made 2-rank single-copy calls of 1 to 8 MiB
 * 1.3-3.3x slower (4 MiB allgather 308 against 95 us a call, broadcast
 * 296 against 99, alternating in one run, 2026-12-04). At 16 MiB it was
 * mixed where the vCPUs share a socket (allgather 0.74-1.02x the plain
 * time, broadcast 1.15x) and 0.49x where they sit far apart: the twin is
 * written into the other rank's buffer, and streamed stores do not fetch
 * its lines from a distant cache first. At 32 MiB streaming wins. */
#define EXEC_TWIN_STREAM_MAX ((size_t)16 << 20)

/* What every slice of one call needs. */
typedef struct {
    struct ccl_comm *comm;
    const coll_args_t *args;
    size_t esz;
    int stream_out;  /* write final results with non-temporal stores */
    int stream_twin; /* ... and twin copies (exec_twin_copy), from a smaller size */
    void *scratch;   /* one slot of cache-resident scratch */
    void *premul_buf; /* one slot: this rank's input times the premulsum scalar */
    /* Single copy: data that lies in a registered user buffer is sent as a
     * reference the peer reads in place, instead of copied into the slot. */
    int send_refs, recv_refs; /* the schedule lets that buffer's data go by reference */
    int send_reg, recv_reg;   /* ... and it is registered (local peers map it) */
    int net_refs;             /* ... and the call is large enough for net sends to go from it */
    mem_ref_t send_ref, recv_ref;
    int sent_refs;   /* the call must drain its sends before returning */
    int sole_call;   /* the only call of the run: its steps alone use their connections */
    /* The local copy step that the twin of our whole-step reference of
     * step twin_send replaces (shm_help.h): the drain makes it, with the
     * reader; -1: none. */
    int twin_step, twin_send;
    int copy_help;   /* we copy slices of what readers take from us (comm->copy_help, exec_ctx_init) */
    char *twin_dst;  /* ... and where it writes */
    const sched_t *sched;
    ccl_result_t res; /* why a slice failed */
} exec_ctx_t;

static inline char *exec_buf(const coll_args_t *a, int which, size_t off_elems, size_t esz)
{
    char *base = which == SCHED_BUF_SEND ? (char *)a->sendbuf : which == SCHED_BUF_RECV ? (char *)a->recvbuf : NULL;
    return base ? base + off_elems * esz : NULL;
}

/* host_single_copy.c: whole-step references (may a step's data go as one
 * reference; may a broadcast forward the one it got). */
int exec_sends_whole(const exec_ctx_t *x, const sched_step_t *st, const shm_conn_t *sc, size_t total);
int exec_may_forward(const exec_ctx_t *x, const sched_step_t *st, const shm_conn_t *sc);
/* ... references: whose buffer a received one names, that it is still
 * alive, reading it, and posting ours. */
ccl_result_t exec_ref_owner(const struct ccl_comm *comm, int from, const shm_ref_t *ref, int *owner);
ccl_result_t exec_owner_check(struct ccl_comm *comm, int owner);
ccl_result_t exec_read_ref(exec_ctx_t *x, const sched_step_t *st, const shm_ref_t *ref, size_t whole_off, size_t nbytes, const void **in, int *owner);
void exec_post_ref(exec_ctx_t *x, shm_conn_t *sc, void *slot, int from_send, const char *data, size_t len, size_t nbytes, int twin);
/* ... twin copies and copy help (transport/shm_help.h). */
void exec_twin_copy(char *dst, char *twin, const void *in, size_t nbytes, int stream);
void exec_help_decide(const exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, shm_help_t *help, const char *dst, size_t total);
ccl_result_t exec_help_wait(exec_ctx_t *x, const sched_step_t *st, shm_conn_t *rc, shm_help_t *help);
void exec_twin_init(exec_ctx_t *x);
ccl_result_t exec_help(struct ccl_comm *comm, int p);
/* ... a failed call closes what peers may still copy for it, then waits
 * for the copies in flight. */
void exec_abandon_close(struct ccl_comm *comm);
void exec_abandon_wait(struct ccl_comm *comm);

#endif
