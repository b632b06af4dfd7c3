/* cli/json_out.h - the `--json` documents of `weft runs`, `weft run show`, `weft trace list`
 * and `weft trace show` (schema: docs/cli-json.md). Every builder returns a new jansson
 * reference (NULL only when memory ran out); the caller prints it with cli_json_print().
 *
 * Conventions, shared by every document: arrays are arrays, numbers are numbers, an absent
 * value is null (never "" or "-"), timestamps are integers in ns since the Unix epoch (the
 * "_ns" keys) with an RFC 3339 UTC string beside them (same key without "_ns").
 */
#ifndef WEFT_CLI_JSON_OUT_H
#define WEFT_CLI_JSON_OUT_H

#include <jansson.h>
#include <stdio.h>
#include <weft/store.h>
#include <weft/weft.h>

#define CLI_SCHEMA_RUNS      "weft.runs/v1"
#define CLI_SCHEMA_RUN       "weft.run/v1"
#define CLI_SCHEMA_TRACES    "weft.traces/v1"
#define CLI_SCHEMA_TRACE     "weft.trace/v1"
#define CLI_SCHEMA_EXPORTERS "weft.exporters/v1"
#define CLI_SCHEMA_SKILLS    "weft.skills/v1"
#define CLI_SCHEMA_SKILL     "weft.skill/v1"

/* One run of `weft runs` (also the "run" member of `weft run show`). */
json_t *cli_json_run_info(const struct weft_run_info *info);

/* The whole `weft run show --json` document. */
json_t *cli_json_run_details(const struct weft_run_details *d);

/* The whole `weft trace list --json` document. */
json_t *cli_json_traces(const char *db_path, const struct weft_trace_summary *list, size_t count);

/* One span: ids as lowercase hex, attributes as an object of JSON-typed values, events and
 * links as arrays. */
json_t *cli_json_span(const struct weft_span_data *s, size_t depth);

/* One stored skill (the solution only with @p with_solution: lists leave it out). */
json_t *cli_json_skill(const struct weft_skill *s, bool with_solution);

/* The whole `weft skills list --json` document. */
json_t *cli_json_skills(const struct weft_skill *skills, size_t count);

/* The "replay" member of `weft replay --json`: the comparison with the original run. */
json_t *cli_json_replay(const struct weft_replay_report *r);

/* Print @p doc (consumed) to stdout, indented, keys in insertion order, followed by a
 * newline. @return CLI_EXIT_OK, or CLI_EXIT_FAIL (with a message on stderr) when @p doc is
 * NULL or writing failed. */
int cli_json_print(json_t *doc);

/* The displayed status of a stored step: "skipped" for a step a failed dependency kept from
 * running, else the stored status. */
const char *cli_step_status(const struct weft_run_details *d, size_t i);

#endif /* WEFT_CLI_JSON_OUT_H */
