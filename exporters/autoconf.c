/* exporters/autoconf.c - the exporter registry and OTEL_TRACES_EXPORTER: one table names every
 * exporter weft can build from the environment (name, description, constructor, processor,
 * the variables it reads), and weft_provider_add_env_exporters() builds the ones the list
 * names, each behind its own processor, so that one slow destination never delays another.
 *
 * The table is the single source: the unknown-name error lists its names, `weft exporters`
 * prints it (text, JSON, and the Markdown block of README.md, which a test compares), so the
 * docs cannot drift from what the code accepts.
 *
 * The console exporter sits behind a simple processor because it prints whole traces as they
 * finish; everything else is batched. Setting LANGFUSE_* adds the Langfuse exporter even when
 * the list does not name it: the keys are all it takes.
 */
#include "base/env.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <weft/export.h>
#include <weft/sampling.h>

typedef weft_err (*create_fn)(struct weft_exporter **out);

struct registry_entry {
    struct weft_exporter_info info; /* first: weft_exporter_info_at() hands out its address */
    create_fn create;               /* NULL for "none" */
    bool (*is_implied)(void);       /* added even when the list does not name it */
};

/* ------------------------------------------------------------------------------------------ */
/* Constructors                                                                                */

static weft_err
create_otlp(struct weft_exporter **out)
{
    return weft_otlp_exporter_new(NULL, out);
}

static weft_err
create_langfuse(struct weft_exporter **out)
{
    return weft_langfuse_exporter_new(NULL, out);
}

static weft_err
create_console(struct weft_exporter **out)
{
    return weft_console_exporter_new(NULL, out);
}

static weft_err
create_file(struct weft_exporter **out)
{
    const char *path = weft__env("WEFT_TRACES_FILE");
    const char *home = weft__env("WEFT_HOME");
    char buf[4096];
    int n = 0;

    if (path != NULL) {
        n = snprintf(buf, sizeof(buf), "%s", path);
    } else {
        n = snprintf(buf, sizeof(buf), "%s/traces.jsonl", home != NULL ? home : ".weft");
    }
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        WEFT_LOG(WEFT_LOG_ERROR, "exporter file: the traces file path is too long");
        return WEFT_EINVAL;
    }
    return weft_file_exporter_new(buf, out);
}

static weft_err
create_store(struct weft_exporter **out)
{
    return weft_store_exporter_new(NULL, out);
}

/* ------------------------------------------------------------------------------------------ */
/* The registry                                                                                */

