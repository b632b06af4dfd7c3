/* report/render.h - the trace renderer (render.c) shared by `weft trace show`, `weft run` and
 * the console exporter. The public entry point is weft_trace_render() in <weft/store.h>;
 * this is the form for spans that are not a loaded trace. Nothing here is public API.
 */
#ifndef WEFT_REPORT_RENDER_H
#define WEFT_REPORT_RENDER_H

#include <stdbool.h>
#include <stdint.h>
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

/* A duration as people read it: 950ns, 12.3us (µs unless @p is_ascii), 4.5ms, 250ms, 3.25s,
 * 2m05s, 1h02m. Shared by the trace tree and the CLI's summaries. */
void weft__format_duration(uint64_t ns, bool is_ascii, char *buf, size_t len);

#endif /* WEFT_REPORT_RENDER_H */
