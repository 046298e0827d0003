/*
 * wire.h - the bootstrap's frames, shared by root.c and bootstrap.c.
 *
 * All frames are fixed-size structs with a magic and a version, read whole
 * with a deadline and validated field by field before anything is used.
 */
#ifndef CCL_BOOTSTRAP_WIRE_H
#define CCL_BOOTSTRAP_WIRE_H

#include "bootstrap/bootstrap.h"

#define BS_MAGIC 0x63636c62u /* "cclb" */
#define BS_VERSION 1
/* Upper bound on ranks a root accepts: bounds every allocation a frame can
 * ask for. */
#define BS_MAX_RANKS (1 << 20)

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
} bs_hello_t;

/* root -> rank, followed by nranks bs_peer_t. */
typedef struct {
    uint32_t magic;
    int32_t nranks;
} bs_table_hdr_t;

#endif
