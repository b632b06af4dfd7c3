/* runtime/state/state_rows.h - what the two state backends (state_sqlite.c, state_pg.c) share of
 * talking to their database: the values a statement is bound with, and the rows it gives back
 * read into weft's structs and JSON once for both.
 *
 * A statement's values are an array of struct weft__state_arg, written at the call with the SQL_*
 * macros (SQL_ARGS(SQL_KEY(run_id), SQL_U64(now))); each backend binds them its own way (libpq
 * text parameters, sqlite3_bind_*), so what a value is (a key bound as it is, free text redacted
 * first) is said once at the call. A row is read through struct weft__state_row, a backend's
 * column accessors over its result (a PGresult row, a stepped sqlite3_stmt), so the readers here
 * take column values, never a backend's handle: both backends select their columns in the order
 * these readers expect.
 *
 * Thread-safety: none beyond the state handle's own (one thread per handle).
 */
#ifndef WEFT_RUNTIME_STATE_ROWS_H
#define WEFT_RUNTIME_STATE_ROWS_H

#include "runtime/state/state_backend.h"

#include "base/buf.h"
#include "store/payload.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* Values bound to a statement                                                                 */

enum weft__state_arg_kind {
    WEFT__ARG_KEY,  /* a key (ids, names, paths): bound as it is; NULL is SQL NULL */
    WEFT__ARG_TEXT, /* free text: redacted before it is bound; NULL is SQL NULL */
    WEFT__ARG_RAW,  /* a string this code built (JSON, status names, hashes); NULL is SQL NULL */
    WEFT__ARG_I64,
    WEFT__ARG_F64,
    WEFT__ARG_BOOL
};

struct weft__state_arg {
    enum weft__state_arg_kind kind;
    const char *s;
    int64_t i;
    double d;
};

/* A counter or nanosecond time as a BIGINT: values past INT64_MAX are clamped (the
 * PostgreSQL backend's convention; the SQLite one casts, SQL_I64((int64_t)v)). */
static inline int64_t
weft__state_arg_u64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

#define SQL_KEY(v)                      \
    {                                   \
        .kind = WEFT__ARG_KEY, .s = (v) \
    }
#define SQL_TEXT(v)                      \
    {                                    \
        .kind = WEFT__ARG_TEXT, .s = (v) \
    }
#define SQL_RAW(v)                      \
    {                                   \
        .kind = WEFT__ARG_RAW, .s = (v) \
    }
#define SQL_I64(v)                               \
    {                                            \
        .kind = WEFT__ARG_I64, .i = (int64_t)(v) \
    }
#define SQL_U64(v)                                         \
    {                                                      \
        .kind = WEFT__ARG_I64, .i = weft__state_arg_u64(v) \
    }
#define SQL_F64(v)                      \
    {                                   \
        .kind = WEFT__ARG_F64, .d = (v) \
    }
#define SQL_BOOL(v)                              \
    {                                            \
        .kind = WEFT__ARG_BOOL, .i = (v) ? 1 : 0 \
    }
#define SQL_NULL                         \
    {                                    \
        .kind = WEFT__ARG_RAW, .s = NULL \
    }
/* The array and count a query helper takes: SQL_ARGS(SQL_KEY(id), SQL_I64(n)). */
#define SQL_ARGS(...)                              \
    (const struct weft__state_arg[]){__VA_ARGS__}, \
        sizeof((const struct weft__state_arg[]){__VA_ARGS__}) / sizeof(struct weft__state_arg)

/* ------------------------------------------------------------------------------------------ */
/* Rows read back                                                                              */

struct weft__state_row;

/* A backend's column accessors. text() is NULL for SQL NULL and valid until the next row. */
struct weft__state_row_ops {
    const char *(*text)(const struct weft__state_row *row, int col);
    int64_t (*i64)(const struct weft__state_row *row, int col);
    double (*f64)(const struct weft__state_row *row, int col);
    bool (*flag)(const struct weft__state_row *row, int col); /* a BOOLEAN or 0/1 column */
    bool (*is_null)(const struct weft__state_row *row, int col);
};

struct weft__state_row {
    const struct weft__state_row_ops *ops;
    const void *handle; /* the backend's result: a PGresult, a sqlite3_stmt */
    int index;          /* the row within a PGresult */
    bool *is_enough;    /* the query helper's: set by weft__state_row_enough() */
};

