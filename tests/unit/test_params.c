/*
 * test_params.c - the CCL_* parameter table (src/base/param.c, params.def).
 *
 * Covers param_parse_size (plain decimals, K/M/G suffixes in powers of 1024
 * with an optional B, negatives, and the malformed or overflowing inputs it
 * must refuse without touching *out), and the table loaded from the
 * environment: defaults of unset variables, a set value, an empty value
 * (treated as unset), and a malformed integer (falls back to the default for
 * both param_int and param_str); the same for NUM parameters (param_num,
 * param_parse_num). The table is read once per process on first
 * use, so main() arranges the environment before any test (and before any
 * other ccl call) runs; no test in this file may change it afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/tuner.h"
#include "base/param.h"

/* Sentinel written into *out before a parse, to see whether it was touched. */
#define UNTOUCHED ((int64_t)0x5a5a5a5a5a5a5a5aLL)

typedef struct {
    const char *text;
    int64_t want;
} size_case_t;

static void test_parse_size_accepts(void **state)
{
    (void)state;
    static const size_case_t cases[] = {
        {"0", 0},
        {"1", 1},
        {"123", 123},
        {"4K", 4LL * 1024},
        {"4k", 4LL * 1024},
        {"2M", 2LL * 1024 * 1024},
        {"2m", 2LL * 1024 * 1024},
        {"1G", 1LL * 1024 * 1024 * 1024},
        {"3g", 3LL * 1024 * 1024 * 1024},
        {"8MB", 8LL * 1024 * 1024},
        {"8mb", 8LL * 1024 * 1024},
        {"16KB", 16LL * 1024},
        {"5B", 5},
        {"0K", 0},
        {"-1", -1},
        {"-4K", -4LL * 1024},
        {"007", 7},
        {"1048576", 1048576},
        /* Largest values that still fit: no false overflow at the edge. */
        {"9223372036854775807", INT64_MAX},
        {"-9223372036854775808", INT64_MIN},
        {"8589934591G", 8589934591LL * 1073741824LL},
        {"-8589934592G", INT64_MIN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = UNTOUCHED;
        int rc = param_parse_size(cases[i].text, &v);
        if (rc != 0 || v != cases[i].want) {
            print_error("param_parse_size(\"%s\"): rc %d value %lld, want rc 0 value %lld\n",
                        cases[i].text, rc, (long long)v, (long long)cases[i].want);
            fail();
        }
    }
}

static void test_parse_size_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "abc",
        "K",
        "12Q",
        "4KK",
        "4KBB",
        "4BK",
        "1.5M",
        "12 ",
        "0x10",
        "-",
        "99999999999G",       /* ~1.07e20: overflows int64 after scaling */
        "8589934592G",        /* 2^33 G = 2^63: one past INT64_MAX */
        "-8589934593G",       /* one step below INT64_MIN */
        "9007199254740992K",  /* 2^53 * 2^10 = 2^63 */
        "9223372036854775808", /* INT64_MAX + 1: strtoll range error */
        "99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = UNTOUCHED;
        int rc = param_parse_size(bad[i], &v);
        if (rc == 0 || v != UNTOUCHED) {
            print_error("param_parse_size(\"%s\") accepted it (rc %d, value %lld)\n", bad[i], rc,
                        (long long)v);
            fail();
        }
    }
}

/* Every suffix is exactly a power of 1024 times the number, for a spread of
 * numbers (the reference multiplies in plain C). */
static void test_parse_size_suffix_sweep(void **state)
{
    (void)state;
    static const struct {
        const char *suffix;
        int64_t mult;
    } sfx[] = {{"", 1}, {"B", 1}, {"K", 1024}, {"KB", 1024}, {"M", 1048576}, {"MB", 1048576},
               {"G", 1073741824}, {"GB", 1073741824}};
    static const int64_t nums[] = {0, 1, 2, 7, 10, 64, 100, 513, 1000, 4095, 65536, 999999};
    for (size_t s = 0; s < sizeof sfx / sizeof sfx[0]; s++) {
        for (size_t n = 0; n < sizeof nums / sizeof nums[0]; n++) {
            char text[64];
            snprintf(text, sizeof text, "%lld%s", (long long)nums[n], sfx[s].suffix);
            int64_t v = UNTOUCHED;
            assert_int_equal(param_parse_size(text, &v), 0);
            if (v != nums[n] * sfx[s].mult) {
                print_error("\"%s\" -> %lld, want %lld\n", text, (long long)v,
                            (long long)(nums[n] * sfx[s].mult));
                fail();
            }
        }
    }
}

