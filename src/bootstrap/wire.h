/*
 * wire.h - the bootstrap's frames, shared by root.c and bootstrap.c.
 *
 * All frames are fixed-size structs with a magic and a version, read whole
 * with a deadline and validated field by field before anything is used.
 * The parsers below (wire.c) are that validation: pure functions from the
 * bytes received to a checked struct or a specific error, so that each one
 * has a fuzz target (tests/fuzz/). Byte order is the host's: every rank
 * runs the same build of ccl. docs/security.md says what this protects.
 *
 * It builds on bootstrap/socket.h alone: the rest of the bootstrap
 * (bootstrap.h, accept.h) builds on it, so it must not lead back to them.
 */
#ifndef CCL_BOOTSTRAP_WIRE_H
#define CCL_BOOTSTRAP_WIRE_H

#include "bootstrap/socket.h"
#include "ccl.h"

#include <stddef.h>
#include <stdint.h>

#define BS_MAGIC 0x63636c62u /* "cclb" */
#define BS_VERSION 2 /* 2: hellos carry the job name; roots refuse other jobs with bs_refusal_t */
/* Upper bound on ranks a root accepts: bounds every allocation a frame can
 * ask for. */
#define BS_MAX_RANKS (1 << 20)
#define BS_SECRET_BYTES 32
#define BS_HOSTNAME_MAX 64
/* Longest launcher job name a hello carries (job.h), terminated. */
#define BS_JOB_MAX 96

/* What every rank learns about every other rank (bs_t's table, which
 * bootstrap.h gives to the layers above). Fixed layout: it travels. */
typedef struct {
    sock_addr_t addr;   /* the rank's bootstrap listener */
    uint64_t hostid;    /* equal for ranks on one host (topo_host_id) */
    uint64_t kernelid;  /* equal for ranks sharing one kernel and its cores (topo_kernel_id) */
    int32_t pid;
    int32_t rank;
    char hostname[BS_HOSTNAME_MAX];
} bs_peer_t;

/* The unique id's layout inside ccl_unique_id_t. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[BS_SECRET_BYTES];
    sock_addr_t root;
    uint32_t root_in_rank0; /* CCL_COMM_ID mode: rank 0 starts the root */
} bs_id_t;
_Static_assert(sizeof(bs_id_t) <= CCL_UNIQUE_ID_BYTES, "bs_id_t must fit in ccl_unique_id_t");

/* rank -> root, and rank -> ring neighbour. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[BS_SECRET_BYTES];
    int32_t rank;
    int32_t nranks;
    bs_peer_t info;
    char job[BS_JOB_MAX]; /* the sender's launcher job name (bs_job_name), for the refusal's message */
} bs_hello_t;

/* root -> rank, followed by nranks bs_peer_t. */
typedef struct {
    uint32_t magic;
    int32_t nranks;
} bs_table_hdr_t;

/* root -> a rank that did not prove the root's secret, instead of the
 * table, then the root closes: the rank fails at once with a message that
 * names both sides, rather than waiting out its timeout. Starts like
 * bs_table_hdr_t. */
#define BS_REFUSE_MAGIC 0x66657262u /* "bref" */
typedef struct {
    uint32_t magic;
    int32_t nranks;   /* the root's world size; -1 while no rank of its own has come */
    int32_t pid;      /* of the process that runs the root */
    int32_t same_job; /* 1: the hello named the root's own job (so another secret or unique id) */
    char host[BS_HOSTNAME_MAX];
    char job[BS_JOB_MAX];
} bs_refusal_t;
_Static_assert(offsetof(bs_refusal_t, nranks) == offsetof(bs_table_hdr_t, nranks), "bs_refusal_t starts like bs_table_hdr_t");

/* The first bytes of every frame sent to the root or to a rank's listener
 * (bs_hello_t starts with them): what an acceptor checks, in constant time
 * for the secret, before a frame's own parser runs. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[BS_SECRET_BYTES];
} bs_auth_t;
_Static_assert(offsetof(bs_hello_t, magic) == offsetof(bs_auth_t, magic) &&
               offsetof(bs_hello_t, version) == offsetof(bs_auth_t, version) &&
               offsetof(bs_hello_t, secret) == offsetof(bs_auth_t, secret),
               "bs_hello_t starts with bs_auth_t");

/* Heads each bs_allgather on the ring, sent once per call to the next
 * rank: both ends check that they run the same allgather (seq) with the
 * same block size, instead of exchanging misaligned bytes. */
