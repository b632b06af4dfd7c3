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
#include "runtime/state/state_backend.h"
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

#define MIGRATION_LOCK        2003134068 /* pg_advisory_xact_lock key of the migrations: "weft" */
#define MAX_PARAMS            28
#define RUNS_PAGE             256        /* runs read per query by runs_each */
#define NOTES_TEXT_CAP        8192       /* bytes of each text copied into feedback_notes */
#define CONNECT_TIMEOUT       "10"       /* seconds; the URL's connect_timeout wins */
#define SQL_IN_LOG_BYTES      160        /* how much of a failed statement a log line quotes */
#define PREPARED_MAX          48         /* distinct statements prepared per connection */
#define RECONNECT_DEFAULT_MS  60000u     /* the wait for the server (WEFT_STATE_RECONNECT_MS) */
#define RECONNECT_FIRST_MS    100u       /* the first pause between attempts, doubled each time */
#define RECONNECT_MAX_STEP_MS 5000u      /* the longest pause between attempts */
#define RECONNECT_CAP_MS      3600000u   /* WEFT_STATE_RECONNECT_MS is capped at one hour */
#define JOURNAL_MAX_BYTES     (8u << 20) /* parameter bytes kept per transaction for a replay */
#define JOURNAL_MAX_ENTRIES   4096u      /* statements kept per transaction (~2 MiB of entries) */

/* The advisory lock payload writers hold shared and their collection exclusively (payload_begin):
 * "payb" in ASCII. A literal, as it is spelled into SQL texts. */
#define PAYLOAD_LOCK      "1885436258"
#define PAYLOAD_GET_BATCH 512 /* hashes asked for per query of a payload read */

/* ------------------------------------------------------------------------------------------ */
/* Schema                                                                                      */

/* Version 1: the design's workflows and tasks with weft's columns, and weft's own tables. */
static const char migration_1[] =
    "CREATE TABLE workflows ("
    " workflow_id UUID PRIMARY KEY,"
    " user_prompt TEXT,"
    " creation_timestamp TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " final_status VARCHAR(20) DEFAULT 'in_progress',"
    " total_reward FLOAT,"
    /* weft's own columns */
    " run_id TEXT NOT NULL UNIQUE,"
    " workflow TEXT NOT NULL,"
    " workflow_path TEXT,"
    " session_id TEXT NOT NULL,"
    " status TEXT NOT NULL,"
    " reason TEXT,"
    " output TEXT,"
    " trace_id TEXT,"
    " root_span_id TEXT,"
    " resumed_from_trace TEXT,"
    " iterations BIGINT NOT NULL DEFAULT 0,"
    " input_tokens BIGINT NOT NULL DEFAULT 0,"
    " output_tokens BIGINT NOT NULL DEFAULT 0,"
    " cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,"
    " corrections BIGINT NOT NULL DEFAULT 0,"
    " loops TEXT,"
    " started_ns BIGINT NOT NULL,"
    " ended_ns BIGINT,"
    " owner_pid BIGINT,"
    " owner_host TEXT,"
    " owner_token TEXT,"
    " owner_since_ns BIGINT,"
    " heartbeat_ns BIGINT,"
    " workflow_hash TEXT,"
    " root_span_name TEXT,"
    " root_parent_span_id TEXT,"
    " root_started_ns BIGINT);"
    "CREATE INDEX workflows_started_idx ON workflows (started_ns);"
    "CREATE INDEX workflows_session_idx ON workflows (session_id);"
    "CREATE INDEX workflows_running_idx ON workflows (status) WHERE status = 'running';"
    "CREATE TABLE tasks ("
    " task_id UUID PRIMARY KEY,"
    " workflow_id UUID NOT NULL REFERENCES workflows (workflow_id) ON DELETE CASCADE,"
    " parent_id UUID REFERENCES tasks (task_id) ON DELETE SET NULL,"
    " task_order INT NOT NULL,"
    " description TEXT,"
    " status VARCHAR(20) NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'dispatched',"
    " 'in_progress', 'success', 'failed', 'paused', 'skipped')),"
    " dependencies UUID[] NOT NULL DEFAULT '{}',"
    " executor_type VARCHAR(50),"
    " reward FLOAT,"
    " feedback_notes JSONB,"
    " retries INT NOT NULL DEFAULT 0,"
    " creation_timestamp TIMESTAMPTZ NOT NULL DEFAULT now(),"
    " last_update_timestamp TIMESTAMPTZ NOT NULL DEFAULT now(),"
    /* weft's own columns */
    " step_id TEXT NOT NULL,"
    " step_status TEXT NOT NULL,"
    " agent TEXT NOT NULL,"
    " attempts INT NOT NULL DEFAULT 0,"
    " result TEXT,"
    " feedback TEXT,"
    " requested_by TEXT,"
    " spec TEXT,"
    " parent_step TEXT,"
    " error_type TEXT,"
    " error TEXT,"
    " depends_on TEXT NOT NULL DEFAULT '[]',"
    " started_ns BIGINT,"
    " ended_ns BIGINT,"
    " span_id TEXT,"
    " span_parent_id TEXT,"
    " is_dispatched BOOLEAN NOT NULL DEFAULT false,"
    " UNIQUE (workflow_id, task_order));"
    "CREATE INDEX tasks_status_idx ON tasks (status);"
    "CREATE INDEX tasks_workflow_id_idx ON tasks (workflow_id);"
    "CREATE INDEX tasks_step_idx ON tasks (workflow_id, step_id);"
    "CREATE TABLE messages ("
    " seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " session_id TEXT NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,"
    " content TEXT NOT NULL, route TEXT, created_ns BIGINT NOT NULL);"
    "CREATE INDEX messages_session_idx ON messages (session_id, seq);"
    "CREATE TABLE script_cursor_keys ("
    " session_id TEXT NOT NULL, script TEXT NOT NULL, queue TEXT NOT NULL,"
    " used BIGINT NOT NULL, PRIMARY KEY (session_id, script, queue));"
    "CREATE TABLE llm_exchanges ("
    " seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " run_id TEXT NOT NULL, who TEXT NOT NULL, purpose TEXT NOT NULL, entry TEXT NOT NULL,"
    " created_ns BIGINT NOT NULL);"
    "CREATE INDEX llm_exchanges_run_idx ON llm_exchanges (run_id, seq);"
    "CREATE TABLE corrections ("
    " run_id TEXT NOT NULL, seq INT NOT NULL, failed_step TEXT NOT NULL, error_type TEXT,"
    " inserted TEXT NOT NULL, depends_before TEXT NOT NULL, depends_after TEXT NOT NULL,"
    " created_ns BIGINT NOT NULL, PRIMARY KEY (run_id, seq));";

/* Version 2: per-run metric snapshots (metrics_store.h), the SQLite table's columns with
 * PostgreSQL's types. No foreign key to workflows: as in SQLite, a snapshot row stands alone. */
static const char migration_2[] =
    "CREATE TABLE run_metrics ("
    " run_id TEXT NOT NULL, attempt BIGINT NOT NULL, name TEXT NOT NULL, kind INT NOT NULL,"
    " unit TEXT NOT NULL, description TEXT NOT NULL, labels TEXT NOT NULL,"
    " value DOUBLE PRECISION NOT NULL DEFAULT 0, count BIGINT NOT NULL DEFAULT 0,"
    " sum DOUBLE PRECISION NOT NULL DEFAULT 0, min DOUBLE PRECISION, max DOUBLE PRECISION,"
    " bounds TEXT, buckets TEXT, saved_ns BIGINT NOT NULL,"
    " PRIMARY KEY (run_id, attempt, name, labels));"
    "CREATE INDEX run_metrics_name_idx ON run_metrics (name);";

/* Version 3: skill memory (state.h, docs/memory.md), the SQLite table's columns. The task's
 * words are a generated tsvector (english: stemmed, stop words dropped) under a GIN index,
 * with one more lexeme, the agent's key ("k" and 16 hex digits of md5(agent)), so that a
 * search ANDs the agent into the match and GIN hands over only that agent's rows. ids sort in
 * the C collation, so a prefix is a range of the primary key. skills_terms holds the lexemes
 * of at least 64 tasks with their counts (rebuilt from ts_stat() as the store grows, see
 * skills_terms_refresh()); skills_meta counts the rows (kept by a trigger). The GIN index
 * takes its entries at once (fastupdate off): with a pending list, every search scanned up to
 * 4 MB of recent entries until a vacuum merged them (3 ms a search at 100,000 skills). */
static const char migration_3[] =
    "CREATE TABLE skills ("
    " id TEXT COLLATE \"C\" PRIMARY KEY, agent TEXT NOT NULL, task_hash TEXT NOT NULL,"
    " task TEXT NOT NULL, solution TEXT NOT NULL, workflow TEXT, run_id TEXT, trace_id TEXT,"
    " span_id TEXT, reward DOUBLE PRECISION NOT NULL, created_ns BIGINT NOT NULL,"
    " last_used_ns BIGINT NOT NULL DEFAULT 0, uses BIGINT NOT NULL DEFAULT 0,"
    " tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', task) ||"
    " array_to_tsvector(ARRAY['k' || left(md5(agent), 16)])) STORED,"
    " UNIQUE (agent, task_hash));"
    "CREATE INDEX skills_agent_rank_idx ON skills (agent, reward, created_ns);"
    "CREATE INDEX skills_created_idx ON skills (created_ns);"
    "CREATE INDEX skills_tsv_idx ON skills USING GIN (tsv) WITH (fastupdate = off);"
    "CREATE TABLE skills_terms (term TEXT PRIMARY KEY, docs BIGINT NOT NULL);"
    "CREATE TABLE skills_meta (id INT PRIMARY KEY CHECK (id = 1), stored BIGINT NOT NULL,"
    " stored_at_terms BIGINT NOT NULL);"
    "INSERT INTO skills_meta VALUES (1, 0, 0);"
    "CREATE FUNCTION weft_skills_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " UPDATE skills_meta SET stored = stored + CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END"
    " WHERE id = 1; RETURN NULL; END $$;"
    "CREATE TRIGGER skills_count AFTER INSERT OR DELETE ON skills"
    " FOR EACH ROW EXECUTE FUNCTION weft_skills_count();";

/* Version 4: skill embeddings (state.h, docs/memory.md): each skill's task vector, float32
 * little-endian bytes, with the model that made it, deleted with its skill (the foreign key);
 * a table of its own so that a scan of one agent's vectors reads only vectors. */
static const char migration_4[] =
    "CREATE TABLE skill_vectors ("
    " id TEXT COLLATE \"C\" PRIMARY KEY REFERENCES skills (id) ON DELETE CASCADE,"
    " agent TEXT NOT NULL, model TEXT NOT NULL, vec bytea NOT NULL);"
    "CREATE INDEX skill_vectors_agent_idx ON skill_vectors (agent, model);";

/* Migration 5 (composed teams, docs/architect.md): a row per team an architect composed, its
 * design as JSONB beside the design's workflows table. (4 is the skill vectors'.) */
static const char migration_5[] =
    "CREATE TABLE teams (id UUID PRIMARY KEY, name TEXT NOT NULL, path TEXT NOT NULL,"
    " goal TEXT NOT NULL, document JSONB NOT NULL, run_id TEXT, created_ns BIGINT NOT NULL);"
    "CREATE INDEX teams_run_idx ON teams (run_id, created_ns);"
    "CREATE INDEX teams_created_idx ON teams (created_ns);";

/* Version 6 (replay and fork, docs/replay.md): every tool call's request and outcome, keyed by
 * run, step, attempt and call sequence (seq_all keeps the order they were made in), and where
 * a run came from (a replay or a fork of another run). */
static const char migration_6[] =
    "CREATE TABLE tool_results ("
    " run_id TEXT NOT NULL, step_id TEXT NOT NULL, attempt INT NOT NULL, seq INT NOT NULL,"
    " seq_all BIGINT GENERATED ALWAYS AS IDENTITY, tool TEXT NOT NULL, kind TEXT NOT NULL,"
    " request TEXT NOT NULL, outcome TEXT NOT NULL, created_ns BIGINT NOT NULL,"
    " PRIMARY KEY (run_id, step_id, attempt, seq));"
    "ALTER TABLE workflows ADD COLUMN origin_kind TEXT;"
    "ALTER TABLE workflows ADD COLUMN origin_run_id TEXT;"
    "ALTER TABLE workflows ADD COLUMN origin_step TEXT;";

/* The snapshot of the run's workflow files (docs/replay.md, "What a run keeps"): replay, fork
 * and resume work after the workflow file moved. SQLite's version 11. */
static const char migration_7[] = "ALTER TABLE workflows ADD COLUMN workflow_snapshot TEXT;";

/* Retention (docs/retention.md): a pinned run is kept by `weft gc` whatever its age; the index
 * on ended_ns finds the runs old enough to go. SQLite's version 12. */
static const char migration_8[] =
    "ALTER TABLE workflows ADD COLUMN pinned BOOLEAN NOT NULL DEFAULT false;"
    "CREATE INDEX workflows_ended_idx ON workflows (ended_ns);";

/* Tail sampling (docs/sampling.md): what the policy decided of the run's trace, "kept:RULE" or
 * "dropped:RULE" (NULL: no policy). SQLite's version 13. */
static const char migration_9[] = "ALTER TABLE workflows ADD COLUMN trace_sampling TEXT;";

/* Content-addressed payloads (store/payload.h, docs/replay.md): a replay record's text of
 * WEFT__PAYLOAD_MIN bytes or more is stored once per content hash in payloads, and its row
 * keeps the reference with the text column empty; a row without one reads as before. The
 * partial indexes let retention ask whether a reference is still held. SQLite's version 14. */
static const char migration_10[] =
    "CREATE TABLE payloads (hash TEXT PRIMARY KEY, kind INT NOT NULL, size BIGINT NOT NULL,"
    " data bytea NOT NULL);"
    "ALTER TABLE llm_exchanges ADD COLUMN entry_ref TEXT;"
    "ALTER TABLE tool_results ADD COLUMN request_ref TEXT, ADD COLUMN outcome_ref TEXT;"
    "CREATE INDEX llm_exchanges_entry_ref_idx ON llm_exchanges (entry_ref)"
    " WHERE entry_ref IS NOT NULL;"
    "CREATE INDEX tool_results_request_ref_idx ON tool_results (request_ref)"
    " WHERE request_ref IS NOT NULL;"
    "CREATE INDEX tool_results_outcome_ref_idx ON tool_results (outcome_ref)"
    " WHERE outcome_ref IS NOT NULL;";

/* The run's workflow snapshot as a payload too: repeated runs of one workflow keep its files
 * once. SQLite's version 15. */
static const char migration_11[] =
    "ALTER TABLE workflows ADD COLUMN workflow_snapshot_ref TEXT;"
    "CREATE INDEX workflows_snapshot_ref_idx ON workflows (workflow_snapshot_ref)"
    " WHERE workflow_snapshot_ref IS NOT NULL;";

static const char *const migrations[] = {migration_1, migration_2,  migration_3, migration_4,
                                         migration_5, migration_6,  migration_7, migration_8,
                                         migration_9, migration_10, migration_11};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* ------------------------------------------------------------------------------------------ */
/* The handle                                                                                  */

/* A statement prepared in the current session (see send_sql()). */
struct prepared {
    const char *sql; /* a string literal: compared by address; NULL: a free slot */
    char name[16];
    bool is_ready; /* prepared in this session (a reconnect starts a new one) */
};

/* One statement of the open transaction, kept to be sent again after a reconnect: its text
 * (the same literal, so the prepared statement cache still knows it) and copies of its
 * parameters. */
struct journal_entry {
    const char *sql;
    char *v[MAX_PARAMS]; /* owned copies; NULL for SQL NULL */
    int len[MAX_PARAMS];
    int fmt[MAX_PARAMS];
    int n;
    bool has_binary;
    bool is_binary_result;
};

