/*
 * tune_text.c - the tuner's view as text, for ccl-info --explain and the
 * TUNING log (CCL_DEBUG=INFO): the model's inputs, and per collective a
 * table of every registered algorithm's modelled cost by size with the
 * pick. Columns follow the registry's order; only the algorithms serving
 * the collective get one.
 */
#include "topo/tune.h"

#include <math.h>
#include <stdio.h>

/* "4K", "64M", "1G", or plain bytes. */
static void tune_size_str(size_t v, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (v >= 1024 && v % 1024 == 0 && u < 3) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%zu", v);
    else
        snprintf(buf, len, "%zu%c", v, units[u]);
}

/* Microseconds in 8 characters at most. */
static void tune_us_str(double us, char *buf, size_t len)
{
    if (!isfinite(us))
        snprintf(buf, len, "-");
    else if (us < 10)
        snprintf(buf, len, "%.2f", us);
    else if (us < 1000)
        snprintf(buf, len, "%.1f", us);
    else if (us < 1e7)
        snprintf(buf, len, "%.0f", us);
    else
        snprintf(buf, len, "%.2e", us);
}

void tune_describe(const tune_model_t *m, tune_line_fn line, void *arg)
{
    char text[512], slot[32], board[32], cores[16], copy[32];
    const tune_links_t *l = &m->link;
    tune_size_str(l->slot_bytes, slot, sizeof slot);
    tune_size_str(l->board_bytes, board, sizeof board);
    tune_size_str(l->single_copy_bytes, copy, sizeof copy);
    snprintf(cores, sizeof cores, "%.3g", l->cores);
    snprintf(text, sizeof text,
             "tuner inputs: %d ranks on %d node%s (%d to %d per node), %s cores per node, slot %s, board %s, "
             "single copy from %s%s; shm %.3g GB/s per pass, %.3g us per hop; net %.3g GB/s per NIC, "
             "%.3g us per hop",
             m->nranks, m->nnodes, m->nnodes == 1 ? "" : "s", m->min_local, m->max_local, l->cores > 0 ? cores : "enough", slot,
             l->board_bytes ? board : "none", l->single_copy_bytes ? copy : "never",
             l->single_copy_auto ? " (automatic)" : "", l->shm_bw, l->shm_lat,
             l->net_bw, l->net_lat);
    line(arg, text);
    snprintf(text, sizeof text,
             "tuner layout: ring crosses nodes %d times (%d per NIC); trees depth %d/%d with %d/%d inter-node "
             "hops (%d edges per NIC); recursive doubling %d exchanges + %d folded",
             m->ring_cross, m->ring_flows, m->tree_depth[0], m->tree_depth[1], m->tree_net[0], m->tree_net[1],
             m->tree_flows, m->rd_logp, m->rd_extra);
    line(arg, text);
}

void tune_table(const tune_model_t *m, sched_coll_t coll, size_t min, size_t max, size_t factor, unsigned allowed,
                tune_line_fn line, void *arg)
{
    char text[512], cell[32];
    unsigned cols = algo_serving(coll) & m->avail;
    int o = snprintf(text, sizeof text, "%-14s %8s", sched_coll_name(coll), "bytes");
    for (int a = 0; a < ALGO_COUNT; a++)
        if (cols & TUNE_BIT(a))
            o += snprintf(text + o, sizeof text - (size_t)o, " %9s", algo_name((algo_t)a));
    snprintf(text + o, sizeof text - (size_t)o, "   pick (us)");
    line(arg, text);
    if (factor < 2)
        factor = 2;
    for (size_t size = min ? min : 1; size <= max && size > 0; size *= factor) {
        tune_size_str(size, cell, sizeof cell);
        o = snprintf(text, sizeof text, "%-14s %8s", "", cell);
        for (int a = 0; a < ALGO_COUNT; a++) {
            if (!(cols & TUNE_BIT(a)))
                continue;
            tune_us_str(tune_cost(m, coll, (algo_t)a, size, 0), cell, sizeof cell);
            o += snprintf(text + o, sizeof text - (size_t)o, " %9s", cell);
        }
        algo_t pick = tune_pick(m, coll, size, 0, allowed, NULL, NULL);
        snprintf(text + o, sizeof text - (size_t)o, "   %s", algo_name(pick));
        line(arg, text);
        if (size > max / factor)
            break;
    }
}