#define BS_RING_MAGIC 0x676e6972u /* "ring" */
typedef struct {
    uint32_t magic;
    uint32_t seq;  /* bs_allgather calls so far on this bootstrap */
    uint64_t size; /* bytes per rank */
} bs_ring_hdr_t;

/* Shrink (rejoin.c): a survivor asks the new communicator's first member,
 * on that member's bootstrap listener, for the new unique id, and waits
 * for the reply. */
#define BS_KIND_REJOIN 0x726a6e31u /* "rjn1" */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[BS_SECRET_BYTES];
    uint32_t kind;
    int32_t rank;  /* the sender's rank in the old communicator */
    uint64_t tag;
} bs_rejoin_req_t;
_Static_assert(offsetof(bs_rejoin_req_t, secret) == offsetof(bs_auth_t, secret),
               "bs_rejoin_req_t starts with bs_auth_t");

enum { REJOIN_OK = 0, REJOIN_MISMATCH = 1, REJOIN_FAILED = 2 };

typedef struct {
    uint32_t magic;
    int32_t status; /* REJOIN_*: the id follows, the lists differ, the leader gave up (why) */
    ccl_unique_id_t id;
    char why[256];
} bs_rejoin_reply_t;

/* ---- parsers (wire.c) --------------------------------------------------
 * Each takes the bytes as received (len is what arrived, never trusted to
 * be the frame's size) and fills *out only on success. Errors are
 * CCL_ERR_REMOTE (CCL_ERR_INVALID_ARGUMENT for the unique id, which comes
 * from the caller) with a message that starts with `from`, which names the
 * source ("bootstrap root: connection from 10.0.0.2:41234"). */

/* Whether two secrets are equal, in constant time in where they differ. */
int bs_secret_equal(const uint8_t *a, const uint8_t *b);
/* The unique id as handed to ccl_comm_init_rank. */
ccl_result_t bs_id_parse(const void *buf, size_t len, bs_id_t *out);
/* Magic, version and secret of any frame that starts with bs_auth_t. */
ccl_result_t bs_auth_check(const void *buf, size_t len, const uint8_t secret[BS_SECRET_BYTES],
                           const char *from);
/* A hello: authenticated, 1 <= nranks <= BS_MAX_RANKS, 0 <= rank < nranks,
 * and a peer entry that bs_peer_check accepts. */
ccl_result_t bs_hello_parse(const void *buf, size_t len, const uint8_t secret[BS_SECRET_BYTES],
                            const char *from, bs_hello_t *out);
/* A hello that failed bs_auth_check on its secret alone, read for the
 * refusal: magic, version, length and every field as bs_hello_parse checks
 * them, but not the secret. It claims a place; nothing it says is trusted
 * beyond the message it goes into. */
ccl_result_t bs_hello_claim_parse(const void *buf, size_t len, const char *from, bs_hello_t *out);
/* A refusal, after its first sizeof(bs_table_hdr_t) bytes told it apart
 * from a table: exact length, magic, nranks -1..BS_MAX_RANKS, strings
 * terminated (and made printable). */
ccl_result_t bs_refusal_parse(const void *buf, size_t len, const char *from, bs_refusal_t *out);
/* One entry of the rank table: an IPv4 or IPv6 address with a port, the
 * expected rank, a NUL-terminated hostname. */
ccl_result_t bs_peer_check(const bs_peer_t *p, int rank, const char *from);
/* The root's reply: the header for a table of `nranks` entries, then the
 * table itself (nranks * sizeof(bs_peer_t) bytes). */
ccl_result_t bs_table_hdr_parse(const void *buf, size_t len, int nranks, const char *from,
                                bs_table_hdr_t *out);
ccl_result_t bs_table_parse(const void *buf, size_t len, int nranks, const char *from, bs_peer_t *out);
ccl_result_t bs_ring_hdr_parse(const void *buf, size_t len, uint32_t seq, uint64_t size, const char *from,
                               bs_ring_hdr_t *out);
/* A rejoin request: authenticated, the rejoin kind, a rank that is not
 * negative. Which ranks may ask is the caller's to check. */
ccl_result_t bs_rejoin_req_parse(const void *buf, size_t len, const uint8_t secret[BS_SECRET_BYTES],
                                 const char *from, bs_rejoin_req_t *out);
/* The reply: magic and a status of 0 or 1 (the id is checked when used). */
ccl_result_t bs_rejoin_reply_parse(const void *buf, size_t len, const char *from, bs_rejoin_reply_t *out);

#endif
