/*
 * param.h - typed access to the CCL_* parameter table (params.def).
 *
 * Values are read from the environment once, on first use, and cached: a
 * collective's fast path must not parse strings. Tests that change the
 * environment do so before the first ccl call of a process (or fork).
 */
#ifndef CCL_BASE_PARAM_H
#define CCL_BASE_PARAM_H

#include <stdint.h>

typedef enum {
#define CCL_PARAM(name, kind, def, doc) PARAM_##name,
#include "base/params.def"
#undef CCL_PARAM
    PARAM_COUNT
} param_id_t;

int64_t param_int(param_id_t id);
/* NUM parameters: a decimal number ("0.25", "20", "1e-3"). */
double param_num(param_id_t id);
/* Never NULL; "" when unset and without default. */
const char *param_str(param_id_t id);
/* Parses "123", "4K", "2M", "1G" (powers of 1024). Returns 0 on success. */
int param_parse_size(const char *text, int64_t *out);
/* Parses a finite decimal number. Returns 0 on success. */
int param_parse_num(const char *text, double *out);

#endif