struct pg_state {
    struct rt_state base; /* first: the handle callers hold */
    PGconn *conn;
    struct prepared prepared[PREPARED_MAX];
    char *where;           /* the URL without its password, for messages */
    unsigned tx_depth;     /* weft__state_begin() nesting: only the outermost pair reaches PG */
    bool is_tx_failed;     /* a statement inside the open transaction failed: roll it back */
    bool is_lost;          /* an outage outlasted the wait: some write is missing (sticky) */
    bool is_committing;    /* pg_commit() is sending COMMIT: a lost answer replays the journal */
    uint64_t reconnect_ms; /* the wait for a lost connection (WEFT_STATE_RECONNECT_MS) */
    const char *begin_sql; /* how the open transaction began ("BEGIN" or the lazy one) */
    /* The open transaction's statements (see the file comment); is_replayable false once it
     * read rows or outgrew JOURNAL_MAX_BYTES / JOURNAL_MAX_ENTRIES, or a copy failed. */
    struct journal_entry *journal;
    size_t journal_count;
    size_t journal_cap;
    size_t journal_bytes;
    bool is_replayable;
    unsigned reconnects;          /* connections made again after a loss, for tests and logs */
    char owner_token[33];         /* this handle's lease token; "" when it owns no run */
    uint64_t last_heartbeat_mono; /* heartbeats are written at most once a second */
};

static const struct weft__state_ops pg_ops;

static struct pg_state *
pg(struct rt_state *base)
{
    return (struct pg_state *)base; /* base is the first member */
}

/* ------------------------------------------------------------------------------------------ */
/* Parameters: text values for PQexecParams, owning what they had to copy                      */

struct params {
    const char *v[MAX_PARAMS];
    char *owned[MAX_PARAMS];
    char num[MAX_PARAMS][32];
    int len[MAX_PARAMS]; /* binary parameters' lengths (p_bytes) */
    int fmt[MAX_PARAMS]; /* 1 for a binary parameter */
    int n;
    bool is_oom;
    bool has_binary;       /* a p_bytes() parameter: lengths and formats go along */
    bool is_binary_result; /* columns come back in binary (bytea as its bytes) */
};

static void
params_init(struct params *p)
{
    memset(p, 0, sizeof(*p));
}

static void
params_cleanup(struct params *p)
{
    for (int i = 0; i < p->n; i++) {
        weft__free(p->owned[i]);
    }
    memset(p, 0, sizeof(*p));
}

/* The next slot, or -1 (and is_oom) past MAX_PARAMS, which would be a bug of this file. */
static int
slot(struct params *p)
{
    if (p->n == MAX_PARAMS) {
        p->is_oom = true;
        return -1;
    }
    p->v[p->n] = NULL;
    p->owned[p->n] = NULL;
    return p->n++;
}

/* @p s made valid UTF-8 (PostgreSQL refuses other text): @p s itself when it is, else a copy
 * with each invalid part replaced by U+FFFD, kept in slot @p i. */
static void
put_utf8(struct params *p, int i, const char *s, char *owned)
{
    struct weft__buf b;
    size_t len = strlen(s);

    if (weft__utf8_valid(s, len)) {
        p->v[i] = s;
        p->owned[i] = owned;
        return;
    }
    weft__buf_init(&b, 0);
    if (weft__utf8_sanitize(s, len, WEFT__UTF8_REPLACEMENT, &b) != WEFT_OK || b.data == NULL) {
        weft__buf_cleanup(&b);
        weft__free(owned);
        p->is_oom = true;
        return;
    }
    weft__free(owned);
    p->v[i] = b.data;
    p->owned[i] = b.data;
}

/* Free text: redacted (credentials never reach the database) and valid UTF-8. NULL is NULL. */
static void
p_text(struct params *p, const char *s)
{
    int i = slot(p);
    char *clean = NULL;

    if (i < 0 || s == NULL) {
        return;
    }
    clean = weft__redact_text(s);
    if (clean == NULL) {
        p->is_oom = true;
        return;
    }
    put_utf8(p, i, clean, clean);
}

/* A key (run, session, step id, script path): generated or chosen by the user, never a secret,
 * and bound as it is so that reads and writes agree (valid UTF-8 aside). NULL is NULL. */
static void
p_key(struct params *p, const char *s)
{
    int i = slot(p);

    if (i >= 0 && s != NULL) {
        put_utf8(p, i, s, NULL);
    }
}

/* A string this file built (JSON, UUIDs, status names): bound as it is. */
static void
p_raw(struct params *p, const char *s)
{
    int i = slot(p);

    if (i >= 0) {
        p->v[i] = s;
    }
}

/* @p len bytes, sent as they are (bytea without hex: half the bytes and no encoding). */
static void
p_bytes(struct params *p, const unsigned char *bytes, size_t len)
{
    int i = len <= INT_MAX ? slot(p) : -1;

    if (i >= 0) {
        p->v[i] = (const char *)bytes;
        p->len[i] = (int)len;
        p->fmt[i] = 1;
        p->has_binary = true;
    } else {
        p->is_oom = true;
    }
}

static void
p_i64(struct params *p, int64_t v)
{
    int i = slot(p);

    if (i >= 0) {
        snprintf(p->num[i], sizeof(p->num[i]), "%lld", (long long)v);
        p->v[i] = p->num[i];
    }
}

/* Nanosecond times and other counters stored as BIGINT. */
static void
p_u64(struct params *p, uint64_t v)
{
    p_i64(p, v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

static void
p_double(struct params *p, double v)
{
    int i = slot(p);

    if (i >= 0) {
        snprintf(p->num[i], sizeof(p->num[i]), "%.17g", v); /* round-trips exactly */
        p->v[i] = p->num[i];
    }
}

static void
p_bool(struct params *p, bool v)
{
    p_raw(p, v ? "true" : "false");
}

/* ------------------------------------------------------------------------------------------ */
/* Running statements                                                                          */

static void
notice(void *arg, const char *message)
{
    (void)arg;
    /* CREATE ... IF NOT EXISTS and friends: the library never prints. */
    WEFT_LOG(WEFT_LOG_DEBUG, "state: postgresql: %s", message);
}

/* The server's one-line message of @p res (or the connection's), without its trailing
 * newline, into @p out. Only the primary message: DETAIL and CONTEXT may quote row values. */
static void
error_text(const struct pg_state *st, const PGresult *res, char *out, size_t len)
{
    const char *primary = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *code = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    size_t n = 0;

    if (primary != NULL) {
        snprintf(out, len, "%s (SQLSTATE %s)", primary, code != NULL ? code : "?");
    } else {
        snprintf(out, len, "%s", PQerrorMessage(st->conn));
    }
    n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ')) {
        out[--n] = '\0';
    }
    for (char *c = out; *c != '\0'; c++) {
        if (*c == '\n') {
            *c = ' ';
        }
    }
}

/* The session's settings, after each connect. Prepared statements are there so that a save
 * is not planned again each time (planning the step upsert costs more than running it), but
 * PostgreSQL's default plan_cache_mode (auto) keeps planning a statement afresh while a plan
 * for its actual parameters looks cheaper than the generic one, which it does for the upsert
 * (its CASE branches fold away once the parameters are known): a quarter of the server's time
 * per save went to the planner. Every statement here is a keyed lookup or write whose generic
 * plan is the right one. Servers before 12 lack the setting: ignored. */
static void
session_setup(struct pg_state *st)
{
    PGresult *res = PQexec(st->conn, "SET plan_cache_mode = force_generic_plan");

    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        WEFT_LOG(WEFT_LOG_DEBUG, "state: %s: plan_cache_mode not set: %s", st->where,
                 PQerrorMessage(st->conn));
    }
    PQclear(res);
}

/* The wait for a lost connection: WEFT_STATE_RECONNECT_MS (milliseconds, at most
 * RECONNECT_CAP_MS; 0 makes the connection again once, without waiting), else
 * RECONNECT_DEFAULT_MS. */
static uint64_t
reconnect_budget_ms(void)
{
    const char *v = getenv("WEFT_STATE_RECONNECT_MS");
    char *end = NULL;
    unsigned long long ms = 0;

    if (v == NULL || v[0] == '\0') {
        return RECONNECT_DEFAULT_MS;
    }
    errno = 0;
    ms = strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
        WEFT_LOG(WEFT_LOG_WARN,
                 "state: WEFT_STATE_RECONNECT_MS=%.32s is not a number of milliseconds; using %u",
                 v, RECONNECT_DEFAULT_MS);
        return RECONNECT_DEFAULT_MS;
    }
    return ms > RECONNECT_CAP_MS ? RECONNECT_CAP_MS : (uint64_t)ms;
}

/* After the connection dropped: make it again, with a pause between attempts that starts at
 * RECONNECT_FIRST_MS and doubles up to RECONNECT_MAX_STEP_MS, until @p deadline
 * (weft__monotonic_ns() time; an attempt itself can take up to the connect timeout). @return
 * true when it is back; false marks the handle lost for good (is_lost). */
static bool
reconnect(struct pg_state *st, const char *what, uint64_t deadline)
{
    uint64_t started = weft__monotonic_ns();
    unsigned pause = RECONNECT_FIRST_MS;
    unsigned attempts = 0;

    for (;;) {
        uint64_t now = 0;
        uint64_t left_ms = 0;

        PQreset(st->conn);
        attempts++;
        if (PQstatus(st->conn) == CONNECTION_OK) {
            break;
        }
        now = weft__monotonic_ns();
        if (now >= deadline) {
            WEFT_LOG(WEFT_LOG_ERROR,
                     "state: the connection to %s was lost during %s and could not be made "
                     "again in %llu ms (%u attempts); writes from now on may be missing",
                     st->where, what, (unsigned long long)((now - started) / 1000000u), attempts);
            st->is_lost = true;
            return false;
        }
        if (attempts == 1) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "state: the connection to %s was lost during %s; waiting up to %llu ms for "
                     "the server",
                     st->where, what, (unsigned long long)((deadline - now) / 1000000u));
        }
        left_ms = (deadline - now + 999999u) / 1000000u;
        weft__sleep_ms(left_ms < pause ? (unsigned)left_ms : pause);
        pause = pause * 2 > RECONNECT_MAX_STEP_MS ? RECONNECT_MAX_STEP_MS : pause * 2;
    }
    for (size_t i = 0; i < PREPARED_MAX; i++) {
        st->prepared[i].is_ready = false; /* prepared statements live in a session */
    }
    session_setup(st);
    st->reconnects++;
    WEFT_LOG(WEFT_LOG_WARN,
             "state: the connection to %s was lost during %s; reconnected after %llu ms", st->where,
             what, (unsigned long long)((weft__monotonic_ns() - started) / 1000000u));
    return true;
}

/* The prepared statement of @p sql (a string literal, known by its address), or NULL when the
 * cache is full: that statement then runs unprepared. */
static struct prepared *
prepared_of(struct pg_state *st, const char *sql)
{
    for (size_t i = 0; i < PREPARED_MAX; i++) {
        struct prepared *ps = &st->prepared[i];
        if (ps->sql == sql) {
            return ps;
        }
        if (ps->sql == NULL) {
            ps->sql = sql;
            snprintf(ps->name, sizeof(ps->name), "weft_%zu", i);
            ps->is_ready = false;
            return ps;
        }
    }
    return NULL;
}

/* Send @p sql once: statements with parameters are prepared on their first use in a session
 * and executed by name afterwards (parsing and planning a step's upsert cost ten times its
 * execution); others go as they are. The result is the server's answer, whatever it is. */
static PGresult *
send_sql(struct pg_state *st, const char *sql, const struct params *p)
{
    struct prepared *ps = p != NULL ? prepared_of(st, sql) : NULL;
    PGresult *res = NULL;

    const int *lens = p != NULL && p->has_binary ? p->len : NULL;
    const int *fmts = p != NULL && p->has_binary ? p->fmt : NULL;
    int result_format = p != NULL && p->is_binary_result ? 1 : 0;

    if (ps == NULL) {
        return PQexecParams(st->conn, sql, p != NULL ? p->n : 0, NULL, p != NULL ? p->v : NULL,
                            lens, fmts, result_format);
    }
    if (!ps->is_ready) {
        res = PQprepare(st->conn, ps->name, sql, p->n, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            return res;
        }
        PQclear(res);
        ps->is_ready = true;
    }
    return PQexecPrepared(st->conn, ps->name, p->n, p->v, lens, fmts, result_format);
}

/* ------------------------------------------------------------------------------------------ */
/* The journal of the open transaction (see the file comment)                                  */

static void
journal_clear(struct pg_state *st)
{
    for (size_t i = 0; i < st->journal_count; i++) {
        for (int k = 0; k < st->journal[i].n; k++) {
            weft__free(st->journal[i].v[k]);
        }
    }
    st->journal_count = 0;
    st->journal_bytes = 0;
    st->is_replayable = true;
}

/* The open transaction can no longer be sent again: its journal goes (memory back at once). */
static void
journal_drop(struct pg_state *st)
{
    journal_clear(st);
    st->is_replayable = false;
}

/* Keep @p sql and copies of @p p (NULL: none) as the next statement of the open transaction. */
static void
journal_add(struct pg_state *st, const char *sql, const struct params *p)
{
    struct journal_entry *e = NULL;
    size_t bytes = 0;

    if (!st->is_replayable) {
        return;
    }
    for (int i = 0; p != NULL && i < p->n; i++) {
        bytes += p->v[i] == NULL ? 0 : p->fmt[i] == 1 ? (size_t)p->len[i] : strlen(p->v[i]) + 1;
    }
    if (st->journal_count == JOURNAL_MAX_ENTRIES || bytes > JOURNAL_MAX_BYTES - st->journal_bytes) {
        WEFT_LOG(WEFT_LOG_DEBUG, "state: a transaction on %s outgrew its journal: not replayable",
                 st->where);
        journal_drop(st);
        return;
    }
    if (st->journal_count == st->journal_cap) {
        size_t cap = st->journal_cap > 0 ? st->journal_cap * 2 : 16;
        struct journal_entry *grown = weft__realloc(st->journal, cap * sizeof(*grown));
        if (grown == NULL) {
            journal_drop(st);
            return;
        }
        st->journal = grown;
        st->journal_cap = cap;
    }
    e = &st->journal[st->journal_count];
    memset(e, 0, sizeof(*e));
    e->sql = sql;
    e->n = p != NULL ? p->n : -1; /* -1: sent without parameters (not prepared) */
    for (int i = 0; p != NULL && i < p->n; i++) {
        size_t len = 0;

        e->fmt[i] = p->fmt[i];
        e->len[i] = p->len[i];
        if (p->v[i] == NULL) {
            continue;
        }
        len = p->fmt[i] == 1 ? (size_t)p->len[i] : strlen(p->v[i]) + 1;
        e->v[i] = weft__malloc(len > 0 ? len : 1);
        if (e->v[i] == NULL) {
            for (int k = 0; k < i; k++) {
                weft__free(e->v[k]);
            }
            journal_drop(st);
            return;
        }
        memcpy(e->v[i], p->v[i], len);
    }
    if (p != NULL) {
        e->has_binary = p->has_binary;
        e->is_binary_result = p->is_binary_result;
    }
    st->journal_count++;
    st->journal_bytes += bytes;
}

/* After a reconnect inside a transaction: begin it again and send its journal, so that the
 * server holds what it held before the loss. @return true then; false when something failed
 * (the connection again: PQstatus tells). */
static bool
journal_replay(struct pg_state *st)
{
    PGresult *res = PQexec(st->conn, st->begin_sql != NULL ? st->begin_sql : "BEGIN");
    bool is_ok = PQresultStatus(res) == PGRES_COMMAND_OK;

    PQclear(res);
    for (size_t i = 0; is_ok && i < st->journal_count; i++) {
        const struct journal_entry *e = &st->journal[i];
        struct params q;
        ExecStatusType status = PGRES_FATAL_ERROR;

        params_init(&q);
        for (int k = 0; k < e->n; k++) {
            q.v[k] = e->v[k];
            q.len[k] = e->len[k];
            q.fmt[k] = e->fmt[k];
        }
        q.n = e->n > 0 ? e->n : 0;
        q.has_binary = e->has_binary;
        q.is_binary_result = e->is_binary_result;
        res = send_sql(st, e->sql, e->n >= 0 ? &q : NULL);
        status = PQresultStatus(res);
        is_ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
        PQclear(res);
    }
    if (is_ok) {
        WEFT_LOG(WEFT_LOG_INFO, "state: the open transaction on %s was sent again (%zu statements)",
                 st->where, st->journal_count);
    }
    return is_ok;
}

