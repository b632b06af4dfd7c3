/* exporters/autoconf.c - builds the exporters named by OTEL_TRACES_EXPORTER and plugs each into
 * the provider behind its own processor, so that one slow destination never delays another.
 *
 * Names: otlp (OTLP/HTTP), langfuse, console, file (OTLP JSON lines), store (SQLite), none.
 * The console exporter sits behind a simple processor because it prints whole traces as they
 * finish; everything else is batched. Setting LANGFUSE_* adds the Langfuse exporter even when
 * the list does not name it: the keys are all it takes.
 */
#include "base/env.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <weft/export.h>

#define MAX_NAMES 8

static weft_err
default_traces_file(char *buf, size_t len)
{
    const char *path = weft__env("WEFT_TRACES_FILE");
    const char *home = weft__env("WEFT_HOME");
    int n = 0;

    if (path != NULL) {
        n = snprintf(buf, len, "%s", path);
    } else {
        n = snprintf(buf, len, "%s/traces.jsonl", home != NULL ? home : ".weft");
    }
    return n < 0 || (size_t)n >= len ? WEFT_EINVAL : WEFT_OK;
}

static weft_err
add_one(struct weft_provider *provider, const char *name)
{
    struct weft_exporter *exporter = NULL;
    struct weft_processor *proc = NULL;
    char path[4096];
    weft_err err = WEFT_OK;

    if (strcmp(name, "otlp") == 0) {
        err = weft_otlp_exporter_new(NULL, &exporter);
    } else if (strcmp(name, "langfuse") == 0) {
        err = weft_langfuse_exporter_new(NULL, &exporter);
    } else if (strcmp(name, "console") == 0) {
        err = weft_console_exporter_new(NULL, &exporter);
        if (err == WEFT_OK) {
            err = weft_simple_processor_new(exporter, &proc);
            return err == WEFT_OK ? weft_provider_add_processor_take(provider, proc) : err;
        }
    } else if (strcmp(name, "file") == 0) {
        err = default_traces_file(path, sizeof(path));
        if (err == WEFT_OK) {
            err = weft_file_exporter_new(path, &exporter);
        }
    } else if (strcmp(name, "store") == 0) {
        err = weft_store_exporter_new(NULL, &exporter);
    } else {
        WEFT_LOG(WEFT_LOG_WARN,
                 "OTEL_TRACES_EXPORTER: unknown exporter '%s' (expected otlp, langfuse, console, "
                 "file, store or none); skipped",
                 name);
        return WEFT_EINVAL;
    }
    if (err != WEFT_OK) {
        if (err != WEFT_EINVAL) { /* a configuration error was already logged with its cause */
            WEFT_LOG(WEFT_LOG_ERROR, "exporter %s: cannot be created: %s", name,
                     weft_strerror(err));
        }
        return err;
    }
    err = weft_batch_processor_new(exporter, NULL, &proc);
    if (err != WEFT_OK) {
        return err;
    }
    return weft_provider_add_processor_take(provider, proc);
}

weft_err
weft_provider_add_env_exporters(struct weft_provider *provider, const char *default_exporters)
{
    const char *list = weft__env("OTEL_TRACES_EXPORTER");
    char buf[256];
    char *save = NULL;
    char *name = NULL;
    bool has_langfuse = false;
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
        weft_err err = WEFT_OK;

        if (strcmp(name, "none") == 0) {
            continue;
        }
        if (strcmp(name, "langfuse") == 0) {
            has_langfuse = true;
        }
        err = add_one(provider, name);
        if (err != WEFT_OK && first == WEFT_OK) {
            first = err;
        }
    }
    if (!has_langfuse && weft_langfuse_configured()) {
        weft_err err = add_one(provider, "langfuse");
        if (err != WEFT_OK && first == WEFT_OK) {
            first = err;
        }
    }
    return first;
}
