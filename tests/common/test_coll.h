/*
 * test_coll.h - one allreduce/allgather test case on one rank, split into
 * prepare (guarded buffers filled with this rank's input), issue (the ccl
 * call, blocking or on a stream) and verify (result against the serial
 * reference, guard bytes, send buffer untouched). The split lets a test
 * queue many cases on a stream before verifying any of them.
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

typedef enum { TST_ALLREDUCE, TST_ALLGATHER } tst_coll_t;

typedef struct {
    tst_coll_t coll;
    ccl_datatype_t dt;
    ccl_redop_t op;     /* ignored for allgather */
    size_t count;       /* allreduce: elements; allgather: elements per rank */
    int inplace;
    size_t misalign;    /* bytes past a 64-byte boundary (multiple of the element size) */
    uint64_t seed;
} tst_case_t;

typedef struct {
    tst_gbuf_t send, recv;
    void *sendp;
    void *recvp;
} tst_bufs_t;

const char *tst_coll_name(tst_coll_t c);
/* "allreduce dtype=int32 op=sum count=13 nranks=3 in-place" */
void tst_case_str(const tst_case_t *c, int nranks, char *buf, size_t len);

void tst_case_prepare(const tst_case_t *c, int rank, int nranks, tst_bufs_t *b, int use_ccl_mem);
ccl_result_t tst_case_issue(const tst_case_t *c, const tst_bufs_t *b, ccl_comm_t comm,
                            ccl_stream_t stream);
/* Returns 0 when everything is right; otherwise writes one line naming the
 * case, rank, first bad index and expected vs got into msg. */
int tst_case_verify(const tst_case_t *c, int rank, int nranks, const tst_bufs_t *b, char *msg,
                    size_t len);
void tst_case_release(tst_bufs_t *b);

/* prepare + blocking issue + verify + release on a forked rank: a ccl error
 * is fatal for the rank, a wrong result is reported with tst_fail. */
void tst_run_case(tst_ctx_t *ctx, ccl_comm_t comm, const tst_case_t *c, int use_ccl_mem);

#ifdef __cplusplus
}
#endif
/* What the collective sweeps read from the environment. */
typedef struct {
    uint64_t seed;   /* CCL_TEST_SEED (default 12345) */
    int use_ccl_mem; /* CCL_TEST_CCL_MEM=1: buffers from ccl_mem_alloc */
} tst_sweep_cfg_t;

/* The shared main() of the collective sweeps: fills *cfg, then runs body on
 * each rank count given in argv, or on the defaults (1 2 3 4 5 7 8 16; with
 * ccl_mem_alloc buffers 2 3 4 5, since every case allocates and touches
 * fresh memory on every rank). Prints "<name>: passed|FAILED"; returns the
 * exit status. */
int tst_sweep_main(const char *name, int argc, char **argv, tst_rank_fn body, tst_sweep_cfg_t *cfg);

#endif /* CCL_TEST_COLL_H */
