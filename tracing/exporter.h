/* tracing/exporter.h - the private side of struct weft_exporter: exporters that expose extra
 * functions (stats, test hooks) find their implementation object through it. */
#ifndef WEFT_TRACING_EXPORTER_H
#define WEFT_TRACING_EXPORTER_H

#include <weft/export.h>

struct weft_exporter {
    const struct weft_exporter_ops *ops;
    void *self;
};

/* The implementation object of @p exporter when its ops are @p ops, else NULL. */
void *weft__exporter_self(const struct weft_exporter *exporter,
                          const struct weft_exporter_ops *ops);

#endif /* WEFT_TRACING_EXPORTER_H */