/* The connection is gone during @p what: make it again before @p deadline and, @p is_in_tx,
 * give the server the open transaction back. @return true when the statement can be sent
 * again. */
static bool
recover(struct pg_state *st, const char *what, bool is_in_tx, uint64_t deadline)
{
    for (;;) {
        if (!reconnect(st, what, deadline)) {
            return false;
        }
        if (!is_in_tx || journal_replay(st)) {
            return true;
        }
        if (PQstatus(st->conn) != CONNECTION_BAD) {
            WEFT_LOG(WEFT_LOG_ERROR,
                     "state: the open transaction on %s could not be sent again: %s", st->where,
                     PQerrorMessage(st->conn));
            return false;
        }
    }
}

/* Run @p sql with the parameters @p p (NULL: none): the one wrapper around libpq's execution.
 * @p may_retry: the statement may be sent again after a reconnect (not ROLLBACK). @p resend
 * (NULL: @p sql) is what is sent again, and journaled inside a transaction: a variant that
 * changes nothing when the first one was applied before its answer was lost. @return the
 * result (PQclear it), or NULL on failure: logged with the statement and the database, and an
 * open transaction is marked to roll back. */
static PGresult *
run_sql_as(struct pg_state *st,
           const char *what,
           const char *sql,
           const char *resend,
           const struct params *p,
           bool may_retry)
{
    PGresult *res = NULL;
    const char *again = resend != NULL ? resend : sql;
    uint64_t deadline = 0;
    char why[512];

    if (p != NULL && p->is_oom) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: %s on %s: out of memory", what, st->where);
        st->is_tx_failed = st->tx_depth > 0;
        return NULL;
    }
    res = send_sql(st, sql, p);
    for (;;) {
        ExecStatusType status = PQresultStatus(res);
        bool is_in_tx = st->tx_depth > 0 || st->is_committing;

        if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
            if (st->tx_depth > 0 && status == PGRES_TUPLES_OK) {
                journal_drop(st); /* what was read decided what follows */
            } else if (st->tx_depth > 0) {
                journal_add(st, again, p);
            }
            return res;
        }
        if (!may_retry || PQstatus(st->conn) != CONNECTION_BAD ||
            (is_in_tx && !st->is_replayable)) {
            break;
        }
        PQclear(res);
        res = NULL;
        if (deadline == 0) {
            /* A handle already lost tries once: a dead database does not cost every statement
             * the whole wait. */
            deadline = weft__monotonic_ns() + (st->is_lost ? 0 : st->reconnect_ms * 1000000u);
        }
        if (!recover(st, what, is_in_tx, deadline)) {
            break;
        }
        res = send_sql(st, again, p);
    }
    error_text(st, res, why, sizeof(why));
    WEFT_LOG(WEFT_LOG_ERROR, "state: %s failed on %s: %s (statement: %.*s%s)", what, st->where, why,
             SQL_IN_LOG_BYTES, sql, strlen(sql) > SQL_IN_LOG_BYTES ? "..." : "");
    PQclear(res);
    st->is_tx_failed = st->tx_depth > 0;
    return NULL;
}

static PGresult *
run_sql(
    struct pg_state *st, const char *what, const char *sql, const struct params *p, bool may_retry)
{
    return run_sql_as(st, what, sql, NULL, p, may_retry);
}

static PGresult *
query(struct pg_state *st, const char *what, const char *sql, const struct params *p)
{
    return run_sql(st, what, sql, p, true);
}

/* A statement whose result is not needed. @return WEFT_OK, WEFT_EIO (logged). */
static weft_err
exec_sql(struct pg_state *st, const char *what, const char *sql, const struct params *p)
{
    PGresult *res = query(st, what, sql, p);

    PQclear(res);
    return res != NULL ? WEFT_OK : WEFT_EIO;
}

/* An append (a row with no key of its own): @p resend, sent again after a lost answer, adds
 * the row only when the first send did not. @return WEFT_OK, WEFT_EIO (logged). */
static weft_err
exec_append(struct pg_state *st,
            const char *what,
            const char *sql,
            const char *resend,
            const struct params *p)
{
    PGresult *res = run_sql_as(st, what, sql, resend, p, true);

    PQclear(res);
    return res != NULL ? WEFT_OK : WEFT_EIO;
}

/* NULL for SQL NULL, else the text value (valid until PQclear). */
static const char *
val(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static int64_t
col_i64(const PGresult *res, int row, int col)
{
    const char *v = val(res, row, col);

    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

static double
col_double(const PGresult *res, int row, int col)
{
    const char *v = val(res, row, col);

    return v != NULL ? strtod(v, NULL) : 0.0;
}

static char *
col_dup(const PGresult *res, int row, int col, bool *is_oom)
{
    const char *v = val(res, row, col);
    char *copy = NULL;

    if (v == NULL) {
        return NULL;
    }
    copy = weft__strdup(v);
    if (copy == NULL) {
        *is_oom = true;
    }
    return copy;
}

/* ------------------------------------------------------------------------------------------ */
/* Open, migrate, close                                                                        */

static weft_err
migrate_one(struct pg_state *st, int version, char *err, size_t err_len)
{
    struct params p;
    struct params lock;
    PGresult *res = NULL;
    int applied = 0;
    weft_err rc = WEFT_EIO;

    params_init(&p);
    p_i64(&p, version);
    params_init(&lock);
    p_i64(&lock, MIGRATION_LOCK);
    if (exec_sql(st, "migration begin", "BEGIN", NULL) != WEFT_OK) {
        snprintf(err, err_len, "state database %s: cannot begin a migration", st->where);
        return WEFT_EIO;
    }
    st->tx_depth = 1;
    journal_drop(st); /* nothing below is sent again after a reconnect */
    /* The lock is the transaction's: the table that records versions is created under it too,
     * so the first two processes on an empty database do not both create it. */
    if (exec_sql(st, "migration lock", "SELECT pg_advisory_xact_lock($1)", &lock) != WEFT_OK ||
        exec_sql(st, "migration table",
                 "CREATE TABLE IF NOT EXISTS weft_schema_migrations (version INT PRIMARY KEY,"
                 " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                 NULL) != WEFT_OK) {
        snprintf(err, err_len, "state database %s: cannot lock or create weft_schema_migrations",
                 st->where);
        goto out;
    }
    res = query(st, "migration version",
                "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations", NULL);
    if (res == NULL) {
        snprintf(err, err_len, "state database %s: cannot read weft_schema_migrations", st->where);
        goto out;
    }
    applied = (int)col_i64(res, 0, 0);
    PQclear(res);
    if (applied > SCHEMA_VERSION) {
        snprintf(err, err_len, "state database %s has schema %d; this weft knows %d", st->where,
                 applied, SCHEMA_VERSION);
        goto out;
    }
    if (applied >= version) {
        rc = WEFT_OK; /* another process applied it while this one waited for the lock */
        goto out;
    }
    /* A migration is several statements without values: the simple query protocol runs them
     * in the open transaction. */
    res = PQexec(st->conn, migrations[version - 1]);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        char why[512];
        error_text(st, res, why, sizeof(why));
        snprintf(err, err_len, "state database %s: migration %d failed: %s", st->where, version,
                 why);
        PQclear(res);
        goto out;
    }
    PQclear(res);
    if (exec_sql(st, "migration record", "INSERT INTO weft_schema_migrations (version) VALUES ($1)",
                 &p) != WEFT_OK) {
        snprintf(err, err_len, "state database %s: cannot record migration %d", st->where, version);
        goto out;
    }
    rc = WEFT_OK;
out:
    st->tx_depth = 0;
    journal_clear(st);
    if (rc == WEFT_OK) {
        res = run_sql(st, "migration commit", "COMMIT", NULL, false);
        if (res == NULL || strcmp(PQcmdStatus(res), "COMMIT") != 0) {
            snprintf(err, err_len, "state database %s: migration %d did not commit", st->where,
                     version);
            rc = WEFT_EIO;
        }
        PQclear(res);
    } else {
        PQclear(run_sql(st, "migration rollback", "ROLLBACK", NULL, false));
    }
    params_cleanup(&p);
    params_cleanup(&lock);
    return rc;
}

static weft_err
migrate(struct pg_state *st, char *err, size_t err_len)
{
    PGresult *res = NULL;
    int applied = -1;

    /* The common case, an up-to-date database, costs one query and takes no lock. Its failure
     * (no table yet) is expected, so it is not logged: PQexec, not query(). */
    res = PQexec(st->conn, "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations");
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        applied = (int)col_i64(res, 0, 0);
    }
    PQclear(res);
    if (applied > SCHEMA_VERSION) {
        snprintf(err, err_len, "state database %s has schema %d; this weft knows %d", st->where,
                 applied, SCHEMA_VERSION);
        return WEFT_EIO;
    }
    for (int v = applied < 0 ? 1 : applied + 1; v <= SCHEMA_VERSION; v++) {
        weft_err rc = migrate_one(st, v, err, err_len);
        if (rc != WEFT_OK) {
            return rc;
        }
    }
    return WEFT_OK;
}

static void pg_close(struct rt_state *base);

weft_err
weft__state_pg_open(
    const char *url, bool is_waiting, struct rt_state **out, char *err, size_t err_len)
{
    /* Defaults first: the URL's own settings, processed after them, win. */
    static const char *const keys[] = {"connect_timeout", "fallback_application_name",
                                       "client_encoding", "dbname", NULL};
    const char *values[] = {CONNECT_TIMEOUT, "weft", "UTF8", url, NULL};
    struct pg_state *st = NULL;
    weft_err rc = WEFT_OK;

    *out = NULL;
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    st->base.ops = &pg_ops;
    st->reconnect_ms = reconnect_budget_ms();
    st->is_replayable = true;
    st->where = weft__state_location_redacted(url);
    if (st->where == NULL) {
        weft__free(st);
        return WEFT_ENOMEM;
    }
    st->conn = PQconnectdbParams(keys, values, 1);
    if (st->conn == NULL) {
        pg_close(&st->base);
        return WEFT_ENOMEM;
    }
    PQsetNoticeProcessor(st->conn, notice, NULL);
    /* A worker's task waits for a server that is away, as a lost connection does; a command
     * (`weft run`, `weft runs`) fails at once: nothing has run yet, and a wrong URL should not
     * cost a minute. */
    if (PQstatus(st->conn) != CONNECTION_OK && is_waiting &&
        reconnect(st, "open", weft__monotonic_ns() + st->reconnect_ms * 1000000u)) {
        st->reconnects = 0;
    }
    if (PQstatus(st->conn) != CONNECTION_OK) {
        char why[512];
        error_text(st, NULL, why, sizeof(why));
        snprintf(err, err_len, "state database %s: cannot connect: %s", st->where, why);
        pg_close(&st->base);
        return WEFT_EIO;
    }
    session_setup(st);
    rc = migrate(st, err, err_len);
    if (rc != WEFT_OK) {
        pg_close(&st->base);
        return rc;
    }
    *out = &st->base;
    return WEFT_OK;
}

static void
pg_close(struct rt_state *base)
{
    struct pg_state *st = pg(base);

    if (st == NULL) {
        return;
    }
    PQfinish(st->conn); /* an open transaction ends with the session: rolled back */
    journal_clear(st);
    weft__free(st->journal);
    weft__free(st->where);
    weft__free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* Transactions                                                                                */

static weft_err
pg_begin(struct rt_state *base)
{
    struct pg_state *st = pg(base);

    if (st->tx_depth > 0) {
        st->tx_depth++;
        return WEFT_OK;
    }
    /* Not inside a transaction yet: a dropped connection is made again and BEGIN retried. */
    if (exec_sql(st, "begin", "BEGIN", NULL) != WEFT_OK) {
        return WEFT_EIO;
    }
    st->tx_depth = 1;
    st->is_tx_failed = false;
    st->begin_sql = "BEGIN";
    journal_clear(st);
    return WEFT_OK;
}

/* A transaction whose COMMIT returns once the WAL record is written, before it is flushed
 * (SET LOCAL: this transaction only). The WAL writer flushes it within a few hundred
 * milliseconds, and any later synchronous commit flushes it first. BEGIN and SET travel as one
 * simple query (one round trip). Should that fail, the transaction is an ordinary one: slower,
 * never less durable. */
static const char lazy_begin_sql[] = "BEGIN; SET LOCAL synchronous_commit TO OFF";

static weft_err
pg_begin_lazy(struct rt_state *base)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    bool is_ok = false;

    if (st->tx_depth > 0) {
        st->tx_depth++;
        return WEFT_OK;
    }
    res = PQexec(st->conn, lazy_begin_sql);
    is_ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (is_ok) {
        st->tx_depth = 1;
        st->is_tx_failed = false;
        st->begin_sql = lazy_begin_sql; /* a replay begins it the same way */
        journal_clear(st);
        return WEFT_OK;
    }
    if (PQstatus(st->conn) == CONNECTION_OK && PQtransactionStatus(st->conn) != PQTRANS_IDLE) {
        PQclear(PQexec(st->conn, "ROLLBACK"));
    }
    return pg_begin(base); /* reconnects and logs as an ordinary BEGIN does */
}

static bool
pg_in_transaction(const struct rt_state *base)
{
    return ((const struct pg_state *)base)->tx_depth > 0;
}

static weft_err
pg_commit(struct rt_state *base)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    bool is_committed = false;

    if (st->tx_depth == 0 || --st->tx_depth > 0) {
        return WEFT_OK;
    }
    if (!st->is_tx_failed) {
        /* A COMMIT whose answer was lost may or may not have committed: run_sql() replays
         * the journal (idempotent statements) and commits again, so either way the
         * transaction is there once. A transaction that is not replayable fails as before. */
        st->is_committing = true;
        res = run_sql(st, "commit", "COMMIT", NULL, true);
        st->is_committing = false;
        /* The server answers COMMIT of a failed transaction with "ROLLBACK". */
        is_committed = res != NULL && strcmp(PQcmdStatus(res), "COMMIT") == 0;
        PQclear(res);
        if (is_committed) {
            journal_clear(st);
            return WEFT_OK;
        }
    }
    WEFT_LOG(WEFT_LOG_ERROR, "state: commit on %s failed: %s", st->where,
             st->is_tx_failed ? "a statement in the transaction failed; rolled back"
                              : "the transaction was rolled back");
    st->is_tx_failed = false;
    journal_clear(st);
    /* With the connection gone the transaction went with it; the next statement makes the
     * connection again (run_sql). */
    if (PQstatus(st->conn) != CONNECTION_BAD) {
        PQclear(run_sql(st, "rollback", "ROLLBACK", NULL, false));
    }
    return WEFT_EIO;
}

/* End a transaction of pg_begin(): committed when @p err is WEFT_OK or a refusal that wrote
 * nothing (WEFT_ESTATE, WEFT_ENOTFOUND), else rolled back. @return @p err, or the commit's
 * failure. */
