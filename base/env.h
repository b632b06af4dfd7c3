/* base/env.h - environment variables with warn-and-default semantics.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_ENV_H
#define WEFT_BASE_ENV_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Environment: an unset or empty variable yields NULL / the default. A malformed value logs a
 * WARN naming the variable and the expected form, and yields the default. */
const char *weft__env(const char *name);
/* weft's own boolean variables: true/false, 1/0, yes/no, on/off (case-insensitive); anything
 * else warns and yields @p def. */
bool weft__env_bool(const char *name, bool def);
/* OTel's boolean variables (OTEL_SDK_DISABLED), as the specification defines them: only
 * "true" (case-insensitive) is true; anything but "false" warns and is false. */
bool weft__env_bool_otel(const char *name, bool def);
uint64_t weft__env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max);
double weft__env_double(const char *name, double def, double min, double max);

#endif /* WEFT_BASE_ENV_H */
