/*
 * fuzz_bs_hello.c - bs_auth_check, bs_hello_parse and bs_hello_claim_parse:
 * the frame every connection to the bootstrap root or to a rank's ring
 * listener starts with, from anyone who can reach the port; and
 * bs_refusal_parse, what a root that is not ours answers.
 *
 * The secret is checked against a fixed one and, so that the fuzzer gets
 * past authentication to the fields behind it, against the secret the
 * input itself carries.
 */
#include "fuzz.h"

#include "bootstrap/wire.h"

static void check(const uint8_t *data, size_t size, const uint8_t secret[BS_SECRET_BYTES])
{
    bs_hello_t h;
    int auth = bs_auth_check(data, size, secret, "fuzz") == CCL_SUCCESS;
    if (bs_hello_parse(data, size, secret, "fuzz", &h) != CCL_SUCCESS)
        return;
    FUZZ_REQUIRE(auth);
    FUZZ_REQUIRE(size == sizeof h);
    FUZZ_REQUIRE(bs_secret_equal(h.secret, secret));
    FUZZ_REQUIRE(h.nranks >= 1 && h.nranks <= BS_MAX_RANKS);
    FUZZ_REQUIRE(h.rank >= 0 && h.rank < h.nranks);
    FUZZ_REQUIRE(h.info.rank == h.rank);
    FUZZ_REQUIRE(strlen(h.info.hostname) < sizeof h.info.hostname);
    FUZZ_REQUIRE(sock_addr_valid(&h.info.addr));
}

static void check_claim(const uint8_t *data, size_t size)
{
    bs_hello_t h;
    if (bs_hello_claim_parse(data, size, "fuzz", &h) == CCL_SUCCESS) {
        FUZZ_REQUIRE(size == sizeof h);
        FUZZ_REQUIRE(h.rank >= 0 && h.rank < h.nranks && h.nranks <= BS_MAX_RANKS);
        FUZZ_REQUIRE(strlen(h.job) < sizeof h.job);
    }
    bs_refusal_t r;
    if (bs_refusal_parse(data, size, "fuzz", &r) == CCL_SUCCESS) {
        FUZZ_REQUIRE(size == sizeof r && r.magic == BS_REFUSE_MAGIC);
        FUZZ_REQUIRE(r.nranks == -1 || (r.nranks >= 1 && r.nranks <= BS_MAX_RANKS));
        FUZZ_REQUIRE(strlen(r.host) < sizeof r.host && strlen(r.job) < sizeof r.job);
        for (const char *c = r.job; *c; c++)
            FUZZ_REQUIRE(*c >= 0x20 && *c <= 0x7e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_claim(data, size);
    uint8_t secret[BS_SECRET_BYTES];
    memset(secret, 0x5a, sizeof secret);
    check(data, size, secret);
    if (size >= sizeof(bs_auth_t)) {
        memcpy(secret, data + offsetof(bs_auth_t, secret), sizeof secret);
        check(data, size, secret);
    }
    return 0;
}