/* What a query helper calls for each row; anything but WEFT_OK ends the walk and is returned. */
typedef weft_err (*state_row_fn)(const struct weft__state_row *row, void *ctx);

/* A row function has every row it wants: the helper steps no further (SQLite stops reading the
 * query's rows; the walk ends with WEFT_OK). */
static inline void
weft__state_row_enough(const struct weft__state_row *row)
{
    *row->is_enough = true;
}

static inline const char *
weft__row_text(const struct weft__state_row *row, int col)
{
    return row->ops->text(row, col);
}

static inline int64_t
weft__row_i64(const struct weft__state_row *row, int col)
{
    return row->ops->i64(row, col);
}

static inline double
weft__row_f64(const struct weft__state_row *row, int col)
{
    return row->ops->f64(row, col);
}

static inline bool
weft__row_flag(const struct weft__state_row *row, int col)
{
    return row->ops->flag(row, col);
}

/* Column @p col's text, "" for SQL NULL (as libpq's PQgetvalue() reads it). */
static inline const char *
weft__row_str(const struct weft__state_row *row, int col)
{
    const char *v = row->ops->text(row, col);

    return v != NULL ? v : "";
}

/* A copy of column @p col's text (NULL for SQL NULL; *is_oom set when the copy failed). */
char *weft__row_dup(const struct weft__state_row *row, int col, bool *is_oom);

/* Column @p col's text, "" for SQL NULL, into @p out of @p len bytes (ids of fixed size). */
void weft__row_copy(const struct weft__state_row *row, int col, char *out, size_t len);

/* A run's row (each backend's RUN_COLUMNS, in this order: id, workflow, workflow_path,
 * session_id, input, status, reason, trace_id, root_span_id, resumed_from_trace, loops,
 * started_ns, ended_ns, iterations, corrections, reward, input_tokens, output_tokens, cost_usd,
 * step count, owner pid, owner host, heartbeat_ns, last sign of life, origin_kind,
 * origin_run_id, origin_step, pinned, trace_sampling) into @p info, which owns the copies
 * (weft__state_info_cleanup()); *is_oom when a copy failed. */
void
weft__state_row_info(const struct weft__state_row *row, struct weft_run_info *info, bool *is_oom);

/* A plan step's row (step_id, agent, task, depends_on, status, attempts, result, feedback,
 * requested_by, executor, spec, parent, reward, error_type, error, started_ns, ended_ns,
 * task_uuid, retries, is_dispatched) into @p out, whose texts are borrowed from the row. */
void weft__state_row_step(const struct weft__state_row *row, struct state_step_row *out);

/* A correction's row (seq, failed_step, error_type, inserted, depends_before, depends_after,
 * created_ns) into @p out, whose texts are borrowed from the row. */
void weft__state_row_correction(const struct weft__state_row *row, struct weft_run_correction *out);

/* A session message's row (role, content, route) appended to the JSON array @p ctx as
 * {"role", "content", "route"}. @return WEFT_OK, WEFT_ENOMEM. A state_row_fn. */
weft_err weft__state_row_message(const struct weft__state_row *row, void *ctx);

/* A scripted cursor's row (queue, used) set in the JSON object *(json_t **)@p ctx, made on the
 * first row. @return WEFT_OK, WEFT_ENOMEM. A state_row_fn. */
weft_err weft__state_row_cursor(const struct weft__state_row *row, void *ctx);

/* An exchange count's row (who, purpose, count) set as "who/purpose": count in the JSON object
 * @p ctx. @return WEFT_OK, WEFT_ENOMEM. A state_row_fn. */
weft_err weft__state_row_exchange_count(const struct weft__state_row *row, void *ctx);

/* The columns of a skill's row, and the row from column 0 into @p s (which owns the copies;
 * *is_oom when a copy failed). */
#define STATE_SKILL_COLUMNS                                                               \
    "id, agent, task, solution, workflow, run_id, trace_id, span_id, reward, created_ns," \
    " last_used_ns, uses"
void weft__state_row_skill(const struct weft__state_row *row, struct weft__skill *s, bool *is_oom);

/* Skills being read by weft__state_row_skills(): rows of STATE_SKILL_COLUMNS, then (when
 * has_score) a score in column 12, best first. */
