/*
 * net_hello.c - the check of a net connection's hello (net_hello.h).
 *
 * An accepted connection may come from anyone who can reach the plugin's
 * listener, so its first message is judged here, from the bytes alone and
 * with no I/O (tests/fuzz/ drives it with arbitrary bytes), before the
 * setup lets it stand for a peer.
 */
#include "transport/net_hello.h"
#include "base/err.h"

#include <string.h>

ccl_result_t net_hello_parse(const void *buf, size_t len, uint64_t comm_id, int nranks, int self, const char *from,
                             net_hello_t *out)
{
    net_hello_t h;
    if (len != sizeof h)
        return err_set(CCL_ERR_REMOTE, "%s: a net hello is %zu bytes, this one %zu", from, sizeof h, len);
    memcpy(&h, buf, sizeof h);
    if (h.magic != NET_HELLO_MAGIC)
        return err_set(CCL_ERR_REMOTE, "%s: not a ccl net hello (magic 0x%016llx)", from,
                       (unsigned long long)h.magic);
    if (h.comm_id != comm_id)
        return err_set(CCL_ERR_REMOTE, "%s: a hello from another communicator", from);
    if (h.nranks != nranks || h.rank < 0 || h.rank >= nranks || h.rank == self)
        return err_set(CCL_ERR_REMOTE, "%s: rank %d of %d is not a peer of rank %d of %d", from, h.rank, h.nranks,
                       self, nranks);
    *out = h;
    return CCL_SUCCESS;
}
