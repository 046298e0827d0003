/*
 * test_registry.c - the algorithm registry (src/algos/registry.h): the one
 * table the tuner, CCL_ALGO, ccl-info and the dispatch read. Checks that
 *   - every algo_t has exactly one row, at its own index;
 *   - names and aliases are unique (CCL_ALGO could not tell them apart);
 *   - CCL_ALGO parses every registered name and alias to that algorithm;
 *   - every collective a row serves has a schedule generator or a direct
 *     executor, and every generator makes a schedule for it;
 *   - every collective has exactly one bandwidth algorithm, which serves it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algos/registry.h"
#include "topo/tune.h"

static void test_one_row_per_id(void **state)
{
    (void)state;
    int seen[ALGO_COUNT] = {0};
    for (int a = 0; a < ALGO_COUNT; a++) {
        assert_int_equal(algo_registry[a].id, a);
        assert_non_null(algo_registry[a].name);
        seen[algo_registry[a].id]++;
    }
    for (int a = 0; a < ALGO_COUNT; a++)
        assert_int_equal(seen[a], 1);
    assert_null(algo_desc(ALGO_COUNT));
    assert_string_equal(algo_name(ALGO_COUNT), "?");
}

static void test_names_unique(void **state)
{
    (void)state;
    const char *names[2 * ALGO_COUNT];
    int n = 0;
    for (int a = 0; a < ALGO_COUNT; a++) {
        names[n++] = algo_registry[a].name;
        if (algo_registry[a].alias)
            names[n++] = algo_registry[a].alias;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            assert_true(strcasecmp(names[i], names[j]) != 0);
}

static void test_ccl_algo_parses_every_name(void **state)
{
    (void)state;
    unsigned allowed[SCHED_NUM_COLLS];
    char bad[128];
    for (int a = 0; a < ALGO_COUNT; a++) {
        const char *names[2] = {algo_registry[a].name, algo_registry[a].alias};
        for (int k = 0; k < 2 && names[k]; k++) {
            assert_int_equal(algo_lookup(names[k]), a);
            assert_int_equal(tune_parse_algo(names[k], allowed, bad, sizeof bad), 0);
            for (int c = 0; c < SCHED_NUM_COLLS; c++)
                assert_int_equal(allowed[c], ALGO_BIT(a));
            char excl[64];
            snprintf(excl, sizeof excl, "allreduce:^%s", names[k]);
            assert_int_equal(tune_parse_algo(excl, allowed, bad, sizeof bad), 0);
            assert_int_equal(allowed[SCHED_ALLREDUCE], ALGO_ALL & ~ALGO_BIT(a));
        }
    }
    assert_int_equal(algo_lookup("no-such-algorithm"), -1);
}

/* A generator must make a schedule for each collective its row serves,
 * on the ranks and nodes the row allows. */
static void test_colls_have_a_runner(void **state)
{
    (void)state;
    sched_layout_t lay;
    assert_int_equal(tune_layout_blocked(4, 2, &lay), CCL_SUCCESS);
    for (int a = 0; a < ALGO_COUNT; a++) {
        const algo_desc_t *d = &algo_registry[a];
        assert_true(d->colls != 0);
        assert_true(d->colls < (1u << SCHED_NUM_COLLS));
        if (d->run != ALGO_RUN_SCHEDULE) {
            assert_null(d->schedule); /* direct: the core calls its executor */
            continue;
        }
        assert_non_null(d->schedule);
        int n = d->max_ranks ? d->max_ranks : 4;
        const sched_layout_t *l = (d->where & ALGO_MANY_NODES) ? &lay : NULL;
        for (int c = 0; c < SCHED_NUM_COLLS; c++) {
            if (!(d->colls & ALGO_COLL(c)))
                continue;
            for (int r = 0; r < n; r++) {
                sched_t s = {0};
                sched_op_t op = {(sched_coll_t)c, 1024, 4, n, r, (r + 1) % n, l};
                assert_int_equal(algo_schedule(&op, (algo_t)a, &s), CCL_SUCCESS);
                sched_free(&s);
            }
        }
    }
    tune_layout_free(&lay);
}

static void test_bandwidth_algorithms(void **state)
{
    (void)state;
    for (int c = 0; c < SCHED_NUM_COLLS; c++) {
        int count = 0;
        for (int a = 0; a < ALGO_COUNT; a++)
            if (algo_registry[a].bandwidth & ALGO_COLL(c)) {
                count++;
                assert_true(algo_registry[a].colls & ALGO_COLL(c));
                assert_int_equal(algo_registry[a].run, ALGO_RUN_SCHEDULE);
                assert_true(algo_bandwidth_mask() & ALGO_BIT(a));
            }
        assert_int_equal(count, 1);
        assert_true(algo_serving((sched_coll_t)c) & ALGO_BIT(algo_bandwidth((sched_coll_t)c)));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_row_per_id),
        cmocka_unit_test(test_names_unique),
        cmocka_unit_test(test_ccl_algo_parses_every_name),
        cmocka_unit_test(test_colls_have_a_runner),
        cmocka_unit_test(test_bandwidth_algorithms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
