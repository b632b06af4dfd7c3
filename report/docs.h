/* report/docs.h - the JSON documents of `weft runs`, `weft run show`, `weft trace list` and
 * `weft trace show` --json, served unchanged by `weft serve`'s /api/v1 (schema:
 * docs/cli-json.md), so a status or a count reads the same everywhere. Every builder returns a
 * new jansson reference (NULL only when memory ran out).
 *
 * Conventions, shared by every document: arrays are arrays, numbers are numbers, an absent
 * value is null (never "" or "-"), timestamps are integers in ns since the Unix epoch (the
 * "_ns" keys) with an RFC 3339 UTC string beside them (same key without "_ns").
 */
#ifndef WEFT_REPORT_DOCS_H
#define WEFT_REPORT_DOCS_H

#include <jansson.h>
#include <stdio.h>
#include <weft/store.h>
#include <weft/weft.h>

#define WEFT_DOC_SCHEMA_RUNS      "weft.runs/v1"
#define WEFT_DOC_SCHEMA_RUN       "weft.run/v1"
#define WEFT_DOC_SCHEMA_TRACES    "weft.traces/v1"
#define WEFT_DOC_SCHEMA_TRACE     "weft.trace/v1"
#define WEFT_DOC_SCHEMA_EXPORTERS "weft.exporters/v1"
#define WEFT_DOC_SCHEMA_SKILLS    "weft.skills/v1"
#define WEFT_DOC_SCHEMA_SKILL     "weft.skill/v1"

/* A JSON text stored in a database, parsed; @p fallback (a new reference, consumed) when absent
 * or corrupt; NULL when memory ran out (the document being built fails with it). */
json_t *weft__doc_parsed_or(const char *text, json_t *fallback);

/* One run of `weft runs` (also the "run" member of `weft run show`). */
json_t *weft__doc_run_info(const struct weft_run_info *info);

/* The whole `weft run show --json` document. */
json_t *weft__doc_run_details(const struct weft_run_details *d);

/* The run's failed tool calls by agent and kind ("tool_errors" of `weft run show --json`):
 * [{"agent", "kind", "count"}], summed from the steps' stored error objects. */
json_t *weft__doc_tool_errors(const struct weft_run_details *d);

/* The whole `weft trace list --json` document. */
json_t *weft__doc_traces(const char *db_path, const struct weft_trace_summary *list, size_t count);

/* One span: ids as lowercase hex, attributes as an object of JSON-typed values, events and
 * links as arrays. */
json_t *weft__doc_span(const struct weft_span_data *s, size_t depth);

/* An attribute value as JSON: its JSON type, arrays as arrays (null for a double JSON cannot
 * hold: NaN, infinities). */
json_t *weft__doc_value(const struct weft_value *v);

/* One stored skill (the solution only with @p with_solution: lists leave it out). */
json_t *weft__doc_skill(const struct weft_skill *s, bool with_solution);

/* The whole `weft skills list --json` document. */
json_t *weft__doc_skills(const struct weft_skill *skills, size_t count);

/* The displayed status of a stored step: "skipped" for a step a failed dependency kept from
 * running, else the stored status. */
const char *weft__doc_step_status(const struct weft_run_details *d, size_t i);

/* The "replay" member of `weft replay --json`: the comparison with the original run. */
json_t *weft__doc_replay(const struct weft_replay_report *r);

/* `weft trace show --json` (weft.trace/v1): the trace's spans in tree order with their depth,
 * the run it belongs to (@p run_id, may be NULL), an @p earlier trace of the same run (may be
 * NULL), span and error counts over the whole trace; only spans @p offset .. @p offset +
 * @p limit are listed ("offset" is then set: the explorer pages a large trace). NULL when out
 * of memory or the trace is empty. */
json_t *weft__doc_trace(const struct weft_trace *trace,
                        const char *run_id,
                        const char *earlier,
                        size_t offset,
                        size_t limit);

/* The index of the deepest ERROR span of @p trace (SIZE_MAX: none), *errors the count of
 * ERROR spans; and the parent of span @p index in tree order (SIZE_MAX for a root). The rule
 * of weft.why/v1 (report/why.h, defined in why.c), shared with `weft mcp serve`'s why_failed. */
size_t weft__why_deepest(const struct weft_trace *trace, size_t *errors);
size_t weft__trace_parent(const struct weft_trace *trace, size_t index);

#endif /* WEFT_REPORT_DOCS_H */
