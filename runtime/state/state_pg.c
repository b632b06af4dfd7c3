/* runtime/state/state_pg.c - the PostgreSQL backend of the run state store (state.h), over libpq,
 * for a postgresql:// or postgres:// URL (WEFT_STATE_URL, --state).
 *
 * Schema. The design's two tables carry a run and its plan: a run is one `workflows` row
 * (workflow_id a fresh UUID per run; weft's 12-hex run id is the unique column run_id) and a
 * plan step is one `tasks` row (task_id is the step's plan_step.task_uuid, kept from its first
 * save on; task_order its index in the plan). The design's columns hold the design's vocabulary
 * (final_status and tasks.status in its status names, feedback_notes in its JSON shape,
 * dependencies and parent_id as task UUIDs); weft's own columns sit beside them and keep weft's
 * own names and values (workflows.status, tasks.step_status, depends_on as step ids...), so
 * what is read back is exactly what was written. Sessions' messages, scripted cursors, LLM
 * exchanges, corrections and per-run metric snapshots (run_metrics, migration 2, written and
 * folded for metrics_store.c by the weft__state_metrics_* functions) are tables of their own.
 * The long texts of LLM exchanges and tool results are content-addressed payloads (payloads,
 * migration 10, state_payloads.h) that their rows refer to. docs/distributed.md has the full
 * map.
 *
 * Migrations are an ordered array of SQL texts; version N is migrations[N - 1]. Each is applied
 * in a transaction of its own under pg_advisory_xact_lock(MIGRATION_LOCK) and recorded in
 * weft_schema_migrations, so two processes opening a new database at once apply it once and a
 * failure leaves the previous version whole. A database with a version this weft does not
 * know is refused (an older weft must not write a newer schema).
 *
 * Every statement is a constant text with $n parameters (text format); values never become
 * SQL. A statement with parameters is prepared once per session (PQprepare, then
 * PQexecPrepared), keyed by its text's address as the SQLite backend's cache is: planning the
 * step upsert cost about 1 ms, ten times its execution. Free text (inputs, tasks, results,
 * messages, exchanges) is redacted as the SQLite backend does, and made valid UTF-8 (PostgreSQL
 * refuses anything else).
 *
 * Connection loss (docs/durability.md, "PostgreSQL outages"): every statement goes through
 * run_sql(), the one place that handles it. A statement that fails with the connection gone
 * (PQstatus CONNECTION_BAD) waits for the server, making the connection again with exponential
 * backoff (100 ms doubling to 5 s) for at most WEFT_STATE_RECONNECT_MS (default 60 s, counted
 * from the failure), then runs again. Inside a transaction the server lost the statements
 * already sent, so each statement of an open transaction is kept in a journal (a copy of its
 * parameters) and, after the reconnect, BEGIN and the journal are sent again before the failed
 * statement; a COMMIT whose answer was lost is retried the same way. That is only correct when
 * running a statement twice changes nothing, since a COMMIT (or a statement outside a
 * transaction) may have been applied before its answer was lost: every write here is an upsert,
 * an update to given values, a delete, or (appends, the run's totals) guarded: run_end adds its
 * totals only to a row not already ended at that instant, and messages, LLM exchanges,
 * corrections and teams are sent again as a variant that skips a row already there (their
 * `resend` text). A transaction that read rows (a lease, a skill save, a migration) decided on
 * what it read and is not replayed; nor is one whose journal outgrew JOURNAL_MAX_BYTES: they
 * fail and roll back as before. Once a wait ran out the handle is lost for good (pg_check()
 * says so, and the run must not report success: some write is missing); later statements then
 * try once more without waiting.
 *
 * Memory: results are read whole (a run's steps, one page of runs at a time); everything else
 * is one row.
 */
#include "runtime/state/state_pg.h"
#include "runtime/state/state_payloads.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/uuid.h"
#include "tracing/ids.h"
#include "tracing/redact.h"

#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNS_PAGE         256  /* runs read per query by runs_each */
#define NOTES_TEXT_CAP    8192 /* bytes of each text copied into feedback_notes */
#define PAYLOAD_GET_BATCH 512  /* hashes asked for per query of a payload read */

/* ------------------------------------------------------------------------------------------ */
/* Runs                                                                                        */

/* weft's run status in the design's final_status vocabulary. Resumable ends (interrupted,
 * aborted) are paused; every other end but completed is a failure. */
static const char *
final_status(const char *status)
{
    if (status == NULL || strcmp(status, "running") == 0) {
        return "in_progress";
    }
    if (strcmp(status, "completed") == 0) {
        return "success";
    }
    if (strcmp(status, "interrupted") == 0 || strcmp(status, "aborted") == 0) {
        return "paused";
    }
    return "failed";
}

static weft_err
pg_run_begin(struct rt_state *base,
             const char *run_id,
             const char *workflow,
             const char *workflow_path,
             const char *session_id,
             const char *input,
             uint64_t started_ns)
{
    struct pg_state *st = weft__pg(base);
    char workflow_id[WEFT_UUID_LEN + 1];
    weft_err err = WEFT_OK;

    weft__uuid_v4(workflow_id);
    /* A resumed run keeps its row, its workflow_id and its first input. */
    err = weft__pg_exec(
        st, "run insert",
        "INSERT INTO workflows (workflow_id, run_id, workflow, workflow_path, session_id,"
        " user_prompt, status, final_status, started_ns, creation_timestamp)"
        " VALUES ($1, $2, $3, $4, $5, $6, 'running', 'in_progress', $7,"
        " to_timestamp($7::bigint / 1e9))"
        " ON CONFLICT (run_id) DO UPDATE SET status = 'running',"
        " final_status = 'in_progress', ended_ns = NULL",
        SQL_ARGS(SQL_RAW(workflow_id), SQL_KEY(run_id), SQL_TEXT(workflow), SQL_TEXT(workflow_path),
                 SQL_KEY(session_id), SQL_TEXT(input), SQL_U64(started_ns)));
    return err;
}

static weft_err
pg_run_trace(struct rt_state *base,
             const char *run_id,
             const char *trace_id,
             const char *root_span_id)
{
    struct pg_state *st = weft__pg(base);

    return weft__pg_exec(
        st, "run trace",
        "UPDATE workflows SET resumed_from_trace = CASE WHEN trace_id IS NOT NULL AND"
        " trace_id <> $1 THEN trace_id ELSE resumed_from_trace END, trace_id = $1,"
        " root_span_id = $2 WHERE run_id = $3",
        SQL_ARGS(SQL_KEY(trace_id), SQL_KEY(root_span_id), SQL_KEY(run_id)));
}

