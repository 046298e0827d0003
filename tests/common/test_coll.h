/*
 * test_coll.h - one collective test case on one rank, split into prepare
 * (guarded buffers filled with this rank's input, laid out as the
 * collective and placement need), issue (the ccl call, blocking or on a
 * stream) and verify (result against the serial reference, guard bytes,
 * send buffer and every buffer the rank does not use untouched). The split
 * lets a test queue many cases on a stream or in a group before verifying
 * any of them. Every collective of ccl.h is covered, plus a send/recv ring.
 */
#ifndef CCL_TEST_COLL_H
#define CCL_TEST_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "ccl.h"
#include "test_common.h"
#include "test_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TST_ALLREDUCE,
    TST_ALLGATHER,
    TST_REDUCE_SCATTER,
    TST_BROADCAST,
    TST_BCAST,       /* ccl_bcast: always in place */
    TST_REDUCE,
    TST_ALLTOALL,
    TST_GATHER,
    TST_SCATTER,
    TST_SENDRECV,    /* in one group: send to rank + root, receive from rank - root */
    TST_NUM_COLLS
} tst_coll_t;

typedef struct {
    tst_coll_t coll;
    ccl_datatype_t dt;
    ccl_redop_t op;     /* reducing collectives (a ccl op or TST_OP_PREMULSUM); ignored otherwise */
    size_t count;       /* the count argument of the call (per-rank block where there are blocks) */
    int inplace;        /* the in-place layout of ccl.h (only where the collective has one);
                         * TST_INPLACE_MIXED: in place on even ranks only */
    size_t misalign;    /* bytes past a 64-byte boundary (multiple of the element size) */
    uint64_t seed;
    int root;           /* rooted collectives: the root; TST_SENDRECV: the distance to the peer */
    int null_unused;    /* ranks pass NULL for the buffers ccl.h says they do not use */
} tst_case_t;

#define TST_INPLACE_MIXED 2

typedef struct {
    tst_gbuf_t send, recv;
    void *sendp;
    void *recvp;
    int rank, nranks;
    /* premulsum: the operator (created at the first issue) and its scalar,
     * which must stay put while a CCL_SCALAR_DEVICE operator is in use */
    ccl_redop_t op;
    ccl_comm_t op_comm;
    int op_made;
    uint64_t scalar[1];
} tst_bufs_t;

const char *tst_coll_name(tst_coll_t c);
/* The collective for a name ("reduce_scatter"), or TST_NUM_COLLS. */
tst_coll_t tst_coll_by_name(const char *name);
/* Whether the collective reduces (takes an op). */
int tst_coll_reduces(tst_coll_t c);
/* Whether it has a root (TST_SENDRECV's peer distance counts as one). */
int tst_coll_rooted(tst_coll_t c);
/* Whether ccl.h gives it an in-place layout besides the out-of-place one. */
int tst_coll_has_inplace(tst_coll_t c);
/* "reduce dtype=int32 op=sum count=13 nranks=3 root=2 in-place" */
void tst_case_str(const tst_case_t *c, int nranks, char *buf, size_t len);

void tst_case_prepare(const tst_case_t *c, int rank, int nranks, tst_bufs_t *b, int use_ccl_mem);
/* Issues the call (on a premulsum case, creates the operator first). */
ccl_result_t tst_case_issue(const tst_case_t *c, tst_bufs_t *b, ccl_comm_t comm,
                            ccl_stream_t stream);
/* Returns 0 when everything is right; otherwise writes one line naming the
 * case, rank, first bad index and expected vs got into msg. */
int tst_case_verify(const tst_case_t *c, int rank, int nranks, const tst_bufs_t *b, char *msg,
                    size_t len);
/* Frees the buffers and destroys a premulsum operator. */
void tst_case_release(tst_bufs_t *b);

/* prepare + blocking issue + verify + release on a forked rank: a ccl error
 * is fatal for the rank, a wrong result is reported with tst_fail. */
void tst_run_case(tst_ctx_t *ctx, ccl_comm_t comm, const tst_case_t *c, int use_ccl_mem);

/* What the collective sweeps read from the environment. */
typedef struct {
    uint64_t seed;   /* CCL_TEST_SEED (default 12345) */
    int use_ccl_mem; /* CCL_TEST_CCL_MEM=1: buffers from ccl_mem_alloc; 2: on even ranks only */
} tst_sweep_cfg_t;

/* A sweep over collectives x every dtype x every op (reducing collectives)
 * x counts x placements (in place on every rank, or, one case in two, on
 * the even ranks only), with the root (or peer distance) cycling through 0,
 * the last rank and a middle one, ranks that do not use a buffer passing
 * NULL every other case, and some buffers merely element-aligned. The big
 * count, which costs more than all the others together, runs for one op
 * per dtype (op d mod nops for dtype d), so every op still meets it. */
typedef struct {
    const tst_coll_t *colls;
    int ncolls;
    const size_t *counts;
    int ncounts;
    size_t big_count;     /* 0: none */
    const int *ranks;     /* rank counts to run (NULL: the defaults below) */
    int nranks;
    int timeout_s;        /* per rank count; 0: 60 */
    tst_sweep_cfg_t cfg;  /* filled by tst_sweep_main */
} tst_sweep_t;

/* The shared main() of the collective sweeps: fills sw->cfg, then runs the
 * sweep on each rank count given in argv, or on sw->ranks, or on the
 * defaults (1 2 3 4 5 7 8 16; with ccl_mem_alloc buffers 2 3 4 5, since
 * every case allocates and touches fresh memory on every rank).
 * CCL_TEST_COLLS, a comma-separated list of names, keeps only those
 * collectives; CCL_TEST_COUNTS, a comma-separated list, replaces the small
 * counts (the big one stays). Prints "<name>: passed|FAILED"; returns the
 * exit status. */
int tst_sweep_main(const char *name, int argc, char **argv, tst_sweep_t *sw);

/* The sweeps' usual counts (0, 1, 2, 3, 7, 13, 1021; big 65537). */
extern const size_t tst_sweep_counts[];
extern const int tst_sweep_ncounts;
#define TST_SWEEP_BIG_COUNT 65537

/* tst_sweep_main for one collective with the usual counts. */
int tst_sweep_one(const char *name, tst_coll_t coll, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* CCL_TEST_COLL_H */