#define ENV_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct weft_exporter_env otlp_env[] = {
    {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318", "base URL; v1/traces is appended"},
    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", NULL, "full URL, used as given"},
    {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "http/protobuf or http/json"},
    {"OTEL_EXPORTER_OTLP_COMPRESSION", "none", "gzip or none"},
    {"OTEL_EXPORTER_OTLP_HEADERS", NULL, "k=v,k2=v2, values percent-decoded; never logged"},
    {"OTEL_EXPORTER_OTLP_TIMEOUT", "10000", "ms per request; 0 means none"},
    {"OTEL_EXPORTER_OTLP_CERTIFICATE", "system CAs", "PEM file of CAs to verify the server"},
    {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", NULL, "PEM client certificate (mTLS)"},
    {"OTEL_EXPORTER_OTLP_CLIENT_KEY", NULL, "PEM client key (mTLS)"},
    {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_PROTOCOL"},
    {"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_COMPRESSION"},
    {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_HEADERS"},
    {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_TIMEOUT"},
    {"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_CERTIFICATE"},
    {"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"},
    {"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", NULL,
     "for traces only; wins over OTEL_EXPORTER_OTLP_CLIENT_KEY"},
    {"WEFT_EXPORT_SPOOL", "off",
     "on: batches whose retries give up wait in an on-disk spool (weft worker: on)"},
    {"WEFT_EXPORT_SPOOL_DIR", "$WEFT_HOME/spool", "the spool's root; one directory per exporter"},
    {"WEFT_EXPORT_SPOOL_MAX_BYTES", "268435456",
     "the spool's cap; the oldest requests go first, counted"},
};

static const struct weft_exporter_env langfuse_env[] = {
    {"LANGFUSE_HOST", "https://cloud.langfuse.com", "base URL (or LANGFUSE_BASE_URL)"},
    {"LANGFUSE_PUBLIC_KEY", NULL, "the project's public key; both keys or neither"},
    {"LANGFUSE_SECRET_KEY", NULL, "the project's secret key; never logged"},
    {"LANGFUSE_ENVIRONMENT", NULL,
     "environment on every span and score (or "
     "LANGFUSE_TRACING_ENVIRONMENT)"},
    {"LANGFUSE_RELEASE", NULL, "langfuse.release on every span"},
    {"LANGFUSE_SAMPLE_RATE", "1", "share of traces sent, decided per trace id"},
    {"WEFT_LANGFUSE_PROTOCOL", "http/protobuf", "http/json sends OTLP JSON"},
    {"WEFT_LANGFUSE_SCORES", "true", "false: spans only, no scores"},
    {"WEFT_LANGFUSE_MAX_VALUE_BYTES", "32768", "longer string values are cut, with a marker"},
    {"WEFT_LANGFUSE_MAX_REQUEST_BYTES", "3145728", "a request's body before gzip"},
    {"WEFT_LANGFUSE_MAX_SPANS_PER_TRACE", "10000", "a longer run is split into several traces"},
    {"WEFT_EXPORT_SPOOL", "off",
     "on: batches whose retries give up wait in an on-disk spool (weft worker: on)"},
    {"WEFT_EXPORT_SPOOL_DIR", "$WEFT_HOME/spool", "the spool's root; one directory per exporter"},
    {"WEFT_EXPORT_SPOOL_MAX_BYTES", "268435456",
     "the spool's cap; the oldest requests go first, counted"},
};

static const struct weft_exporter_env file_env[] = {
    {"WEFT_TRACES_FILE", "$WEFT_HOME/traces.jsonl", "where OTLP JSON lines are appended"},
    {"WEFT_HOME", "./.weft", "directory of the default traces file"},
};

static const struct weft_exporter_env store_env[] = {
    {"WEFT_HOME", "./.weft", "directory of the store, weft.db, read by weft trace"},
};

static const struct registry_entry registry[] = {
    {{"otlp", "OTLP/HTTP to a collector (protobuf or JSON, gzip, retries)", "batch", otlp_env,
      ENV_COUNT(otlp_env)},
     create_otlp,
     NULL},
    {{"langfuse",
      "Langfuse over its OTLP endpoint, with scores; added whenever a LANGFUSE_HOST or key is set",
      "batch", langfuse_env, ENV_COUNT(langfuse_env)},
     create_langfuse,
     weft_langfuse_configured},
    {{"store", "the local SQLite span store behind weft trace", "batch", store_env,
      ENV_COUNT(store_env)},
     create_store,
     NULL},
    {{"file", "one OTLP JSON request per line, appended to a file", "batch", file_env,
      ENV_COUNT(file_env)},
     create_file,
     NULL},
    {{"console", "each finished trace printed to stdout as a tree", "simple", NULL, 0},
     create_console,
     NULL},
    {{"none", "no exporter (the other names in the list still apply)", NULL, NULL, 0}, NULL, NULL},
};

#define REGISTRY_COUNT (sizeof(registry) / sizeof(registry[0]))

const struct weft_exporter_info *
weft_exporter_info_at(size_t index)
{
    return index < REGISTRY_COUNT ? &registry[index].info : NULL;
}

static const struct registry_entry *
find_entry(const char *name)
{
    if (name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < REGISTRY_COUNT; i++) {
        if (strcmp(registry[i].info.name, name) == 0) {
            return &registry[i];
        }
    }
    return NULL;
}

const struct weft_exporter_info *
weft_exporter_info_find(const char *name)
{
    const struct registry_entry *e = find_entry(name);

    return e != NULL ? &e->info : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* OTEL_TRACES_EXPORTER                                                                        */

static void
log_unknown(const char *name)
{
    char names[256] = "";
    size_t len = 0;

    for (size_t i = 0; i < REGISTRY_COUNT && len < sizeof(names); i++) {
        int n = snprintf(names + len, sizeof(names) - len, "%s%s", i > 0 ? ", " : "",
                         registry[i].info.name);

        len += n > 0 ? (size_t)n : 0;
    }
    WEFT_LOG(WEFT_LOG_WARN,
             "OTEL_TRACES_EXPORTER: unknown exporter '%s' (valid names: %s; `weft exporters` "
             "lists them with their settings); skipped",
             name, names);
}

/* One exporter of the registry behind its processor; behind a run buffer of @p tail too
 * when it is set and the exporter is batched (a simple processor exports on the ending
 * thread, where holding spans has no place: the console stays unsampled). */
static weft_err
add_entry(struct weft_provider *provider, const struct registry_entry *e, struct weft_tail *tail)
{
    struct weft_exporter *exporter = NULL;
    struct weft_processor *proc = NULL;
    weft_err err = e->create(&exporter);

    if (err != WEFT_OK) {
        if (err != WEFT_EINVAL) { /* a configuration error was already logged with its cause */
            WEFT_LOG(WEFT_LOG_ERROR, "exporter %s: cannot be created: %s", e->info.name,
                     weft_strerror(err));
        }
        return err;
    }
    if (strcmp(e->info.processor, "simple") == 0) {
        err = weft_simple_processor_new(exporter, &proc);
    } else {
        if (tail != NULL) {
            err = weft_tail_wrap(tail, exporter, &exporter);
        }
        if (err == WEFT_OK) {
            err = weft_batch_processor_new(exporter, NULL, &proc);
        }
    }
    if (err != WEFT_OK) {
        return err;
    }
    return weft_provider_add_processor_take(provider, proc);
}

static void
keep_first(weft_err *first, weft_err err)
{
    if (err != WEFT_OK && *first == WEFT_OK) {
        *first = err;
    }
}

/* The run buffer an entry goes behind: @p tail, unless only @p only_name is wrapped. */
static struct weft_tail *
wrap_for(const struct registry_entry *e, struct weft_tail *tail, const char *only_name)
{
    return only_name == NULL || strcmp(e->info.name, only_name) == 0 ? tail : NULL;
}

weft_err
weft_provider_add_env_exporters(struct weft_provider *provider, const char *default_exporters)
{
    return weft_provider_add_env_exporters_tail(provider, default_exporters, NULL, NULL);
}

weft_err
weft_provider_add_env_exporters_tail(struct weft_provider *provider,
                                     const char *default_exporters,
                                     struct weft_tail *tail,
                                     const char *only_name)
{
    const char *list = weft__env("OTEL_TRACES_EXPORTER");
    bool is_named[REGISTRY_COUNT] = {false};
    char buf[256];
    char *save = NULL;
    char *name = NULL;
    weft_err first = WEFT_OK;

    if (provider == NULL) {
        return WEFT_EINVAL;
    }
    if (weft_provider_is_disabled(provider)) {
        return WEFT_OK; /* a disabled SDK exports nothing: do not open files or sockets */
    }
    if (list == NULL) {
        list = default_exporters != NULL ? default_exporters : "otlp";
    }
    if (strlen(list) >= sizeof(buf)) {
        WEFT_LOG(WEFT_LOG_ERROR, "OTEL_TRACES_EXPORTER: value too long");
        return WEFT_EINVAL;
    }
    snprintf(buf, sizeof(buf), "%s", list);
    for (name = strtok_r(buf, ", ", &save); name != NULL; name = strtok_r(NULL, ", ", &save)) {
        const struct registry_entry *e = find_entry(name);

        if (e == NULL) {
            log_unknown(name);
            keep_first(&first, WEFT_EINVAL);
            continue;
        }
        is_named[e - registry] = true;
        if (e->create != NULL) {
            keep_first(&first, add_entry(provider, e, wrap_for(e, tail, only_name)));
        }
    }
    for (size_t i = 0; i < REGISTRY_COUNT; i++) {
        if (!is_named[i] && registry[i].is_implied != NULL && registry[i].is_implied()) {
            keep_first(&first,
                       add_entry(provider, &registry[i], wrap_for(&registry[i], tail, only_name)));
        }
    }
    return first;
}
