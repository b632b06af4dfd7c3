/* base/env.c - environment variables with warn-and-default semantics. */
#include "base/env.h"
#include "base/log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *
weft__env(const char *name)
{
    const char *v = getenv(name);

    return (v == NULL || v[0] == '\0') ? NULL : v;
}

bool
weft__env_bool(const char *name, bool def)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    const char *v = weft__env(name);

    if (v == NULL) {
        return def;
    }
    /* The forms the README documents, case-insensitive. */
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            return true;
        }
        if (strcasecmp(v, no[i]) == 0) {
            return false;
        }
    }
    WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected true/false, 1/0, yes/no or on/off; using %s", name, v,
             def ? "true" : "false");
    return def;
}

bool
weft__env_bool_otel(const char *name, bool def)
{
    const char *v = weft__env(name);

    if (v == NULL) {
        return def;
    }
    /* The OTel specification: only a case-insensitive "true" is true; anything else that is
     * not "false" warns and is false. */
    if (strcasecmp(v, "true") == 0) {
        return true;
    }
    if (strcasecmp(v, "false") != 0) {
        WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected true or false; using false", name, v);
    }
    return false;
}

uint64_t
weft__env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
    const char *v = weft__env(name);
    char *end = NULL;
    unsigned long long n = 0;

    if (v == NULL) {
        return def;
    }
    errno = 0;
    n = strtoull(v, &end, 10);
    while (end != NULL && (*end == ' ' || *end == '\t')) {
        end++;
    }
    if (v[0] == '-' || errno != 0 || end == v || *end != '\0' || n < min || n > max) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "%s=%s: expected an integer in [%llu, %llu]; using the default %llu", name, v,
                 (unsigned long long)min, (unsigned long long)max, (unsigned long long)def);
        return def;
    }
    return (uint64_t)n;
}

double
weft__env_double(const char *name, double def, double min, double max)
{
    const char *v = weft__env(name);
    char *end = NULL;
    double d = 0;

    if (v == NULL) {
        return def;
    }
    errno = 0;
    d = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(d >= min && d <= max)) {
        WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected a number in [%g, %g]; using the default %g", name,
                 v, min, max, def);
        return def;
    }
    return d;
}
