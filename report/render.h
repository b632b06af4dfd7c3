/* report/render.h - the trace renderer (render.c) shared by `weft trace show`, `weft run` and
 * the console exporter. The public entry point is weft_trace_render() in <weft/store.h>;
 * this is the form for spans that are not a loaded trace. Nothing here is public API.
 */
#ifndef WEFT_REPORT_RENDER_H
#define WEFT_REPORT_RENDER_H

#include <stdio.h>
#include <weft/export.h>

/* Render @p count spans of one trace (any order) as a header and a tree; @p note, when not
 * NULL, is printed after the header (for example why a trace is incomplete). @p flags are
 * WEFT_RENDER_* from <weft/store.h>. @return WEFT_OK, WEFT_EIO (the stream failed),
 * WEFT_ENOMEM. */
weft_err weft__render_spans(FILE *stream,
                            const struct weft_span_data *const *spans,
                            size_t count,
                            unsigned flags,
                            const char *note);

#endif /* WEFT_REPORT_RENDER_H */