struct weft__state_skills_read {
    size_t cap;     /* rows kept at most */
    bool has_score; /* column 12 is a score; a row below min_score ends the walk */
    bool is_rank;   /* the score is a rank >= 0, mapped into [0, 1) as r / (r + 1) */
    double min_score;
    struct weft__skill *rows; /* grown as needed */
    size_t n;
    size_t rows_cap;
    bool is_done;
};

/* One row into the struct weft__state_skills_read @p ctx. @return WEFT_OK, WEFT_ENOMEM. A
 * state_row_fn. */
weft_err weft__state_row_skills(const struct weft__state_row *row, void *ctx);

/* The rows read handed over as *out and *count when @p err is WEFT_OK, else freed. @return
 * @p err. Ownership: the caller owns *out (weft__skills_free()). */
weft_err weft__state_skills_take(struct weft__state_skills_read *r,
                                 weft_err err,
                                 struct weft__skill **out,
                                 size_t *count);

/* A team's row (id, name, path, goal, document, run_id, created_ns) into @p t (which owns the
 * copies; *is_oom when a copy failed). */
void
weft__state_row_team(const struct weft__state_row *row, struct weft__state_team *t, bool *is_oom);

/* The running runs whose owner is gone at @p now, collected by weft__state_row_dead(). */
struct weft__state_dead_scan {
    uint64_t now;
    struct weft__state_dead **dead; /* grown as needed; the caller's even on error */
    size_t *n;
    size_t cap;
};

/* A running run's row (run id, workflow, owner_host, trace_id, root_span_id,
 * root_parent_span_id, root_span_name, owner_pid, heartbeat_ns, root_started_ns, started_ns,
 * last sign of life) appended to the struct weft__state_dead_scan @p ctx when its owner is gone,
 * owning the copies; its end is the latest sign of life. @return WEFT_OK, WEFT_ENOMEM. A
 * state_row_fn. */
weft_err weft__state_row_dead(const struct weft__state_row *row, void *ctx);

/* An in-progress step of a dead run (span_id, span_parent_id, agent, started_ns) added to the
 * struct weft__state_dead @p ctx. A state_row_fn. */
weft_err weft__state_row_open_step(const struct weft__state_row *row, void *ctx);

/* A run's lease as read in its owner's transaction (owner_pid, owner_host, owner_token,
 * owner_since_ns, heartbeat_ns), for weft__state_row_lease(). */
struct weft__state_lease_read {
    const char *own_token; /* this handle's token: its own lease is no obstacle */
    uint64_t now;
    struct state_owner *holder; /* filled when another live process holds the run */
    bool has_row;
};

/* The first row of a lease read into the struct weft__state_lease_read @p ctx. @return
 * WEFT_ESTATE when another process that is alive holds the run (ctx->holder says who), else
 * WEFT_OK. A state_row_fn. */
weft_err weft__state_row_lease(const struct weft__state_row *row, void *ctx);

/* The text of column @p col, resolved through its content-addressed reference in column
 * @p ref_col when that is set (read from @p src into @p buf). NULL when the text cannot be had
 * (logged, naming @p where when it is not NULL): a missing or damaged record, or out of memory
 * (*is_oom). */
const char *weft__state_row_payload(const struct weft__state_row *row,
                                    int col,
                                    int ref_col,
                                    const struct weft__payload_source *src,
                                    const char *where,
                                    struct weft__buf *buf,
                                    bool *is_oom);

/* ------------------------------------------------------------------------------------------ */
/* Row functions of the reads both backends make alike                                         */

/* The first row of a walk only, handed to fn (the query helpers' *_one()). */
struct weft__state_first {
    state_row_fn fn;
    void *ctx;
    bool has_row;
};
weft_err weft__state_row_first(const struct weft__state_row *row, void *ctx);

/* A first column as an integer into the int64_t @p ctx (0 for SQL NULL). */
weft_err weft__state_row_int(const struct weft__state_row *row, void *ctx);
/* The first two columns as integers into the int64_t[2] @p ctx. */
weft_err weft__state_row_int_pair(const struct weft__state_row *row, void *ctx);
/* A first column as a boolean into the bool @p ctx. */
weft_err weft__state_row_bool(const struct weft__state_row *row, void *ctx);
/* A copy of a first column's text ("" for SQL NULL) into the char * @p ctx (free it with
 * weft__free()). @return WEFT_OK, WEFT_ENOMEM. */
