/* tracing/exporter.c - the exporter handle: an ops table plus the implementation object.
 * Processors call the ops; weft_exporter_free() is for handles never given to a processor. */
#include "exporter.h"

#include "base/mem.h"
#include "base/time.h"

#include <string.h>

weft_err
weft_exporter_new(const struct weft_exporter_ops *ops, void *self, struct weft_exporter **out)
{
    struct weft_exporter *exporter = NULL;

    if (out != NULL) {
        *out = NULL;
    }
    if (ops == NULL || ops->export_batch == NULL || out == NULL) {
        if (ops != NULL && ops->destroy != NULL && self != NULL) {
            ops->destroy(self);
        }
        return WEFT_EINVAL;
    }
    exporter = weft__calloc(1, sizeof(*exporter));
    if (exporter == NULL) {
        if (ops->destroy != NULL) {
            ops->destroy(self);
        }
        return WEFT_ENOMEM;
    }
    exporter->ops = ops;
    exporter->self = self;
    *out = exporter;
    return WEFT_OK;
}

void
weft_exporter_free(struct weft_exporter *exporter)
{
    if (exporter == NULL) {
        return;
    }
    if (exporter->ops->shutdown != NULL) {
        exporter->ops->shutdown(exporter->self, weft__monotonic_ns() + 5000000000ull);
    }
    if (exporter->ops->destroy != NULL) {
        exporter->ops->destroy(exporter->self);
    }
    weft__free(exporter);
}

const char *
weft_exporter_name(const struct weft_exporter *exporter)
{
    if (exporter == NULL || exporter->ops->name == NULL) {
        return "unknown";
    }
    return exporter->ops->name;
}

void *
weft__exporter_self(const struct weft_exporter *exporter, const struct weft_exporter_ops *ops)
{
    if (exporter == NULL || exporter->ops != ops) {
        return NULL;
    }
    return exporter->self;
}

void
weft_exporter_spool_stats(const struct weft_exporter *exporter, struct weft_spool_stats *out)
{
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (exporter != NULL && exporter->ops->spool_stats != NULL) {
        exporter->ops->spool_stats(exporter->self, out);
    }
}