static weft_err
tx_end(struct pg_state *st, weft_err err)
{
    weft_err commit_err = WEFT_OK;

    if (err != WEFT_OK && err != WEFT_ESTATE && err != WEFT_ENOTFOUND) {
        st->is_tx_failed = true;
    }
    commit_err = pg_commit(&st->base);
    return err != WEFT_OK ? err : commit_err;
}

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
    struct pg_state *st = pg(base);
    char workflow_id[WEFT_UUID_LEN + 1];
    struct params p;
    weft_err err = WEFT_OK;

    weft__uuid_v4(workflow_id);
    params_init(&p);
    p_raw(&p, workflow_id);
    p_key(&p, run_id);
    p_text(&p, workflow);
    p_text(&p, workflow_path);
    p_key(&p, session_id);
    p_text(&p, input);
    p_u64(&p, started_ns);
    /* A resumed run keeps its row, its workflow_id and its first input. */
    err =
        exec_sql(st, "run insert",
                 "INSERT INTO workflows (workflow_id, run_id, workflow, workflow_path, session_id,"
                 " user_prompt, status, final_status, started_ns, creation_timestamp)"
                 " VALUES ($1, $2, $3, $4, $5, $6, 'running', 'in_progress', $7,"
                 " to_timestamp($7::bigint / 1e9))"
                 " ON CONFLICT (run_id) DO UPDATE SET status = 'running',"
                 " final_status = 'in_progress', ended_ns = NULL",
                 &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_run_trace(struct rt_state *base,
             const char *run_id,
             const char *trace_id,
             const char *root_span_id)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, trace_id);
    p_key(&p, root_span_id);
    p_key(&p, run_id);
    err = exec_sql(st, "run trace",
                   "UPDATE workflows SET resumed_from_trace = CASE WHEN trace_id IS NOT NULL AND"
                   " trace_id <> $1 THEN trace_id ELSE resumed_from_trace END, trace_id = $1,"
                   " root_span_id = $2 WHERE run_id = $3",
                   &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_run_end(struct rt_state *base, const char *run_id, const struct weft__state_run_end *end)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, end->status);
    p_raw(&p, final_status(end->status));
    p_text(&p, end->reason);
    p_text(&p, end->output);
    p_u64(&p, end->iterations);
    p_i64(&p, end->input_tokens);
    p_i64(&p, end->output_tokens);
    p_double(&p, end->cost_usd);
    p_u64(&p, end->ended_ns);
    p_double(&p, end->reward);
    p_u64(&p, end->corrections);
    p_text(&p, end->loops);
    p_key(&p, run_id);
    p_text(&p, end->trace_sampling);
    /* The totals are added (a resumed run adds its attempt's), only to a row not already
     * ended at this end's own instant: sent again after a lost answer, the statement sets the
     * same values and adds nothing. */
    err = exec_sql(st, "run update",
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
                   &p);
    params_cleanup(&p);
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
        p_raw(p, NULL);
        return;
    }
    weft_hex_encode(ctx->span_id, WEFT_SPAN_ID_SIZE, hex);
    hex[2 * WEFT_SPAN_ID_SIZE] = '\0';
    p_raw(p, hex);
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
    char *error_text = dump_or_null(step->error);
    bool is_oom = deps_text == NULL || (step->spec != NULL && spec_text == NULL) ||
                  (step->error != NULL && error_text == NULL);
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
    params_init(&p);
    p.is_oom = is_oom;
    p_key(&p, run_id);
    p_u64(&p, index);
    p_raw(&p, task_id);
    p_key(&p, step->id);
    p_key(&p, actor);
    p_text(&p, step->task);
    p_raw(&p, deps_text);
    p_raw(&p, task_status(step));
    p_raw(&p, weft__step_status_name(step->status));
    p_u64(&p, step->attempts);
    p_text(&p, step->result);
    p_text(&p, step->feedback);
    p_key(&p, step->requested_by);
    p_raw(&p, weft__step_executor_name(step->executor));
    p_text(&p, spec_text);
    p_key(&p, step->parent);
    if (step->has_reward) {
        p_double(&p, step->reward);
    } else {
        p_raw(&p, NULL);
    }
    p_key(&p, step->error_type);
    p_text(&p, error_text);
    p_u64(&p, step->started_ns);
    p_u64(&p, step->ended_ns);
    /* The step's agent span and its parent: recovery closes a span a kill left open. */
    p_span_id(&p, &step->span, span_hex[0]);
    p_span_id(&p, &step->parent_ctx, span_hex[1]);
    p_u64(&p, step->retries);
    p_bool(&p, step->is_dispatched);
    p_raw(&p, notes);
    res = query(st, "step upsert", step_upsert_sql, &p);
    if (res == NULL) {
        err = WEFT_EIO;
    } else if (strcmp(PQcmdTuples(res), "1") != 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: step upsert on %s: run %s is not stored", st->where,
                 run_id);
        st->is_tx_failed = st->tx_depth > 0;
        err = WEFT_EIO;
    }
    PQclear(res);
    params_cleanup(&p);
    free(deps_text);
    free(spec_text);
    free(error_text);
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
    return step_upsert(pg(base), run_id, index, step, actor);
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
    struct pg_state *st = pg(base);
    json_t *inserted = json_array();
    char *inserted_text = NULL;
    char *before_text = dump_or_null(depends_before);
    char *after_text = dump_or_null(depends_after);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
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
    if (pg_begin(base) != WEFT_OK) {
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
        p_key(&p, run_id);
        p_u64(&p, seq);
        p_key(&p, plan->steps[failed].id);
        p_key(&p, error_type);
        p_raw(&p, inserted_text);
        p_raw(&p, before_text);
        p_raw(&p, after_text);
        p_u64(&p, weft__now_ns());
        err = exec_append(st, "correction insert",
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
    if (pg_commit(base) != WEFT_OK && err == WEFT_OK) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: DAG surgery of run %s rolled back", run_id);
    }
out:
    params_cleanup(&p);
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
    struct pg_state *st = pg(base);
    json_t *arr = json_array();
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    *out = NULL;
    params_init(&p);
    p_key(&p, session_id);
    p_u64(&p, limit);
    res = arr != NULL ? query(st, "messages load",
                              "SELECT role, content, route FROM (SELECT seq, role, content, route"
                              " FROM messages WHERE session_id = $1 ORDER BY seq DESC LIMIT $2)"
                              " m ORDER BY seq",
                              &p)
                      : NULL;
    params_cleanup(&p);
    if (res == NULL) {
        json_decref(arr);
        return arr == NULL ? WEFT_ENOMEM : WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        const char *route = val(res, i, 2);
        json_t *m = json_pack("{s:s, s:s, s:o}", "role", PQgetvalue(res, i, 0), "content",
                              PQgetvalue(res, i, 1), "route",
                              route != NULL ? json_string(route) : json_null());
        if (m == NULL || json_array_append_new(arr, m) != 0) {
            err = WEFT_ENOMEM;
        }
    }
    PQclear(res);
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
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, session_id);
    p_key(&p, run_id);
    p_text(&p, role);
    p_text(&p, content != NULL ? content : "");
    p_text(&p, route);
    p_u64(&p, weft__now_ns());
    /* seq is an identity column: appends from parallel flow steps never collide. */
    err = exec_append(st, "message insert",
                      "INSERT INTO messages (session_id, run_id, role, content, route, created_ns)"
                      " VALUES ($1, $2, $3, $4, $5, $6)",
                      "INSERT INTO messages (session_id, run_id, role, content, route, created_ns)"
                      " SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint"
                      " WHERE NOT EXISTS (SELECT 1 FROM messages WHERE session_id = $1::text"
                      " AND run_id = $2::text AND role = $3::text AND created_ns = $6::bigint)",
                      &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_cursors_load(struct rt_state *base, const char *session_id, const char *script, json_t **out)
{
    struct pg_state *st = pg(base);
    json_t *cursors = NULL;
    PGresult *res = NULL;
    struct params p;

    *out = NULL;
    params_init(&p);
    p_key(&p, session_id);
    p_key(&p, script);
    res = query(st, "cursors load",
                "SELECT queue, used FROM script_cursor_keys WHERE session_id = $1 AND"
                " script = $2",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        if (cursors == NULL) {
            cursors = json_object();
        }
        if (cursors == NULL || json_object_set_new(cursors, PQgetvalue(res, i, 0),
                                                   json_integer(col_i64(res, i, 1))) != 0) {
            PQclear(res);
            json_decref(cursors);
            return WEFT_ENOMEM;
        }
    }
    PQclear(res);
    *out = cursors;
    return WEFT_OK;
}

static weft_err
pg_cursors_save(struct rt_state *base,
                const char *session_id,
                const char *script,
                const json_t *cursors)
{
    struct pg_state *st = pg(base);
    const char *key = NULL;
    json_t *v = NULL;
    bool is_multi = json_object_size(cursors) > 1;
    weft_err err = WEFT_OK;

    /* Several queues at once (parallel flow steps) land in one transaction. */
    if (is_multi && pg_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    json_object_foreach((json_t *)cursors, key, v)
    {
        struct params p;

        params_init(&p);
        p_key(&p, session_id);
        p_key(&p, script);
        p_key(&p, key);
        p_i64(&p, (int64_t)json_integer_value(v));
        err = exec_sql(st, "cursor upsert",
                       "INSERT INTO script_cursor_keys (session_id, script, queue, used)"
                       " VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, script, queue)"
                       " DO UPDATE SET used = excluded.used",
                       &p);
        params_cleanup(&p);
        if (err != WEFT_OK) {
            break;
        }
    }
    if (is_multi && pg_commit(base) != WEFT_OK) {
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

/* The columns read_info() reads, in its order; the last four feed weft__state_owner_view(). */
#define RUN_COLUMNS                                                                            \
    "run_id, workflow, workflow_path, session_id, user_prompt, status, reason, trace_id,"      \
    " root_span_id, resumed_from_trace, loops, started_ns, ended_ns, iterations, corrections," \
    " COALESCE(total_reward, 0), input_tokens, output_tokens, cost_usd,"                       \
    " (SELECT count(*) FROM tasks t WHERE t.workflow_id = w.workflow_id),"                     \
    " owner_pid, owner_host, heartbeat_ns," PG_LAST_LIFE ","                                   \
    " origin_kind, origin_run_id, origin_step, pinned, trace_sampling"

static void
read_info(const PGresult *res, int row, struct weft_run_info *info, bool *is_oom)
{
    info->run_id = col_dup(res, row, 0, is_oom);
    info->workflow = col_dup(res, row, 1, is_oom);
    info->workflow_path = col_dup(res, row, 2, is_oom);
    info->session_id = col_dup(res, row, 3, is_oom);
    info->input = col_dup(res, row, 4, is_oom);
    info->status = col_dup(res, row, 5, is_oom);
    info->reason = col_dup(res, row, 6, is_oom);
    info->trace_id = col_dup(res, row, 7, is_oom);
    info->root_span_id = col_dup(res, row, 8, is_oom);
    info->resumed_from_trace = col_dup(res, row, 9, is_oom);
    info->loops = col_dup(res, row, 10, is_oom);
    info->started_ns = (uint64_t)col_i64(res, row, 11);
    info->ended_ns = (uint64_t)col_i64(res, row, 12);
    info->iterations = (size_t)col_i64(res, row, 13);
    info->corrections = (size_t)col_i64(res, row, 14);
    info->reward = col_double(res, row, 15);
    info->input_tokens = col_i64(res, row, 16);
    info->output_tokens = col_i64(res, row, 17);
    info->cost_usd = col_double(res, row, 18);
    info->step_count = (size_t)col_i64(res, row, 19);
    weft__state_owner_view(info, col_i64(res, row, 20), val(res, row, 21),
                           (uint64_t)col_i64(res, row, 22), (uint64_t)col_i64(res, row, 23),
                           is_oom);
    info->origin_kind = col_dup(res, row, 24, is_oom);
    info->origin_run_id = col_dup(res, row, 25, is_oom);
    info->origin_step = col_dup(res, row, 26, is_oom);
    info->is_pinned = val(res, row, 27) != NULL && strcmp(val(res, row, 27), "t") == 0;
    info->trace_sampling = col_dup(res, row, 28, is_oom);
}

static weft_err
pg_runs_each(struct rt_state *base, size_t limit, state_run_fn fn, void *user_data)
{
    struct pg_state *st = pg(base);
    char *after_id = NULL;
    int64_t after_ns = 0;
    weft_err err = WEFT_OK;

    /* Page by page (newest first, keyed by start and id), so memory stays one page whatever
     * the limit, and @p fn may use the handle between rows. */
    while (err == WEFT_OK && limit > 0) {
        size_t page = limit < RUNS_PAGE ? limit : RUNS_PAGE;
        PGresult *res = NULL;
        struct params p;
        int rows = 0;

        params_init(&p);
        p_u64(&p, page);
        if (after_id != NULL) {
            p_i64(&p, after_ns);
            p_key(&p, after_id);
        } else {
            p_raw(&p, NULL);
            p_raw(&p, NULL);
        }
        res = query(st, "runs list",
                    "SELECT " RUN_COLUMNS " FROM workflows w WHERE $2::bigint IS NULL"
                    " OR (started_ns, run_id) < ($2::bigint, $3::text)"
                    " ORDER BY started_ns DESC, run_id DESC LIMIT $1",
                    &p);
        params_cleanup(&p);
        if (res == NULL) {
            err = WEFT_EIO;
            break;
        }
        rows = PQntuples(res);
        for (int i = 0; err == WEFT_OK && i < rows; i++) {
            struct weft_run_info info;
            bool is_oom = false;

            memset(&info, 0, sizeof(info));
            read_info(res, i, &info, &is_oom);
            if (i == rows - 1) {
                weft__free(after_id);
                after_id = weft__strdup(PQgetvalue(res, i, 0));
                after_ns = col_i64(res, i, 11);
                is_oom = is_oom || after_id == NULL;
            }
            err = is_oom ? WEFT_ENOMEM : fn(&info, user_data);
            weft__state_info_cleanup(&info);
        }
        PQclear(res);
        limit -= (size_t)rows;
        if ((size_t)rows < page) {
            break;
        }
    }
    weft__free(after_id);
    return err;
}

static weft_err
pg_run_resolve(
    struct rt_state *base, const char *ref, char *out, size_t out_len, char *err, size_t err_len)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    int matches = 0;
    weft_err result = WEFT_ENOTFOUND;

    out[0] = '\0';
    params_init(&p);
    if (strcmp(ref, "last") == 0) {
        res = query(st, "run resolve",
                    "SELECT run_id FROM workflows ORDER BY started_ns DESC LIMIT 1", NULL);
    } else {
        if (!weft__state_ref_is_valid(ref, err, err_len)) {
            return WEFT_EINVAL;
        }
        p_key(&p, ref);
        /* An exact id comes first, however many newer runs it is a prefix of. */
        res = query(st, "run resolve",
                    "SELECT run_id FROM workflows WHERE starts_with(run_id, $1)"
                    " ORDER BY run_id = $1 DESC, started_ns DESC LIMIT 2",
                    &p);
    }
    params_cleanup(&p);
    if (res == NULL) {
        /* An unreachable database is an error, not "no such run". */
        snprintf(err, err_len, "state database %s: cannot be read", st->where);
        return WEFT_EIO;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        const char *id = PQgetvalue(res, i, 0);
        if (matches == 0) {
            snprintf(out, out_len, "%s", id);
        }
        matches++;
        if (strcmp(id, ref) == 0) {
            matches = 1;
            break;
        }
    }
    PQclear(res);
    if (matches == 1) {
        result = WEFT_OK;
    } else if (matches > 1) {
        snprintf(err, err_len, "'%.64s' matches several runs", ref);
        result = WEFT_EINVAL;
    } else {
        snprintf(err, err_len, "no run '%.64s'", ref);
    }
    return result;
}

static weft_err
pg_run_info(struct rt_state *base, const char *run_id, struct weft_run_info *info)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    bool is_oom = false;
    weft_err err = WEFT_OK;

    memset(info, 0, sizeof(*info));
    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "run info", "SELECT " RUN_COLUMNS " FROM workflows w WHERE run_id = $1", &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    if (PQntuples(res) == 0) {
        err = WEFT_ENOTFOUND;
    } else {
        read_info(res, 0, info, &is_oom);
    }
    PQclear(res);
    if (is_oom) {
        weft__state_info_cleanup(info);
        return WEFT_ENOMEM;
    }
    return err;
}

static weft_err
pg_steps_each(struct rt_state *base, const char *run_id, state_step_fn fn, void *user_data)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "steps read",
                "SELECT t.step_id, t.agent, t.description, t.depends_on, t.step_status,"
                " t.attempts, t.result, t.feedback, t.requested_by, t.executor_type, t.spec,"
                " t.parent_step, t.reward, t.error_type, t.error, t.started_ns, t.ended_ns,"
                " t.task_id, t.retries, t.is_dispatched"
                " FROM tasks t JOIN workflows w ON w.workflow_id = t.workflow_id"
                " WHERE w.run_id = $1 ORDER BY t.task_order",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct state_step_row row;

        memset(&row, 0, sizeof(row));
        row.id = val(res, i, 0);
        row.actor = val(res, i, 1);
        row.task = val(res, i, 2);
        row.depends_on = val(res, i, 3);
        row.status = val(res, i, 4);
        row.attempts = (unsigned)col_i64(res, i, 5);
        row.result = val(res, i, 6);
        row.feedback = val(res, i, 7);
        row.requested_by = val(res, i, 8);
        row.executor = val(res, i, 9);
        row.spec = val(res, i, 10);
        row.parent = val(res, i, 11);
        row.has_reward = val(res, i, 12) != NULL;
        row.reward = col_double(res, i, 12);
        row.error_type = val(res, i, 13);
        row.error = val(res, i, 14);
        row.started_ns = (uint64_t)col_i64(res, i, 15);
        row.ended_ns = (uint64_t)col_i64(res, i, 16);
        row.task_uuid = val(res, i, 17);
        row.retries = (unsigned)col_i64(res, i, 18);
        row.is_dispatched = val(res, i, 19) != NULL && strcmp(val(res, i, 19), "t") == 0;
        err = fn(&row, user_data);
    }
    PQclear(res);
    return err;
}