weft_err weft__state_row_strdup(const struct weft__state_row *row, void *ctx);

/* A first column's text into @p out ("" and is_null for SQL NULL). */
struct weft__state_text_out {
    char *out;
    size_t len;
    bool is_null;
};
weft_err weft__state_row_text_into(const struct weft__state_row *row, void *ctx);

/* The caller's function and data of an *_each() walk, called by the row functions below. */
struct weft__state_each {
    state_step_fn step_fn;
    state_correction_fn correction_fn;
    state_gc_fn gc_fn;
    void *user_data;
};
/* A step's row (weft__state_row_step()) to step_fn. */
weft_err weft__state_row_step_each(const struct weft__state_row *row, void *ctx);
/* A correction's row (weft__state_row_correction()) to correction_fn. */
weft_err weft__state_row_correction_each(const struct weft__state_row *row, void *ctx);
/* A run past retention's row (run id, ended_ns) to gc_fn. */
weft_err weft__state_row_gc_each(const struct weft__state_row *row, void *ctx);

/* The first row of a run's RUN_COLUMNS into info (weft__state_row_info()). */
struct weft__state_info_read {
    struct weft_run_info *info;
    bool has_row;
    bool is_oom;
};
weft_err weft__state_row_info_first(const struct weft__state_row *row, void *ctx);

/* The run ids a reference matches (an exact id comes first and ends the count), for
 * weft__state_resolve_end(). */
struct weft__state_resolve {
    const char *ref;
    char *out;
    size_t out_len;
    int matches;
    bool is_exact;
};
weft_err weft__state_row_resolve(const struct weft__state_row *row, void *ctx);
/* What the rows read said: WEFT_OK (one run: out holds its id), WEFT_EINVAL (several),
 * WEFT_ENOTFOUND (none), @p err saying which. */
weft_err weft__state_resolve_end(const struct weft__state_resolve *r, char *err, size_t err_len);

/* Teams being read, grown as they come. */
struct weft__state_teams_read {
    size_t cap; /* rows kept at most */
    struct weft__state_team *rows;
    size_t n;
    size_t rows_cap;
};
/* A team's row (weft__state_row_team()) into the struct weft__state_teams_read @p ctx. */
weft_err weft__state_row_teams(const struct weft__state_row *row, void *ctx);
/* The teams read handed over as *out and *count when @p err is WEFT_OK, else freed. */
weft_err weft__state_teams_take(struct weft__state_teams_read *r,
                                weft_err err,
                                struct weft__state_team **out,
                                size_t *count);

/* A read of rows whose long texts may be payloads (weft__state_row_payload()): a replay script,
 * tool results, a workflow snapshot. */
struct weft__state_payload_read {
    struct weft__payload_source src;
    const char *where; /* named in logs; NULL: not */
    struct weft__buf buf[2];
    json_t *responses; /* exchanges: the script's responses */
    size_t n;          /* exchanges: the entries added */
    state_tool_result_fn tool_fn;
    void *user_data;
    char **out;   /* a snapshot: its copy */
    weft_err err; /* a snapshot: what reading it said */
};
void weft__state_payload_read_init(struct weft__state_payload_read *r,
                                   const struct weft__payload_source *src,
                                   const char *where);
void weft__state_payload_read_cleanup(struct weft__state_payload_read *r);
/* An exchange's row (who, purpose, entry, entry_ref) added to r->responses (a damaged row is
 * skipped: the replay then reports the missing answer). @return WEFT_OK, WEFT_ENOMEM. */
weft_err weft__state_row_script(const struct weft__state_row *row, void *ctx);
/* A tool result's row (step_id, attempt, seq, tool, kind, request, outcome, request_ref,
 * outcome_ref) to r->tool_fn; a row whose payload is missing is skipped. */
weft_err weft__state_row_tool_result(const struct weft__state_row *row, void *ctx);
/* A snapshot's row (workflow_snapshot, workflow_snapshot_ref) copied into *r->out; r->err says
 * WEFT_OK, WEFT_ENOTFOUND (neither set), WEFT_EIO (its payload is missing), WEFT_ENOMEM. */
weft_err weft__state_row_snapshot(const struct weft__state_row *row, void *ctx);

#endif /* WEFT_RUNTIME_STATE_ROWS_H */
