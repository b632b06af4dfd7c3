/* exporters/otlp_http.c - the OTLP/HTTP trace exporter: encodes span batches (protobuf or
 * OTLP JSON) and sends them through the shared transport (otlp_transport.c), which owns the
 * environment rules, the connection and the retries.
 *
 * Threads: export_batch runs on one export thread at a time. shutdown may come from another
 * thread while an export waits to retry; the transport wakes the wait and the export gives up.
 */
#include "otlp_encode.h"
#include "otlp_transport.h"

#include "base/buf.h"
#include "base/mem.h"
#include "tracing/exporter.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REQUEST_BYTES (64u << 20) /* REFERENCE.md: keep a request under 64 MiB */

struct otlp {
    struct weft__otlp_transport *transport;
    struct weft__buf body; /* encoded request */
};

static weft_err
export_part(struct otlp *x,
            const struct weft_span_data *const *spans,
            size_t count,
            uint64_t deadline,
            struct weft_export_result *result)
{
    weft_err err = WEFT_OK;

    weft__buf_reset(&x->body);
    err = weft__otlp_transport_is_json(x->transport)
              ? weft__otlp_encode_json(spans, count, &x->body)
              : weft__otlp_encode_proto(spans, count, &x->body);
    if (err == WEFT_ELIMIT && count > 1) {
        /* Over 64 MiB: send each half on its own. */
        size_t half = count / 2;

        err = export_part(x, spans, half, deadline, result);
        if (err == WEFT_OK) {
            err = export_part(x, spans + half, count - half, deadline, result);
        }
        return err;
    }
    if (err != WEFT_OK) {
        return err;
    }
    {
        uint64_t rejected = 0;
        uint64_t spooled = 0;

        err = weft__otlp_transport_export(x->transport, x->body.data, x->body.len, (uint32_t)count,
                                          deadline, &rejected, &spooled);
        result->rejected += rejected;
        result->spooled += spooled;
    }
    return err;
}

static weft_err
otlp_export(void *self,
            const struct weft_span_data *const *spans,
            size_t count,
            uint64_t deadline_ns,
            struct weft_export_result *result)
{
    struct otlp *x = self;

    if (count == 0) {
        return WEFT_OK; /* no envelopes without spans */
    }
    return export_part(x, spans, count, deadline_ns, result);
}

/* Flush: send what the spool holds while the endpoint takes it (spooled spans are safe on
 * disk either way, so a flush that leaves some there still succeeds). */
static weft_err
otlp_force_flush(void *self, uint64_t deadline_ns)
{
    struct otlp *x = self;

    weft__otlp_transport_flush_spool(x->transport, deadline_ns);
    return WEFT_OK;
}

static bool
otlp_idle(void *self, uint64_t deadline_ns)
{
    struct otlp *x = self;

    return weft__otlp_transport_idle(x->transport, deadline_ns);
}

static void
otlp_spool_stats(void *self, struct weft_spool_stats *out)
{
    struct otlp *x = self;

    weft__otlp_transport_spool_stats(x->transport, out);
}

static weft_err
otlp_shutdown(void *self, uint64_t deadline_ns)
{
    struct otlp *x = self;

    (void)deadline_ns;
    weft__otlp_transport_shutdown(x->transport);
    return WEFT_OK;
}

static void
otlp_destroy(void *self)
{
    struct otlp *x = self;

    if (x == NULL) {
        return;
    }
    weft__otlp_transport_free(x->transport);
    weft__buf_cleanup(&x->body);
    weft__free(x);
}

static size_t
otlp_last_error(void *self, char *buf, size_t len)
{
    struct otlp *x = self;

    return weft__otlp_transport_last_error(x->transport, buf, len);
}

static const struct weft_exporter_ops otlp_ops = {
    .name = "otlp",
    .export_batch = otlp_export,
    .force_flush = otlp_force_flush,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
    .last_error = otlp_last_error,
    .idle = otlp_idle,
    .spool_stats = otlp_spool_stats,
};

weft_err
weft_otlp_exporter_new(const struct weft_otlp_options *opts, struct weft_exporter **out)
{
    struct weft__otlp_transport_config cfg = {
        .signal = "TRACES",
        .path = "v1/traces",
        .log_name = "OTLP",
        .parse_partial_success = true,
        .spool_kind = "otlp",
    };
    struct otlp *x = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    x = weft__calloc(1, sizeof(*x));
    if (x == NULL) {
        return WEFT_ENOMEM;
    }
    weft__buf_init(&x->body, MAX_REQUEST_BYTES);
    cfg.signal_endpoint = opts != NULL ? opts->traces_endpoint : NULL;
    err = weft__otlp_transport_new(&cfg, opts, &x->transport);
    if (err != WEFT_OK) {
        otlp_destroy(x);
        return err;
    }
    return weft_exporter_new(&otlp_ops, x, out);
}

void
weft_otlp_exporter_stats(const struct weft_exporter *exporter, struct weft_otlp_stats *out)
{
    const struct otlp *x = weft__exporter_self(exporter, &otlp_ops);

    weft__otlp_transport_stats(x == NULL ? NULL : x->transport, out);
}