static weft_err
pg_run_end(struct rt_state *base, const char *run_id, const struct weft__state_run_end *end)
{
    struct pg_state *st = weft__pg(base);
    weft_err err = WEFT_OK;

    /* The totals are added (a resumed run adds its attempt's), only to a row not already
     * ended at this end's own instant: sent again after a lost answer, the statement sets the
     * same values and adds nothing. */
    err = weft__pg_exec(
        st, "run update",
        "UPDATE workflows SET status = $1, final_status = $2, reason = $3, output = $4,"
        " iterations = iterations + CASE WHEN ended_ns IS DISTINCT FROM $9::bigint"
        " THEN $5::bigint ELSE 0 END,"
        " input_tokens = input_tokens + CASE WHEN ended_ns IS DISTINCT FROM $9::bigint"
        " THEN $6::bigint ELSE 0 END,"
        " output_tokens = output_tokens + CASE WHEN ended_ns IS DISTINCT FROM"
        " $9::bigint THEN $7::bigint ELSE 0 END,"
        " cost_usd = cost_usd + CASE WHEN ended_ns IS DISTINCT FROM $9::bigint"
        " THEN $8::float8 ELSE 0 END, ended_ns = $9,"
        " total_reward = $10, corrections = $11, loops = $12, trace_sampling = $14"
        " WHERE run_id = $13",
        SQL_ARGS(SQL_KEY(end->status), SQL_RAW(final_status(end->status)), SQL_TEXT(end->reason),
                 SQL_TEXT(end->output), SQL_U64(end->iterations), SQL_I64(end->input_tokens),
                 SQL_I64(end->output_tokens), SQL_F64(end->cost_usd), SQL_U64(end->ended_ns),
                 SQL_F64(end->reward), SQL_U64(end->corrections), SQL_TEXT(end->loops),
                 SQL_KEY(run_id), SQL_TEXT(end->trace_sampling)));
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Steps (tasks)                                                                               */

/* The step's status in the design's tasks.status vocabulary. */
static const char *
task_status(const struct plan_step *s)
{
    switch (s->status) {
    case STEP_PENDING:
        return "pending";
    case STEP_IN_PROGRESS:
        return s->is_dispatched ? "dispatched" : "in_progress";
    case STEP_COMPLETED:
        return "success";
    case STEP_FAILED:
        return "failed";
    case STEP_PAUSED:
        return "paused";
    case STEP_SKIPPED:
        return "skipped";
    }
    return "pending";
}

/* Set @p key of @p o to @p s cut to NOTES_TEXT_CAP bytes and made valid UTF-8 ("" for NULL).
 * @return false when out of memory. */
static bool
notes_set(json_t *o, const char *key, const char *s)
{
    struct weft__buf b;
    size_t len = s != NULL ? weft__utf8_cut(s, strlen(s), NOTES_TEXT_CAP) : 0;
    bool is_ok = false;

    weft__buf_init(&b, 0);
    if (weft__buf_append_str(&b, "") == WEFT_OK &&
        (len == 0 || weft__utf8_sanitize(s, len, WEFT__UTF8_REPLACEMENT, &b) == WEFT_OK)) {
        is_ok = json_object_set_new(o, key, json_string(b.data)) == 0;
    }
    weft__buf_cleanup(&b);
    return is_ok;
}

/* {"status": "success", "notes", "stdout", "stderr"}: a command step's result is its tool's
 * JSON ({"stdout", "stderr", ...}); an agent's is its answer, which goes to stdout. */
static json_t *
success_notes(const struct plan_step *s)
{
    json_t *o = json_pack("{s:s}", "status", "success");
    json_t *tool = s->executor != EXEC_AGENT && s->result != NULL
                       ? json_loads(s->result, JSON_DECODE_ANY, NULL)
                       : NULL;
    const char *out =
        json_is_object(tool) ? json_string_value(json_object_get(tool, "stdout")) : s->result;
    const char *err =
        json_is_object(tool) ? json_string_value(json_object_get(tool, "stderr")) : NULL;

    if (o != NULL && (!notes_set(o, "notes", s->feedback) || !notes_set(o, "stdout", out) ||
                      !notes_set(o, "stderr", err))) {
        json_decref(o);
        o = NULL;
    }
    json_decref(tool);
    return o;
}

/* {"status": "failed", "error_type", "error_message", "traceback" or "details"}: the failure's
 * type, the reason the step gave (its feedback, else the error's message) and the error's
 * details as the step recorded them (command steps: exit code, stderr and stdout tails). */
static json_t *
failure_notes(const struct plan_step *s)
{
    json_t *o = json_pack("{s:s}", "status", "failed");
    const char *type = s->error_type != NULL
                           ? s->error_type
                           : json_string_value(json_object_get(s->error, "error_type"));
    const char *message =
        s->feedback != NULL ? s->feedback : json_string_value(json_object_get(s->error, "message"));
    const char *traceback = json_string_value(json_object_get(s->error, "traceback"));
    bool is_ok = o != NULL && notes_set(o, "error_type", type != NULL ? type : "failed") &&
                 notes_set(o, "error_message", message);

    if (is_ok && traceback != NULL) {
        is_ok = notes_set(o, "traceback", traceback);
    } else if (is_ok) {
        is_ok = json_object_set_new(o, "details",
                                    json_is_object(s->error) ? json_deep_copy(s->error)
                                                             : json_object()) == 0;
    }
    if (!is_ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The step's feedback_notes as JSON text (redacted), or NULL when it has none: a completed
 * step has the success shape; a failed or paused one, and a step retried after a failure, the
 * failure shape of its last failure. *is_oom is set when it cannot be built. */
static char *
feedback_notes(const struct plan_step *s, bool *is_oom)
{
    json_t *o = NULL;
    char *raw = NULL;
    char *text = NULL;

    if (s->status == STEP_COMPLETED) {
        o = success_notes(s);
    } else if (s->status == STEP_FAILED || s->status == STEP_PAUSED ||
               (s->status != STEP_SKIPPED && (s->error_type != NULL || s->error != NULL))) {
        o = failure_notes(s);
    } else {
        return NULL;
    }
    raw = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    /* JSONB refuses the NUL character; the details (any JSON a step recorded) may hold one. */
    if (raw != NULL && strstr(raw, "\\u0000") != NULL) {
        free(raw);
        o = s->status == STEP_COMPLETED ? NULL : failure_notes(s);
        if (o != NULL) {
            json_object_set_new(o, "details", json_object());
        }
        raw = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
    }
    text = raw != NULL ? weft__redact_text(raw) : NULL;
    free(raw);
    if (text == NULL) {
        *is_oom = true;
    }
    return text;
}

static char *
dump_or_null(const json_t *v)
{
    return v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* Bind the span id of @p ctx as 16 hex digits, or NULL when it is not valid. */
static void
p_span_id(struct params *p,
          const struct weft_span_context *ctx,
          char hex[2 * WEFT_SPAN_ID_SIZE + 1])
{
    if (!weft_span_context_is_valid(ctx)) {
        weft__pg_p_raw(p, NULL);
        return;
    }
    weft_hex_encode(ctx->span_id, WEFT_SPAN_ID_SIZE, hex);
    hex[2 * WEFT_SPAN_ID_SIZE] = '\0';
    weft__pg_p_raw(p, hex);
}

/* The task row of step @p index: inserted with the step's task UUID, or updated in place
 * (the first task_id stays). Dependencies and parent are resolved to task UUIDs from the rows
 * already stored, so a step saved before its dependencies gets them at its next save.
 * The lookups are shaped so that their cost never depends on the run's size: a step without a
 * parent or dependencies runs neither subquery (CASE), and each dependency is one probe of
 * tasks(workflow_id, step_id) (LATERAL ... OFFSET 0 keeps the planner from turning it into a
 * join over every task of the run). As a plain join, planned while a run's plan was being
 * inserted (statistics of an empty table), each save read every row of the run through
 * tasks(workflow_id): storing a 20,000-step plan took 70 s, quadratic in its size. */
static const char step_upsert_sql[] =
    "INSERT INTO tasks (task_id, workflow_id, parent_id, task_order, description, status,"
    " dependencies, executor_type, reward, feedback_notes, retries, step_id, step_status, agent,"
    " attempts, result, feedback, requested_by, spec, parent_step, error_type, error, depends_on,"
    " started_ns, ended_ns, span_id, span_parent_id, is_dispatched)"
    " SELECT $3::uuid, w.workflow_id,"
    " CASE WHEN $16::text IS NULL THEN NULL ELSE"
    " (SELECT p.task_id FROM tasks p WHERE p.workflow_id = w.workflow_id AND p.step_id = $16"
    " ORDER BY p.task_order LIMIT 1) END,"
    " $2::int, $6, $8,"
    " CASE WHEN $7::text = '[]' THEN '{}'::uuid[] ELSE"
    " ARRAY(SELECT d.task_id FROM jsonb_array_elements_text($7::text::jsonb) WITH ORDINALITY"
    " AS j (id, n) CROSS JOIN LATERAL (SELECT t.task_id, t.task_order FROM tasks t"
    " WHERE t.workflow_id = w.workflow_id AND t.step_id = j.id OFFSET 0) d"
    " ORDER BY j.n, d.task_order) END,"
    " $14, $17::float8, $26::jsonb, $24::int, $4, $9, $5, $10::int, $11, $12, $13, $15, $16,"
    " $18, $19, $7::text, $20::bigint, $21::bigint, $22, $23, $25::boolean"
    " FROM workflows w WHERE w.run_id = $1"
    " ON CONFLICT (workflow_id, task_order) DO UPDATE SET"
    " parent_id = COALESCE(tasks.parent_id, excluded.parent_id), status = excluded.status,"
    " dependencies = excluded.dependencies, reward = excluded.reward,"
    " feedback_notes = excluded.feedback_notes, retries = excluded.retries,"
    " last_update_timestamp = now(), step_status = excluded.step_status,"
    " attempts = excluded.attempts, result = excluded.result, feedback = excluded.feedback,"
    " depends_on = excluded.depends_on, error_type = excluded.error_type,"
    " error = excluded.error, started_ns = excluded.started_ns, ended_ns = excluded.ended_ns,"
    " span_id = excluded.span_id, span_parent_id = excluded.span_parent_id,"
    " is_dispatched = excluded.is_dispatched";

static weft_err
step_upsert(struct pg_state *st,
            const char *run_id,
            size_t index,
            const struct plan_step *step,
            const char *actor)
{
    char task_id[WEFT_UUID_LEN + 1];
    char span_hex[2][2 * WEFT_SPAN_ID_SIZE + 1];
    char *deps_text = weft__state_deps_json(step);
    char *spec_text = dump_or_null(step->spec);
    char *weft__pg_error_text = dump_or_null(step->error);
    bool is_oom = deps_text == NULL || (step->spec != NULL && spec_text == NULL) ||
                  (step->error != NULL && weft__pg_error_text == NULL);
    char *notes = feedback_notes(step, &is_oom);
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    if (index > (size_t)INT32_MAX) {
        is_oom = true; /* task_order is an INT; PLAN_MAX_STEPS keeps far below */
    }
    if (weft__uuid_is_valid(step->task_uuid)) {
        memcpy(task_id, step->task_uuid, sizeof(task_id));
    } else {
        weft__uuid_v4(task_id); /* a step made without one (tests, older callers) */
    }
    weft__pg_params_init(&p);
    p.is_oom = is_oom;
    weft__pg_p_key(&p, run_id);
    weft__pg_p_u64(&p, index);
    weft__pg_p_raw(&p, task_id);
    weft__pg_p_key(&p, step->id);
    weft__pg_p_key(&p, actor);
    weft__pg_p_text(&p, step->task);
    weft__pg_p_raw(&p, deps_text);
    weft__pg_p_raw(&p, task_status(step));
    weft__pg_p_raw(&p, weft__step_status_name(step->status));
    weft__pg_p_u64(&p, step->attempts);
    weft__pg_p_text(&p, step->result);
    weft__pg_p_text(&p, step->feedback);
    weft__pg_p_key(&p, step->requested_by);
    weft__pg_p_raw(&p, weft__step_executor_name(step->executor));
    weft__pg_p_text(&p, spec_text);
    weft__pg_p_key(&p, step->parent);
    if (step->has_reward) {
        weft__pg_p_double(&p, step->reward);
    } else {
        weft__pg_p_raw(&p, NULL);
    }
    weft__pg_p_key(&p, step->error_type);
    weft__pg_p_text(&p, weft__pg_error_text);
    weft__pg_p_u64(&p, step->started_ns);
    weft__pg_p_u64(&p, step->ended_ns);
    /* The step's agent span and its parent: recovery closes a span a kill left open. */
    p_span_id(&p, &step->span, span_hex[0]);
    p_span_id(&p, &step->parent_ctx, span_hex[1]);
    weft__pg_p_u64(&p, step->retries);
    weft__pg_p_bool(&p, step->is_dispatched);
    weft__pg_p_raw(&p, notes);
    res = weft__pg_query(st, "step upsert", step_upsert_sql, &p);
    if (res == NULL) {
        err = WEFT_EIO;
    } else if (strcmp(PQcmdTuples(res), "1") != 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: step upsert on %s: run %s is not stored", st->where,
                 run_id);
        st->is_tx_failed = st->tx_depth > 0;
        err = WEFT_EIO;
    }
    PQclear(res);
    weft__pg_params_cleanup(&p);
    free(deps_text);
    free(spec_text);
    free(weft__pg_error_text);
    weft__free(notes);
    return err;
}

static weft_err
pg_step_save(struct rt_state *base,
             const char *run_id,
             size_t index,
             const struct plan_step *step,
             const char *actor)
{
    return step_upsert(weft__pg(base), run_id, index, step, actor);
}

static weft_err
pg_surgery(struct rt_state *base,
           const char *run_id,
           const struct plan *plan,
           size_t failed,
           size_t first_new,
           unsigned seq,
           const char *error_type,
           const json_t *depends_before,
           const json_t *depends_after,
           const char *const *actors)
{
    struct pg_state *st = weft__pg(base);
    json_t *inserted = json_array();
    char *inserted_text = NULL;
    char *before_text = dump_or_null(depends_before);
    char *after_text = dump_or_null(depends_after);
    struct params p;
    weft_err err = WEFT_OK;

    weft__pg_params_init(&p);
    for (size_t i = first_new; inserted != NULL && i < plan->count; i++) {
        json_array_append_new(inserted, json_string(plan->steps[i].id));
    }
    inserted_text = inserted != NULL ? json_dumps(inserted, JSON_COMPACT) : NULL;
    json_decref(inserted);
    if (inserted_text == NULL || before_text == NULL || after_text == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    /* One transaction (nested in the caller's when there is one): the store holds the plan
     * before the surgery or after it, never a mix. The corrective steps go first, so that the
     * failed step's new dependencies resolve to their task ids. */
    if (weft__pg_begin(base) != WEFT_OK) {
        err = WEFT_EIO;
        goto out;
    }
    for (size_t i = first_new; err == WEFT_OK && i < plan->count; i++) {
        err = step_upsert(st, run_id, i, &plan->steps[i], actors[i]);
    }
    if (err == WEFT_OK) {
        err = step_upsert(st, run_id, failed, &plan->steps[failed], actors[failed]);
    }
    if (err == WEFT_OK) {
        weft__pg_p_key(&p, run_id);
        weft__pg_p_u64(&p, seq);
        weft__pg_p_key(&p, plan->steps[failed].id);
        weft__pg_p_key(&p, error_type);
        weft__pg_p_raw(&p, inserted_text);
        weft__pg_p_raw(&p, before_text);
        weft__pg_p_raw(&p, after_text);
        weft__pg_p_u64(&p, weft__now_ns());
        err = weft__pg_exec_append(
            st, "correction insert",
            "INSERT INTO corrections (run_id, seq, failed_step, error_type, inserted,"
            " depends_before, depends_after, created_ns)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            "INSERT INTO corrections (run_id, seq, failed_step, error_type, inserted,"
            " depends_before, depends_after, created_ns)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            " ON CONFLICT (run_id, seq) DO NOTHING",
            &p);
    }
    if (err != WEFT_OK) {
        st->is_tx_failed = true; /* the outermost commit rolls back */
    }
    if (weft__pg_commit(base) != WEFT_OK && err == WEFT_OK) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: DAG surgery of run %s rolled back", run_id);
    }
out:
    weft__pg_params_cleanup(&p);
    free(inserted_text);
    free(before_text);
    free(after_text);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Sessions: messages and scripted cursors                                                     */

static weft_err
pg_messages_load(struct rt_state *base, const char *session_id, size_t limit, json_t **out)
{
    json_t *arr = json_array();
    weft_err err = arr != NULL ? WEFT_OK : WEFT_ENOMEM;

    *out = NULL;
    if (err == WEFT_OK) {
        err = weft__pg_each(weft__pg(base), "messages load",
                            "SELECT role, content, route FROM (SELECT seq, role, content, route"
                            " FROM messages WHERE session_id = $1 ORDER BY seq DESC LIMIT $2)"
                            " m ORDER BY seq",
                            SQL_ARGS(SQL_KEY(session_id), SQL_U64(limit)), weft__state_row_message,
                            arr);
    }
    if (err != WEFT_OK) {
        json_decref(arr);
        return err;
    }
    *out = arr;
    return WEFT_OK;
}

static weft_err
pg_message_add(struct rt_state *base,
               const char *session_id,
               const char *run_id,
               const char *role,
               const char *content,
               const char *route)
{
    struct pg_state *st = weft__pg(base);
    weft_err err = WEFT_OK;

    /* seq is an identity column: appends from parallel flow steps never collide. */
    err = weft__pg_append(
        st, "message insert",
        "INSERT INTO messages (session_id, run_id, role, content, route, created_ns)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        "INSERT INTO messages (session_id, run_id, role, content, route, created_ns)"
        " SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint"
        " WHERE NOT EXISTS (SELECT 1 FROM messages WHERE session_id = $1::text"
        " AND run_id = $2::text AND role = $3::text AND created_ns = $6::bigint)",
        SQL_ARGS(SQL_KEY(session_id), SQL_KEY(run_id), SQL_TEXT(role),
                 SQL_TEXT(content != NULL ? content : ""), SQL_TEXT(route),
                 SQL_U64(weft__now_ns())));
    return err;
}

static weft_err
pg_cursors_load(struct rt_state *base, const char *session_id, const char *script, json_t **out)
{
    json_t *cursors = NULL;
    weft_err err = weft__pg_each(
        weft__pg(base), "cursors load",
        "SELECT queue, used FROM script_cursor_keys WHERE session_id = $1 AND"
        " script = $2",
        SQL_ARGS(SQL_KEY(session_id), SQL_KEY(script)), weft__state_row_cursor, &cursors);

    *out = NULL;
    if (err != WEFT_OK) {
        json_decref(cursors);
        return err;
    }
    *out = cursors;
    return WEFT_OK;
}

static weft_err
pg_cursors_save(struct rt_state *base,
                const char *session_id,
                const char *script,
                const json_t *cursors)
{
    struct pg_state *st = weft__pg(base);
    const char *key = NULL;
    json_t *v = NULL;
    bool is_multi = json_object_size(cursors) > 1;
    weft_err err = WEFT_OK;

    /* Several queues at once (parallel flow steps) land in one transaction. */
    if (is_multi && weft__pg_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    json_object_foreach((json_t *)cursors, key, v)
    {

        err = weft__pg_exec(st, "cursor upsert",
                            "INSERT INTO script_cursor_keys (session_id, script, queue, used)"
                            " VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, script, queue)"
                            " DO UPDATE SET used = excluded.used",
                            SQL_ARGS(SQL_KEY(session_id), SQL_KEY(script), SQL_KEY(key),
                                     SQL_I64((int64_t)json_integer_value(v))));
        if (err != WEFT_OK) {
            break;
        }
    }
    if (is_multi && weft__pg_commit(base) != WEFT_OK) {
        err = WEFT_EIO;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading runs back                                                                           */

/* A run's latest sign of life apart from its heartbeat, which is written at most once a second:
 * the last start or end of a task and the last LLM exchange it stored (GREATEST skips NULLs).
 * Without the starts and exchanges, a run killed 600 ms into its first step read as having
 * lasted a few microseconds. */
#define PG_LAST_LIFE                                                         \
    " GREATEST((SELECT MAX(GREATEST(t.ended_ns, t.started_ns)) FROM tasks t" \
    " WHERE t.workflow_id = w.workflow_id),"                                 \
    " (SELECT MAX(e.created_ns) FROM llm_exchanges e WHERE e.run_id = w.run_id))"

/* The columns weft__state_row_info() reads, in its order; the last four feed
 * weft__state_owner_view(). */
#define RUN_COLUMNS                                                                            \
    "run_id, workflow, workflow_path, session_id, user_prompt, status, reason, trace_id,"      \
    " root_span_id, resumed_from_trace, loops, started_ns, ended_ns, iterations, corrections," \
    " COALESCE(total_reward, 0), input_tokens, output_tokens, cost_usd,"                       \
    " (SELECT count(*) FROM tasks t WHERE t.workflow_id = w.workflow_id),"                     \
    " owner_pid, owner_host, heartbeat_ns," PG_LAST_LIFE ","                                   \
    " origin_kind, origin_run_id, origin_step, pinned, trace_sampling"

/* One page of runs_each(): each row to the caller's function, the last one's key kept. */
struct runs_page {
    state_run_fn fn;
    void *user_data;
    char *after_id;
    int64_t after_ns;
};

static weft_err
runs_page_row(const struct weft__state_row *row, void *ctx)
{
    struct runs_page *rp = ctx;
    struct weft_run_info info;
    bool is_oom = false;
    weft_err err = WEFT_OK;

    memset(&info, 0, sizeof(info));
    weft__state_row_info(row, &info, &is_oom);
    weft__free(rp->after_id);
    rp->after_id = weft__row_dup(row, 0, &is_oom);
    rp->after_ns = weft__row_i64(row, 11);
    err = is_oom ? WEFT_ENOMEM : rp->fn(&info, rp->user_data);
    weft__state_info_cleanup(&info);
    return err;
}

static weft_err
pg_runs_each(struct rt_state *base, size_t limit, state_run_fn fn, void *user_data)
{
    struct runs_page page_ = {.fn = fn, .user_data = user_data};
    weft_err err = WEFT_OK;

    /* Page by page (newest first, keyed by start and id), so memory stays one page whatever
     * the limit, and @p fn may use the handle between rows. */
    while (err == WEFT_OK && limit > 0) {
        size_t page = limit < RUNS_PAGE ? limit : RUNS_PAGE;
        struct weft__state_arg args[] = {SQL_U64(page), SQL_I64(page_.after_ns),
                                         SQL_KEY(page_.after_id)};
        size_t rows = 0;

        if (page_.after_id == NULL) {
            args[1] = (struct weft__state_arg)SQL_NULL; /* the first page */
        }
        err = weft__pg_run(weft__pg(base), "runs list",
                           "SELECT " RUN_COLUMNS " FROM workflows w WHERE $2::bigint IS NULL"
                           " OR (started_ns, run_id) < ($2::bigint, $3::text)"
                           " ORDER BY started_ns DESC, run_id DESC LIMIT $1",
                           NULL, args, 3, runs_page_row, &page_, &rows);
        limit -= rows < limit ? rows : limit;
        if (rows < page) {
            break;
        }
    }
    weft__free(page_.after_id);
    return err;
}

static weft_err
pg_run_resolve(
    struct rt_state *base, const char *ref, char *out, size_t out_len, char *err, size_t err_len)
{
    struct pg_state *st = weft__pg(base);
    struct weft__state_resolve r = {.ref = ref, .out = out, .out_len = out_len};
    weft_err result = WEFT_OK;

    out[0] = '\0';
    if (strcmp(ref, "last") == 0) {
        result = weft__pg_each(st, "run resolve",
                               "SELECT run_id FROM workflows ORDER BY started_ns DESC LIMIT 1",
                               NULL, 0, weft__state_row_resolve, &r);
    } else if (!weft__state_ref_is_valid(ref, err, err_len)) {
        return WEFT_EINVAL;
    } else {
        /* An exact id comes first, however many newer runs it is a prefix of. */
        result = weft__pg_each(st, "run resolve",
                               "SELECT run_id FROM workflows WHERE starts_with(run_id, $1)"
                               " ORDER BY run_id = $1 DESC, started_ns DESC LIMIT 2",
                               SQL_ARGS(SQL_KEY(ref)), weft__state_row_resolve, &r);
    }
    if (result != WEFT_OK) {
        /* An unreachable database is an error, not "no such run". */
        snprintf(err, err_len, "state database %s: cannot be read", st->where);
        return WEFT_EIO;
    }
    return weft__state_resolve_end(&r, err, err_len);
}

static weft_err
pg_run_info(struct rt_state *base, const char *run_id, struct weft_run_info *info)
{
    struct weft__state_info_read r = {.info = info};
    weft_err err = WEFT_OK;

    memset(info, 0, sizeof(*info));
    err = weft__pg_each(weft__pg(base), "run info",
                        "SELECT " RUN_COLUMNS " FROM workflows w WHERE run_id = $1",
                        SQL_ARGS(SQL_KEY(run_id)), weft__state_row_info_first, &r);
    if (err != WEFT_OK) {
        return err;
    }
    if (r.is_oom) {
        weft__state_info_cleanup(info);
        return WEFT_ENOMEM;
    }
    return r.has_row ? WEFT_OK : WEFT_ENOTFOUND;
}

static weft_err
pg_steps_each(struct rt_state *base, const char *run_id, state_step_fn fn, void *user_data)
{
    struct weft__state_each c = {.step_fn = fn, .user_data = user_data};

    return weft__pg_each(
        weft__pg(base), "steps read",
        "SELECT t.step_id, t.agent, t.description, t.depends_on, t.step_status,"
        " t.attempts, t.result, t.feedback, t.requested_by, t.executor_type, t.spec,"
        " t.parent_step, t.reward, t.error_type, t.error, t.started_ns, t.ended_ns,"
        " t.task_id, t.retries, t.is_dispatched"
        " FROM tasks t JOIN workflows w ON w.workflow_id = t.workflow_id"
        " WHERE w.run_id = $1 ORDER BY t.task_order",
        SQL_ARGS(SQL_KEY(run_id)), weft__state_row_step_each, &c);
}

static weft_err
pg_corrections_each(struct rt_state *base,
                    const char *run_id,
                    state_correction_fn fn,
                    void *user_data)
{
    struct weft__state_each c = {.correction_fn = fn, .user_data = user_data};

    return weft__pg_each(
        weft__pg(base), "corrections read",
        "SELECT seq, failed_step, error_type, inserted, depends_before, depends_after,"
        " created_ns FROM corrections WHERE run_id = $1 ORDER BY seq",
        SQL_ARGS(SQL_KEY(run_id)), weft__state_row_correction_each, &c);
}

/* ------------------------------------------------------------------------------------------ */
/* Payloads (state_payloads.h): long replay texts stored once per content hash                 */

/* Free text as weft__pg_p_text() binds it, redacted and then made valid UTF-8, so that a payload's
 * reference is the hash of what is stored. NULL when out of memory. */
static char *
clean_text(const char *s)
{
    char *clean = weft__redact_text(s);
    struct weft__buf b;

    if (clean == NULL || weft__utf8_valid(clean, strlen(clean))) {
        return clean;
    }
    weft__buf_init(&b, 0);
    if (weft__utf8_sanitize(clean, strlen(clean), WEFT__UTF8_REPLACEMENT, &b) != WEFT_OK ||
        b.data == NULL) {
        weft__buf_cleanup(&b);
        weft__free(clean);
        return NULL;
    }
    weft__free(clean);
    return b.data;
}

/* Open the transaction a payload and its row are written in, holding the payload lock shared:
 * collection (weft__pg_gc_run) takes it exclusively before it decides which records no row holds,
 * so it never deletes a record a writer found there (ON CONFLICT DO NOTHING) and is about to refer
 * to. A DO block, not a SELECT: a statement that returns rows would stop the transaction from
 * being sent again after a lost connection (run_sql_as). */
static weft_err
payload_begin(struct pg_state *st)
{
    weft_err err = WEFT_OK;

    if (weft__pg_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    err = weft__pg_exec_sql(
        st, "payload lock",
        "DO $$ BEGIN PERFORM pg_advisory_xact_lock_shared(" PAYLOAD_LOCK "); END $$", NULL);
    if (err != WEFT_OK) {
        (void)weft__pg_tx_end(st, err);
    }
    return err;
}

/* No has(): a record already there is skipped by the server (ON CONFLICT DO NOTHING), which
 * costs its compression and its bytes on the wire but no round trip per chunk to ask first. */
static weft_err
payload_put(void *user, const struct weft__payload_record *rec)
{
    struct pg_state *st = user;
    struct params p;
    weft_err err = WEFT_OK;

    weft__pg_params_init(&p);
    weft__pg_p_key(&p, rec->hash);
    weft__pg_p_i64(&p, (int64_t)rec->kind);
    weft__pg_p_u64(&p, rec->raw_len);
    weft__pg_p_bytes(&p, rec->data, rec->len);
    err = weft__pg_exec_sql(st, "payload insert",
                            "INSERT INTO payloads (hash, kind, size, data) VALUES ($1, $2, $3, $4)"
                            " ON CONFLICT (hash) DO NOTHING",
                            &p);
    weft__pg_params_cleanup(&p);
    return err;
}

/* Up to PAYLOAD_GET_BATCH hashes per weft__pg_query (WHERE hash = ANY), the data in binary. */
weft_err
weft__pg_payload_get(void *user,
                     const char *const *hashes,
                     size_t count,
                     weft__payload_each_fn each,
                     void *each_user)
{
    struct pg_state *st = user;
    struct weft__buf list;
    weft_err err = WEFT_OK;

    weft__buf_init(&list, 0);
    for (size_t at = 0; err == WEFT_OK && at < count; at += PAYLOAD_GET_BATCH) {
        PGresult *res = NULL;
        struct params p;

        weft__buf_reset(&list);
        err = weft__buf_append_byte(&list, '{');
        for (size_t i = at; err == WEFT_OK && i < count && i < at + PAYLOAD_GET_BATCH; i++) {
            if (!weft__payload_is_ref(hashes[i])) {
                continue; /* never part of the array's text */
            }
            err = weft__buf_printf(&list, "%s%s", list.len > 1 ? "," : "", hashes[i]);
        }
        if (err == WEFT_OK) {
            err = weft__buf_append_byte(&list, '}');
        }
        if (err != WEFT_OK) {
            break;
        }
        weft__pg_params_init(&p);
        weft__pg_p_raw(&p, list.data);
        p.is_binary_result = true; /* data as its bytes; the other columns are cast to text */
        res = weft__pg_query(st, "payload read",
                             "SELECT hash, kind::text, size::text, data FROM payloads"
                             " WHERE hash = ANY ($1::text[])",
                             &p);
        weft__pg_params_cleanup(&p);
        if (res == NULL) {
            err = WEFT_EIO;
            break;
        }
        for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
            struct weft__payload_record rec;
            const char *hash = PQgetvalue(res, i, 0);

            if (PQgetlength(res, i, 0) != WEFT__PAYLOAD_HEX_LEN) {
                continue;
            }
            memcpy(rec.hash, hash, sizeof(rec.hash));
            rec.kind = (weft__payload_kind)strtol(PQgetvalue(res, i, 1), NULL, 10);
            rec.raw_len = (size_t)strtoull(PQgetvalue(res, i, 2), NULL, 10);
            rec.data = (const unsigned char *)PQgetvalue(res, i, 3);
            rec.len = (size_t)PQgetlength(res, i, 3);
            err = each(&rec, each_user);
        }
        PQclear(res);
    }
    weft__buf_cleanup(&list);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* LLM exchanges                                                                               */

static weft_err
pg_exchange_add(struct rt_state *base,
                const char *run_id,
                const char *who,
                const char *purpose,
                const json_t *entry)
{
    struct pg_state *st = weft__pg(base);
    char *raw = json_dumps(entry, JSON_COMPACT);
    char *text = raw != NULL ? clean_text(raw) : NULL; /* redacted, as the SQLite backend does */
    const struct weft__payload_sink sink = {.put = payload_put, .user = st};
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    bool is_ref = false;
    bool is_tx = false;
    weft_err err = WEFT_OK;

    free(raw);
    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    /* Redacted before it is hashed; the records and the row commit together. */
    is_tx = strlen(text) >= WEFT__PAYLOAD_MIN && weft__payload_enabled();
    if (is_tx) {
        err = payload_begin(st);
        is_tx = err == WEFT_OK;
    }
    if (is_tx) {
        err = weft__state_payload_put(text, &sink, ref, &is_ref);
    }
    if (err == WEFT_OK) {
        err = weft__pg_append(
            st, "exchange insert",
            "INSERT INTO llm_exchanges (run_id, who, purpose, entry, created_ns, entry_ref)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            "INSERT INTO llm_exchanges (run_id, who, purpose, entry, created_ns, entry_ref)"
            " SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text"
            " WHERE NOT EXISTS (SELECT 1 FROM llm_exchanges WHERE run_id = $1::text"
            " AND who = $2::text AND purpose = $3::text AND created_ns = $5::bigint)",
            SQL_ARGS(SQL_KEY(run_id), SQL_TEXT(who), SQL_TEXT(purpose), SQL_RAW(is_ref ? "" : text),
                     SQL_U64(weft__now_ns()), SQL_RAW(is_ref ? ref : NULL)));
    }
    if (is_tx) {
        err = weft__pg_tx_end(st, err);
    }
    weft__free(text);
    return err;
}

static weft_err
pg_exchanges_script(struct rt_state *base, const char *run_id, json_t **out)
{
    struct pg_state *st = weft__pg(base);
    const struct weft__payload_source src = {.get = weft__pg_payload_get, .user = st};
    struct weft__state_payload_read r;
    weft_err err = WEFT_OK;

    *out = NULL;
    weft__state_payload_read_init(&r, &src, st->where);
    r.responses = json_object();
    err = r.responses != NULL ? WEFT_OK : WEFT_ENOMEM;
    if (err == WEFT_OK) {
        err = weft__pg_each(st, "exchanges read",
                            "SELECT who, purpose, entry, entry_ref FROM llm_exchanges"
                            " WHERE run_id = $1 ORDER BY seq",
                            SQL_ARGS(SQL_KEY(run_id)), weft__state_row_script, &r);
    }
    weft__state_payload_read_cleanup(&r);
    if (err != WEFT_OK || r.n == 0) {
        json_decref(r.responses);
        return err != WEFT_OK ? err : WEFT_ENOTFOUND;
    }
    *out = json_pack("{s:i, s:o}", "version", 1, "responses", r.responses);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
pg_exchange_counts(struct rt_state *base, const char *run_id, uint64_t before_ns, json_t **out)
{
    json_t *counts = json_object();
    weft_err err = counts != NULL ? WEFT_OK : WEFT_ENOMEM;

    *out = NULL;
    if (err == WEFT_OK) {
        err = weft__pg_each(weft__pg(base), "exchange counts",
                            "SELECT who, purpose, COUNT(*) FROM llm_exchanges"
                            " WHERE run_id = $1 AND created_ns < $2 GROUP BY who, purpose",
                            SQL_ARGS(SQL_KEY(run_id), SQL_U64(before_ns)),
                            weft__state_row_exchange_count, counts);
    }
    if (err != WEFT_OK) {
        json_decref(counts);
        return err;
    }
    *out = counts;
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tool results and run origins (docs/replay.md)                                               */

static weft_err
pg_tool_result_add(struct rt_state *base,
                   const char *run_id,
                   const struct weft__state_tool_result *r)
{
    struct pg_state *st = weft__pg(base);
    const struct weft__payload_sink sink = {.put = payload_put, .user = st};
    char *request = r->request != NULL ? clean_text(r->request) : NULL;
    char *outcome = r->outcome != NULL ? clean_text(r->outcome) : NULL;
    char request_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    char outcome_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    bool has_request_ref = false;
    bool has_outcome_ref = false;
    bool is_tx = false;
    weft_err err = WEFT_OK;

    if ((r->request != NULL && request == NULL) || (r->outcome != NULL && outcome == NULL)) {
        err = WEFT_ENOMEM;
        goto out;
    }
    /* Redacted first, then hashed; records and row in one transaction (pg_exchange_add). */
    is_tx = weft__payload_enabled() && ((request != NULL && strlen(request) >= WEFT__PAYLOAD_MIN) ||
                                        (outcome != NULL && strlen(outcome) >= WEFT__PAYLOAD_MIN));
    if (is_tx) {
        err = payload_begin(st);
        is_tx = err == WEFT_OK;
    }
    if (is_tx) {
        err = weft__state_payload_put(request, &sink, request_ref, &has_request_ref);
    }
    if (is_tx && err == WEFT_OK) {
        err = weft__state_payload_put(outcome, &sink, outcome_ref, &has_outcome_ref);
    }
    if (err != WEFT_OK) {
        goto out;
    }
    /* request and outcome as they are: clean_text() above made them. */
    err = weft__pg_exec(
        st, "tool result insert",
        "INSERT INTO tool_results (run_id, step_id, attempt, seq, tool, kind, request,"
        " outcome, created_ns, request_ref, outcome_ref)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        " ON CONFLICT (run_id, step_id, attempt, seq) DO UPDATE SET tool = $5,"
        " kind = $6, request = $7, outcome = $8, created_ns = $9,"
        " request_ref = $10, outcome_ref = $11",
        SQL_ARGS(SQL_KEY(run_id), SQL_KEY(r->step_id), SQL_U64(r->attempt), SQL_U64(r->seq),
                 SQL_KEY(r->tool), SQL_KEY(r->kind), SQL_RAW(has_request_ref ? "" : request),
                 SQL_RAW(has_outcome_ref ? "" : outcome), SQL_U64(weft__now_ns()),
                 SQL_RAW(has_request_ref ? request_ref : NULL),
                 SQL_RAW(has_outcome_ref ? outcome_ref : NULL)));
out:
    if (is_tx) {
        err = weft__pg_tx_end(st, err);
    }
    weft__free(request);
    weft__free(outcome);
    return err;
}

static weft_err
pg_tool_results_each(struct rt_state *base,
                     const char *run_id,
                     state_tool_result_fn fn,
                     void *user_data)
{
    struct pg_state *st = weft__pg(base);
    const struct weft__payload_source src = {.get = weft__pg_payload_get, .user = st};
    struct weft__state_payload_read r;
    weft_err err = WEFT_OK;

    weft__state_payload_read_init(&r, &src, st->where);
    r.tool_fn = fn;
    r.user_data = user_data;
    err = weft__pg_each(
        st, "tool results read",
        "SELECT step_id, attempt, seq, tool, kind, request, outcome, request_ref,"
        " outcome_ref FROM tool_results WHERE run_id = $1 ORDER BY created_ns, seq_all",
        SQL_ARGS(SQL_KEY(run_id)), weft__state_row_tool_result, &r);
    weft__state_payload_read_cleanup(&r);
    return err;
}

static weft_err
pg_run_origin(struct rt_state *base,
              const char *run_id,
              const char *kind,
              const char *origin_run_id,
              const char *origin_step)
{
    struct pg_state *st = weft__pg(base);

    return weft__pg_exec(
        st, "run origin update",
        "UPDATE workflows SET origin_kind = $1, origin_run_id = $2, origin_step = $3"
        " WHERE run_id = $4",
        SQL_ARGS(SQL_KEY(kind), SQL_KEY(origin_run_id), SQL_KEY(origin_step), SQL_KEY(run_id)));
}

/* ------------------------------------------------------------------------------------------ */
/* Durability: one owner per run, heartbeats, interrupted runs (docs/durability.md)            */

static weft_err
pg_check(struct rt_state *base, char *err, size_t err_len)
{
    struct pg_state *st = weft__pg(base);
    char why[512];

    if (!st->is_lost) {
        return WEFT_OK;
    }
    weft__pg_error_text(st, NULL, why, sizeof(why));
    if (why[0] == '\0') {
        snprintf(why, sizeof(why), "the server did not answer");
    }
    snprintf(err, err_len,
             "state database %s: the connection was lost and could not be made again within "
             "%llu ms (WEFT_STATE_RECONNECT_MS), so some of the run's state was not saved: %s",
             st->where, (unsigned long long)st->reconnect_ms, why);
    return WEFT_EIO;
}

static weft_err
pg_lease_acquire(struct rt_state *base, const char *run_id, struct state_owner *holder)
{
    struct pg_state *st = weft__pg(base);
    char host[256];
    char token[33];
    uint64_t now = weft__now_ns();
    struct weft__state_lease_read lease = {
        .own_token = st->owner_token, .now = now, .holder = holder};
    weft_err err = WEFT_OK;

    memset(holder, 0, sizeof(*holder));
    weft__state_hostname(host, sizeof(host));
    if (weft__pg_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    /* FOR UPDATE: of two processes taking the run at once, the second waits here until the
     * first commits, then reads the first one's lease and is refused. */
    err = weft__pg_one(st, "lease read",
                       "SELECT owner_pid, owner_host, owner_token, owner_since_ns, heartbeat_ns"
                       " FROM workflows WHERE run_id = $1 FOR UPDATE",
                       SQL_ARGS(SQL_KEY(run_id)), weft__state_row_lease, &lease);
    if (err != WEFT_OK) {
        return weft__pg_tx_end(st, err);
    }
    weft__state_new_token(token);
    err = weft__pg_exec(st, "lease",
                        "UPDATE workflows SET owner_pid = $1, owner_host = $2, owner_token = $3,"
                        " owner_since_ns = $4, heartbeat_ns = $4 WHERE run_id = $5",
                        SQL_ARGS(SQL_I64((int64_t)getpid()), SQL_KEY(host), SQL_RAW(token),
                                 SQL_U64(now), SQL_KEY(run_id)));
    err = weft__pg_tx_end(st, err);
    if (err != WEFT_OK) {
        return err;
    }
    memcpy(st->owner_token, token, sizeof(st->owner_token));
    st->last_heartbeat_mono = weft__monotonic_ns();
    return WEFT_OK;
}

static weft_err
pg_lease_release(struct rt_state *base, const char *run_id)
{
    struct pg_state *st = weft__pg(base);
    weft_err err = WEFT_OK;

    if (st->owner_token[0] == '\0') {
        return WEFT_OK;
    }
    err = weft__pg_exec(
        st, "lease release",
        "UPDATE workflows SET owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
        " owner_since_ns = NULL, heartbeat_ns = $1 WHERE run_id = $2 AND owner_token = $3",
        SQL_ARGS(SQL_U64(weft__now_ns()), SQL_KEY(run_id), SQL_RAW(st->owner_token)));
    st->owner_token[0] = '\0';
    return err;
}

static weft_err
pg_heartbeat(struct rt_state *base, const char *run_id)
{
    struct pg_state *st = weft__pg(base);
    uint64_t mono = weft__monotonic_ns();
    weft_err err = WEFT_OK;

    if (st->owner_token[0] == '\0' ||
        mono - st->last_heartbeat_mono < STATE_HEARTBEAT_MIN_INTERVAL_NS) {
        return WEFT_OK;
    }
    st->last_heartbeat_mono = mono;
    err = weft__pg_exec(
        st, "heartbeat",
        "UPDATE workflows SET heartbeat_ns = $1 WHERE run_id = $2 AND owner_token = $3",
        SQL_ARGS(SQL_U64(weft__now_ns()), SQL_KEY(run_id), SQL_RAW(st->owner_token)));
    return err;
}

static weft_err
pg_run_root(struct rt_state *base,
            const char *run_id,
            const char *name,
            const char *parent_span_id,
            uint64_t started_ns)
{
    struct pg_state *st = weft__pg(base);

    return weft__pg_exec(
        st, "run root",
        "UPDATE workflows SET root_span_name = $1, root_parent_span_id = $2,"
        " root_started_ns = $3 WHERE run_id = $4",
        SQL_ARGS(SQL_TEXT(name), SQL_KEY(parent_span_id), SQL_U64(started_ns), SQL_KEY(run_id)));
}

static weft_err
pg_run_hash_set(struct rt_state *base, const char *run_id, const char *hash)
{
    struct pg_state *st = weft__pg(base);

    return weft__pg_exec(st, "workflow hash",
                         "UPDATE workflows SET workflow_hash = $1 WHERE run_id = $2",
                         SQL_ARGS(SQL_KEY(hash), SQL_KEY(run_id)));
}

static weft_err
pg_run_hash_get(struct rt_state *base, const char *run_id, char *out, size_t out_len)
{
    struct weft__state_text_out t = {.out = out, .len = out_len};
    weft_err err = WEFT_OK;

    out[0] = '\0';
    err = weft__pg_one(weft__pg(base), "workflow hash read",
                       "SELECT workflow_hash FROM workflows WHERE run_id = $1",
                       SQL_ARGS(SQL_KEY(run_id)), weft__state_row_text_into, &t);
    return err == WEFT_OK && t.is_null ? WEFT_ENOTFOUND : err;
}

static weft_err
pg_run_snapshot_set(struct rt_state *base, const char *run_id, const char *snapshot)
{
    struct pg_state *st = weft__pg(base);
    const struct weft__payload_sink sink = {.put = payload_put, .user = st};
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    /* Valid UTF-8 only: the column makes other bytes valid, and the payload must read back
     * as the column would. */
    bool is_tx = strlen(snapshot) >= WEFT__PAYLOAD_MIN && weft__payload_enabled() &&
                 weft__utf8_valid(snapshot, strlen(snapshot));
    bool is_ref = false;
    weft_err err = WEFT_OK;

    /* A long snapshot is a payload: the records and the row commit together. */
    if (is_tx) {
        err = payload_begin(st);
        is_tx = err == WEFT_OK;
    }
    if (is_tx) {
        err = weft__state_payload_put(snapshot, &sink, ref, &is_ref);
    }
    if (err == WEFT_OK) {
        /* as is: the files' bytes are the point (SQL_TEXT would rewrite them) */
        err =
            weft__pg_exec(st, "workflow snapshot",
                          "UPDATE workflows SET workflow_snapshot = $1, workflow_snapshot_ref = $2"
                          " WHERE run_id = $3",
                          SQL_ARGS(SQL_KEY(is_ref ? NULL : snapshot), SQL_RAW(is_ref ? ref : NULL),
                                   SQL_KEY(run_id)));
    }
    if (is_tx) {
        err = weft__pg_tx_end(st, err);
    }
    return err;
}

static weft_err
pg_run_snapshot_get(struct rt_state *base, const char *run_id, char **out)
{
    struct pg_state *st = weft__pg(base);
    const struct weft__payload_source src = {.get = weft__pg_payload_get, .user = st};
    struct weft__state_payload_read r;
    weft_err err = WEFT_OK;

    weft__state_payload_read_init(&r, &src, st->where);
    r.out = out;
    err = weft__pg_one(st, "workflow snapshot read",
                       "SELECT workflow_snapshot, workflow_snapshot_ref FROM workflows"
                       " WHERE run_id = $1",
                       SQL_ARGS(SQL_KEY(run_id)), weft__state_row_snapshot, &r);
    weft__state_payload_read_cleanup(&r);
    return err == WEFT_OK || err == WEFT_ENOTFOUND ? r.err : err;
}

/* The steps of @p d's run that were in progress, with the spans the kill left open. */
static weft_err
open_steps(struct pg_state *st, struct weft__state_dead *d)
{
    return weft__pg_each(st, "open steps",
                         "SELECT t.span_id, t.span_parent_id, t.agent, t.started_ns FROM tasks t"
                         " JOIN workflows w ON w.workflow_id = t.workflow_id WHERE w.run_id = $1"
                         " AND t.step_status = 'in_progress' AND t.span_id IS NOT NULL"
                         " ORDER BY t.task_order",
                         SQL_ARGS(SQL_KEY(d->text[0])), weft__state_row_open_step, d);
}

/* The running runs whose owner is gone at @p now, into *dead (*n entries, owned by the caller
 * even on error, free with weft__state_dead_free()). Rows another process holds locked (it is
 * taking the run over, or marking it) are skipped: that process decides about them. */
static weft_err
pg_dead_collect(struct rt_state *base, uint64_t now, struct weft__state_dead **dead, size_t *n)
{
    struct weft__state_dead_scan scan = {.now = now, .dead = dead, .n = n};

    return weft__pg_each(weft__pg(base), "recover scan",
                         "SELECT run_id, workflow, owner_host, trace_id, root_span_id,"
                         " root_parent_span_id, root_span_name, owner_pid, heartbeat_ns,"
                         " root_started_ns, started_ns," PG_LAST_LIFE
                         " FROM workflows w WHERE status = 'running' AND owner_token IS NOT NULL"
                         " FOR UPDATE OF w SKIP LOCKED",
                         NULL, 0, weft__state_row_dead, &scan);
}

/* Mark @p d's run interrupted (final_status paused: `weft resume` continues it) and read the
 * steps it left in progress into @p d. */
static weft_err
pg_dead_mark(struct rt_state *base, struct weft__state_dead *d)
{
    struct pg_state *st = weft__pg(base);
    weft_err err = weft__state_dead_reason(d);

    if (err != WEFT_OK) {
        return err;
    }
    err =
        weft__pg_exec(st, "mark interrupted",
                      "UPDATE workflows SET status = 'interrupted', final_status = $4, reason = $1,"
                      " ended_ns = $2, owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
                      " owner_since_ns = NULL WHERE run_id = $3 AND status = 'running'",
                      SQL_ARGS(SQL_TEXT(d->text[7]), SQL_U64(d->ended_ns), SQL_KEY(d->text[0]),
                               SQL_RAW(final_status("interrupted"))));
    if (err == WEFT_OK) {
        err = open_steps(st, d);
    }
    return err;
}

static weft_err
pg_end(struct rt_state *base, weft_err err)
{
    return weft__pg_tx_end(weft__pg(base), err);
}

const struct weft__state_ops weft__pg_ops = {
    .name = "postgresql",
    .close = weft__pg_close,
    .begin = weft__pg_begin,
    .begin_lazy = weft__pg_begin_lazy,
    .commit = weft__pg_commit,
    .in_transaction = weft__pg_in_transaction,
    .run_begin = pg_run_begin,
    .run_trace = pg_run_trace,
    .run_end = pg_run_end,
    .step_save = pg_step_save,
    .surgery = pg_surgery,
    .messages_load = pg_messages_load,
    .message_add = pg_message_add,
    .cursors_load = pg_cursors_load,
    .cursors_save = pg_cursors_save,
    .runs_each = pg_runs_each,
    .run_resolve = pg_run_resolve,
    .run_info = pg_run_info,
    .steps_each = pg_steps_each,
    .corrections_each = pg_corrections_each,
    .exchange_add = pg_exchange_add,
    .exchanges_script = pg_exchanges_script,
    .exchange_counts = pg_exchange_counts,
    .tool_result_add = pg_tool_result_add,
    .tool_results_each = pg_tool_results_each,
    .run_origin = pg_run_origin,
    .check = pg_check,
    .lease_acquire = pg_lease_acquire,
    .lease_release = pg_lease_release,
    .heartbeat = pg_heartbeat,
    .run_root = pg_run_root,
    .run_hash_set = pg_run_hash_set,
    .run_hash_get = pg_run_hash_get,
    .run_snapshot_set = pg_run_snapshot_set,
    .run_snapshot_get = pg_run_snapshot_get,
    .end = pg_end,
    .dead_collect = pg_dead_collect,
    .dead_mark = pg_dead_mark,
    .skill_save = weft__pg_skill_save,
    .skill_vectors = weft__pg_skill_vectors,
    .skills_search = weft__pg_skills_search,
    .skill_used = weft__pg_skill_used,
    .skills_list = weft__pg_skills_list,
    .team_save = weft__pg_team_save,
    .teams_list = weft__pg_teams_list,
    .skill_get = weft__pg_skill_get,
    .skills_forget = weft__pg_skills_forget,
    .skills_prune = weft__pg_skills_prune,
    .run_pin = weft__pg_run_pin,
    .gc_scan = weft__pg_gc_scan,
    .gc_kept = weft__pg_gc_kept,
    .gc_run = weft__pg_gc_run,
    .ds_run = weft__pg_ds_run,
};
