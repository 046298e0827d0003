/*
 * ccl_perf_json.c - `-J FILE`: every row of ccl-perf's tables also as JSON,
 * written by rank 0, for scripts that plot or compare runs without parsing
 * the text table. One object per row and placement (out of place, in
 * place), in the order the table prints them; each row is flushed as it is
 * written, and the closing brackets come at the end of the run.
 */
#include "ccl_perf.h"

#include <stdio.h>
#include <string.h>

static FILE *perf_json;
static int perf_json_rows;

/* A string value: the table's names are plain ASCII, but a host name or
 * a launcher's description is escaped all the same. */
static void perf_json_str(const char *s)
{
    fputc('"', perf_json);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(perf_json, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(perf_json, "\\u%04x", ch);
        else
            fputc(ch, perf_json);
    }
    fputc('"', perf_json);
}

int perf_json_open(const char *path, int nranks, const char *launch_desc, const struct perf_args *a)
{
    perf_json = fopen(path, "w");
    if (!perf_json) {
        perror(path);
        return -1;
    }
    int v = 0;
    ccl_get_version(&v);
    fprintf(perf_json, "{\n  \"tool\": \"ccl-perf\",\n  \"ccl_version\": \"%d.%d.%d\",\n  \"nranks\": %d,\n  \"launch\": ",
            v / 10000, v / 100 % 100, v % 100, nranks);
    perf_json_str(launch_desc);
    fprintf(perf_json, ",\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"blocking\": %d,\n  \"average\": %d,\n"
            "  \"results\": [", a->iters, a->warmup, a->blocking, a->average);
    perf_json_rows = 0;
    return 0;
}

void perf_json_row(const struct perf_json_row_t *r)
{
    if (!perf_json)
        return;
    fprintf(perf_json, "%s\n    {\"collective\": ", perf_json_rows++ ? "," : "");
    perf_json_str(r->collective);
    fprintf(perf_json, ", \"size_bytes\": %zu, \"count\": %zu, \"type\": ", r->bytes, r->count);
    perf_json_str(r->type);
    fprintf(perf_json, ", \"redop\": ");
    perf_json_str(r->redop);
    fprintf(perf_json, ", \"root\": %d, \"in_place\": %s", r->root, r->in_place ? "true" : "false");
    if (r->applicable)
        fprintf(perf_json, ", \"time_us\": %.4f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, \"wrong\": %lld}", r->us,
                r->algbw, r->busbw, r->wrong);
    else
        fprintf(perf_json, ", \"time_us\": null, \"algbw_gbs\": null, \"busbw_gbs\": null, \"wrong\": null}");
    fflush(perf_json);
}

void perf_json_close(void)
{
    if (!perf_json)
        return;
    fprintf(perf_json, "\n  ]\n}\n");
    fclose(perf_json);
    perf_json = NULL;
}