static weft_err
pg_corrections_each(struct rt_state *base,
                    const char *run_id,
                    state_correction_fn fn,
                    void *user_data)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "corrections read",
                "SELECT seq, failed_step, error_type, inserted, depends_before, depends_after,"
                " created_ns FROM corrections WHERE run_id = $1 ORDER BY seq",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft_run_correction c;

        c.seq = (unsigned)col_i64(res, i, 0);
        c.failed_step = (char *)val(res, i, 1);
        c.error_type = (char *)val(res, i, 2);
        c.inserted = (char *)val(res, i, 3);
        c.depends_before = (char *)val(res, i, 4);
        c.depends_after = (char *)val(res, i, 5);
        c.created_ns = (uint64_t)col_i64(res, i, 6);
        err = fn(&c, user_data);
    }
    PQclear(res);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Payloads (state_payloads.h): long replay texts stored once per content hash                 */

/* Free text as p_text() binds it, redacted and then made valid UTF-8, so that a payload's
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
 * collection (pg_gc_run) takes it exclusively before it decides which records no row holds, so
 * it never deletes a record a writer found there (ON CONFLICT DO NOTHING) and is about to refer
 * to. A DO block, not a SELECT: a statement that returns rows would stop the transaction from
 * being sent again after a lost connection (run_sql_as). */
