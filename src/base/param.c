/*
 * param.c - the CCL_* parameter table, read once from the environment.
 *
 * This is the only place in ccl that calls getenv. A malformed integer or
 * number is reported once at WARN and the default is used, so a typo never
 * turns into a silent zero.
 */
#include "base/param.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Straight to stderr: parameters are read before the log configuration
 * exists (the log reads its own settings from this table), so this file
 * must not depend on log.c. */
__attribute__((format(printf, 1, 2))) static void param_warn(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    fprintf(stderr, "ccl WARN %.*s", n, buf);
}

typedef enum { KIND_INT, KIND_NUM, KIND_STR } param_kind_t;

typedef struct {
    const char *name;
    param_kind_t kind;
    const char *def;
    const char *doc;
} param_desc_t;

static const param_desc_t param_table[PARAM_COUNT] = {
#define CCL_PARAM(name, kind, def, doc) {"CCL_" #name, KIND_##kind, def, doc},
#include "base/params.def"
#undef CCL_PARAM
};

static pthread_once_t param_once = PTHREAD_ONCE_INIT;
static const char *param_strs[PARAM_COUNT];
static int64_t param_ints[PARAM_COUNT];
static double param_nums[PARAM_COUNT];

int param_parse_num(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int param_parse_size(const char *text, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text)
        return -1;
    int64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1LL << 10; end++; break;
    case 'M': mult = 1LL << 20; end++; break;
    case 'G': mult = 1LL << 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return -1;
    if (v > INT64_MAX / mult || v < INT64_MIN / mult)
        return -1;
    *out = (int64_t)v * mult;
    return 0;
}

static void param_load(void)
{
    for (int i = 0; i < PARAM_COUNT; i++) {
        const param_desc_t *p = &param_table[i];
        const char *env = getenv(p->name);
        const char *text = (env && *env) ? env : p->def;
        param_strs[i] = text;
        /* The log layer reads params too, so report without recursing
         * into it before this table is complete. */
        if (p->kind == KIND_INT && param_parse_size(text, &param_ints[i]) != 0) {
            param_parse_size(p->def, &param_ints[i]);
            param_strs[i] = p->def;
            param_warn("ignoring %s=\"%s\": not an integer; using %s", p->name, text, p->def);
        } else if (p->kind == KIND_NUM && param_parse_num(text, &param_nums[i]) != 0) {
            param_parse_num(p->def, &param_nums[i]);
            param_strs[i] = p->def;
            param_warn("ignoring %s=\"%s\": not a number; using %s", p->name, text, p->def);
        }
    }
}

int64_t param_int(param_id_t id)
{
    pthread_once(&param_once, param_load);
    return param_ints[id];
}

double param_num(param_id_t id)
{
    pthread_once(&param_once, param_load);
    return param_nums[id];
}

const char *param_str(param_id_t id)
{
    pthread_once(&param_once, param_load);
    return param_strs[id];
}