/* ---- the table, as main() arranged the environment ---------------------- */

/* Each param's default text, straight from params.def, so retuning a
 * default does not need this test edited while the test still checks that
 * unset and malformed values resolve to exactly that default. */
static const char *const table_default[PARAM_COUNT] = {
#define CCL_PARAM(name, kind, def, doc) [PARAM_##name] = def,
#include "base/params.def"
#undef CCL_PARAM
};

static int64_t table_default_int(param_id_t id)
{
    int64_t v = 0;
    assert_int_equal(param_parse_size(table_default[id], &v), 0);
    return v;
}

static void test_defaults_of_unset_params(void **state)
{
    (void)state;
    /* Values the rest of the library relies on stay as documented. */
    assert_int_equal(param_int(PARAM_BUFFSIZE), 1048576);
    assert_string_equal(param_str(PARAM_BUFFSIZE), "1M");
    assert_int_equal(param_int(PARAM_NSLOTS), 8);
    assert_int_equal(param_int(PARAM_TIMEOUT), 300);
    assert_int_equal(param_int(PARAM_SPIN), -1);
    /* Tuned thresholds: whatever the table says. */
    assert_int_equal(param_int(PARAM_SINGLE_COPY_THRESHOLD), table_default_int(PARAM_SINGLE_COPY_THRESHOLD));
    assert_int_equal(param_int(PARAM_SINGLE_COPY_THRESHOLD), -1); /* automatic (tuner.c) */
    assert_string_equal(param_str(PARAM_DEBUG), "WARN");
    assert_string_equal(param_str(PARAM_DEBUG_SUBSYS), "ALL");
    const char *id = param_str(PARAM_COMM_ID);
    assert_non_null(id);
    assert_string_equal(id, "");
}

/* CCL_SINGLE_COPY_THRESHOLD unset (automatic): what the tuner proposes
 * for 1 to 4 local ranks, and what each collective then uses. */
static void test_single_copy_automatic(void **state)
{
    (void)state;
    tune_links_t one, two, four;
    tuner_links_local(NULL, 0, 1, 1, 1, &one);
    tuner_links_local(NULL, 1, 2, 2, 1, &two);
    tuner_links_local(NULL, 1, 4, 4, 1, &four);
    assert_int_equal(two.single_copy_auto, 1);
    assert_int_equal(four.single_copy_auto, 1);
    assert_int_equal(one.single_copy_bytes, (size_t)1 << 20);
    assert_int_equal(two.single_copy_bytes, (size_t)1 << 20);
    assert_int_equal(four.single_copy_bytes, (size_t)1 << 20);

    /* Per collective, from what the ranks agreed: every one from that
     * figure, reduce from 16 MiB; a figure the user set applies as it is,
     * to all. */
    static struct ccl_comm comm;
    tune_links_t *l = &comm.tune.link;
    *l = two;
    static const sched_coll_t from_1m[] = {SCHED_ALLREDUCE, SCHED_ALLGATHER, SCHED_REDUCE_SCATTER, SCHED_BROADCAST,
                                           SCHED_ALLTOALL,  SCHED_GATHER,    SCHED_SCATTER,        SCHED_P2P_SEND,
                                           SCHED_P2P_RECV};
    for (size_t i = 0; i < sizeof from_1m / sizeof from_1m[0]; i++)
        assert_int_equal(tuner_single_copy_bytes(&comm, from_1m[i]), (size_t)1 << 20);
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_REDUCE), (size_t)16 << 20);
    l->single_copy_bytes = (size_t)32 << 20; /* agreed larger than reduce's own: reduce does not go lower */
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_REDUCE), (size_t)32 << 20);
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_ALLGATHER), (size_t)32 << 20);
    l->single_copy_auto = 0; /* set by the user: as it is, for every collective */
    l->single_copy_bytes = (size_t)8 << 20;
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_ALLREDUCE), (size_t)8 << 20);
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_REDUCE), (size_t)8 << 20);
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_ALLGATHER), (size_t)8 << 20);
    l->single_copy_bytes = 0;
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_ALLGATHER), 0);
    assert_int_equal(tuner_single_copy_bytes(&comm, SCHED_REDUCE), 0);
}

static void test_set_values_are_read(void **state)
{
    (void)state;
    /* main(): CCL_ONESHOT_MAX=64K, CCL_ALGO=ring, CCL_YIELD=7. */
    assert_int_equal(param_int(PARAM_ONESHOT_MAX), 64 * 1024);
    assert_string_equal(param_str(PARAM_ONESHOT_MAX), "64K");
    assert_string_equal(param_str(PARAM_ALGO), "ring");
    assert_int_equal(param_int(PARAM_YIELD), 7);
}

