/* tests/support/store_spans.h - spans built by hand for the span store's tests (independent
 * of the SDK), and an exporter called as a batch processor would call it. */
#ifndef WEFT_TESTS_SUPPORT_STORE_SPANS_H
#define WEFT_TESTS_SUPPORT_STORE_SPANS_H

#include <stddef.h>
#include <stdint.h>
#include <weft/export.h>
#include <weft/trace.h>

#define STORE_SPANS_MS 1000000ull
#define STORE_SPANS_T0 1700000000000000000ull /* 2023-11-14T22:13:20Z */

/* A span of trace @p trace_hex (32 hex), id @p span_hex (16 hex), parent @p parent_hex (NULL
 * for a root), starting @p start_ms after STORE_SPANS_T0 and lasting @p dur_ms; service
 * "svc-store", scope weft.test 1.2.3. Strings are borrowed. */
struct weft_span_data store_spans_make(const char *trace_hex,
                                       const char *span_hex,
                                       const char *parent_hex,
                                       const char *name,
                                       uint64_t start_ms,
                                       uint64_t dur_ms);

/* The resource store_spans_make() gives its spans. */
extern const struct weft_resource store_spans_resource;

/* @p len bytes of hex text @p hex into @p out. */
void store_spans_hex(const char *hex, uint8_t *out, size_t len);

/* Call @p ex's export_batch once with the @p n spans (at most 4096). */
weft_err store_spans_export(struct weft_exporter *ex, const struct weft_span_data *spans, size_t n);

#endif
