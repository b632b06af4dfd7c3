/* report/why.h - why a run failed: the weft.why/v1 document (why.c says how each member is
 * found), shared by `weft run why`, the explorer's /api/v1/runs/REF/why and, for the failing
 * span, `weft mcp serve`'s why_failed. */
#ifndef WEFT_REPORT_WHY_H
#define WEFT_REPORT_WHY_H

#include <jansson.h>
#include <stddef.h>
#include <weft/store.h>
#include <weft/weft.h>

#define WEFT_DOC_SCHEMA_WHY "weft.why/v1"

/* Why run @p run failed (weft.why/v1): the deepest ERROR span of @p trace (among equals the
 * latest in tree order, the last failure) and the path from the root down to it, the run's
 * failed steps with their stored errors, the exception events of the failure, the last model
 * answer before it, the stuck loops with their repetitions, and the budget that ran out.
 * @p trace may be NULL (the run was not traced: no path, no span causes). @p exchanges (may be
 * NULL with @p exchange_count 0) are the run's stored LLM exchanges
 * (weft_run_exchanges_load()), read for the last answer when its span kept no content.
 * Ownership: borrows everything; returns a new reference, NULL when out of memory. */
json_t *weft__doc_why(const struct weft_run_details *run,
                      const struct weft_trace *trace,
                      const struct weft_run_exchange *exchanges,
                      size_t exchange_count);

#endif /* WEFT_REPORT_WHY_H */
