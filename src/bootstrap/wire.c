/*
 * wire.c - validation of every bootstrap frame (wire.h).
 *
 * Bytes from the network reach the bootstrap through these functions only:
 * each checks the length it was given, then every field, and copies the
 * frame out only when all of it is sound, so a stray connection, a port
 * scanner or a corrupt stream ends in an error that names its source and
 * never in a read past a buffer or an allocation a peer chose. They do no
 * I/O, which lets tests/fuzz/ drive them with arbitrary bytes.
 */
#include "bootstrap/wire.h"
#include "base/err.h"

#include <string.h>

int bs_secret_equal(const uint8_t *a, const uint8_t *b)
{
    /* Constant time: how long a refusal takes must not tell an attacker
     * how many leading bytes of its guess were right. */
    unsigned diff = 0;
    for (int i = 0; i < BS_SECRET_BYTES; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

ccl_result_t bs_id_parse(const void *buf, size_t len, bs_id_t *out)
{
    bs_id_t id;
    char abuf[80];
    if (len < sizeof id)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "the unique id is %zu bytes, a ccl id needs %zu", len,
                       sizeof id);
    memcpy(&id, buf, sizeof id);
    if (id.magic != BS_MAGIC || id.version != BS_VERSION)
        return err_set(CCL_ERR_INVALID_ARGUMENT,
                       "the unique id is not one ccl_get_unique_id made (magic 0x%08x, version %u)", id.magic,
                       id.version);
    if (!sock_addr_valid(&id.root))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "the unique id names no usable root address (%s)",
                       sock_addr_str(&id.root, abuf, sizeof abuf));
    if (id.root_in_rank0 > 1)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "the unique id is corrupt (root_in_rank0 = %u)", id.root_in_rank0);
    *out = id;
    return CCL_SUCCESS;
}

ccl_result_t bs_auth_check(const void *buf, size_t len, const uint8_t secret[BS_SECRET_BYTES], const char *from)
{
    bs_auth_t a;
    if (len < sizeof a)
        return err_set(CCL_ERR_REMOTE, "%s: truncated frame (%zu bytes, at least %zu expected)", from, len,
                       sizeof a);
    memcpy(&a, buf, sizeof a);
    if (a.magic != BS_MAGIC)
        return err_set(CCL_ERR_REMOTE, "%s: not a ccl bootstrap frame (magic 0x%08x)", from, a.magic);
    if (a.version != BS_VERSION)
        return err_set(CCL_ERR_REMOTE, "%s: bootstrap wire version %u, this build speaks %u", from, a.version,
                       BS_VERSION);
    if (!bs_secret_equal(a.secret, secret))
        return err_set(CCL_ERR_REMOTE, "%s: wrong secret (not a rank of this unique id)", from);
    return CCL_SUCCESS;
}

ccl_result_t bs_peer_check(const bs_peer_t *p, int rank, const char *from)
{
    char abuf[80];
    if (p->rank != rank)
        return err_set(CCL_ERR_REMOTE, "%s: the entry of rank %d says rank %d", from, rank, p->rank);
    if (!sock_addr_valid(&p->addr))
        return err_set(CCL_ERR_REMOTE, "%s: rank %d has no usable address (%s)", from, rank,
                       sock_addr_str(&p->addr, abuf, sizeof abuf));
    if (!memchr(p->hostname, '\0', sizeof p->hostname))
        return err_set(CCL_ERR_REMOTE, "%s: the hostname of rank %d is not terminated", from, rank);
    return CCL_SUCCESS;
}

/* Everything of a hello but its secret. */
static ccl_result_t bs_hello_fields(const void *buf, size_t len, const char *from, bs_hello_t *out)
{
    bs_hello_t h;
    ccl_result_t res;
    if (len != sizeof h)
        return err_set(CCL_ERR_REMOTE, "%s: a hello is %zu bytes, this frame %zu", from, sizeof h, len);
    memcpy(&h, buf, sizeof h);
    if (h.nranks < 1 || h.nranks > BS_MAX_RANKS)
        return err_set(CCL_ERR_REMOTE, "%s: nranks %d is out of range (1..%d)", from, h.nranks, BS_MAX_RANKS);
    if (h.rank < 0 || h.rank >= h.nranks)
        return err_set(CCL_ERR_REMOTE, "%s: rank %d of %d is out of range", from, h.rank, h.nranks);
    res = bs_peer_check(&h.info, h.rank, from);
    if (res != CCL_SUCCESS)
        return res;
    if (!memchr(h.job, '\0', sizeof h.job))
        return err_set(CCL_ERR_REMOTE, "%s: the job name of rank %d is not terminated", from, h.rank);
    *out = h;
    return CCL_SUCCESS;
}

ccl_result_t bs_hello_parse(const void *buf, size_t len, const uint8_t secret[BS_SECRET_BYTES], const char *from,
                            bs_hello_t *out)
{
    ccl_result_t res = bs_auth_check(buf, len, secret, from);
    if (res != CCL_SUCCESS)
        return res;
    return bs_hello_fields(buf, len, from, out);
}

ccl_result_t bs_hello_claim_parse(const void *buf, size_t len, const char *from, bs_hello_t *out)
{
    bs_auth_t a;
    if (len < sizeof a)
        return err_set(CCL_ERR_REMOTE, "%s: truncated frame (%zu bytes)", from, len);
    memcpy(&a, buf, sizeof a);
    if (a.magic != BS_MAGIC || a.version != BS_VERSION)
        return err_set(CCL_ERR_REMOTE, "%s: not a hello of this ccl (magic 0x%08x, version %u)", from, a.magic,
                       a.version);
    return bs_hello_fields(buf, len, from, out);
}

