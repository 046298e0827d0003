/*
 * tune_algo.c - CCL_ALGO (and ccl-info --algo): NCCL_ALGO's syntax over
 * the registry's algorithm names (algos/registry.h), turned into the mask
 * of allowed algorithms per collective that the pick takes (tune.h says
 * the syntax). Parsed once at comm init; every rank then uses rank 0's
 * masks (core/tuner.c).
 */
#include "topo/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Collectives a prefix names (bit per sched_coll_t); 0 if unknown. NCCL's
 * names (allreduce, reducescatter, sendrecv...) and ccl's own. */
static unsigned tune_prefix_lookup(const char *name)
{
    static const struct { const char *name; unsigned colls; } names[] = {
        {"allreduce", 1u << SCHED_ALLREDUCE},
        {"allgather", 1u << SCHED_ALLGATHER},
        {"reducescatter", 1u << SCHED_REDUCE_SCATTER},
        {"reduce_scatter", 1u << SCHED_REDUCE_SCATTER},
        {"broadcast", 1u << SCHED_BROADCAST},
        {"bcast", 1u << SCHED_BROADCAST},
        {"reduce", 1u << SCHED_REDUCE},
        {"alltoall", 1u << SCHED_ALLTOALL},
        {"gather", 1u << SCHED_GATHER},
        {"scatter", 1u << SCHED_SCATTER},
        {"sendrecv", (1u << SCHED_P2P_SEND) | (1u << SCHED_P2P_RECV)},
        {"p2p", (1u << SCHED_P2P_SEND) | (1u << SCHED_P2P_RECV)},
        {"send", 1u << SCHED_P2P_SEND},
        {"recv", 1u << SCHED_P2P_RECV},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name))
            return names[i].colls;
    return 0;
}

/* Trims spaces at both ends, in place. */
static char *tune_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        s[--len] = '\0';
    return s;
}

static void tune_bad(int *nbad, char *bad, size_t badlen, const char *fmt, const char *what)
{
    if ((*nbad)++ == 0 && bad && badlen)
        snprintf(bad, badlen, fmt, what);
}

int tune_parse_algo(const char *text, unsigned allowed[SCHED_NUM_COLLS], char *bad, size_t badlen)
{
    int nbad = 0;
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        allowed[c] = TUNE_ALL;
    if (bad && badlen)
        bad[0] = '\0';
    if (!text || !text[0])
        return 0;
    char *copy = strdup(text);
    if (!copy)
        return 0; /* out of memory: as if unset */
    char *save = NULL;
    int first = 1;
    for (char *entry = strtok_r(copy, ";", &save); entry; entry = strtok_r(NULL, ";", &save), first = 0) {
        unsigned colls = (1u << SCHED_NUM_COLLS) - 1;
        char *list = entry, *colon = strchr(entry, ':');
        if (colon) {
            *colon = '\0';
            list = colon + 1;
            colls = tune_prefix_lookup(tune_trim(entry));
            if (!colls) {
                tune_bad(&nbad, bad, badlen, "unknown collective \"%s\"", tune_trim(entry));
                continue;
            }
        } else if (!first) {
            /* As in NCCL: it would undo every entry before it. */
            tune_bad(&nbad, bad, badlen, "\"%s\" has no collective prefix but is not the first entry",
                     tune_trim(entry));
            continue;
        }
        list = tune_trim(list);
        int exclude = list[0] == '^';
        unsigned named = 0;
        char *save2 = NULL;
        for (char *name = strtok_r(list + exclude, ",", &save2); name; name = strtok_r(NULL, ",", &save2)) {
            name = tune_trim(name);
            int a = algo_lookup(name);
            if (a < 0)
                tune_bad(&nbad, bad, badlen, "unknown algorithm \"%s\"", name);
            else
                named |= TUNE_BIT(a);
        }
        if (!named)
            continue; /* nothing known in it: the entry changes nothing */
        for (int c = 0; c < SCHED_NUM_COLLS; c++)
            if (colls & (1u << c))
                allowed[c] = exclude ? TUNE_ALL & ~named : named;
    }
    free(copy);
    return nbad;
}
