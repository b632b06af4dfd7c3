/* runtime/mcp_server/tools.h - what `weft mcp serve`'s tools share (docs/mcp.md): the server's
 * state, a tool's outcome and table entry, and the helpers that build results (tool_util.c).
 *
 * Each tools_*.c file holds the tools of one subject and exports its table entries;
 * server.c lists the tables in a fixed order (the order tools/list answers). To add a tool file:
 * define its entries as `const struct tool weft__mcp_tools_NAME[]` with
 * `const size_t weft__mcp_tools_NAME_count`, declare them below, and add the table to
 * server.c's tool_tables[].
 *
 * Every tool runs under the server's lock (one message at a time), keeps its result within
 * srv->max_result as it builds it (weft__mcp_fits()), and leaves either a result or an error
 * sentence in its struct tool_out.
 */
#ifndef WEFT_RUNTIME_MCP_SERVER_TOOLS_H
#define WEFT_RUNTIME_MCP_SERVER_TOOLS_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/mcp.h>
#include <weft/runtime.h>
#include <weft/store.h>
#include <weft/trace.h>

#define WEFT__MCP_MAX_VALUE_BYTES 4096 /* a string attribute value in a result */
#define WEFT__MCP_MAX_TEXT_BYTES  2000 /* a step's result, input or feedback in a result */

struct weft_mcp_server {
    pthread_mutex_t lock;
    char *state_path;               /* NULL: the default */
    char *db_path;                  /* NULL: the default */
    struct weft_store_pool *stores; /* open span store handles, reused across tool calls */
    char *workflows_dir;            /* resolved (realpath) */
    struct weft_provider *provider;
    struct weft_meter *meter;
    const volatile sig_atomic_t *abort_flag;
    size_t max_message;
    size_t max_result;
};

/* A tool's outcome: its structured result, or an error sentence for isError. */
struct tool_out {
    json_t *result;  /* owned; NULL when failed */
    char error[512]; /* set when result is NULL */
};

typedef void (*tool_fn)(struct weft_mcp_server *srv, const json_t *args, struct tool_out *out);

struct tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;  /* JSON text */
    const char *output_schema; /* JSON text */
    tool_fn run;
    bool is_read_only; /* annotations.readOnlyHint */
};

/* The tool tables, in the order server.c lists them. */
extern const struct tool weft__mcp_tools_runs[]; /* list_runs, show_run (tools_runs.c) */
extern const size_t weft__mcp_tools_runs_count;
extern const struct tool weft__mcp_tools_trace[]; /* get_trace, get_span, search_spans */
extern const size_t weft__mcp_tools_trace_count;
extern const struct tool weft__mcp_tools_why[]; /* why_failed (tools_why.c) */
extern const size_t weft__mcp_tools_why_count;
extern const struct tool weft__mcp_tools_start[]; /* start_run (tools_start.c) */
extern const size_t weft__mcp_tools_start_count;
extern const struct tool weft__mcp_tools_datasets[]; /* list_datasets, show_dataset */
extern const size_t weft__mcp_tools_datasets_count;
extern const struct tool
    weft__mcp_tools_eval[]; /* list_experiments, get_experiment, compare_experiments */
extern const size_t weft__mcp_tools_eval_count;

/* ---------------------------------------------------------------------------------------- */
/* Helpers (tool_util.c)                                                                      */

/* Fail the tool with a sentence (printf format), cut to fit. */
void weft__mcp_fail_tool(struct tool_out *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* RFC 3339 in UTC with milliseconds; null for 0. New reference. */
json_t *weft__mcp_time_json(uint64_t ns);

/* Milliseconds between two times; null when the end is unknown. New reference. */
json_t *weft__mcp_duration_json(uint64_t start_ns, uint64_t end_ns);

/* @p s cut to @p max bytes (on a UTF-8 boundary) with a note of how much was cut; null for
 * NULL. New reference, NULL when out of memory. */
json_t *weft__mcp_text_json(const char *s, size_t max);

/* OTel names of a span kind and a status code (static strings). */
const char *weft__mcp_kind_name(weft_span_kind kind);
const char *weft__mcp_status_name(weft_status_code code);

/* An attribute value (strings cut at WEFT__MCP_MAX_VALUE_BYTES, arrays at 128 items), and a
 * set of attributes as an object. New references. */
json_t *weft__mcp_value_json(const struct weft_value *v);
json_t *weft__mcp_attrs_json(const struct weft_attr *attrs, size_t count);

/* Set @p key of @p o to the RFC 3339 time of its integer member @p ns_key (nanoseconds since
 * the epoch; null when 0 or absent). false when out of memory. */
bool weft__mcp_add_time(json_t *o, const char *ns_key, const char *key);

/* Cut string member @p key of @p o to @p max bytes as weft__mcp_text_json() does (nothing when
 * it is shorter or not a string). false when out of memory. */
bool weft__mcp_cut_member(json_t *o, const char *key, size_t max);

/* Is @p item's JSON size within @p budget? Adds it to *used when it is. */
bool weft__mcp_fits(const json_t *item, size_t *used, size_t budget);

/* Integer argument @p key of @p args in [min, max], @p def when absent; false with @p to's
 * error set when it is not such an integer. */
bool weft__mcp_int_arg(const json_t *args,
                       const char *key,
                       long long min,
                       long long max,
                       long long def,
                       long long *out,
                       struct tool_out *to);

/* String argument @p key (borrowed from @p args); NULL when absent and not required; false
 * with @p to's error set when it is not a non-empty string. */
bool weft__mcp_str_arg(
    const json_t *args, const char *key, bool is_required, const char **out, struct tool_out *to);

/* Open the span store (a pooled handle); fills @p to on failure. Give it back with
 * weft__mcp_close_store() (NULL: nothing). */
struct weft_store *weft__mcp_open_store(struct weft_mcp_server *srv, struct tool_out *to);
void weft__mcp_close_store(struct weft_mcp_server *srv, struct weft_store *store);

/* Resolve a trace reference: "last", a trace id or a prefix, or a run id (its latest trace).
 * @return WEFT_OK with @p out filled, else fills @p to. */
weft_err weft__mcp_resolve_trace(struct weft_mcp_server *srv,
                                 struct weft_store *store,
                                 const char *ref,
                                 char out[WEFT_TRACE_ID_HEX_LEN + 1],
                                 struct tool_out *to);

/* Load a run by reference (a run id, a unique prefix or "last"); fills @p to on failure.
 * Ownership: free with weft_run_details_free(). */
struct weft_run_details *
weft__mcp_load_run(struct weft_mcp_server *srv, const char *ref, struct tool_out *to);

/* A failed (or skipped) step as show_run and why_failed list it: its stored error parsed.
 * New reference. */
json_t *weft__mcp_failure_json(const struct weft_run_step *st, const struct weft_run_step_extra *x);

#endif /* WEFT_RUNTIME_MCP_SERVER_TOOLS_H */