/* A peer's string, for a message: terminated within n, printable. */
static int bs_text_clean(char *s, size_t n)
{
    if (!memchr(s, '\0', n))
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
    return 1;
}

ccl_result_t bs_refusal_parse(const void *buf, size_t len, const char *from, bs_refusal_t *out)
{
    bs_refusal_t r;
    if (len != sizeof r)
        return err_set(CCL_ERR_REMOTE, "%s: a refusal is %zu bytes, this one %zu", from, sizeof r, len);
    memcpy(&r, buf, sizeof r);
    if (r.magic != BS_REFUSE_MAGIC)
        return err_set(CCL_ERR_REMOTE, "%s: not a refusal (magic 0x%08x)", from, r.magic);
    if (r.nranks < -1 || r.nranks == 0 || r.nranks > BS_MAX_RANKS || (r.same_job != 0 && r.same_job != 1))
        return err_set(CCL_ERR_REMOTE, "%s: malformed refusal (nranks %d, same_job %d)", from, r.nranks,
                       r.same_job);
    if (!bs_text_clean(r.host, sizeof r.host) || !bs_text_clean(r.job, sizeof r.job))
        return err_set(CCL_ERR_REMOTE, "%s: malformed refusal (a string is not terminated)", from);
    *out = r;
    return CCL_SUCCESS;
}

ccl_result_t bs_table_hdr_parse(const void *buf, size_t len, int nranks, const char *from, bs_table_hdr_t *out)
{
    bs_table_hdr_t h;
    if (len != sizeof h)
        return err_set(CCL_ERR_REMOTE, "%s: table header of %zu bytes, %zu expected", from, len, sizeof h);
    memcpy(&h, buf, sizeof h);
    if (h.magic != BS_MAGIC)
        return err_set(CCL_ERR_REMOTE, "%s: not a ccl table header (magic 0x%08x)", from, h.magic);
    if (h.nranks != nranks)
        return err_set(CCL_ERR_REMOTE, "%s: table of %d ranks, this rank expects %d", from, h.nranks, nranks);
    *out = h;
    return CCL_SUCCESS;
}

ccl_result_t bs_table_parse(const void *buf, size_t len, int nranks, const char *from, bs_peer_t *out)
{
    if (nranks < 1 || nranks > BS_MAX_RANKS || len != (size_t)nranks * sizeof(bs_peer_t))
        return err_set(CCL_ERR_REMOTE, "%s: table of %zu bytes for %d ranks", from, len, nranks);
    const unsigned char *p = buf;
    for (int r = 0; r < nranks; r++) {
        bs_peer_t e;
        memcpy(&e, p + (size_t)r * sizeof e, sizeof e);
        ccl_result_t res = bs_peer_check(&e, r, from);
        if (res != CCL_SUCCESS)
            return res;
    }
    memcpy(out, buf, len);
    return CCL_SUCCESS;
}

ccl_result_t bs_ring_hdr_parse(const void *buf, size_t len, uint32_t seq, uint64_t size, const char *from,
                               bs_ring_hdr_t *out)
{
    bs_ring_hdr_t h;
    if (len != sizeof h)
        return err_set(CCL_ERR_REMOTE, "%s: allgather header of %zu bytes, %zu expected", from, len, sizeof h);
    memcpy(&h, buf, sizeof h);
    if (h.magic != BS_RING_MAGIC)
        return err_set(CCL_ERR_REMOTE, "%s: not a bootstrap allgather header (magic 0x%08x): the stream is corrupt",
                       from, h.magic);
    if (h.seq != seq)
        return err_set(CCL_ERR_REMOTE, "%s: sent allgather #%u where #%u was due: ranks run different init steps",
                       from, h.seq, seq);
    if (h.size != size)
        return err_set(CCL_ERR_REMOTE, "%s: allgather #%u has %llu bytes per rank there, %llu here", from, seq,
                       (unsigned long long)h.size, (unsigned long long)size);
    *out = h;
    return CCL_SUCCESS;
}

ccl_result_t bs_rejoin_req_parse(const void *buf, size_t len, const uint8_t secret[BS_SECRET_BYTES],
                                 const char *from, bs_rejoin_req_t *out)
{
    bs_rejoin_req_t q;
    ccl_result_t res = bs_auth_check(buf, len, secret, from);
    if (res != CCL_SUCCESS)
        return res;
    if (len != sizeof q)
        return err_set(CCL_ERR_REMOTE, "%s: a rejoin request is %zu bytes, this frame %zu", from, sizeof q, len);
    memcpy(&q, buf, sizeof q);
    if (q.kind != BS_KIND_REJOIN)
        return err_set(CCL_ERR_REMOTE, "%s: not a rejoin request (kind 0x%08x)", from, q.kind);
    if (q.rank < 0 || q.rank >= BS_MAX_RANKS)
        return err_set(CCL_ERR_REMOTE, "%s: rank %d is out of range", from, q.rank);
    *out = q;
    return CCL_SUCCESS;
}

ccl_result_t bs_rejoin_reply_parse(const void *buf, size_t len, const char *from, bs_rejoin_reply_t *out)
{
    bs_rejoin_reply_t r;
    if (len != sizeof r)
        return err_set(CCL_ERR_REMOTE, "%s: a rejoin reply is %zu bytes, this one %zu", from, sizeof r, len);
    memcpy(&r, buf, sizeof r);
    r.why[sizeof r.why - 1] = '\0';
    if (r.magic != BS_MAGIC || r.status < REJOIN_OK || r.status > REJOIN_FAILED)
        return err_set(CCL_ERR_REMOTE, "%s: answered the rejoin request with a malformed frame (magic 0x%08x, "
                       "status %d)", from, r.magic, r.status);
    *out = r;
    return CCL_SUCCESS;
}
