/*
 * test_common.h - helpers shared by the public-API tests (tests/mp, tests/mpi,
 * tests/unit/test_api.c): per-dtype metadata, deterministic rank inputs, a
 * serial reference for every (dtype, op), result checking with a readable
 * first mismatch, guarded buffers, timing and process-resource probes.
 *
 * Inputs are a pure function of (seed, rank, index, dtype, op, nranks), so any
 * rank can compute any other rank's input and with it the expected result of
 * a collective without talking to anyone. Value ranges are chosen per
 * (dtype, op) so that the reference is exact (see test_common.c).
 */
#ifndef CCL_TEST_COMMON_H
#define CCL_TEST_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pseudo-op for data that is only moved, never reduced (allgather): full
 * range integers and arbitrary finite floats. */
#define TST_OP_COPY ((ccl_redop_t)-1)
/* Pseudo-op for a premulsum operator: the test creates one per call with
 * ccl_redop_create_premulsum and this rank's tst_premul_scalar(). */
#define TST_OP_PREMULSUM ((ccl_redop_t)-2)

/* The dtypes and ops every test sweeps: all of ccl_datatype_t, and the
 * five built-in ops plus premulsum (MPI cross-checks skip what MPI lacks). */
extern const ccl_datatype_t tst_dtypes[];
extern const int tst_num_dtypes;
extern const ccl_redop_t tst_ops[];
extern const int tst_num_ops;

size_t tst_dtype_size(ccl_datatype_t dt);
const char *tst_dtype_name(ccl_datatype_t dt);
const char *tst_op_name(ccl_redop_t op);
/* Any of the six float types (16- and 8-bit ones included). */
int tst_dtype_is_float(ccl_datatype_t dt);

/* 64-bit mixing hash (splitmix64 finalizer). */
uint64_t tst_mix64(uint64_t x);
/* A per-case seed, so that different cases of one run see different data. */
uint64_t tst_case_seed(uint64_t base, uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* One element as a wide scalar: integers in i (signed) or u (unsigned),
 * floats in f. */
typedef union {
    int64_t i;
    uint64_t u;
    double f;
} tst_scalar_t;

/* The premulsum scalar of `rank` (same on every call with this seed): small
 * integers for integer types (any value for unsigned ones, which wrap), +-2^k
 * for float types, sized with the inputs so that every sum stays exact. */
tst_scalar_t tst_premul_scalar(ccl_datatype_t dt, int nranks, uint64_t seed, int rank);

/* Input element `index` of `rank` for a collective over nranks ranks. */
tst_scalar_t tst_input(ccl_datatype_t dt, ccl_redop_t op, int nranks, uint64_t seed,
                       int rank, size_t index);
/* Fills buf[0..count) with tst_input(..., rank, first + k). */
void tst_fill_input(void *buf, size_t count, ccl_datatype_t dt, ccl_redop_t op, int nranks,
                    uint64_t seed, int rank, size_t first);

void tst_store(void *buf, size_t index, ccl_datatype_t dt, tst_scalar_t v);
tst_scalar_t tst_load(const void *buf, size_t index, ccl_datatype_t dt);
/* Writes v as text ("-3", "0x..", "1.25") into out. */
void tst_format(char *out, size_t outlen, ccl_datatype_t dt, tst_scalar_t v);

/* Expected reduction result at `index` (serial reduction over ranks 0..n-1
 * of their inputs at `index`), and the tolerance allowed for it (0 unless op
 * is AVG on a float type). */
tst_scalar_t tst_reference(ccl_datatype_t dt, ccl_redop_t op, int nranks, uint64_t seed,
                           size_t index, double *tol);

/* Details of the first bad element of a check. */
typedef struct {
    size_t index;  /* first bad index in the checked buffer */
    size_t nbad;   /* how many elements were bad */
    char expected[64];
    char got[64];
} tst_mismatch_t;

/* Compares one element; returns 1 when equal (within tol for floats). */
int tst_equal(ccl_datatype_t dt, tst_scalar_t expected, tst_scalar_t got, double tol);

/* Each returns the number of bad elements (0 = pass) and describes the first
 * one in *mm. */
/* recv[k] against the reduction of every rank's input at first + k. */
size_t tst_check_reduced(const void *recv, size_t count, ccl_datatype_t dt, ccl_redop_t op,
                         int nranks, uint64_t seed, size_t first, tst_mismatch_t *mm);
/* Block p of recv (count elements) against rank p's copy input at first + k. */
size_t tst_check_gathered(const void *recv, size_t count, ccl_datatype_t dt, int nranks,
                          uint64_t seed, size_t first, tst_mismatch_t *mm);
/* Checks buf[k] == tst_input(..., rank, first + k): an unmodified send buffer. */
size_t tst_check_input(const void *buf, size_t count, ccl_datatype_t dt, ccl_redop_t op,
                       int nranks, uint64_t seed, int rank, size_t first, tst_mismatch_t *mm);
/* Index of the first of `bytes` bytes that is not `byte`, or `bytes` when all
 * are: a buffer the library had no business writing. */
size_t tst_check_bytes(const void *buf, size_t bytes, unsigned char byte);

/* A buffer with guard bytes on both sides to catch out-of-bounds writes.
 * The user pointer sits `misalign` bytes past a 64-byte boundary, so a test
 * can hand the library element-aligned but not vector-aligned pointers. */
typedef struct {
    unsigned char *base;
    unsigned char *user;
    size_t bytes;      /* user bytes */
    size_t total;      /* bytes allocated */
    int from_ccl;      /* allocated with ccl_mem_alloc */
} tst_gbuf_t;

#define TST_GUARD_BYTES 256
#define TST_GUARD_BYTE 0xA5
#define TST_FILL_BYTE 0x5A

/* Returns the user pointer, never NULL (aborts the process on allocation
 * failure). The user bytes are filled with TST_FILL_BYTE. */
void *tst_gbuf_alloc(tst_gbuf_t *g, size_t bytes, size_t misalign, int use_ccl_mem);
/* 0 when both guards are intact (or g was never allocated); otherwise
 * describes the first damaged byte. */
int tst_gbuf_check(const tst_gbuf_t *g, char *msg, size_t msglen);
void tst_gbuf_free(tst_gbuf_t *g);

double tst_now(void);
/* Open file descriptors and threads of this process. */
int tst_count_fds(void);
int tst_count_threads(void);
/* Names in /dev/shm that contain "ccl" (any case), sorted, one per line, in
 * out (truncated to outlen); returns how many there are. */
int tst_list_ccl_shm(char *out, size_t outlen);
/* Whether /dev/shm/<name> is mapped by any process on this machine. */
int tst_shm_is_mapped(const char *name);

/* base_s times TEST_TIMEOUT_SCALE (default 1; raise it for sanitizer or
 * debug builds), so in-test deadlines and run_all.sh's limits scale together. */
int tst_timeout(int base_s);

/* Environment integer with a default (for scaling tests down or up). */
long tst_env_long(const char *name, long dflt);

/* The base seed of a test: CCL_TEST_SEED (default 12345), printed as
 * "<name>: seed N" so that a failure can be replayed. */
uint64_t tst_seed(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* CCL_TEST_COMMON_H */
