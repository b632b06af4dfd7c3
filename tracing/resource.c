/* tracing/resource.c - the provider's resource: SDK defaults, then OTEL_RESOURCE_ATTRIBUTES,
 * then OTEL_SERVICE_NAME, then attributes given through the API (later sources win).
 *
 * Per the OTel specification an OTEL_RESOURCE_ATTRIBUTES value that fails to decode is
 * discarded whole, with a warning.
 */
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/str.h"
#include "sdk.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_RESOURCE_ATTRS 128

struct draft {
    struct weft_attr attrs[MAX_RESOURCE_ATTRS];
    char *owned[MAX_RESOURCE_ATTRS * 2]; /* decoded env strings */
    size_t count;
    size_t owned_count;
    uint32_t dropped;
};

static void
draft_set(struct draft *d, const struct weft_attr *attr)
{
    for (size_t i = 0; i < d->count; i++) {
        if (strcmp(d->attrs[i].key, attr->key) == 0) {
            d->attrs[i] = *attr;
            return;
        }
    }
    if (d->count == MAX_RESOURCE_ATTRS) {
        d->dropped++;
        return;
    }
    d->attrs[d->count++] = *attr;
}

static void
draft_cleanup(struct draft *d)
{
    for (size_t i = 0; i < d->owned_count; i++) {
        weft__free(d->owned[i]);
    }
}

static char *
draft_keep(struct draft *d, char *s)
{
    if (s != NULL && d->owned_count < sizeof(d->owned) / sizeof(d->owned[0])) {
        d->owned[d->owned_count++] = s;
        return s;
    }
    weft__free(s);
    return NULL;
}

/* Parse "k=v,k2=v2" (values percent-encoded). On any error nothing is added. */
static void
parse_env_attrs(struct draft *d, const char *env)
{
    struct draft parsed;
    const char *p = env;

    memset(&parsed, 0, sizeof(parsed));
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end == NULL ? strlen(p) : (size_t)(end - p);
        const char *member = p;
        const char *eq = NULL;
        const char *k = NULL;
        size_t klen = 0;
        const char *v = NULL;
        size_t vlen = 0;
        char *key = NULL;
        char *value = NULL;

        weft__trim(&member, &len);
        if (len > 0) {
            eq = memchr(member, '=', len);
            if (eq == NULL) {
                goto bad;
            }
            k = member;
            klen = (size_t)(eq - member);
            v = eq + 1;
            vlen = len - klen - 1;
            weft__trim(&k, &klen);
            weft__trim(&v, &vlen);
            if (klen == 0) {
                goto bad;
            }
            key = draft_keep(&parsed, weft__percent_decode(k, klen));
            value = draft_keep(&parsed, weft__percent_decode(v, vlen));
            if (key == NULL || value == NULL) {
                goto bad;
            }
            {
                struct weft_attr a = weft_attr_str(key, value);
                draft_set(&parsed, &a);
            }
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    for (size_t i = 0; i < parsed.count; i++) {
        draft_set(d, &parsed.attrs[i]);
    }
    for (size_t i = 0; i < parsed.owned_count; i++) {
        draft_keep(d, parsed.owned[i]);
    }
    return;
bad:
    WEFT_LOG(WEFT_LOG_WARN,
             "OTEL_RESOURCE_ATTRIBUTES: expected comma-separated key=value pairs with "
             "percent-encoded values; ignoring the whole value");
    draft_cleanup(&parsed);
}

weft_err
weft__resource_parse_env(const char *value, struct weft_attr **out, size_t *count)
{
    struct draft d;
    weft_err err = WEFT_OK;

    *out = NULL;
    *count = 0;
    memset(&d, 0, sizeof(d));
    parse_env_attrs(&d, value);
    if (d.count > 0) {
        err = weft__attrs_copy(d.attrs, d.count, out);
    }
    if (err == WEFT_OK) {
        *count = d.count;
    }
    draft_cleanup(&d);
    return err;
}

weft_err
weft__resource_build(struct weft_provider *provider, const struct weft_provider_options *opts)
{
    struct draft d;
    char exe[PATH_MAX];
    char service[PATH_MAX + 32];
    char host[256];
    ssize_t n = 0;
    const char *env = NULL;
    struct weft_attr a;
    weft_err err = WEFT_OK;

    memset(&d, 0, sizeof(d));
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    {
        const char *base = strrchr(exe, '/');
        snprintf(service, sizeof(service), "unknown_service:%s",
                 base != NULL ? base + 1 : (exe[0] != '\0' ? exe : "weft"));
    }
    a = weft_attr_str("service.name", service);
    draft_set(&d, &a);
    a = weft_attr_str("telemetry.sdk.name", "weft");
    draft_set(&d, &a);
    a = weft_attr_str("telemetry.sdk.language", "c");
    draft_set(&d, &a);
    a = weft_attr_str("telemetry.sdk.version", WEFT_VERSION_STRING);
    draft_set(&d, &a);
    a = weft_attr_int("process.pid", (int64_t)getpid());
    draft_set(&d, &a);
    if (exe[0] != '\0') {
        const char *base = strrchr(exe, '/');
        a = weft_attr_str("process.executable.name", base != NULL ? base + 1 : exe);
        draft_set(&d, &a);
    }
    if (gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        a = weft_attr_str("host.name", host);
        draft_set(&d, &a);
    }

    env = weft__env("OTEL_RESOURCE_ATTRIBUTES");
    if (env != NULL) {
        parse_env_attrs(&d, env);
    }
    env = weft__env("OTEL_SERVICE_NAME");
    if (env != NULL) {
        a = weft_attr_str("service.name", env);
        draft_set(&d, &a);
    }
    if (opts != NULL) {
        for (size_t i = 0; i < opts->resource_attr_count; i++) {
            if (opts->resource_attrs[i].key == NULL || opts->resource_attrs[i].key[0] == '\0') {
                err = WEFT_EINVAL;
                goto out;
            }
            draft_set(&d, &opts->resource_attrs[i]);
        }
        if (opts->service_name != NULL) {
            a = weft_attr_str("service.name", opts->service_name);
            draft_set(&d, &a);
        }
    }
    err = weft__attrs_copy(d.attrs, d.count, &provider->resource_attrs);
    if (err != WEFT_OK) {
        goto out;
    }
    provider->resource.attrs = provider->resource_attrs;
    provider->resource.attr_count = d.count;
    provider->resource.dropped_attrs = d.dropped;
    provider->resource.schema_url = NULL;
out:
    draft_cleanup(&d);
    return err;
}

void
weft__resource_cleanup(struct weft_provider *provider)
{
    weft__free(provider->resource_attrs);
    provider->resource_attrs = NULL;
}

const struct weft_value *
weft_provider_resource_get(const struct weft_provider *provider, const char *key)
{
    if (provider == NULL || key == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < provider->resource.attr_count; i++) {
        if (strcmp(provider->resource.attrs[i].key, key) == 0) {
            return &provider->resource.attrs[i].value;
        }
    }
    return NULL;
}