static weft_err
payload_begin(struct pg_state *st)
{
    weft_err err = WEFT_OK;

    if (pg_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    err = exec_sql(st, "payload lock",
                   "DO $$ BEGIN PERFORM pg_advisory_xact_lock_shared(" PAYLOAD_LOCK "); END $$",
                   NULL);
    if (err != WEFT_OK) {
        (void)tx_end(st, err);
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

    params_init(&p);
    p_key(&p, rec->hash);
    p_i64(&p, (int64_t)rec->kind);
    p_u64(&p, rec->raw_len);
    p_bytes(&p, rec->data, rec->len);
    err = exec_sql(st, "payload insert",
                   "INSERT INTO payloads (hash, kind, size, data) VALUES ($1, $2, $3, $4)"
                   " ON CONFLICT (hash) DO NOTHING",
                   &p);
    params_cleanup(&p);
    return err;
}

/* Up to PAYLOAD_GET_BATCH hashes per query (WHERE hash = ANY), the data in binary. */
static weft_err
payload_get(void *user,
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
        params_init(&p);
        p_raw(&p, list.data);
        p.is_binary_result = true; /* data as its bytes; the other columns are cast to text */
        res = query(st, "payload read",
                    "SELECT hash, kind::text, size::text, data FROM payloads"
                    " WHERE hash = ANY ($1::text[])",
                    &p);
        params_cleanup(&p);
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

/* The text of column @p col of row @p row, resolved through its reference in column @p ref_col
 * when that is set, into @p buf. NULL when the text cannot be had (logged): a missing or
 * damaged record, or out of memory (*is_oom). */
static const char *
column_text(struct pg_state *st,
            const PGresult *res,
            int row,
            int col,
            int ref_col,
            struct weft__buf *buf,
            bool *is_oom)
{
    const struct weft__payload_source src = {.get = payload_get, .user = st};
    const char *ref = val(res, row, ref_col);
    weft_err err = WEFT_OK;

    if (ref == NULL) {
        return val(res, row, col);
    }
    weft__buf_reset(buf);
    err = weft__payload_get(ref, &src, buf);
    if (err != WEFT_OK) {
        *is_oom = err == WEFT_ENOMEM;
        WEFT_LOG(WEFT_LOG_WARN, "state: payload %.12s on %s: %s", ref, st->where,
                 weft_strerror(err));
        return NULL;
    }
    return buf->data;
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
    struct pg_state *st = pg(base);
    char *raw = json_dumps(entry, JSON_COMPACT);
    char *text = raw != NULL ? clean_text(raw) : NULL; /* redacted, as the SQLite backend does */
    const struct weft__payload_sink sink = {.put = payload_put, .user = st};
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    struct params p;
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
        params_init(&p);
        p_key(&p, run_id);
        p_text(&p, who);
        p_text(&p, purpose);
        p_raw(&p, is_ref ? "" : text);
        p_u64(&p, weft__now_ns());
        p_raw(&p, is_ref ? ref : NULL);
        err = exec_append(
            st, "exchange insert",
            "INSERT INTO llm_exchanges (run_id, who, purpose, entry, created_ns, entry_ref)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            "INSERT INTO llm_exchanges (run_id, who, purpose, entry, created_ns, entry_ref)"
            " SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text"
            " WHERE NOT EXISTS (SELECT 1 FROM llm_exchanges WHERE run_id = $1::text"
            " AND who = $2::text AND purpose = $3::text AND created_ns = $5::bigint)",
            &p);
        params_cleanup(&p);
    }
    if (is_tx) {
        err = tx_end(st, err);
    }
    weft__free(text);
    return err;
}

static weft_err
pg_exchanges_script(struct rt_state *base, const char *run_id, json_t **out)
{
    struct pg_state *st = pg(base);
    json_t *responses = json_object();
    PGresult *res = NULL;
    struct weft__buf buf;
    struct params p;
    bool is_oom = false;
    size_t n = 0;

    *out = NULL;
    params_init(&p);
    p_key(&p, run_id);
    res = responses != NULL ? query(st, "exchanges read",
                                    "SELECT who, purpose, entry, entry_ref FROM llm_exchanges"
                                    " WHERE run_id = $1 ORDER BY seq",
                                    &p)
                            : NULL;
    params_cleanup(&p);
    if (res == NULL) {
        json_decref(responses);
        return responses == NULL ? WEFT_ENOMEM : WEFT_EIO;
    }
    weft__buf_init(&buf, 0);
    for (int i = 0; !is_oom && i < PQntuples(res); i++) {
        const char *who = PQgetvalue(res, i, 0);
        const char *purpose = PQgetvalue(res, i, 1);
        const char *text = column_text(st, res, i, 2, 3, &buf, &is_oom);
        json_t *entry = text != NULL ? json_loads(text, 0, NULL) : NULL;
        /* A damaged row is skipped: the replay then reports the missing answer. */
        n += weft__state_script_add(responses, who, purpose, entry) ? 1 : 0;
    }
    PQclear(res);
    weft__buf_cleanup(&buf);
    if (is_oom || n == 0) {
        json_decref(responses);
        return is_oom ? WEFT_ENOMEM : WEFT_ENOTFOUND;
    }
    *out = json_pack("{s:i, s:o}", "version", 1, "responses", responses);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
pg_exchange_counts(struct rt_state *base, const char *run_id, uint64_t before_ns, json_t **out)
{
    struct pg_state *st = pg(base);
    json_t *counts = json_object();
    PGresult *res = NULL;
    struct params p;
    char key[512];
    bool is_oom = counts == NULL;

    *out = NULL;
    params_init(&p);
    p_key(&p, run_id);
    p_u64(&p, before_ns);
    res = counts != NULL ? query(st, "exchange counts",
                                 "SELECT who, purpose, COUNT(*) FROM llm_exchanges"
                                 " WHERE run_id = $1 AND created_ns < $2 GROUP BY who, purpose",
                                 &p)
                         : NULL;
    params_cleanup(&p);
    if (res == NULL) {
        json_decref(counts);
        return is_oom ? WEFT_ENOMEM : WEFT_EIO;
    }
    for (int i = 0; !is_oom && i < PQntuples(res); i++) {
        snprintf(key, sizeof(key), "%s/%s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
        is_oom = json_object_set_new(counts, key,
                                     json_integer(strtoll(PQgetvalue(res, i, 2), NULL, 10))) != 0;
    }
    PQclear(res);
    if (is_oom) {
        json_decref(counts);
        return WEFT_ENOMEM;
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
    struct pg_state *st = pg(base);
    const struct weft__payload_sink sink = {.put = payload_put, .user = st};
    char *request = r->request != NULL ? clean_text(r->request) : NULL;
    char *outcome = r->outcome != NULL ? clean_text(r->outcome) : NULL;
    char request_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    char outcome_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    struct params p;
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
    params_init(&p);
    p_key(&p, run_id);
    p_key(&p, r->step_id);
    p_u64(&p, r->attempt);
    p_u64(&p, r->seq);
    p_key(&p, r->tool);
    p_key(&p, r->kind);
    p_raw(&p, has_request_ref ? "" : request); /* clean_text() above */
    p_raw(&p, has_outcome_ref ? "" : outcome);
    p_u64(&p, weft__now_ns());
    p_raw(&p, has_request_ref ? request_ref : NULL);
    p_raw(&p, has_outcome_ref ? outcome_ref : NULL);
    err = exec_sql(st, "tool result insert",
                   "INSERT INTO tool_results (run_id, step_id, attempt, seq, tool, kind, request,"
                   " outcome, created_ns, request_ref, outcome_ref)"
                   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                   " ON CONFLICT (run_id, step_id, attempt, seq) DO UPDATE SET tool = $5,"
                   " kind = $6, request = $7, outcome = $8, created_ns = $9,"
                   " request_ref = $10, outcome_ref = $11",
                   &p);
    params_cleanup(&p);
out:
    if (is_tx) {
        err = tx_end(st, err);
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
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct weft__buf request;
    struct weft__buf outcome;
    struct params p;
    bool is_oom = false;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "tool results read",
                "SELECT step_id, attempt, seq, tool, kind, request, outcome, request_ref,"
                " outcome_ref FROM tool_results WHERE run_id = $1 ORDER BY created_ns, seq_all",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    weft__buf_init(&request, 0);
    weft__buf_init(&outcome, 0);
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft__state_tool_result r;
        r.step_id = val(res, i, 0);
        r.attempt = (unsigned)col_i64(res, i, 1);
        r.seq = (unsigned)col_i64(res, i, 2);
        r.tool = val(res, i, 3);
        r.kind = val(res, i, 4);
        r.request = column_text(st, res, i, 5, 7, &request, &is_oom);
        r.outcome = column_text(st, res, i, 6, 8, &outcome, &is_oom);
        if (is_oom) {
            err = WEFT_ENOMEM;
        } else if (r.request != NULL && r.outcome != NULL) {
            err = fn(&r, user_data); /* a row whose payload is missing is skipped */
        }
    }
    PQclear(res);
    weft__buf_cleanup(&request);
    weft__buf_cleanup(&outcome);
    return err;
}

static weft_err
pg_run_origin(struct rt_state *base,
              const char *run_id,
              const char *kind,
              const char *origin_run_id,
              const char *origin_step)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, kind);
    p_key(&p, origin_run_id);
    p_key(&p, origin_step);
    p_key(&p, run_id);
    err = exec_sql(st, "run origin update",
                   "UPDATE workflows SET origin_kind = $1, origin_run_id = $2, origin_step = $3"
                   " WHERE run_id = $4",
                   &p);
    params_cleanup(&p);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Durability: one owner per run, heartbeats, interrupted runs (docs/durability.md)            */

static weft_err
pg_check(struct rt_state *base, char *err, size_t err_len)
{
    struct pg_state *st = pg(base);
    char why[512];

    if (!st->is_lost) {
        return WEFT_OK;
    }
    error_text(st, NULL, why, sizeof(why));
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
    struct pg_state *st = pg(base);
    char host[256];
    char token[33];
    uint64_t now = weft__now_ns();
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    memset(holder, 0, sizeof(*holder));
    weft__state_hostname(host, sizeof(host));
    if (pg_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    /* FOR UPDATE: of two processes taking the run at once, the second waits here until the
     * first commits, then reads the first one's lease and is refused. */
    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "lease read",
                "SELECT owner_pid, owner_host, owner_token, owner_since_ns, heartbeat_ns"
                " FROM workflows WHERE run_id = $1 FOR UPDATE",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return tx_end(st, WEFT_EIO);
    }
    if (PQntuples(res) == 0) {
        err = WEFT_ENOTFOUND;
    } else if (val(res, 0, 2) != NULL && strcmp(val(res, 0, 2), st->owner_token) != 0 &&
               weft__state_owner_is_alive(col_i64(res, 0, 0), val(res, 0, 1),
                                          (uint64_t)col_i64(res, 0, 4), now)) {
        holder->pid = col_i64(res, 0, 0);
        snprintf(holder->host, sizeof(holder->host), "%s",
                 val(res, 0, 1) != NULL ? val(res, 0, 1) : "?");
        holder->since_ns = (uint64_t)col_i64(res, 0, 3);
        holder->heartbeat_ns = (uint64_t)col_i64(res, 0, 4);
        err = WEFT_ESTATE;
    }
    PQclear(res);
    if (err != WEFT_OK) {
        return tx_end(st, err);
    }
    weft__state_new_token(token);
    params_init(&p);
    p_i64(&p, (int64_t)getpid());
    p_key(&p, host);
    p_raw(&p, token);
    p_u64(&p, now);
    p_key(&p, run_id);
    err = exec_sql(st, "lease",
                   "UPDATE workflows SET owner_pid = $1, owner_host = $2, owner_token = $3,"
                   " owner_since_ns = $4, heartbeat_ns = $4 WHERE run_id = $5",
                   &p);
    params_cleanup(&p);
    err = tx_end(st, err);
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
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    if (st->owner_token[0] == '\0') {
        return WEFT_OK;
    }
    params_init(&p);
    p_u64(&p, weft__now_ns());
    p_key(&p, run_id);
    p_raw(&p, st->owner_token);
    err =
        exec_sql(st, "lease release",
                 "UPDATE workflows SET owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
                 " owner_since_ns = NULL, heartbeat_ns = $1 WHERE run_id = $2 AND owner_token = $3",
                 &p);
    params_cleanup(&p);
    st->owner_token[0] = '\0';
    return err;
}

static weft_err
pg_heartbeat(struct rt_state *base, const char *run_id)
{
    struct pg_state *st = pg(base);
    uint64_t mono = weft__monotonic_ns();
    struct params p;
    weft_err err = WEFT_OK;

    if (st->owner_token[0] == '\0' ||
        mono - st->last_heartbeat_mono < STATE_HEARTBEAT_MIN_INTERVAL_NS) {
        return WEFT_OK;
    }
    st->last_heartbeat_mono = mono;
    params_init(&p);
    p_u64(&p, weft__now_ns());
    p_key(&p, run_id);
    p_raw(&p, st->owner_token);
    err = exec_sql(st, "heartbeat",
                   "UPDATE workflows SET heartbeat_ns = $1 WHERE run_id = $2 AND owner_token = $3",
                   &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_run_root(struct rt_state *base,
            const char *run_id,
            const char *name,
            const char *parent_span_id,
            uint64_t started_ns)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_text(&p, name);
    p_key(&p, parent_span_id);
    p_u64(&p, started_ns);
    p_key(&p, run_id);
    err = exec_sql(st, "run root",
                   "UPDATE workflows SET root_span_name = $1, root_parent_span_id = $2,"
                   " root_started_ns = $3 WHERE run_id = $4",
                   &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_run_hash_set(struct rt_state *base, const char *run_id, const char *hash)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, hash);
    p_key(&p, run_id);
    err = exec_sql(st, "workflow hash", "UPDATE workflows SET workflow_hash = $1 WHERE run_id = $2",
                   &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_run_hash_get(struct rt_state *base, const char *run_id, char *out, size_t out_len)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_ENOTFOUND;

    out[0] = '\0';
    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "workflow hash read", "SELECT workflow_hash FROM workflows WHERE run_id = $1",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    if (PQntuples(res) == 1 && val(res, 0, 0) != NULL) {
        snprintf(out, out_len, "%s", val(res, 0, 0));
        err = WEFT_OK;
    }
    PQclear(res);
    return err;
}

static weft_err
pg_run_snapshot_set(struct rt_state *base, const char *run_id, const char *snapshot)
{
    struct pg_state *st = pg(base);
    const struct weft__payload_sink sink = {.put = payload_put, .user = st};
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    /* Valid UTF-8 only: the column makes other bytes valid, and the payload must read back
     * as the column would. */
    bool is_tx = strlen(snapshot) >= WEFT__PAYLOAD_MIN && weft__payload_enabled() &&
                 weft__utf8_valid(snapshot, strlen(snapshot));
    bool is_ref = false;
    struct params p;
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
        params_init(&p);
        /* as is: the files' bytes are the point (p_text would rewrite them) */
        p_key(&p, is_ref ? NULL : snapshot);
        p_raw(&p, is_ref ? ref : NULL);
        p_key(&p, run_id);
        err = exec_sql(st, "workflow snapshot",
                       "UPDATE workflows SET workflow_snapshot = $1, workflow_snapshot_ref = $2"
                       " WHERE run_id = $3",
                       &p);
        params_cleanup(&p);
    }
    if (is_tx) {
        err = tx_end(st, err);
    }
    return err;
}

static weft_err
pg_run_snapshot_get(struct rt_state *base, const char *run_id, char **out)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct weft__buf buf;
    struct params p;
    const char *text = NULL;
    bool is_oom = false;
    weft_err err = WEFT_ENOTFOUND;

    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "workflow snapshot read",
                "SELECT workflow_snapshot, workflow_snapshot_ref FROM workflows WHERE run_id = $1",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    weft__buf_init(&buf, 0);
    if (PQntuples(res) == 1 && (val(res, 0, 0) != NULL || val(res, 0, 1) != NULL)) {
        text = column_text(st, res, 0, 0, 1, &buf, &is_oom);
        *out = text != NULL ? weft__strdup(text) : NULL;
        err = is_oom || (text != NULL && *out == NULL) ? WEFT_ENOMEM
              : text == NULL                           ? WEFT_EIO
                                                       : WEFT_OK;
    }
    PQclear(res);
    weft__buf_cleanup(&buf);
    return err;
}

/* The steps of @p d's run that were in progress, with the spans the kill left open. */
static weft_err
open_steps(struct pg_state *st, struct weft__state_dead *d)
{
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, d->text[0]);
    res = query(st, "open steps",
                "SELECT t.span_id, t.span_parent_id, t.agent, t.started_ns FROM tasks t"
                " JOIN workflows w ON w.workflow_id = t.workflow_id WHERE w.run_id = $1"
                " AND t.step_status = 'in_progress' AND t.span_id IS NOT NULL"
                " ORDER BY t.task_order",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        err = weft__state_dead_add_step(d, val(res, i, 0), val(res, i, 1), val(res, i, 2),
                                        (uint64_t)col_i64(res, i, 3));
    }
    PQclear(res);
    return err;
}

/* The running runs whose owner is gone at @p now, into *dead (*n entries, owned by the caller
 * even on error, free with weft__state_dead_free()). Rows another process holds locked (it is
 * taking the run over, or marking it) are skipped: that process decides about them. */
static weft_err
pg_dead_collect(struct rt_state *base, uint64_t now, struct weft__state_dead **dead, size_t *n)
{
    struct pg_state *st = pg(base);
    PGresult *res = query(st, "recover scan",
                          "SELECT run_id, workflow, owner_host, trace_id, root_span_id,"
                          " root_parent_span_id, root_span_name, owner_pid, heartbeat_ns,"
                          " root_started_ns, started_ns," PG_LAST_LIFE
                          " FROM workflows w WHERE status = 'running' AND owner_token IS NOT NULL"
                          " FOR UPDATE OF w SKIP LOCKED",
                          NULL);
    int rows = 0;
    weft_err err = WEFT_OK;

    if (res == NULL) {
        return WEFT_EIO;
    }
    rows = PQntuples(res);
    *dead = rows > 0 ? weft__calloc((size_t)rows, sizeof(**dead)) : NULL;
    if (rows > 0 && *dead == NULL) {
        PQclear(res);
        return WEFT_ENOMEM;
    }
    for (int i = 0; err == WEFT_OK && i < rows; i++) {
        struct weft__state_dead *d = NULL;

        if (weft__state_owner_is_alive(col_i64(res, i, 7), val(res, i, 2),
                                       (uint64_t)col_i64(res, i, 8), now)) {
            continue;
        }
        d = &(*dead)[(*n)++];
        for (int c = 0; c < 7; c++) {
            const char *v = val(res, i, c);
            d->text[c] = v != NULL ? weft__strdup(v) : NULL;
            if (v != NULL && d->text[c] == NULL) {
                err = WEFT_ENOMEM;
            }
        }
        d->pid = col_i64(res, i, 7);
        d->root_started_ns = (uint64_t)col_i64(res, i, 9);
        d->ended_ns =
            weft__state_dead_end(d, (uint64_t)col_i64(res, i, 8), (uint64_t)col_i64(res, i, 11),
                                 (uint64_t)col_i64(res, i, 10));
    }
    PQclear(res);
    return err;
}

/* Mark @p d's run interrupted (final_status paused: `weft resume` continues it) and read the
 * steps it left in progress into @p d. */
static weft_err
pg_dead_mark(struct rt_state *base, struct weft__state_dead *d)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = weft__state_dead_reason(d);

    if (err != WEFT_OK) {
        return err;
    }
    params_init(&p);
    p_text(&p, d->text[7]);
    p_u64(&p, d->ended_ns);
    p_key(&p, d->text[0]);
    p_raw(&p, final_status("interrupted"));
    err = exec_sql(st, "mark interrupted",
                   "UPDATE workflows SET status = 'interrupted', final_status = $4, reason = $1,"
                   " ended_ns = $2, owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
                   " owner_since_ns = NULL WHERE run_id = $3 AND status = 'running'",
                   &p);
    params_cleanup(&p);
    if (err == WEFT_OK) {
        err = open_steps(st, d);
    }
    return err;
}

static weft_err
pg_end(struct rt_state *base, weft_err err)
{
    return tx_end(pg(base), err);
}

/* ------------------------------------------------------------------------------------------ */
/* Run metric snapshots (metrics_store.c)                                                      */

weft_err
weft__state_metrics_attempt(struct rt_state *base, const char *run_id, bool is_next, int64_t *out)
{
    static const char next_sql[] =
        "SELECT COALESCE(MAX(attempt) + 1, 0) FROM run_metrics WHERE run_id = $1";
    static const char latest_sql[] =
        "SELECT COALESCE(MAX(attempt), 0) FROM run_metrics WHERE run_id = $1";
    struct pg_state *st = NULL;
    PGresult *res = NULL;
    struct params p;

    if (base == NULL || base->ops != &pg_ops || run_id == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    st = pg(base);
    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "run metrics attempt", is_next ? next_sql : latest_sql, &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    *out = col_i64(res, 0, 0);
    PQclear(res);
    return WEFT_OK;
}

static const char metric_insert_sql[] =
    "INSERT INTO run_metrics (run_id, attempt, name, kind, unit, description, labels, value,"
    " count, sum, min, max, bounds, buckets, saved_ns)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)";

static weft_err
metric_insert(struct pg_state *st,
              const char *run_id,
              int64_t attempt,
              const struct weft__state_metric *m)
{
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, run_id);
    p_i64(&p, attempt);
    p_key(&p, m->name);
    p_i64(&p, m->kind);
    p_key(&p, m->unit);
    p_key(&p, m->description);
    p_key(&p, m->labels);
    p_double(&p, m->value);
    p_u64(&p, m->count);
    p_double(&p, m->sum);
    if (m->has_range) {
        p_double(&p, m->min);
        p_double(&p, m->max);
    } else {
        p_raw(&p, NULL);
        p_raw(&p, NULL);
    }
    p_raw(&p, m->bounds);
    p_raw(&p, m->buckets);
    p_u64(&p, m->saved_ns);
    err = exec_sql(st, "run metrics insert", metric_insert_sql, &p);
    params_cleanup(&p);
    return err;
}

weft_err
weft__state_metrics_save(struct rt_state *base,
                         const char *run_id,
                         int64_t attempt,
                         bool is_self_only,
                         const struct weft__state_metric *rows,
                         size_t count)
{
    static const char del_sql[] = "DELETE FROM run_metrics WHERE run_id = $1 AND attempt = $2";
    static const char del_self_sql[] =
        "DELETE FROM run_metrics WHERE run_id = $1 AND attempt = $2"
        " AND (name LIKE 'weft.spans.%' OR name LIKE 'weft.exporter.%')";
    struct pg_state *st = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    if (base == NULL || base->ops != &pg_ops || run_id == NULL || (rows == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    st = pg(base);
    err = pg_begin(base);
    if (err != WEFT_OK) {
        return err;
    }
    params_init(&p);
    p_key(&p, run_id);
    p_i64(&p, attempt);
    err = exec_sql(st, "run metrics delete", is_self_only ? del_self_sql : del_sql, &p);
    params_cleanup(&p);
    for (size_t i = 0; err == WEFT_OK && i < count; i++) {
        err = metric_insert(st, run_id, attempt, &rows[i]);
    }
    return tx_end(st, err);
}

/* A snapshot row of the fold's sums or gauges: columns name, kind, unit, description, labels,
 * value, sum, min, max, bounds, buckets. */
static void
read_metric(const PGresult *res, int row, struct weft__state_metric *m)
{
    memset(m, 0, sizeof(*m));
    m->name = PQgetvalue(res, row, 0);
    m->kind = (int)col_i64(res, row, 1);
    m->unit = PQgetvalue(res, row, 2);
    m->description = PQgetvalue(res, row, 3);
    m->labels = PQgetvalue(res, row, 4);
    m->value = col_double(res, row, 5);
    m->sum = col_double(res, row, 6);
    m->has_range = val(res, row, 7) != NULL && val(res, row, 8) != NULL;
    m->min = col_double(res, row, 7);
    m->max = col_double(res, row, 8);
    m->bounds = val(res, row, 9);
    m->buckets = val(res, row, 10);
}

static weft_err
fold_run_rows(struct pg_state *st,
              size_t limit,
              const struct weft__state_metrics_fold *cb,
              void *user_data)
{
    struct params p;
    PGresult *res = NULL;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_u64(&p, limit);
    res = query(st, "run metrics runs",
                "SELECT w.workflow, w.status, w.started_ns, w.ended_ns, w.total_reward,"
                " w.cost_usd, w.loops,"
                " EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = w.run_id),"
                " EXISTS (SELECT 1 FROM run_metrics m WHERE m.run_id = w.run_id"
                " AND m.name = 'weft.runs')"
                " FROM workflows w ORDER BY w.started_ns DESC, w.run_id DESC LIMIT $1",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft_run_info info;

        memset(&info, 0, sizeof(info));
        info.workflow = PQgetvalue(res, i, 0);
        info.status = PQgetvalue(res, i, 1);
        info.started_ns = (uint64_t)col_i64(res, i, 2);
        info.ended_ns = (uint64_t)col_i64(res, i, 3);
        info.reward = col_double(res, i, 4);
        info.cost_usd = col_double(res, i, 5);
        info.loops = (char *)val(res, i, 6);
        err = cb->run(&info, strcmp(PQgetvalue(res, i, 7), "t") == 0,
                      strcmp(PQgetvalue(res, i, 8), "t") == 0, user_data);
    }
    PQclear(res);
    return err;
}

static weft_err
fold_agent_rows(struct pg_state *st, const struct weft__state_metrics_fold *cb, void *user_data)
{
    PGresult *res = query(st, "run metrics agents",
                          "SELECT w.workflow, t.agent, t.step_status, count(*) FROM tasks t"
                          " JOIN workflows w ON w.workflow_id = t.workflow_id"
                          " WHERE t.executor_type = 'agent'"
                          " AND t.step_status IN ('completed', 'failed')"
                          " AND NOT EXISTS (SELECT 1 FROM run_metrics m"
                          " WHERE m.run_id = w.run_id)"
                          " GROUP BY w.workflow, t.agent, t.step_status",
                          NULL);
    weft_err err = WEFT_OK;

    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        err = cb->agents(PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                         strcmp(PQgetvalue(res, i, 2), "completed") == 0,
                         (uint64_t)col_i64(res, i, 3), user_data);
    }
    PQclear(res);
    return err;
}

static weft_err
fold_metric_rows(struct pg_state *st,
                 uint64_t fresh_ns,
                 const struct weft__state_metrics_fold *cb,
                 void *user_data)
{
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    /* Sums add up in SQL; histograms row by row (their buckets are JSON). A family's kind,
     * unit and description are the same in every row a weft writes; MIN() picks one should
     * two versions disagree, as SQLite's bare columns do. */
    res = query(st, "run metrics sums",
                "SELECT name, MIN(kind), MIN(unit), MIN(description), labels, SUM(value), 0,"
                " NULL, NULL, NULL, NULL FROM run_metrics WHERE kind IN (0, 1)"
                " GROUP BY name, labels"
                " UNION ALL SELECT name, kind, unit, description, labels, value, sum, min, max,"
                " bounds, buckets FROM run_metrics WHERE kind = 3",
                NULL);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft__state_metric m;
        read_metric(res, i, &m);
        err = cb->sum(&m, user_data);
    }
    PQclear(res);
    if (err != WEFT_OK) {
        return err;
    }
    res =
        query(st, "run metrics tasks",
              "SELECT DISTINCT labels FROM run_metrics WHERE name = 'weft.tasks.dispatched'", NULL);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        err = cb->task_labels(PQgetvalue(res, i, 0), user_data);
    }
    PQclear(res);
    if (err != WEFT_OK) {
        return err;
    }
    params_init(&p);
    p_u64(&p, fresh_ns);
    res = query(st, "run metrics gauges",
                "SELECT m.name, 2, MIN(m.unit), MIN(m.description), m.labels,"
                " CASE WHEN m.name IN ('weft.exporter.queue.utilization', 'weft.exporter.failing')"
                " THEN MAX(v) ELSE SUM(v) END, 0, NULL, NULL, NULL, NULL"
                " FROM (SELECT m.*, CASE WHEN m.name NOT LIKE 'weft.exporter.queue.%'"
                " AND m.name <> 'weft.exporter.failing' AND m.name <> 'weft.tasks.in_flight'"
                " AND m.name NOT IN ('weft.exporter.spool.size', 'weft.exporter.spool.bytes')"
                " OR ((w.ended_ns IS NULL OR w.ended_ns = 0) AND m.saved_ns >= $1)"
                " THEN m.value ELSE 0 END AS v"
                " FROM run_metrics m JOIN workflows w ON w.run_id = m.run_id WHERE m.kind = 2) m"
                " GROUP BY m.name, m.labels",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft__state_metric m;
        read_metric(res, i, &m);
        err = cb->gauge(&m, user_data);
    }
    PQclear(res);
    return err;
}

weft_err
weft__state_metrics_fold(struct rt_state *base,
                         size_t limit,
                         uint64_t fresh_ns,
                         const struct weft__state_metrics_fold *cb,
                         void *user_data)
{
    struct pg_state *st = NULL;
    weft_err err = WEFT_OK;

    if (base == NULL || base->ops != &pg_ops || cb == NULL) {
        return WEFT_EINVAL;
    }
    st = pg(base);
    err = pg_begin(base);
    if (err != WEFT_OK) {
        return err;
    }
    /* Every run and its snapshots as of one moment, as SQLite's read transaction gives. */
    err = exec_sql(st, "run metrics snapshot",
                   "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", NULL);
    if (err == WEFT_OK) {
        err = fold_run_rows(st, limit, cb, user_data);
    }
    if (err == WEFT_OK) {
        err = fold_agent_rows(st, cb, user_data);
    }
    if (err == WEFT_OK) {
        err = fold_metric_rows(st, fresh_ns, cb, user_data);
    }
    return tx_end(st, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Skill memory (state.h, docs/memory.md)                                                      */

#define SKILL_COLUMNS                                                                     \
    "id, agent, task, solution, workflow, run_id, trace_id, span_id, reward, created_ns," \
    " last_used_ns, uses"

/* How many rows a DELETE or UPDATE touched. */
static size_t
affected(PGresult *res)
{
    return (size_t)strtoull(PQcmdTuples(res), NULL, 10);
}

static void
read_skill(const PGresult *res, int row, struct weft__skill *s, bool *is_oom)
{
    const char *v = NULL;

    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", PQgetvalue(res, row, 0));
    s->agent = col_dup(res, row, 1, is_oom);
    s->task = col_dup(res, row, 2, is_oom);
    s->solution = col_dup(res, row, 3, is_oom);
    s->workflow = col_dup(res, row, 4, is_oom);
    s->run_id = col_dup(res, row, 5, is_oom);
    v = val(res, row, 6);
    snprintf(s->trace_id, sizeof(s->trace_id), "%s", v != NULL ? v : "");
    v = val(res, row, 7);
    snprintf(s->span_id, sizeof(s->span_id), "%s", v != NULL ? v : "");
    s->reward = col_double(res, row, 8);
    s->created_ns = (uint64_t)col_i64(res, row, 9);
    s->last_used_ns = (uint64_t)col_i64(res, row, 10);
    s->uses = (uint64_t)col_i64(res, row, 11);
}

/* The rows of @p res (SKILL_COLUMNS, then a score when @p has_score; best first) into *out,
 * stopping at the first score below @p min_score. Clears @p res. */
static weft_err
collect_skills(
    PGresult *res, bool has_score, double min_score, struct weft__skill **out, size_t *count)
{
    struct weft__skill *rows = NULL;
    int total = PQntuples(res);
    size_t n = 0;
    weft_err err = WEFT_OK;

    for (int i = 0; err == WEFT_OK && i < total; i++) {
        bool is_oom = false;
        double score = has_score ? col_double(res, i, 12) : 0.0;

        if (has_score && score < min_score) {
            break;
        }
        if (rows == NULL) {
            rows = weft__calloc((size_t)total, sizeof(*rows));
            if (rows == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
        }
        read_skill(res, i, &rows[n], &is_oom);
        rows[n++].score = score;
        err = is_oom ? WEFT_ENOMEM : WEFT_OK;
    }
    PQclear(res);
    if (err != WEFT_OK) {
        weft__skills_free(rows, n);
        return err;
    }
    *out = rows;
    *count = n;
    return WEFT_OK;
}

/* Retention after a new row (state.h): two indexed deletes, nothing to do in the usual case. */
static weft_err
skills_retain(struct pg_state *st, const char *agent)
{
    uint64_t now = weft__now_ns();
    struct params p;
    weft_err err = WEFT_OK;

    if (st->base.skills_max_age_ns > 0 && now > st->base.skills_max_age_ns) {
        params_init(&p);
        p_u64(&p, now - st->base.skills_max_age_ns);
        err = exec_sql(st, "skills age retention", "DELETE FROM skills WHERE created_ns < $1", &p);
        params_cleanup(&p);
    }
    if (err == WEFT_OK && st->base.skills_max_per_agent > 0) {
        params_init(&p);
        p_key(&p, agent);
        p_u64(&p, st->base.skills_max_per_agent);
        err = exec_sql(st, "skills count retention",
                       "DELETE FROM skills WHERE id IN (SELECT id FROM skills WHERE agent = $1"
                       " ORDER BY reward DESC, created_ns DESC OFFSET $2)",
                       &p);
        params_cleanup(&p);
    }
    return err;
}

/* A search ranks at most about this many rows across agents: its rarest lexemes are kept
 * while the tasks they occur in add up to no more (the rarest always), as on SQLite. */
#define SKILL_DF_BUDGET 12000

/* Rebuild skills_terms from ts_stat() when the store's size has moved by more than an eighth
 * (at least 256 rows) since the last rebuild. */
static weft_err
skills_terms_refresh(struct pg_state *st)
{
    PGresult *res = query(st, "skills meta",
                          "SELECT stored, stored_at_terms FROM skills_meta"
                          " WHERE id = 1",
                          NULL);
    int64_t stored = 0;
    int64_t at = 0;
    int64_t slack = 0;
    weft_err err = WEFT_OK;

    if (res == NULL) {
        return WEFT_EIO;
    }
    if (PQntuples(res) == 1) {
        stored = col_i64(res, 0, 0);
        at = col_i64(res, 0, 1);
    }
    PQclear(res);
    slack = at / 8 > 256 ? at / 8 : 256;
    if (stored <= at + slack && stored >= at - slack) {
        return WEFT_OK;
    }
    err = exec_sql(st, "skills terms clear", "DELETE FROM skills_terms", NULL);
    if (err == WEFT_OK) {
        err = exec_sql(st, "skills terms rebuild",
                       "INSERT INTO skills_terms (term, docs) SELECT word, ndoc"
                       " FROM ts_stat('SELECT tsv FROM skills') WHERE ndoc >= 64",
                       NULL);
    }
    if (err == WEFT_OK) {
        err = exec_sql(st, "skills terms mark",
                       "UPDATE skills_meta SET stored_at_terms = stored WHERE id = 1", NULL);
    }
    return err;
}

/* The vector of skill @p id, replacing the one it had (bytea sent in binary). */
static weft_err
vector_put(struct pg_state *st,
           const char *id,
           const char *agent,
           const struct weft__state_vec_blob *vec)
{
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, id);
    p_key(&p, agent);
    p_key(&p, vec->model);
    p_bytes(&p, vec->bytes, vec->len);
    err = exec_sql(st, "skill vector",
                   "INSERT INTO skill_vectors (id, agent, model, vec)"
                   " VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE"
                   " SET agent = excluded.agent, model = excluded.model, vec = excluded.vec",
                   &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_skill_vectors(struct rt_state *base,
                 const char *agent,
                 const char *model,
                 size_t len,
                 size_t limit,
                 state_blob_fn fn,
                 void *user_data)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    bool is_bad = false;

    params_init(&p);
    p_key(&p, agent);
    p_key(&p, model);
    p_u64(&p, len);
    p_u64(&p, limit);
    /* In binary, a vector comes back as its bytes: as text it was hex, twice the bytes to send
     * and decode (p99 283 ms for 1,000 vectors of 1,536 dimensions). */
    p.is_binary_result = true;
    res = query(st, "skill vectors",
                "SELECT id, vec FROM skill_vectors WHERE agent = $1"
                " AND model = $2 AND length(vec) = $3 LIMIT $4",
                &p);
    params_cleanup(&p);
    for (int i = 0; res != NULL && i < PQntuples(res); i++) {
        if ((size_t)PQgetlength(res, i, 1) != len) {
            is_bad = true; /* skipped: length() said len, so this is not expected */
            continue;
        }
        if (!fn(PQgetvalue(res, i, 0), (const unsigned char *)PQgetvalue(res, i, 1), user_data)) {
            break;
        }
    }
    if (is_bad) {
        WEFT_LOG(WEFT_LOG_WARN, "state: skipped a malformed skill vector on %s", st->where);
    }
    PQclear(res);
    return res != NULL ? WEFT_OK : WEFT_EIO;
}

/* In pg_skill_save()'s upsert: the stored row has the solution and reward being saved. */
#define PG_SAME_SKILL "skills.solution = excluded.solution AND skills.reward = excluded.reward"

static weft_err
pg_skill_save(struct rt_state *base,
              const struct weft__skill *s,
              const char *hash,
              const struct weft__state_vec_blob *vec,
              bool *is_new)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    char kept_id[WEFT_UUID_LEN + 1] = "";
    struct params p;
    weft_err err = WEFT_OK;

    *is_new = false;
    if (pg_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    params_init(&p);
    p_key(&p, s->id);
    p_key(&p, s->agent);
    p_key(&p, hash);
    p_text(&p, s->task);
    p_text(&p, s->solution);
    p_key(&p, s->workflow);
    p_key(&p, s->run_id);
    p_key(&p, s->trace_id[0] != '\0' ? s->trace_id : NULL);
    p_key(&p, s->span_id[0] != '\0' ? s->span_id : NULL);
    p_double(&p, s->reward);
    p_u64(&p, s->created_ns);
    /* One statement decides, so two processes saving the same task cannot both insert: the
     * row is replaced only by an equal or better reward (no row comes back otherwise), and
     * xmax = 0 tells an insert from an update. The same solution at the same reward, from a
     * run that was shown it, keeps the provenance of the run that made it (run, trace, span,
     * workflow, creation time): the CASEs. */
    res = query(st, "skill save",
                "INSERT INTO skills (id, agent, task_hash, task, solution, workflow, run_id,"
                " trace_id, span_id, reward, created_ns)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                " ON CONFLICT (agent, task_hash) DO UPDATE SET task = excluded.task,"
                " solution = excluded.solution, reward = excluded.reward,"
                " workflow = CASE WHEN " PG_SAME_SKILL " THEN skills.workflow"
                " ELSE excluded.workflow END,"
                " run_id = CASE WHEN " PG_SAME_SKILL " THEN skills.run_id ELSE excluded.run_id END,"
                " trace_id = CASE WHEN " PG_SAME_SKILL " THEN skills.trace_id"
                " ELSE excluded.trace_id END,"
                " span_id = CASE WHEN " PG_SAME_SKILL " THEN skills.span_id"
                " ELSE excluded.span_id END,"
                " created_ns = CASE WHEN " PG_SAME_SKILL " THEN skills.created_ns"
                " ELSE excluded.created_ns END WHERE skills.reward <= excluded.reward"
                " RETURNING xmax = 0, id",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return tx_end(st, WEFT_EIO);
    }
    *is_new = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    if (PQntuples(res) == 1) {
        /* The row written: a replaced one keeps its id. */
        snprintf(kept_id, sizeof(kept_id), "%s", PQgetvalue(res, 0, 1));
    }
    PQclear(res);
    if (vec != NULL && kept_id[0] != '\0') {
        err = vector_put(st, kept_id, s->agent, vec);
    }
    if (*is_new && err == WEFT_OK) {
        err = skills_retain(st, s->agent);
    }
    if (*is_new && err == WEFT_OK) {
        err = skills_terms_refresh(st);
    }
    err = tx_end(st, err);
    if (err != WEFT_OK) {
        *is_new = false;
    }
    return err;
}

static weft_err
pg_skills_search(struct rt_state *base,
                 const char *agent,
                 const char *terms,
                 size_t k,
                 double min_score,
                 struct weft__skill **out,
                 size_t *count)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    char *words = NULL;
    char *agent_lexeme = NULL;
    struct params p;
    bool is_oom = false;

    /* The query's lexemes (stemmed as the index's are), the rarest first while the tasks they
     * occur in add up to SKILL_DF_BUDGET, ORed; and the agent's lexeme. */
    params_init(&p);
    p_key(&p, terms);
    p_i64(&p, SKILL_DF_BUDGET);
    p_key(&p, agent);
    res = query(st, "skills search words",
                "WITH w AS (SELECT DISTINCT u.lexeme, COALESCE(t.docs, 0) AS docs"
                " FROM unnest(to_tsvector('english', $1)) u"
                " LEFT JOIN skills_terms t ON t.term = u.lexeme),"
                " r AS (SELECT lexeme, sum(docs) OVER (ORDER BY docs, lexeme) AS cum,"
                " row_number() OVER (ORDER BY docs, lexeme) AS n FROM w)"
                " SELECT (SELECT string_agg(quote_literal(lexeme), ' | ') FROM r"
                " WHERE n = 1 OR cum <= $2), quote_literal('k' || left(md5($3), 16))",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    if (PQntuples(res) == 1 && val(res, 0, 0) != NULL) {
        words = col_dup(res, 0, 0, &is_oom);
        agent_lexeme = col_dup(res, 0, 1, &is_oom);
    }
    PQclear(res);
    if (is_oom || words == NULL) {
        weft__free(words);
        weft__free(agent_lexeme);
        return is_oom ? WEFT_ENOMEM : WEFT_OK; /* no word left: no hits */
    }
    /* GIN intersects the agent's lexeme with the words, and the k best are picked before the
     * agent's name is compared (an index on agent ANDed into the bitmap cost more than it
     * saved). Normalisation 32 maps the rank into [0, 1) as rank / (rank + 1). */
    params_init(&p);
    p_raw(&p, agent_lexeme);
    p_raw(&p, words);
    p_key(&p, agent);
    p_u64(&p, k);
    res = query(st, "skills search",
                "SELECT * FROM (SELECT " SKILL_COLUMNS ", ts_rank_cd(tsv, $2::tsquery, 32) AS"
                " score FROM skills WHERE tsv @@ ($1::tsquery && $2::tsquery)"
                " ORDER BY score DESC, reward DESC, created_ns DESC LIMIT $4) r"
                " WHERE agent = $3 ORDER BY score DESC, reward DESC, created_ns DESC",
                &p);
    params_cleanup(&p);
    weft__free(words);
    weft__free(agent_lexeme);
    if (res == NULL) {
        return WEFT_EIO;
    }
    return collect_skills(res, true, min_score, out, count);
}

static weft_err
pg_skill_used(struct rt_state *base, const char *id, uint64_t now_ns)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    size_t n = 0;

    params_init(&p);
    p_u64(&p, now_ns);
    p_key(&p, id);
    res = query(st, "skill used",
                "UPDATE skills SET uses = uses + 1, last_used_ns = $1 WHERE id = $2", &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    n = affected(res);
    PQclear(res);
    return n > 0 ? WEFT_OK : WEFT_ENOTFOUND;
}

static weft_err
pg_skills_list(
    struct rt_state *base, const char *agent, size_t limit, struct weft__skill **out, size_t *count)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;

    params_init(&p);
    p_key(&p, agent);
    p_u64(&p, limit);
    res = query(st, "skills list",
                "SELECT " SKILL_COLUMNS " FROM skills WHERE $1::text IS NULL OR agent = $1"
                " ORDER BY created_ns DESC LIMIT $2",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    return collect_skills(res, false, 0.0, out, count);
}

static weft_err
pg_team_save(struct rt_state *base, const struct weft__state_team *t)
{
    struct pg_state *st = pg(base);
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_raw(&p, t->id);
    p_key(&p, t->name);
    p_key(&p, t->path);
    p_text(&p, t->goal);
    p_text(&p, t->document);
    p_key(&p, t->run_id);
    p_u64(&p, t->created_ns);
    err = exec_append(st, "team save",
                      "INSERT INTO teams (id, name, path, goal, document, run_id, created_ns)"
                      " VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)",
                      "INSERT INTO teams (id, name, path, goal, document, run_id, created_ns)"
                      " VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7) ON CONFLICT (id) DO NOTHING",
                      &p);
    params_cleanup(&p);
    return err;
}

static weft_err
pg_teams_list(struct rt_state *base,
              const char *run_id,
              size_t limit,
              struct weft__state_team **out,
              size_t *count)
{
    struct pg_state *st = pg(base);
    struct weft__state_team *rows = NULL;
    PGresult *res = NULL;
    struct params p;
    bool is_oom = false;
    int total = 0;

    params_init(&p);
    p_key(&p, run_id);
    p_u64(&p, limit);
    res = query(st, "teams list",
                run_id != NULL ? "SELECT id, name, path, goal, document::text, run_id, created_ns"
                                 " FROM teams WHERE run_id = $1 ORDER BY created_ns LIMIT $2"
                               : "SELECT id, name, path, goal, document::text, run_id, created_ns"
                                 " FROM teams WHERE $1::text IS NULL ORDER BY created_ns DESC"
                                 " LIMIT $2",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    total = PQntuples(res);
    rows = total > 0 ? weft__calloc((size_t)total, sizeof(*rows)) : NULL;
    is_oom = total > 0 && rows == NULL;
    for (int i = 0; !is_oom && i < total; i++) {
        snprintf(rows[i].id, sizeof(rows[i].id), "%s", PQgetvalue(res, i, 0));
        rows[i].name = col_dup(res, i, 1, &is_oom);
        rows[i].path = col_dup(res, i, 2, &is_oom);
        rows[i].goal = col_dup(res, i, 3, &is_oom);
        rows[i].document = col_dup(res, i, 4, &is_oom);
        rows[i].run_id = col_dup(res, i, 5, &is_oom);
        rows[i].created_ns = (uint64_t)col_i64(res, i, 6);
    }
    PQclear(res);
    if (is_oom) {
        weft__state_teams_free(rows, (size_t)total);
        return WEFT_ENOMEM;
    }
    *out = rows;
    *count = (size_t)total;
    return WEFT_OK;
}

static weft_err
pg_skill_get(struct rt_state *base, const char *prefix, struct weft__skill **out, size_t *count)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;

    params_init(&p);
    p_key(&p, prefix);
    /* Ids are lowercase hex and hyphens, all below 'z' in the C collation of the column. */
    res = query(st, "skill get",
                "SELECT " SKILL_COLUMNS " FROM skills WHERE id >= $1 AND id < $1 || 'z'"
                " ORDER BY id = $1 DESC, id LIMIT 2",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    return collect_skills(res, false, 0.0, out, count);
}

static weft_err
pg_skills_forget(struct rt_state *base, const char *id, const char *agent, size_t *removed)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;

    params_init(&p);
    p_key(&p, id);
    p_key(&p, agent);
    res = query(st, "skills forget",
                "DELETE FROM skills WHERE ($1::text IS NULL OR id = $1)"
                " AND ($2::text IS NULL OR agent = $2)",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    if (removed != NULL) {
        *removed = affected(res);
    }
    PQclear(res);
    return WEFT_OK;
}

static weft_err
pg_skills_prune(struct rt_state *base,
                size_t max_per_agent,
                uint64_t max_age_ns,
                uint64_t now_ns,
                size_t *removed)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (pg_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    if (max_age_ns > 0 && now_ns > max_age_ns) {
        params_init(&p);
        p_u64(&p, now_ns - max_age_ns);
        res = query(st, "skills prune by age", "DELETE FROM skills WHERE created_ns < $1", &p);
        params_cleanup(&p);
        err = res != NULL ? WEFT_OK : WEFT_EIO;
        n += res != NULL ? affected(res) : 0;
        PQclear(res);
    }
    if (err == WEFT_OK && max_per_agent > 0) {
        params_init(&p);
        p_u64(&p, max_per_agent);
        res = query(st, "skills prune by count",
                    "DELETE FROM skills WHERE id IN (SELECT id FROM (SELECT id, row_number()"
                    " OVER (PARTITION BY agent ORDER BY reward DESC, created_ns DESC) AS n"
                    " FROM skills) r WHERE n > $1)",
                    &p);
        params_cleanup(&p);
        err = res != NULL ? WEFT_OK : WEFT_EIO;
        n += res != NULL ? affected(res) : 0;
        PQclear(res);
    }
    err = tx_end(st, err);
    if (err == WEFT_OK && removed != NULL) {
        *removed = n;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Retention (state.h, docs/retention.md)                                                      */

static weft_err
pg_run_pin(struct rt_state *base, const char *run_id, bool is_pinned)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_bool(&p, is_pinned);
    p_key(&p, run_id);
    res = query(st, "run pin", "UPDATE workflows SET pinned = $1 WHERE run_id = $2", &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    err = affected(res) == 0 ? WEFT_ENOTFOUND : WEFT_OK;
    PQclear(res);
    return err;
}

static weft_err
pg_gc_scan(struct rt_state *base,
           uint64_t cutoff_ns,
           uint64_t after_ns,
           const char *after_id,
           size_t limit,
           state_gc_fn fn,
           void *user_data)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_u64(&p, cutoff_ns);
    p_u64(&p, after_ns);
    p_key(&p, after_id);
    p_u64(&p, limit);
    res = query(st, "gc scan",
                "SELECT run_id, ended_ns FROM workflows WHERE status <> 'running'"
                " AND ended_ns IS NOT NULL AND ended_ns < $1 AND NOT pinned AND ($3::text IS NULL"
                " OR (ended_ns, run_id) > ($2::bigint, $3::text)) ORDER BY ended_ns, run_id"
                " LIMIT $4",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        err = fn(PQgetvalue(res, i, 0), (uint64_t)col_i64(res, i, 1), user_data);
    }
    PQclear(res);
    return err;
}

static weft_err
pg_gc_kept(struct rt_state *base, uint64_t cutoff_ns, size_t *pinned, size_t *running)
{
    struct pg_state *st = pg(base);
    PGresult *res = NULL;
    struct params p;

    params_init(&p);
    p_u64(&p, cutoff_ns);
    res = query(st, "gc count",
                "SELECT count(*) FILTER (WHERE pinned AND status <> 'running' AND ended_ns < $1),"
                " count(*) FILTER (WHERE status = 'running' AND started_ns < $1) FROM workflows",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    *pinned = (size_t)col_i64(res, 0, 0);
    *running = (size_t)col_i64(res, 0, 1);
    PQclear(res);
    return WEFT_OK;
}

/* A session's rows (messages, scripted cursors) go with its last run: later runs of the same
 * session read its conversation back ($1 the run, $2 its session). */
#define PG_SESSION_GONE                                                  \
    " AND NOT EXISTS (SELECT 1 FROM workflows r WHERE r.session_id = $2" \
    " AND r.run_id <> $1)"

/* Every table with rows of a run, the run's own row last: the same WHERE counted (dry run) or
 * deleted; each text a literal, as the prepared statement cache needs. Tasks are deleted
 * before their workflow (not left to ON DELETE CASCADE) so that they are counted. Skills
 * (lessons are skills) and teams keep their own retention and are not here. */
static const struct pg_gc_table {
    const char *name;
    bool is_session; /* takes the session as $2 */
    const char *count;
    const char *del;
} pg_gc_tables[] = {
    {"tasks", false,
     "SELECT count(*) FROM tasks WHERE workflow_id = (SELECT workflow_id FROM workflows"
     " WHERE run_id = $1)",
     "DELETE FROM tasks WHERE workflow_id = (SELECT workflow_id FROM workflows"
     " WHERE run_id = $1)"},
    {"llm_exchanges", false, "SELECT count(*) FROM llm_exchanges WHERE run_id = $1",
     "DELETE FROM llm_exchanges WHERE run_id = $1"},
    {"tool_results", false, "SELECT count(*) FROM tool_results WHERE run_id = $1",
     "DELETE FROM tool_results WHERE run_id = $1"},
    {"corrections", false, "SELECT count(*) FROM corrections WHERE run_id = $1",
     "DELETE FROM corrections WHERE run_id = $1"},
    {"run_metrics", false, "SELECT count(*) FROM run_metrics WHERE run_id = $1",
     "DELETE FROM run_metrics WHERE run_id = $1"},
    {"messages", true, "SELECT count(*) FROM messages WHERE session_id = $2" PG_SESSION_GONE,
     "DELETE FROM messages WHERE session_id = $2" PG_SESSION_GONE},
    {"script_cursor_keys", true,
     "SELECT count(*) FROM script_cursor_keys WHERE session_id = $2" PG_SESSION_GONE,
     "DELETE FROM script_cursor_keys WHERE session_id = $2" PG_SESSION_GONE},
    {"workflows", false, "SELECT count(*) FROM workflows WHERE run_id = $1",
     "DELETE FROM workflows WHERE run_id = $1"},
};

/* The run being deleted, for the payload collection's callbacks. */
struct pg_gc {
    struct pg_state *st;
    const char *run_id;
};

static weft_err
gc_is_referenced(void *user, const char *hash, bool *is_live)
{
    struct pg_gc *gc = user;
    PGresult *res = NULL;
    struct params p;

    params_init(&p);
    p_key(&p, hash);
    p_key(&p, gc->run_id);
    res = query(gc->st, "payload references",
                "SELECT EXISTS (SELECT 1 FROM llm_exchanges WHERE entry_ref = $1 AND run_id <> $2)"
                " OR EXISTS (SELECT 1 FROM tool_results WHERE request_ref = $1 AND run_id <> $2)"
                " OR EXISTS (SELECT 1 FROM tool_results WHERE outcome_ref = $1 AND run_id <> $2)"
                " OR EXISTS (SELECT 1 FROM workflows WHERE workflow_snapshot_ref = $1"
                " AND run_id <> $2)",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    *is_live = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return WEFT_OK;
}

static weft_err
gc_lists_each(void *user, weft__payload_each_fn each, void *each_user)
{
    struct pg_gc *gc = user;
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p.is_binary_result = true;
    res = query(gc->st, "payload lists",
                "SELECT hash, size::text, data FROM payloads WHERE kind = 1", &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        struct weft__payload_record rec = {.kind = WEFT__PAYLOAD_CHUNKS};

        if (PQgetlength(res, i, 0) != WEFT__PAYLOAD_HEX_LEN) {
            continue;
        }
        memcpy(rec.hash, PQgetvalue(res, i, 0), sizeof(rec.hash));
        rec.raw_len = (size_t)strtoull(PQgetvalue(res, i, 1), NULL, 10);
        rec.data = (const unsigned char *)PQgetvalue(res, i, 2);
        rec.len = (size_t)PQgetlength(res, i, 2);
        err = each(&rec, each_user);
    }
    PQclear(res);
    return err;
}

static weft_err
gc_del(void *user, const char *hash)
{
    struct pg_gc *gc = user;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, hash);
    err = exec_sql(gc->st, "payload delete", "DELETE FROM payloads WHERE hash = $1", &p);
    params_cleanup(&p);
    return err;
}

/* The payload references run @p run_id's rows hold, into @p refs. */
static weft_err
gc_run_refs(struct pg_state *st, const char *run_id, struct weft__hash_set *refs)
{
    PGresult *res = NULL;
    struct params p;
    weft_err err = WEFT_OK;

    params_init(&p);
    p_key(&p, run_id);
    res = query(st, "payload references of the run",
                "SELECT entry_ref FROM llm_exchanges WHERE run_id = $1 AND entry_ref IS NOT NULL"
                " UNION SELECT request_ref FROM tool_results WHERE run_id = $1"
                " AND request_ref IS NOT NULL"
                " UNION SELECT outcome_ref FROM tool_results WHERE run_id = $1"
                " AND outcome_ref IS NOT NULL"
                " UNION SELECT workflow_snapshot_ref FROM workflows WHERE run_id = $1"
                " AND workflow_snapshot_ref IS NOT NULL",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        return WEFT_EIO;
    }
    for (int i = 0; err == WEFT_OK && i < PQntuples(res); i++) {
        err = weft__hash_set_add(refs, PQgetvalue(res, i, 0));
    }
    PQclear(res);
    return err;
}

/* After the run's rows (or, dry, instead of deleting them): the payload records only they
 * held, counted into *rows like any table's rows. The payload lock, taken exclusively, waits
 * for the writers' transactions that may be taking up a record (payload_begin) and holds new
 * ones off until this one commits. */
static weft_err
gc_payloads(struct pg_state *st,
            const char *run_id,
            struct weft__hash_set *refs,
            bool is_dry_run,
            uint64_t *rows)
{
    struct pg_gc gc = {.st = st, .run_id = run_id};
    const struct weft__state_payload_gc ops = {
        .source = {.get = payload_get, .user = st},
        .is_referenced = gc_is_referenced,
        .lists_each = gc_lists_each,
        .del = gc_del,
        .user = &gc,
    };
    uint64_t n = 0;
    weft_err err = WEFT_OK;

    if (refs->count == 0) {
        return WEFT_OK;
    }
    if (!is_dry_run) {
        err = exec_sql(st, "payload lock", "SELECT pg_advisory_xact_lock(" PAYLOAD_LOCK ")", NULL);
    }
    if (err == WEFT_OK) {
        err = weft__state_payloads_collect(&ops, refs, is_dry_run, &n);
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s on %s: payloads: %s", run_id, st->where,
                 weft_strerror(err));
        return err;
    }
    *rows += n;
    return WEFT_OK;
}

static weft_err
pg_gc_run(struct rt_state *base,
          const char *run_id,
          uint64_t cutoff_ns,
          bool is_dry_run,
          uint64_t *rows,
          bool *is_deleted)
{
    struct pg_state *st = pg(base);
    struct weft__hash_set refs;
    PGresult *res = NULL;
    struct params p;
    char *session_id = NULL;
    uint64_t n = 0;
    weft_err err = WEFT_OK;

    if (!is_dry_run && pg_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    weft__hash_set_init(&refs);
    /* FOR UPDATE: a process resuming or pinning the run meanwhile waits, or has committed and
     * is seen here (the run is then kept). A dry run only reads. */
    params_init(&p);
    p_key(&p, run_id);
    p_u64(&p, cutoff_ns);
    res = query(st, "gc check",
                is_dry_run ? "SELECT session_id FROM workflows WHERE run_id = $1"
                             " AND status <> 'running' AND ended_ns IS NOT NULL"
                             " AND ended_ns < $2 AND NOT pinned"
                           : "SELECT session_id FROM workflows WHERE run_id = $1"
                             " AND status <> 'running' AND ended_ns IS NOT NULL"
                             " AND ended_ns < $2 AND NOT pinned FOR UPDATE",
                &p);
    params_cleanup(&p);
    if (res == NULL) {
        err = WEFT_EIO;
    } else if (PQntuples(res) == 1) {
        session_id = weft__strdup(PQgetvalue(res, 0, 0));
        err = session_id == NULL ? WEFT_ENOMEM : WEFT_OK;
    }
    PQclear(res);
    /* Its references are read before its rows go; what they alone held goes after them. */
    if (err == WEFT_OK && session_id != NULL) {
        err = gc_run_refs(st, run_id, &refs);
    }
    for (size_t i = 0;
         err == WEFT_OK && session_id != NULL && i < sizeof(pg_gc_tables) / sizeof(pg_gc_tables[0]);
         i++) {
        const struct pg_gc_table *t = &pg_gc_tables[i];

        params_init(&p);
        p_key(&p, run_id);
        if (t->is_session) {
            p_key(&p, session_id);
        }
        res = query(st, t->name, is_dry_run ? t->count : t->del, &p);
        params_cleanup(&p);
        if (res == NULL) {
            err = WEFT_EIO;
            break;
        }
        n += is_dry_run ? (uint64_t)col_i64(res, 0, 0) : (uint64_t)affected(res);
        PQclear(res);
    }
    if (err == WEFT_OK && session_id != NULL) {
        err = gc_payloads(st, run_id, &refs, is_dry_run, &n);
    }
    if (!is_dry_run) {
        err = tx_end(st, err);
    }
    if (err == WEFT_OK && session_id != NULL) {
        *rows = n;
        *is_deleted = true;
    }
    weft__hash_set_cleanup(&refs);
    weft__free(session_id);
    return err;
}

static const struct weft__state_ops pg_ops = {
    .name = "postgresql",
    .close = pg_close,
    .begin = pg_begin,
    .begin_lazy = pg_begin_lazy,
    .commit = pg_commit,
    .in_transaction = pg_in_transaction,
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
    .skill_save = pg_skill_save,
    .skill_vectors = pg_skill_vectors,
    .skills_search = pg_skills_search,
    .skill_used = pg_skill_used,
    .skills_list = pg_skills_list,
    .team_save = pg_team_save,
    .teams_list = pg_teams_list,
    .skill_get = pg_skill_get,
    .skills_forget = pg_skills_forget,
    .skills_prune = pg_skills_prune,
    .run_pin = pg_run_pin,
    .gc_scan = pg_gc_scan,
    .gc_kept = pg_gc_kept,
    .gc_run = pg_gc_run,
};
