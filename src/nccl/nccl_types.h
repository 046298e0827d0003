/*
 * nccl_types.h - the facts of NCCL 2.28's public ABI that libnccl.so.2 needs,
 * and the helpers every file of the layer shares.
 *
 * The layer is built without NVIDIA's nccl.h (nothing of NVIDIA's is copied
 * or shipped), so the values a caller compiled against it passes in are
 * restated here: result codes, the config and simulation structs with their
 * magics, the version code. Types and operators need no table: ccl numbers
 * them as NCCL does (ccl.h), so they pass through unchanged, and ccl's own
 * checks refuse bad values with a message. A communicator handle is ccl's
 * own pointer, so ccl's set of live communicators also guards this layer
 * against destroyed or foreign handles.
 */
#ifndef CCL_NCCL_TYPES_H
#define CCL_NCCL_TYPES_H

#include "ccl.h"

#include <limits.h>
#include <stddef.h>

/* Only nccl* and pnccl* leave the library; the link's version script
 * hides everything else, libccl included. */
#define NCCL_API __attribute__((visibility("default")))
/* NCCL exports every function twice: pnccl* is the name profilers
 * (PMPI-style interposers) call through once they wrap nccl*. */
#define NCCL_PROFILE_ALIAS(ret, name, params) NCCL_API ret p##name params __attribute__((alias(#name)))
/* A function that is ccl's call with the same arguments: defined with
 * its alias from one list of parameters. comm is whose message a failure
 * leaves for ncclGetLastError (NULL: the thread's). */
#define NCCL_FORWARD(name, params, call, comm)                                \
    NCCL_API nccl_result_t name params { return nccl_check(call, comm); }     \
    NCCL_PROFILE_ALIAS(nccl_result_t, name, params)

/* ncclResult_t. ccl's codes 0..7 mean the same; its finer codes fold
 * into these (nccl_from_ccl). */
typedef enum {
    NCCL_ABI_SUCCESS = 0,
    NCCL_ABI_CUDA_ERROR = 1,
    NCCL_ABI_SYSTEM_ERROR = 2,
    NCCL_ABI_INTERNAL_ERROR = 3,
    NCCL_ABI_INVALID_ARGUMENT = 4,
    NCCL_ABI_INVALID_USAGE = 5,
    NCCL_ABI_REMOTE_ERROR = 6,
    NCCL_ABI_IN_PROGRESS = 7,
    NCCL_ABI_NUM_RESULTS = 8
} nccl_result_t;

/* What ncclGetVersion reports: the ABI level this layer is written
 * against (NCCL_VERSION(2,28,0)); docs/nccl.md says why. */
#define NCCL_ABI_VERSION_CODE 22800
/* The oldest ncclConfig_t NCCL itself still accepts (2.14). */
#define NCCL_ABI_CONFIG_MIN_VERSION 21400
#define NCCL_ABI_CONFIG_MAGIC 0xcafebeefu
#define NCCL_ABI_SIM_INFO_MAGIC 0x74685283u
#define NCCL_ABI_CONFIG_UNDEF_INT INT_MIN
#define NCCL_ABI_SHRINK_DEFAULT 0x00
#define NCCL_ABI_SHRINK_ABORT 0x01

/* ncclConfig_t (ncclConfig_v22800). Fields are only ever appended, so a
 * caller built against an older nccl.h passes a shorter struct: its size
 * says which fields exist. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
    int split_share;
    int traffic_class;
    const char *comm_name;
    int collnet_enable;
    int cta_policy;
    int shrink_share;
    int nvls_ctas;
    int nchannels_per_net_peer;
    int nvlink_centric_sched;
} nccl_config_abi_t;

/* ncclSimInfo_t (ncclSimInfo_v22200). */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimated_time;
} nccl_sim_info_abi_t;

_Static_assert(sizeof(nccl_config_abi_t) == 80 && offsetof(nccl_config_abi_t, nvlink_centric_sched) == 76,
               "ncclConfig_t of NCCL 2.28 is 80 bytes on LP64");
_Static_assert(sizeof(ccl_unique_id_t) == 128, "ncclUniqueId is 128 bytes");
_Static_assert(sizeof(ccl_datatype_t) == sizeof(int) && sizeof(ccl_redop_t) == sizeof(int),
               "ncclDataType_t and ncclRedOp_t are int-sized enums");
_Static_assert(CCL_BFLOAT16 == 9 && CCL_FLOAT8_E5M2 == 11 && CCL_AVG == 4 && CCL_NUM_OPS == 5,
               "ccl numbers types and operators as NCCL does");

/* The NCCL code for a ccl result. */
nccl_result_t nccl_from_ccl(ccl_result_t res);
/* Records ccl's message for a failed call on comm (NULL: the thread's) as
 * this thread's last error, and returns the NCCL code. */
nccl_result_t nccl_check_slow(ccl_result_t res, ccl_comm_t comm);
/* A failure found by this layer: formats the message, returns code. */
nccl_result_t nccl_fail(nccl_result_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ncclGetLastError's answer for this thread ("" when none). */
const char *nccl_last_message(void);
/* Reads a caller's ncclConfig_t as NCCL does (NULL: defaults): checks size,
 * magic and version, reads only the fields the caller's struct has, and
 * sets *blocking (1 unless the caller asked for 0). who names the call in
 * messages. */
nccl_result_t nccl_read_config(const nccl_config_abi_t *config, const char *who, int *blocking);

/* The common case inlined: a call that succeeded costs one compare. */
static inline nccl_result_t nccl_check(ccl_result_t res, ccl_comm_t comm)
{
    return res == CCL_SUCCESS ? NCCL_ABI_SUCCESS : nccl_check_slow(res, comm);
}

#endif