static void test_empty_value_means_default(void **state)
{
    (void)state;
    /* main(): CCL_SPIN="" and CCL_HOSTID="" behave as unset. */
    assert_int_equal(param_int(PARAM_SPIN), -1);
    assert_string_equal(param_str(PARAM_SPIN), "-1");
    assert_string_equal(param_str(PARAM_HOSTID), "");
}

static void test_parse_num(void **state)
{
    (void)state;
    static const struct { const char *text; double want; } ok[] = {
        {"0", 0}, {"0.25", 0.25}, {"20", 20}, {"-1", -1}, {"1e-3", 1e-3}, {"12.5", 12.5},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double v = -99;
        assert_int_equal(param_parse_num(ok[i].text, &v), 0);
        assert_true(v == ok[i].want);
    }
    static const char *const bad[] = {"", "fast", "1.5x", "0.25 GB/s", "nan", "inf", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = -99;
        assert_int_not_equal(param_parse_num(bad[i], &v), 0);
        assert_true(v == -99);
    }
}

static void test_num_values(void **state)
{
    (void)state;
    /* main(): CCL_NET_LAT=12.5, CCL_NET_BW=fast (malformed), CCL_SHM_BW unset. */
    assert_true(param_num(PARAM_NET_LAT) == 12.5);
    double def = -99;
    assert_int_equal(param_parse_num(table_default[PARAM_NET_BW], &def), 0);
    assert_true(param_num(PARAM_NET_BW) == def);
    assert_string_equal(param_str(PARAM_NET_BW), table_default[PARAM_NET_BW]);
    assert_int_equal(param_parse_num(table_default[PARAM_SHM_BW], &def), 0);
    assert_true(param_num(PARAM_SHM_BW) == def);
    assert_true(def > 0);
}

static void test_malformed_int_falls_back_to_default(void **state)
{
    (void)state;
    /* main(): CCL_STREAM_THRESHOLD=lots. */
    assert_int_equal(param_int(PARAM_STREAM_THRESHOLD), table_default_int(PARAM_STREAM_THRESHOLD));
    assert_string_equal(param_str(PARAM_STREAM_THRESHOLD), table_default[PARAM_STREAM_THRESHOLD]);
}

/* The cache really is read once: changing the environment later changes
 * nothing. */
static void test_table_is_cached(void **state)
{
    (void)state;
    int64_t before = param_int(PARAM_ONESHOT_MAX);
    setenv("CCL_ONESHOT_MAX", "1G", 1);
    setenv("CCL_ALGO", "direct", 1);
    assert_int_equal(param_int(PARAM_ONESHOT_MAX), before);
    assert_string_equal(param_str(PARAM_ALGO), "ring");
    setenv("CCL_ONESHOT_MAX", "64K", 1);
    setenv("CCL_ALGO", "ring", 1);
}

int main(void)
{
    /* Before the first param access of the process: fix the environment so
     * the table tests see known values whatever the caller exported. */
    static const char *const unset[] = {"CCL_BUFFSIZE", "CCL_NSLOTS", "CCL_TIMEOUT",
                                        "CCL_SINGLE_COPY_THRESHOLD", "CCL_DEBUG",
                                        "CCL_DEBUG_SUBSYS", "CCL_COMM_ID"};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++)
        unsetenv(unset[i]);
    setenv("CCL_ONESHOT_MAX", "64K", 1);
    setenv("CCL_ALGO", "ring", 1);
    setenv("CCL_YIELD", "7", 1);
    setenv("CCL_SPIN", "", 1);
    setenv("CCL_HOSTID", "", 1);
    setenv("CCL_STREAM_THRESHOLD", "lots", 1);
    setenv("CCL_NET_LAT", "12.5", 1);
    setenv("CCL_NET_BW", "fast", 1);
    unsetenv("CCL_SHM_BW");

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size_accepts),
        cmocka_unit_test(test_parse_size_rejects),
        cmocka_unit_test(test_parse_num),
        cmocka_unit_test(test_parse_size_suffix_sweep),
        cmocka_unit_test(test_defaults_of_unset_params),
        cmocka_unit_test(test_single_copy_automatic),
        cmocka_unit_test(test_set_values_are_read),
        cmocka_unit_test(test_empty_value_means_default),
        cmocka_unit_test(test_malformed_int_falls_back_to_default),
        cmocka_unit_test(test_num_values),
        cmocka_unit_test(test_table_is_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
