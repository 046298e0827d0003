/*
 * fuzz_bs_rejoin.c - bs_rejoin_req_parse and bs_rejoin_reply_parse: what a
 * survivor sends to the new communicator's first member during
 * ccl_comm_shrink (on a listener anyone can reach), and the reply.
 *
 * As in fuzz_bs_hello, the request is also checked against the secret it
 * carries, so that the fuzzer gets past authentication.
 */
#include "fuzz.h"

#include "bootstrap/wire.h"

static void check_req(const uint8_t *data, size_t size, const uint8_t secret[BS_SECRET_BYTES])
{
    bs_rejoin_req_t q;
    if (bs_rejoin_req_parse(data, size, secret, "fuzz", &q) != CCL_SUCCESS)
        return;
    FUZZ_REQUIRE(size == sizeof q);
    FUZZ_REQUIRE(q.magic == BS_MAGIC && q.version == BS_VERSION && q.kind == BS_KIND_REJOIN);
    FUZZ_REQUIRE(bs_secret_equal(q.secret, secret));
    FUZZ_REQUIRE(q.rank >= 0 && q.rank < BS_MAX_RANKS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t secret[BS_SECRET_BYTES];
    memset(secret, 0x5a, sizeof secret);
    check_req(data, size, secret);
    if (size >= sizeof(bs_auth_t)) {
        memcpy(secret, data + offsetof(bs_auth_t, secret), sizeof secret);
        check_req(data, size, secret);
    }
    bs_rejoin_reply_t r;
    if (bs_rejoin_reply_parse(data, size, "fuzz", &r) == CCL_SUCCESS) {
        FUZZ_REQUIRE(size == sizeof r);
        FUZZ_REQUIRE(r.magic == BS_MAGIC && (r.status == 0 || r.status == 1));
    }
    return 0;
}
