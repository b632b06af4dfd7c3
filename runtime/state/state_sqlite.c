/* runtime/state/state_sqlite.c - the SQLite backend of the run state store (state.h): the embedded
 * default, one file ($WEFT_HOME/state.db unless told otherwise).
 *
 * WAL mode lets `weft` readers look at a database a run is writing. The statements a run
 * repeats (step, cursor, exchange and message writes) are prepared once per handle and kept
 * in a small cache keyed by their SQL text's address (every SQL text here is a string
 * literal): parsing them was 60 % of a scripted step's instructions (callgrind). SQLite
 * re-prepares a cached statement itself when the schema changes (sqlite3_prepare_v2). Reads
 * for `weft runs` are rare and keep per-call statements.
 *
 * The long texts of LLM exchanges and tool results are content-addressed payloads (schema 14,
 * state_payloads.h): records in the payloads table, written in the transaction of the row that
 * refers to them and collected with the last run that does.
 */
#include "runtime/common/json_write.h"
#include "runtime/state/state_backend.h"
#include "runtime/state/state_payloads.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "tracing/ids.h"
#include "tracing/redact.h"

#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEMA_VERSION 15

/* Distinct cached SQL texts; more than this are prepared per call (still correct). */
#define STMT_CACHE 24

struct cached_stmt {
    const char *sql; /* a string literal: compared by address */
    sqlite3_stmt *stmt;
    bool is_busy; /* handed out and not yet released: a nested use prepares its own */
};

struct lite_state {
    struct rt_state base; /* first: the handle callers hold */
    sqlite3 *db;
    struct cached_stmt cache[STMT_CACHE];
    unsigned tx_depth;    /* weft__state_begin() nesting: only the outermost pair touches SQLite */
    bool is_tx_failed;    /* a write inside the open transaction failed: roll it back */
    bool is_damaged;      /* SQLite said the file is corrupt (durable.c) */
    char owner_token[33]; /* this handle's lease token; "" when it owns no run */
    uint64_t last_heartbeat_mono; /* heartbeats are written at most once a second */
    /* The step rows this handle knows are stored for run rows_run, by index: the hash of the
     * dependencies last written (0: not known). A step saved again with the same dependencies
     * is an UPDATE of the columns that change (status, result, times...), not a whole upsert
     * with its dependencies serialised again. Forgotten on any rollback and on a surgery. */
    char *rows_run;
    uint64_t *rows_deps;
    size_t rows_cap;
};

static const struct weft__state_ops lite_ops;

static struct lite_state *
lite(struct rt_state *base)
{
    return (struct lite_state *)base; /* base is the first member */
}

static void lite_close(struct rt_state *base);
static weft_err lite_begin(struct rt_state *base);
static weft_err lite_commit(struct rt_state *base);

/* Version 5 (durability, see docs/durability.md): the process that owns a running run (pid,
 * host, a token per acquisition, since when, its last heartbeat), the workflow file's hash,
 * the root span's name, parent and start (to close it on recovery) and each step's span. */
static const char state_migrate_v5[] = "ALTER TABLE runs ADD COLUMN owner_pid BIGINT;"
                                       "ALTER TABLE runs ADD COLUMN owner_host TEXT;"
                                       "ALTER TABLE runs ADD COLUMN owner_token TEXT;"
                                       "ALTER TABLE runs ADD COLUMN owner_since_ns BIGINT;"
                                       "ALTER TABLE runs ADD COLUMN heartbeat_ns BIGINT;"
                                       "ALTER TABLE runs ADD COLUMN workflow_hash TEXT;"
                                       "ALTER TABLE runs ADD COLUMN root_span_name TEXT;"
                                       "ALTER TABLE runs ADD COLUMN root_parent_span_id TEXT;"
                                       "ALTER TABLE runs ADD COLUMN root_started_ns BIGINT;"
                                       "ALTER TABLE steps ADD COLUMN span_id TEXT;"
                                       "ALTER TABLE steps ADD COLUMN span_parent_id TEXT;";

/* Version 6 (distributed runs, docs/distributed.md): each step's task id (a UUID, the
 * PostgreSQL backend's tasks.task_id), the redeliveries of its task messages and whether it is
 * handed to a remote executor without a result yet. */
static const char state_migrate_v6[] = "ALTER TABLE steps ADD COLUMN task_uuid TEXT;"
                                       "ALTER TABLE steps ADD COLUMN retries INTEGER NOT NULL"
                                       " DEFAULT 0;"
                                       "ALTER TABLE steps ADD COLUMN is_dispatched INTEGER NOT NULL"
                                       " DEFAULT 0;";

/* Version 7 (skill memory, docs/memory.md): one row per (agent, normalised task hash), an
 * integer key for the full-text index, and the indexes retention needs: (agent, reward,
 * created_ns) keeps the best of an agent with one range walk, created_ns finds the old ones.
 * skills_fts is an external-content FTS5 table over the task and the agent's key (one token,
 * "k" and 16 hex digits of the agent name's FNV-1a: a search ANDs it into the match, so only
 * that agent's rows are ranked, exactly, whatever characters the name has), kept in step by
 * triggers. Words are not stemmed: a search looks its words' document frequencies up
 * by the index's own tokens (skills_terms, see skills_terms_refresh()), and a stemmer would
 * make those differ from the words of the query.
 * skills_terms holds the words of at least SKILL_COMMON_DOCS tasks with their counts,
 * rebuilt from the index's vocabulary (skills_vocab) when the store's size has moved by an
 * eighth since the last rebuild; skills_meta counts the rows (kept by the triggers). */
static const char state_migrate_v7[] =
    "CREATE TABLE IF NOT EXISTS skills ("
    " rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, agent TEXT NOT NULL,"
    " task_hash TEXT NOT NULL, task TEXT NOT NULL, solution TEXT NOT NULL, workflow TEXT,"
    " run_id TEXT, trace_id TEXT, span_id TEXT, reward REAL NOT NULL,"
    " created_ns BIGINT NOT NULL, last_used_ns BIGINT NOT NULL DEFAULT 0,"
    " uses INTEGER NOT NULL DEFAULT 0, agent_key TEXT NOT NULL, UNIQUE (agent, task_hash));"
    "CREATE INDEX IF NOT EXISTS skills_agent_rank ON skills(agent, reward, created_ns);"
    "CREATE INDEX IF NOT EXISTS skills_created ON skills(created_ns);"
    "CREATE TABLE IF NOT EXISTS skills_meta (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " stored INTEGER NOT NULL, stored_at_terms INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO skills_meta VALUES (1, 0, 0);"
    "CREATE TABLE IF NOT EXISTS skills_terms (term TEXT PRIMARY KEY, docs INTEGER NOT NULL)"
    " WITHOUT ROWID;"
    "CREATE VIRTUAL TABLE IF NOT EXISTS skills_fts USING fts5(task, agent_key, content='skills',"
    " content_rowid='rid', tokenize='unicode61 remove_diacritics 2');"
    "CREATE VIRTUAL TABLE IF NOT EXISTS skills_vocab USING fts5vocab(skills_fts, 'col');"
    "CREATE TRIGGER IF NOT EXISTS skills_fts_insert AFTER INSERT ON skills BEGIN"
    " INSERT INTO skills_fts(rowid, task, agent_key) VALUES (new.rid, new.task, new.agent_key);"
    " UPDATE skills_meta SET stored = stored + 1 WHERE id = 1; END;"
    "CREATE TRIGGER IF NOT EXISTS skills_fts_delete AFTER DELETE ON skills BEGIN"
    " INSERT INTO skills_fts(skills_fts, rowid, task, agent_key)"
    " VALUES ('delete', old.rid, old.task, old.agent_key);"
    " UPDATE skills_meta SET stored = stored - 1 WHERE id = 1; END;"
    "CREATE TRIGGER IF NOT EXISTS skills_fts_update AFTER UPDATE OF task, agent_key ON skills"
    " BEGIN INSERT INTO skills_fts(skills_fts, rowid, task, agent_key)"
    " VALUES ('delete', old.rid, old.task, old.agent_key);"
    " INSERT INTO skills_fts(rowid, task, agent_key) VALUES (new.rid, new.task, new.agent_key);"
    " END;"
    "INSERT INTO skills_fts(skills_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');";

/* Version 8 (skill embeddings, docs/memory.md): each skill's task vector, float32
 * little-endian, with the model that made it, in a table of its own so that a scan of one
 * agent's vectors reads only vectors (not the tasks and solutions beside them); deleted with
 * its skill by a trigger (retention, forget, prune all delete from skills). */
static const char state_migrate_v8[] =
    "CREATE TABLE IF NOT EXISTS skill_vectors (rid INTEGER PRIMARY KEY, id TEXT NOT NULL,"
    " agent TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL);"
    "CREATE INDEX IF NOT EXISTS skill_vectors_agent ON skill_vectors(agent, model);"
    "CREATE TRIGGER IF NOT EXISTS skill_vectors_delete AFTER DELETE ON skills BEGIN"
    " DELETE FROM skill_vectors WHERE rid = old.rid; END;";

/* Version 9 (composed teams, docs/architect.md): a row per team an architect composed. */
static const char state_migrate_v9[] =
    "CREATE TABLE IF NOT EXISTS teams (id TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " path TEXT NOT NULL, goal TEXT NOT NULL, document TEXT NOT NULL, run_id TEXT,"
    " created_ns INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS teams_run ON teams(run_id, created_ns);"
    "CREATE INDEX IF NOT EXISTS teams_created ON teams(created_ns);";

/* A run's latest sign of life apart from its heartbeat, which is written at most once a second:
 * the last start or end of a step and the last LLM exchange it stored. Without the starts and
 * exchanges, a run killed 600 ms into its first step read as having lasted a few microseconds. */
#define STATE_LAST_LIFE                                                              \
    " MAX(COALESCE((SELECT MAX(MAX(COALESCE(ended_ns, 0), COALESCE(started_ns, 0)))" \
    " FROM steps WHERE steps.run_id = runs.id), 0),"                                 \
    " COALESCE((SELECT MAX(e.created_ns) FROM llm_exchanges e WHERE e.run_id = runs.id), 0))"

/* The owner columns read with every run (read_info): a run whose owner is gone reads as
 * interrupted before anything marks it so. */
#define STATE_OWNER_COLUMNS "owner_pid, owner_host, heartbeat_ns," STATE_LAST_LIFE

/* Durability helpers, defined at the end of the file. */
static void state_note_error(struct lite_state *st, int rc);
static void
state_owner_view(sqlite3_stmt *stmt, int first, struct weft_run_info *info, bool *is_oom);

/* Version 1: runs, steps, messages, script cursors. */
static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS runs ("
    " id TEXT PRIMARY KEY, workflow TEXT NOT NULL, session_id TEXT NOT NULL, input TEXT,"
    " status TEXT NOT NULL, reason TEXT, trace_id TEXT, output TEXT,"
    " iterations INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,"
    " output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,"
    " started_ns BIGINT NOT NULL, ended_ns BIGINT);"
    "CREATE INDEX IF NOT EXISTS runs_session ON runs(session_id);"
    "CREATE TABLE IF NOT EXISTS steps ("
    " run_id TEXT NOT NULL, idx INTEGER NOT NULL, step_id TEXT NOT NULL, agent TEXT NOT NULL,"
    " task TEXT NOT NULL, depends_on TEXT NOT NULL, status TEXT NOT NULL,"
    " attempts INTEGER NOT NULL, result TEXT, feedback TEXT, requested_by TEXT,"
    " PRIMARY KEY (run_id, idx));"
    "CREATE TABLE IF NOT EXISTS messages ("
    " session_id TEXT NOT NULL, seq INTEGER NOT NULL, run_id TEXT NOT NULL, role TEXT NOT NULL,"
    " content TEXT NOT NULL, route TEXT, created_ns BIGINT NOT NULL,"
    " PRIMARY KEY (session_id, seq));"
    "CREATE TABLE IF NOT EXISTS script_cursors ("
    " session_id TEXT NOT NULL, script TEXT NOT NULL, cursors TEXT NOT NULL,"
    " PRIMARY KEY (session_id, script));";

/* Version 3: every LLM exchange of a run, so that it can be replayed (`--replay run:ID`). */
static const char migrate_v3[] =
    "CREATE TABLE IF NOT EXISTS llm_exchanges ("
    " run_id TEXT NOT NULL, seq INTEGER NOT NULL, who TEXT NOT NULL, purpose TEXT NOT NULL,"
    " entry TEXT NOT NULL, created_ns BIGINT NOT NULL, PRIMARY KEY (run_id, seq));";

/* Version 4: scripted cursors one row per queue, so a step saves only what it used. */
static const char migrate_v4[] =
    "CREATE TABLE IF NOT EXISTS script_cursor_keys ("
    " session_id TEXT NOT NULL, script TEXT NOT NULL, queue TEXT NOT NULL,"
    " used INTEGER NOT NULL, PRIMARY KEY (session_id, script, queue));";

/* Version 2: executor steps, rewards, corrections (DAG surgery history), resumable runs.
 * Only ADD COLUMN and CREATE: the same statements work on PostgreSQL. */
static const char migrate_v2[] =
    "ALTER TABLE runs ADD COLUMN workflow_path TEXT;"
    "ALTER TABLE runs ADD COLUMN root_span_id TEXT;"
    "ALTER TABLE runs ADD COLUMN reward REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE runs ADD COLUMN corrections INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE runs ADD COLUMN loops TEXT;"
    "ALTER TABLE runs ADD COLUMN resumed_from_trace TEXT;"
    "ALTER TABLE steps ADD COLUMN executor TEXT NOT NULL DEFAULT 'agent';"
    "ALTER TABLE steps ADD COLUMN spec TEXT;"
    "ALTER TABLE steps ADD COLUMN parent TEXT;"
    "ALTER TABLE steps ADD COLUMN reward REAL;"
    "ALTER TABLE steps ADD COLUMN error_type TEXT;"
    "ALTER TABLE steps ADD COLUMN error TEXT;"
    "ALTER TABLE steps ADD COLUMN started_ns BIGINT;"
    "ALTER TABLE steps ADD COLUMN ended_ns BIGINT;"
    "CREATE TABLE IF NOT EXISTS corrections ("
    " run_id TEXT NOT NULL, seq INTEGER NOT NULL, failed_step TEXT NOT NULL,"
    " error_type TEXT, inserted TEXT NOT NULL, depends_before TEXT NOT NULL,"
    " depends_after TEXT NOT NULL, created_ns BIGINT NOT NULL,"
    " PRIMARY KEY (run_id, seq));"
    "CREATE INDEX IF NOT EXISTS runs_started ON runs(started_ns);";

/* Version 10 (replay and fork, docs/replay.md): every tool call's request and outcome, keyed by
 * run, step, attempt and call sequence, so `weft replay` answers tools as the run saw them;
 * and where a run came from (a replay or a fork of another run), so a UI can compare the
 * pair. Versions 8 and 9 belong to other work (skill vectors, composed teams). Only ADD
 * COLUMN and CREATE. */
static const char state_migrate_v10[] =
    "CREATE TABLE IF NOT EXISTS tool_results ("
    " run_id TEXT NOT NULL, step_id TEXT NOT NULL, attempt INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, tool TEXT NOT NULL, kind TEXT NOT NULL, request TEXT NOT NULL,"
    " outcome TEXT NOT NULL, created_ns BIGINT NOT NULL,"
    " PRIMARY KEY (run_id, step_id, attempt, seq));"
    "ALTER TABLE runs ADD COLUMN origin_kind TEXT;"
    "ALTER TABLE runs ADD COLUMN origin_run_id TEXT;"
    "ALTER TABLE runs ADD COLUMN origin_step TEXT;";

/* Version 11 (docs/replay.md, "What a run keeps"): the snapshot of the workflow file and the
 * files it references (scripts, team and sub-workflows, the MCP servers file), so that replay,
 * fork and resume work after the file moved. Only ADD COLUMN. */
static const char state_migrate_v11[] = "ALTER TABLE runs ADD COLUMN workflow_snapshot TEXT;";

/* Version 12 (retention, docs/retention.md): a pinned run is kept by `weft gc` whatever its
 * age; the index on ended_ns finds the runs old enough to go. Only ADD COLUMN and CREATE. */
static const char state_migrate_v12[] =
    "ALTER TABLE runs ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX IF NOT EXISTS runs_ended ON runs(ended_ns);";

/* Version 13 (tail sampling, docs/sampling.md): what the policy decided of the run's trace,
 * "kept:RULE" or "dropped:RULE" (NULL: no policy). Only ADD COLUMN. */
static const char state_migrate_v13[] = "ALTER TABLE runs ADD COLUMN trace_sampling TEXT;";

/* Version 14 (content-addressed payloads, store/payload.h, docs/replay.md): a replay record's
 * text of WEFT__PAYLOAD_MIN bytes or more is stored once per content hash in payloads, and its
 * row keeps the reference (entry_ref, request_ref, outcome_ref) with the text column empty; a
 * row without a reference reads as before. The partial indexes let retention ask whether a
 * reference is still held (docs/retention.md). Only ADD COLUMN and CREATE. */
static const char state_migrate_v14[] =
    "CREATE TABLE IF NOT EXISTS payloads (hash TEXT PRIMARY KEY, kind INTEGER NOT NULL,"
    " size INTEGER NOT NULL, data BLOB NOT NULL);"
    "ALTER TABLE llm_exchanges ADD COLUMN entry_ref TEXT;"
    "ALTER TABLE tool_results ADD COLUMN request_ref TEXT;"
    "ALTER TABLE tool_results ADD COLUMN outcome_ref TEXT;"
    "CREATE INDEX IF NOT EXISTS llm_exchanges_entry_ref ON llm_exchanges(entry_ref)"
    " WHERE entry_ref IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS tool_results_request_ref ON tool_results(request_ref)"
    " WHERE request_ref IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS tool_results_outcome_ref ON tool_results(outcome_ref)"
    " WHERE outcome_ref IS NOT NULL;";

/* Version 15: the run's workflow snapshot (docs/replay.md, "What a run keeps") as a payload
 * too: repeated runs of one workflow keep its files once. */
static const char state_migrate_v15[] =
    "ALTER TABLE runs ADD COLUMN workflow_snapshot_ref TEXT;"
    "CREATE INDEX IF NOT EXISTS runs_workflow_snapshot_ref ON runs(workflow_snapshot_ref)"
    " WHERE workflow_snapshot_ref IS NOT NULL;";

/* The state holds prompts, answers and tool outputs: create the file 0600 before SQLite opens
 * it (SQLite gives its -wal and -shm files the database's mode), and take group and other
 * access away from a file an older weft created 0644. Failures are left to sqlite3_open_v2,
 * which reports them. */
static void
make_private(const char *path)
{
    struct stat sb;
    int fd = -1;

    if (strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
        return;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return;
    }
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0 &&
        sb.st_uid == geteuid()) {
        (void)fchmod(fd, sb.st_mode & 0700);
    }
    close(fd);
}

/* The IDF weights of a search's phrases, in the order of the match expression, parsed once
 * per query from weft_skill_rank()'s argument. */
struct rank_weights {
    int n;
    double w[WEFT_SKILL_QUERY_TERMS + 1];
};

static void
rank_weights_free(void *p)
{
    weft__free(p);
}

/* weft_skill_rank(skills_fts, 'w0 w1 ...'): BM25 of the row's task for the query's phrases,
 * each weighted by the IDF the search computed (0 for the agent's phrase), without length
 * normalisation (b = 0: tasks are capped and alike in length, and skipping it saves a
 * %_docsize lookup per row). FTS5's bm25() would count every phrase's documents for its IDFs
 * on each query (60 ns per document, the agent's phrase included), which the search's own
 * document frequencies make unnecessary. */
static void
skill_rank(const Fts5ExtensionApi *api,
           Fts5Context *fts,
           sqlite3_context *ctx,
           int argc,
           sqlite3_value **argv)
{
    struct rank_weights *rw = api->xGetAuxdata(fts, 0);
    int phrases = api->xPhraseCount(fts);
    double score = 0.0;

    if (rw == NULL) {
        const char *p = argc > 0 ? (const char *)sqlite3_value_text(argv[0]) : NULL;

        rw = weft__calloc(1, sizeof(*rw));
        if (rw == NULL) {
            sqlite3_result_error_nomem(ctx);
            return;
        }
        while (p != NULL && *p != '\0' && rw->n < (int)WEFT_SKILL_QUERY_TERMS + 1) {
            char *end = NULL;
            double v = strtod(p, &end);

            if (end == p) {
                break;
            }
            rw->w[rw->n++] = v;
            p = end;
        }
        if (api->xSetAuxdata(fts, rw, rank_weights_free) != SQLITE_OK) {
            sqlite3_result_error_nomem(ctx); /* xSetAuxdata freed it */
            return;
        }
    }
    for (int i = 0; i < phrases && i < rw->n; i++) {
        Fts5PhraseIter it;
        int col = -1;
        int off = 0;
        int tf = 0;

        if (rw->w[i] == 0.0) {
            continue;
        }
        if (api->xPhraseFirst(fts, i, &it, &col, &off) != SQLITE_OK) {
            sqlite3_result_error(ctx, "weft_skill_rank: cannot read a phrase", -1);
            return;
        }
        for (; col >= 0; api->xPhraseNext(fts, &it, &col, &off)) {
            tf += col == 0 ? 1 : 0;
        }
        if (tf > 0) {
            score += rw->w[i] * (double)tf * 2.2 / ((double)tf + 1.2); /* k1 = 1.2 */
        }
    }
    sqlite3_result_double(ctx, score);
}

/* Register weft_skill_rank() on @p db through the FTS5 API (fetched as SQLite documents it:
 * SELECT fts5(?) with a pointer binding). @return false when FTS5 is missing. */
static bool
register_rank(sqlite3 *db)
{
    fts5_api *api = NULL;
    sqlite3_stmt *stmt = NULL;

    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL) != SQLITE_OK) {
        return false;
    }
    sqlite3_bind_pointer(stmt, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return api != NULL &&
           api->xCreateFunction(api, "weft_skill_rank", NULL, skill_rank, NULL) == SQLITE_OK;
}

weft_err
weft__state_sqlite_open(const char *path, struct rt_state **out, char *err, size_t err_len)
{
    struct lite_state *st = NULL;
    char *errmsg = NULL;
    sqlite3_stmt *stmt = NULL;
    int version = 0;

    *out = NULL;
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    st->base.ops = &lite_ops;
    make_private(path);
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        snprintf(err, err_len, "state database %s: %s", path,
                 st->db != NULL ? sqlite3_errmsg(st->db) : "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if (!register_rank(st->db)) {
        snprintf(err, err_len, "state database %s: this SQLite lacks FTS5 (skill memory needs it)",
                 path);
        goto fail;
    }
    /* The version is read inside the write transaction, so two processes opening a new file
     * at once migrate it once; a crash leaves the previous version whole. */
    /* A page cache of up to 32 MiB (SQLite's default is 2 MiB), filled only as pages are read:
     * a skills search at 100,000 skills reads a few MiB of index, and re-reading it through
     * the kernel on every search was a third of its time (perf). */
    if (sqlite3_exec(st->db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     " PRAGMA cache_size=-32768",
                     NULL, NULL, &errmsg) != SQLITE_OK ||
        sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, &errmsg) != SQLITE_OK) {
        goto sql_fail;
    }
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
        version = sqlite3_column_int(stmt, 0);
    }
    sqlite3_finalize(stmt);
    if (version > SCHEMA_VERSION) {
        snprintf(err, err_len, "state database %s has schema %d; this weft knows %d", path, version,
                 SCHEMA_VERSION);
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    if ((version < 1 && sqlite3_exec(st->db, schema_v1, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 2 && sqlite3_exec(st->db, migrate_v2, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 3 && sqlite3_exec(st->db, migrate_v3, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 4 && sqlite3_exec(st->db, migrate_v4, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 5 && sqlite3_exec(st->db, state_migrate_v5, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 6 && sqlite3_exec(st->db, state_migrate_v6, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 7 && sqlite3_exec(st->db, state_migrate_v7, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 8 && sqlite3_exec(st->db, state_migrate_v8, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 9 && sqlite3_exec(st->db, state_migrate_v9, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 10 &&
         sqlite3_exec(st->db, state_migrate_v10, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 11 &&
         sqlite3_exec(st->db, state_migrate_v11, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 12 &&
         sqlite3_exec(st->db, state_migrate_v12, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 13 &&
         sqlite3_exec(st->db, state_migrate_v13, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 14 &&
         sqlite3_exec(st->db, state_migrate_v14, NULL, NULL, &errmsg) != SQLITE_OK) ||
        (version < 15 &&
         sqlite3_exec(st->db, state_migrate_v15, NULL, NULL, &errmsg) != SQLITE_OK) ||
        sqlite3_exec(st->db, "PRAGMA user_version = 15; COMMIT", NULL, NULL, &errmsg) !=
            SQLITE_OK) {
        goto sql_fail;
    }
    *out = &st->base;
    return WEFT_OK;
sql_fail:
    snprintf(err, err_len, "state database %s: %s", path,
             errmsg != NULL ? errmsg : "schema setup failed");
    sqlite3_free(errmsg);
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
fail:
    lite_close(&st->base);
    return WEFT_EIO;
}

static void
lite_close(struct rt_state *base)
{
    struct lite_state *st = lite(base);

    if (st == NULL) {
        return;
    }
    for (size_t i = 0; i < STMT_CACHE; i++) {
        sqlite3_finalize(st->cache[i].stmt);
    }
    sqlite3_close(st->db);
    weft__free(st->rows_run);
    weft__free(st->rows_deps);
    weft__free(st);
}

/* Bind a NUL-terminated string or NULL. */
static void
bind_text(sqlite3_stmt *stmt, int i, const char *s)
{
    char *clean = NULL;

    if (s == NULL) {
        sqlite3_bind_null(stmt, i);
        return;
    }
    /* Inputs, tasks, results and exchanges are kept on disk: credentials in them are not. */
    clean = weft__redact_text(s);
    sqlite3_bind_text(stmt, i, clean != NULL ? clean : "", -1, SQLITE_TRANSIENT);
    weft__free(clean);
}

/* A lookup key (a run id or id prefix) is bound as is: ids are generated, never secrets, and a
 * redaction that ran out of memory must not turn the lookup into one of "" (no run, no steps,
 * silently). */
static void
bind_key(sqlite3_stmt *stmt, int i, const char *key)
{
    sqlite3_bind_text(stmt, i, key, -1, SQLITE_TRANSIENT);
}

/* Give back a statement from prepare() or cached(): a cached one is reset for its next use
 * (its bindings cleared, so no text outlives the call), any other is finalized. */
static void
release(struct lite_state *st, sqlite3_stmt *stmt)
{
    for (size_t i = 0; stmt != NULL && i < STMT_CACHE; i++) {
        if (st->cache[i].stmt == stmt) {
            sqlite3_reset(stmt);
            sqlite3_clear_bindings(stmt);
            st->cache[i].is_busy = false;
            return;
        }
    }
    sqlite3_finalize(stmt);
}

static weft_err
finish(struct lite_state *st, sqlite3_stmt *stmt, const char *what)
{
    int rc = sqlite3_step(stmt);

    release(st, stmt);
    if (rc != SQLITE_DONE) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: %s failed: %s", what, sqlite3_errmsg(st->db));
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static sqlite3_stmt *
prepare(struct lite_state *st, const char *sql)
{
    sqlite3_stmt *stmt = NULL;

    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        state_note_error(st, sqlite3_errcode(st->db));
        WEFT_LOG(WEFT_LOG_ERROR, "state: prepare failed: %s", sqlite3_errmsg(st->db));
        sqlite3_finalize(stmt);
        return NULL;
    }
    return stmt;
}

/* The statement for @p sql (a string literal), prepared on first use and then reused. Give it
 * back with finish() or release(). NULL on failure (logged). */
static sqlite3_stmt *
cached(struct lite_state *st, const char *sql)
{
    struct cached_stmt *free_slot = NULL;

    for (size_t i = 0; i < STMT_CACHE; i++) {
        struct cached_stmt *c = &st->cache[i];
        if (c->sql == sql) {
            if (c->is_busy) {
                return prepare(st, sql); /* nested use of the same statement */
            }
            c->is_busy = true;
            return c->stmt;
        }
        if (c->sql == NULL && free_slot == NULL) {
            free_slot = c;
        }
    }
    if (free_slot == NULL) {
        return prepare(st, sql);
    }
    free_slot->stmt = prepare(st, sql);
    if (free_slot->stmt == NULL) {
        return NULL;
    }
    free_slot->sql = sql;
    free_slot->is_busy = true;
    return free_slot->stmt;
}

/* Run @p sql (a string literal returning no rows: BEGIN, COMMIT) through the statement cache:
 * a step's two or three commits no longer parse their BEGIN and COMMIT each time.
 * @return true when it ran; else sqlite3_errcode()/sqlite3_errmsg() say why. */
static bool
exec_cached(struct lite_state *st, const char *sql)
{
    sqlite3_stmt *stmt = cached(st, sql);
    int rc = SQLITE_ERROR;

    if (stmt == NULL) {
        return false;
    }
    rc = sqlite3_step(stmt);
    release(st, stmt);
    return rc == SQLITE_DONE;
}

/* Forget which step rows are known to be stored (rows_deps): the next save of each step is a
 * whole upsert again. */
static void
rows_forget(struct lite_state *st)
{
    if (st->rows_deps != NULL) {
        memset(st->rows_deps, 0, st->rows_cap * sizeof(*st->rows_deps));
    }
}

/* A hash of the step's dependencies (never 0): what decides whether a save must write them. */
static uint64_t
deps_hash(const struct plan_step *step)
{
    uint64_t h = 14695981039346656037ull ^ (uint64_t)step->depends_count;

    for (size_t d = 0; d < step->depends_count; d++) {
        for (const unsigned char *p = (const unsigned char *)step->depends_on[d]; *p != '\0'; p++) {
            h = (h ^ *p) * 1099511628211ull;
        }
        h = (h ^ 0xffu) * 1099511628211ull; /* between ids: ["ab"] is not ["a", "b"] */
    }
    return h != 0 ? h : 1;
}

/* Is the row of step @p index of @p run_id stored with dependencies hashed @p deps? */
static bool
rows_is_known(const struct lite_state *st, const char *run_id, size_t index, uint64_t deps)
{
    return st->rows_run != NULL && index < st->rows_cap && st->rows_deps[index] == deps &&
           strcmp(st->rows_run, run_id) == 0;
}

/* Remember that the row of step @p index of @p run_id is stored with dependencies @p deps.
 * Out of memory it remembers nothing: the next save is a whole upsert, as before. */
static void
rows_note(struct lite_state *st, const char *run_id, size_t index, uint64_t deps)
{
    if (st->rows_run == NULL || strcmp(st->rows_run, run_id) != 0) {
        char *copy = weft__strdup(run_id);
        if (copy == NULL) {
            return;
        }
        weft__free(st->rows_run);
        st->rows_run = copy;
        rows_forget(st);
    }
    if (index >= st->rows_cap) {
        size_t cap = st->rows_cap == 0 ? 64 : st->rows_cap;
        uint64_t *grown = NULL;
        while (cap <= index) {
            cap *= 2;
        }
        grown = weft__realloc(st->rows_deps, cap * sizeof(*grown));
        if (grown == NULL) {
            return;
        }
        memset(grown + st->rows_cap, 0, (cap - st->rows_cap) * sizeof(*grown));
        st->rows_deps = grown;
        st->rows_cap = cap;
    }
    st->rows_deps[index] = deps;
}

static weft_err
lite_begin(struct rt_state *base)
{
    struct lite_state *st = lite(base);

    if (st->tx_depth++ > 0) {
        return WEFT_OK;
    }
    st->is_tx_failed = false;
    if (!exec_cached(st, "BEGIN IMMEDIATE")) {
        state_note_error(st, sqlite3_errcode(st->db));
        WEFT_LOG(WEFT_LOG_ERROR, "state: begin failed: %s", sqlite3_errmsg(st->db));
        st->tx_depth = 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static bool
lite_in_transaction(const struct rt_state *base)
{
    const struct lite_state *st = (const struct lite_state *)base;

    return st != NULL && st->tx_depth > 0;
}

static weft_err
lite_commit(struct rt_state *base)
{
    struct lite_state *st = lite(base);

    if (st->tx_depth == 0 || --st->tx_depth > 0) {
        return WEFT_OK;
    }
    if (!st->is_tx_failed && exec_cached(st, "COMMIT")) {
        return WEFT_OK;
    }
    if (!st->is_tx_failed) {
        state_note_error(st, sqlite3_errcode(st->db));
    }
    WEFT_LOG(WEFT_LOG_ERROR, "state: commit failed: %s",
             st->is_tx_failed ? "a write in it failed" : sqlite3_errmsg(st->db));
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    rows_forget(st); /* what the rolled back upserts wrote is gone */
    return WEFT_EIO;
}

static weft_err
lite_run_begin(struct rt_state *base,
               const char *run_id,
               const char *workflow,
               const char *workflow_path,
               const char *session_id,
               const char *input,
               uint64_t started_ns)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "INSERT INTO runs (id, workflow, workflow_path, session_id,"
                                     " input, status, started_ns)"
                                     " VALUES (?, ?, ?, ?, ?, 'running', ?)"
                                     " ON CONFLICT (id) DO UPDATE SET status = 'running',"
                                     " ended_ns = NULL");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, run_id);
    bind_text(stmt, 2, workflow);
    bind_text(stmt, 3, workflow_path);
    bind_text(stmt, 4, session_id);
    bind_text(stmt, 5, input);
    sqlite3_bind_int64(stmt, 6, (sqlite3_int64)started_ns);
    return finish(st, stmt, "run insert");
}

static weft_err
lite_run_trace(struct rt_state *base,
               const char *run_id,
               const char *trace_id,
               const char *root_span_id)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET resumed_from_trace = CASE WHEN trace_id IS"
                                     " NOT NULL AND trace_id != ? THEN trace_id ELSE"
                                     " resumed_from_trace END, trace_id = ?, root_span_id = ?"
                                     " WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, trace_id);
    bind_text(stmt, 2, trace_id);
    bind_text(stmt, 3, root_span_id);
    bind_text(stmt, 4, run_id);
    return finish(st, stmt, "run trace");
}

static weft_err
lite_run_end(struct rt_state *base, const char *run_id, const struct weft__state_run_end *end)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt =
        prepare(st, "UPDATE runs SET status = ?, reason = ?, output = ?,"
                    " iterations = iterations + ?, input_tokens = input_tokens + ?,"
                    " output_tokens = output_tokens + ?, cost_usd = cost_usd + ?,"
                    " ended_ns = ?, reward = ?, corrections = ?, loops = ?,"
                    " trace_sampling = ? WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, end->status);
    bind_text(stmt, 2, end->reason);
    bind_text(stmt, 3, end->output);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)end->iterations);
    sqlite3_bind_int64(stmt, 5, end->input_tokens);
    sqlite3_bind_int64(stmt, 6, end->output_tokens);
    sqlite3_bind_double(stmt, 7, end->cost_usd);
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)end->ended_ns);
    sqlite3_bind_double(stmt, 9, end->reward);
    sqlite3_bind_int64(stmt, 10, (sqlite3_int64)end->corrections);
    bind_text(stmt, 11, end->loops);
    bind_text(stmt, 12, end->trace_sampling);
    bind_text(stmt, 13, run_id);
    return finish(st, stmt, "run update");
}

static char *
dump_or_null(const json_t *v)
{
    return v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* Upsert one step row; part of the caller's transaction when there is one. */
/* Bind the span id of @p ctx as 16 hex digits, or NULL when it is not valid. */
static void
bind_span_id(sqlite3_stmt *stmt, int i, const struct weft_span_context *ctx)
{
    char hex[2 * WEFT_SPAN_ID_SIZE + 1];

    if (!weft_span_context_is_valid(ctx)) {
        sqlite3_bind_null(stmt, i);
        return;
    }
    weft_hex_encode(ctx->span_id, WEFT_SPAN_ID_SIZE, hex);
    sqlite3_bind_text(stmt, i, hex, -1, SQLITE_TRANSIENT);
}

static weft_err
step_upsert(struct lite_state *st,
            const char *run_id,
            size_t index,
            const struct plan_step *step,
            const char *actor)
{
    sqlite3_stmt *stmt = NULL;
    char *deps_text = weft__state_deps_json(step);
    char *spec_text = dump_or_null(step->spec);
    char *error_text = dump_or_null(step->error);
    weft_err err = WEFT_OK;

    if (deps_text == NULL) {
        free(spec_text);
        free(error_text);
        return WEFT_ENOMEM;
    }
    stmt = cached(st, "INSERT INTO steps (run_id, idx, step_id, agent, task, depends_on, status,"
                      " attempts, result, feedback, requested_by, executor, spec, parent, reward,"
                      " error_type, error, started_ns, ended_ns, span_id, span_parent_id,"
                      " task_uuid, retries, is_dispatched)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                      " ?, ?)"
                      " ON CONFLICT (run_id, idx) DO UPDATE SET status = excluded.status,"
                      " attempts = excluded.attempts, result = excluded.result,"
                      " feedback = excluded.feedback, depends_on = excluded.depends_on,"
                      " reward = excluded.reward, error_type = excluded.error_type,"
                      " error = excluded.error, started_ns = excluded.started_ns,"
                      " ended_ns = excluded.ended_ns, span_id = excluded.span_id,"
                      " span_parent_id = excluded.span_parent_id,"
                      " task_uuid = COALESCE(steps.task_uuid, excluded.task_uuid),"
                      " retries = excluded.retries, is_dispatched = excluded.is_dispatched");
    if (stmt != NULL) {
        bind_text(stmt, 1, run_id);
        sqlite3_bind_int64(stmt, 2, (sqlite3_int64)index);
        bind_text(stmt, 3, step->id);
        bind_text(stmt, 4, actor);
        bind_text(stmt, 5, step->task);
        bind_text(stmt, 6, deps_text);
        bind_text(stmt, 7, weft__step_status_name(step->status));
        sqlite3_bind_int64(stmt, 8, step->attempts);
        bind_text(stmt, 9, step->result);
        bind_text(stmt, 10, step->feedback);
        bind_text(stmt, 11, step->requested_by);
        bind_text(stmt, 12, weft__step_executor_name(step->executor));
        bind_text(stmt, 13, spec_text);
        bind_text(stmt, 14, step->parent);
        if (step->has_reward) {
            sqlite3_bind_double(stmt, 15, step->reward);
        } else {
            sqlite3_bind_null(stmt, 15);
        }
        bind_text(stmt, 16, step->error_type);
        bind_text(stmt, 17, error_text);
        sqlite3_bind_int64(stmt, 18, (sqlite3_int64)step->started_ns);
        sqlite3_bind_int64(stmt, 19, (sqlite3_int64)step->ended_ns);
        /* The step's agent span and its parent: recovery closes a span a kill left open. */
        bind_span_id(stmt, 20, &step->span);
        bind_span_id(stmt, 21, &step->parent_ctx);
        /* The task id stays the one first stored (as PostgreSQL's tasks.task_id does): a resumed
         * plan that made new ids keeps naming the same task. */
        bind_key(stmt, 22, step->task_uuid[0] != '\0' ? step->task_uuid : NULL);
        sqlite3_bind_int64(stmt, 23, step->retries);
        sqlite3_bind_int(stmt, 24, step->is_dispatched ? 1 : 0);
        err = finish(st, stmt, "step upsert");
    } else {
        err = WEFT_EIO;
    }
    free(deps_text);
    free(spec_text);
    free(error_text);
    return err;
}

/* Update the columns of a stored step row that change as the step runs: what the upsert's DO
 * UPDATE writes, but its dependencies (unchanged: rows_is_known()). Part of the caller's
 * transaction when there is one. *is_updated is false when the row is not there (deleted
 * behind the handle's back): the caller upserts it whole. */
static weft_err
step_update(struct lite_state *st,
            const char *run_id,
            size_t index,
            const struct plan_step *step,
            bool *is_updated)
{
    sqlite3_stmt *stmt = NULL;
    char *error_text = dump_or_null(step->error);
    weft_err err = WEFT_OK;

    *is_updated = false;
    if (step->error != NULL && error_text == NULL) {
        return WEFT_ENOMEM;
    }
    stmt = cached(st, "UPDATE steps SET status = ?, attempts = ?, result = ?, feedback = ?,"
                      " reward = ?, error_type = ?, error = ?, started_ns = ?, ended_ns = ?,"
                      " span_id = ?, span_parent_id = ?, task_uuid = COALESCE(task_uuid, ?),"
                      " retries = ?, is_dispatched = ? WHERE run_id = ? AND idx = ?");
    if (stmt == NULL) {
        free(error_text);
        return WEFT_EIO;
    }
    bind_text(stmt, 1, weft__step_status_name(step->status));
    sqlite3_bind_int64(stmt, 2, step->attempts);
    bind_text(stmt, 3, step->result);
    bind_text(stmt, 4, step->feedback);
    if (step->has_reward) {
        sqlite3_bind_double(stmt, 5, step->reward);
    } else {
        sqlite3_bind_null(stmt, 5);
    }
    bind_text(stmt, 6, step->error_type);
    bind_text(stmt, 7, error_text);
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)step->started_ns);
    sqlite3_bind_int64(stmt, 9, (sqlite3_int64)step->ended_ns);
    bind_span_id(stmt, 10, &step->span);
    bind_span_id(stmt, 11, &step->parent_ctx);
    bind_key(stmt, 12, step->task_uuid[0] != '\0' ? step->task_uuid : NULL);
    sqlite3_bind_int64(stmt, 13, step->retries);
    sqlite3_bind_int(stmt, 14, step->is_dispatched ? 1 : 0);
    bind_key(stmt, 15, run_id);
    sqlite3_bind_int64(stmt, 16, (sqlite3_int64)index);
    err = finish(st, stmt, "step update");
    *is_updated = err == WEFT_OK && sqlite3_changes(st->db) > 0;
    free(error_text);
    return err;
}

static weft_err
lite_step_save(struct rt_state *base,
               const char *run_id,
               size_t index,
               const struct plan_step *step,
               const char *actor)
{
    struct lite_state *st = lite(base);
    uint64_t deps = deps_hash(step);
    weft_err err = WEFT_OK;

    if (rows_is_known(st, run_id, index, deps)) {
        bool is_updated = false;
        err = step_update(st, run_id, index, step, &is_updated);
        if (err != WEFT_OK || is_updated) {
            return err;
        }
    }
    err = step_upsert(st, run_id, index, step, actor);
    if (err == WEFT_OK) {
        rows_note(st, run_id, index, deps);
    }
    return err;
}

static weft_err
lite_surgery(struct rt_state *base,
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
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    json_t *inserted = json_array();
    char *inserted_text = NULL;
    char *before_text = dump_or_null(depends_before);
    char *after_text = dump_or_null(depends_after);
    weft_err err = WEFT_OK;

    for (size_t i = first_new; inserted != NULL && i < plan->count; i++) {
        json_array_append_new(inserted, json_string(plan->steps[i].id));
    }
    inserted_text = inserted != NULL ? json_dumps(inserted, JSON_COMPACT) : NULL;
    json_decref(inserted);
    if (inserted_text == NULL || before_text == NULL || after_text == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    rows_forget(st); /* the surgery rewrites dependencies and adds rows */
    /* One transaction: the store holds the plan before the surgery or after it, never a mix.
     * weft__state_begin() nests, so a surgery inside the caller's transaction joins it (a plain
     * BEGIN there failed, and its ROLLBACK undid the caller's writes behind its back). */
    if (lite_begin(&st->base) != WEFT_OK) {
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
        stmt = prepare(st, "INSERT INTO corrections (run_id, seq, failed_step, error_type,"
                           " inserted, depends_before, depends_after, created_ns)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
        if (stmt == NULL) {
            err = WEFT_EIO;
        } else {
            bind_text(stmt, 1, run_id);
            sqlite3_bind_int64(stmt, 2, seq);
            bind_text(stmt, 3, plan->steps[failed].id);
            bind_text(stmt, 4, error_type);
            bind_text(stmt, 5, inserted_text);
            bind_text(stmt, 6, before_text);
            bind_text(stmt, 7, after_text);
            sqlite3_bind_int64(stmt, 8, (sqlite3_int64)weft__now_ns());
            err = finish(st, stmt, "correction insert");
        }
    }
    if (err != WEFT_OK) {
        st->is_tx_failed = true; /* the outermost commit rolls back */
    }
    if (lite_commit(&st->base) != WEFT_OK && err == WEFT_OK) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: DAG surgery of run %s rolled back", run_id);
    }
out:
    free(inserted_text);
    free(before_text);
    free(after_text);
    return err;
}

static weft_err
lite_messages_load(struct rt_state *base, const char *session_id, size_t limit, json_t **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT role, content, route FROM (SELECT seq, role, content,"
                                     " route FROM messages WHERE session_id = ?"
                                     " ORDER BY seq DESC LIMIT ?) ORDER BY seq");
    json_t *arr = json_array();
    int rc = 0;

    *out = NULL;
    if (stmt == NULL || arr == NULL) {
        sqlite3_finalize(stmt);
        json_decref(arr);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    bind_text(stmt, 1, session_id);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)limit);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *route = (const char *)sqlite3_column_text(stmt, 2);
        json_t *m = json_pack("{s:s, s:s, s:o}", "role", sqlite3_column_text(stmt, 0), "content",
                              sqlite3_column_text(stmt, 1), "route",
                              route != NULL ? json_string(route) : json_null());
        if (m == NULL || json_array_append_new(arr, m) != 0) {
            sqlite3_finalize(stmt);
            json_decref(arr);
            return WEFT_ENOMEM;
        }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return WEFT_EIO;
    }
    *out = arr;
    return WEFT_OK;
}

static weft_err
lite_message_add(struct rt_state *base,
                 const char *session_id,
                 const char *run_id,
                 const char *role,
                 const char *content,
                 const char *route)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = cached(st, "INSERT INTO messages (session_id, seq, run_id, role,"
                                    " content, route, created_ns) VALUES (?, (SELECT"
                                    " COALESCE(MAX(seq), 0) + 1 FROM messages WHERE"
                                    " session_id = ?), ?, ?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, session_id);
    bind_text(stmt, 2, session_id);
    bind_text(stmt, 3, run_id);
    bind_text(stmt, 4, role);
    bind_text(stmt, 5, content != NULL ? content : "");
    bind_text(stmt, 6, route);
    sqlite3_bind_int64(stmt, 7, (sqlite3_int64)weft__now_ns());
    return finish(st, stmt, "message insert");
}

static weft_err
lite_cursors_load(struct rt_state *base, const char *session_id, const char *script, json_t **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt =
        prepare(st, "SELECT cursors FROM script_cursors WHERE session_id = ? AND script = ?");
    json_t *cursors = NULL;
    int rc = 0;

    *out = NULL;
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    /* Databases before version 4 kept one JSON object per script; its queues are the base
     * that the per-queue rows override. */
    bind_key(stmt, 1, session_id);
    bind_key(stmt, 2, script);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        cursors = json_loads((const char *)sqlite3_column_text(stmt, 0), 0, NULL);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        return WEFT_EIO;
    }
    stmt = prepare(st, "SELECT queue, used FROM script_cursor_keys WHERE session_id = ? AND"
                       " script = ?");
    if (stmt == NULL) {
        json_decref(cursors);
        return WEFT_EIO;
    }
    bind_key(stmt, 1, session_id);
    bind_key(stmt, 2, script);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (cursors == NULL) {
            cursors = json_object();
        }
        if (cursors == NULL ||
            json_object_set_new(cursors, (const char *)sqlite3_column_text(stmt, 0),
                                json_integer(sqlite3_column_int64(stmt, 1))) != 0) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        json_decref(cursors);
        return rc == SQLITE_NOMEM ? WEFT_ENOMEM : WEFT_EIO;
    }
    *out = cursors;
    return WEFT_OK;
}

static weft_err
lite_cursors_save(struct rt_state *base,
                  const char *session_id,
                  const char *script,
                  const json_t *cursors)
{
    struct lite_state *st = lite(base);
    const char *key = NULL;
    json_t *v = NULL;
    bool is_multi = json_object_size(cursors) > 1;
    weft_err err = WEFT_OK;

    /* Several queues at once (parallel flow steps) land in one transaction. */
    if (is_multi && lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    json_object_foreach((json_t *)cursors, key, v)
    {
        sqlite3_stmt *stmt = cached(st, "INSERT INTO script_cursor_keys (session_id, script,"
                                        " queue, used) VALUES (?, ?, ?, ?) ON CONFLICT"
                                        " (session_id, script, queue) DO UPDATE SET"
                                        " used = excluded.used");
        if (stmt == NULL) {
            err = WEFT_EIO;
            break;
        }
        bind_key(stmt, 1, session_id);
        bind_key(stmt, 2, script);
        bind_key(stmt, 3, key);
        sqlite3_bind_int64(stmt, 4, (sqlite3_int64)json_integer_value(v));
        err = finish(st, stmt, "cursor upsert");
        if (err != WEFT_OK) {
            break;
        }
    }
    if (is_multi && lite_commit(&st->base) != WEFT_OK) {
        err = WEFT_EIO;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading runs back                                                                           */

static char *
col_dup(sqlite3_stmt *stmt, int i, bool *is_oom)
{
    const unsigned char *v = sqlite3_column_text(stmt, i);
    char *copy = NULL;

    if (v == NULL) {
        return NULL;
    }
    copy = weft__strdup((const char *)v);
    if (copy == NULL) {
        *is_oom = true;
    }
    return copy;
}

#define RUN_COLUMNS                                                                           \
    "id, workflow, workflow_path, session_id, input, status, reason, trace_id, root_span_id," \
    " resumed_from_trace, loops, started_ns, ended_ns, iterations, corrections, reward,"      \
    " input_tokens, output_tokens, cost_usd,"                                                 \
    " (SELECT count(*) FROM steps WHERE steps.run_id = runs.id), " STATE_OWNER_COLUMNS        \
    ", origin_kind, origin_run_id, origin_step, pinned, trace_sampling"

static void
read_info(sqlite3_stmt *stmt, struct weft_run_info *info, bool *is_oom)
{
    info->run_id = col_dup(stmt, 0, is_oom);
    info->workflow = col_dup(stmt, 1, is_oom);
    info->workflow_path = col_dup(stmt, 2, is_oom);
    info->session_id = col_dup(stmt, 3, is_oom);
    info->input = col_dup(stmt, 4, is_oom);
    info->status = col_dup(stmt, 5, is_oom);
    info->reason = col_dup(stmt, 6, is_oom);
    info->trace_id = col_dup(stmt, 7, is_oom);
    info->root_span_id = col_dup(stmt, 8, is_oom);
    info->resumed_from_trace = col_dup(stmt, 9, is_oom);
    info->loops = col_dup(stmt, 10, is_oom);
    info->started_ns = (uint64_t)sqlite3_column_int64(stmt, 11);
    info->ended_ns = (uint64_t)sqlite3_column_int64(stmt, 12);
    info->iterations = (size_t)sqlite3_column_int64(stmt, 13);
    info->corrections = (size_t)sqlite3_column_int64(stmt, 14);
    info->reward = sqlite3_column_double(stmt, 15);
    info->input_tokens = sqlite3_column_int64(stmt, 16);
    info->output_tokens = sqlite3_column_int64(stmt, 17);
    info->cost_usd = sqlite3_column_double(stmt, 18);
    info->step_count = (size_t)sqlite3_column_int64(stmt, 19);
    state_owner_view(stmt, 20, info, is_oom);
    info->origin_kind = col_dup(stmt, 24, is_oom);
    info->origin_run_id = col_dup(stmt, 25, is_oom);
    info->origin_step = col_dup(stmt, 26, is_oom);
    info->is_pinned = sqlite3_column_int64(stmt, 27) != 0;
    info->trace_sampling = col_dup(stmt, 28, is_oom);
}

static weft_err
lite_runs_each(struct rt_state *base, size_t limit, state_run_fn fn, void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt =
        prepare(st, "SELECT " RUN_COLUMNS " FROM runs ORDER BY started_ns DESC LIMIT ?");
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, limit > INT64_MAX ? INT64_MAX : (sqlite3_int64)limit);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft_run_info info;
        bool is_oom = false;

        memset(&info, 0, sizeof(info));
        read_info(stmt, &info, &is_oom);
        err = is_oom ? WEFT_ENOMEM : fn(&info, user_data);
        weft__state_info_cleanup(&info);
    }
    sqlite3_finalize(stmt);
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    return err;
}

static weft_err
lite_run_resolve(
    struct rt_state *base, const char *ref, char *out, size_t out_len, char *err, size_t err_len)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    size_t matches = 0;
    char pattern[96];
    weft_err result = WEFT_ENOTFOUND;
    int rc = SQLITE_DONE;

    if (strcmp(ref, "last") == 0) {
        stmt = prepare(st, "SELECT id FROM runs ORDER BY started_ns DESC LIMIT 1");
    } else {
        if (!weft__state_ref_is_valid(ref, err, err_len)) {
            return WEFT_EINVAL;
        }
        snprintf(pattern, sizeof(pattern), "%s%%", ref);
        /* An exact id comes first, however many newer runs it is a prefix of. */
        stmt = prepare(st, "SELECT id FROM runs WHERE id LIKE ?"
                           " ORDER BY id = ? DESC, started_ns DESC LIMIT 2");
        if (stmt != NULL) {
            bind_key(stmt, 1, pattern);
            bind_key(stmt, 2, ref);
        }
    }
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(stmt, 0);
        if (matches == 0) {
            snprintf(out, out_len, "%s", id);
        }
        matches++;
        if (strcmp(id, ref) == 0) {
            matches = 1;
            break;
        }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        /* A damaged or locked database is an error, not "no such run". */
        state_note_error(st, rc);
        snprintf(err, err_len, "state database: %s", sqlite3_errstr(rc));
        out[0] = '\0';
        result = WEFT_EIO;
    } else if (matches == 1) {
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
lite_run_info(struct rt_state *base, const char *run_id, struct weft_run_info *info)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?");
    bool is_oom = false;
    int rc = 0;

    memset(info, 0, sizeof(*info));
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        read_info(stmt, info, &is_oom);
    }
    sqlite3_finalize(stmt);
    if (is_oom) {
        weft__state_info_cleanup(info);
        return WEFT_ENOMEM;
    }
    return rc == SQLITE_ROW ? WEFT_OK : rc == SQLITE_DONE ? WEFT_ENOTFOUND : WEFT_EIO;
}

static weft_err
lite_steps_each(struct rt_state *base, const char *run_id, state_step_fn fn, void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT step_id, agent, task, depends_on, status, attempts,"
                                     " result, feedback, requested_by, executor, spec, parent,"
                                     " reward, error_type, error, started_ns, ended_ns, task_uuid,"
                                     " retries, is_dispatched FROM steps"
                                     " WHERE run_id = ?"
                                     " ORDER BY idx");
    int rc = 0;
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct state_step_row row;
        memset(&row, 0, sizeof(row));
        row.id = (const char *)sqlite3_column_text(stmt, 0);
        row.actor = (const char *)sqlite3_column_text(stmt, 1);
        row.task = (const char *)sqlite3_column_text(stmt, 2);
        row.depends_on = (const char *)sqlite3_column_text(stmt, 3);
        row.status = (const char *)sqlite3_column_text(stmt, 4);
        row.attempts = (unsigned)sqlite3_column_int(stmt, 5);
        row.result = (const char *)sqlite3_column_text(stmt, 6);
        row.feedback = (const char *)sqlite3_column_text(stmt, 7);
        row.requested_by = (const char *)sqlite3_column_text(stmt, 8);
        row.executor = (const char *)sqlite3_column_text(stmt, 9);
        row.spec = (const char *)sqlite3_column_text(stmt, 10);
        row.parent = (const char *)sqlite3_column_text(stmt, 11);
        row.has_reward = sqlite3_column_type(stmt, 12) != SQLITE_NULL;
        row.reward = sqlite3_column_double(stmt, 12);
        row.error_type = (const char *)sqlite3_column_text(stmt, 13);
        row.error = (const char *)sqlite3_column_text(stmt, 14);
        row.started_ns = (uint64_t)sqlite3_column_int64(stmt, 15);
        row.ended_ns = (uint64_t)sqlite3_column_int64(stmt, 16);
        row.task_uuid = (const char *)sqlite3_column_text(stmt, 17);
        row.retries = (unsigned)sqlite3_column_int64(stmt, 18);
        row.is_dispatched = sqlite3_column_int(stmt, 19) != 0;
        err = fn(&row, user_data);
    }
    sqlite3_finalize(stmt);
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    return err;
}

static weft_err
lite_corrections_each(struct rt_state *base,
                      const char *run_id,
                      state_correction_fn fn,
                      void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT seq, failed_step, error_type, inserted,"
                                     " depends_before, depends_after, created_ns FROM corrections"
                                     " WHERE run_id = ? ORDER BY seq");
    int rc = 0;
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft_run_correction c;
        c.seq = (unsigned)sqlite3_column_int(stmt, 0);
        c.failed_step = (char *)sqlite3_column_text(stmt, 1);
        c.error_type = (char *)sqlite3_column_text(stmt, 2);
        c.inserted = (char *)sqlite3_column_text(stmt, 3);
        c.depends_before = (char *)sqlite3_column_text(stmt, 4);
        c.depends_after = (char *)sqlite3_column_text(stmt, 5);
        c.created_ns = (uint64_t)sqlite3_column_int64(stmt, 6);
        err = fn(&c, user_data);
    }
    sqlite3_finalize(stmt);
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Payloads (state_payloads.h): long replay texts stored once per content hash                 */

static weft_err tx_end(struct lite_state *st, weft_err err);

static bool
payload_has(void *user, const char *hash)
{
    struct lite_state *st = user;
    sqlite3_stmt *stmt = cached(st, "SELECT 1 FROM payloads WHERE hash = ?");
    bool has = false;

    if (stmt == NULL) {
        return false; /* put() then says what is wrong */
    }
    bind_key(stmt, 1, hash);
    has = sqlite3_step(stmt) == SQLITE_ROW;
    release(st, stmt);
    return has;
}

static weft_err
payload_put(void *user, const struct weft__payload_record *rec)
{
    struct lite_state *st = user;
    sqlite3_stmt *stmt = cached(st, "INSERT OR IGNORE INTO payloads (hash, kind, size, data)"
                                    " VALUES (?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, rec->hash);
    sqlite3_bind_int(stmt, 2, (int)rec->kind);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)rec->raw_len);
    sqlite3_bind_blob64(stmt, 4, rec->data, rec->len, SQLITE_STATIC);
    return finish(st, stmt, "payload insert");
}

/* One statement per hash: SQLite has no round trips to save, and the primary key finds each. */
static weft_err
payload_get(void *user,
            const char *const *hashes,
            size_t count,
            weft__payload_each_fn each,
            void *each_user)
{
    struct lite_state *st = user;
    sqlite3_stmt *stmt = cached(st, "SELECT kind, size, data FROM payloads WHERE hash = ?");
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    for (size_t i = 0; err == WEFT_OK && i < count; i++) {
        struct weft__payload_record rec;
        int rc = SQLITE_DONE;

        if (strlen(hashes[i]) != WEFT__PAYLOAD_HEX_LEN) {
            continue;
        }
        sqlite3_reset(stmt);
        bind_key(stmt, 1, hashes[i]);
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            memcpy(rec.hash, hashes[i], sizeof(rec.hash));
            rec.kind = (weft__payload_kind)sqlite3_column_int(stmt, 0);
            rec.raw_len = (size_t)sqlite3_column_int64(stmt, 1);
            rec.data = sqlite3_column_blob(stmt, 2);
            rec.len = (size_t)sqlite3_column_bytes(stmt, 2);
            err = each(&rec, each_user);
        } else if (rc != SQLITE_DONE) {
            state_note_error(st, rc);
            WEFT_LOG(WEFT_LOG_ERROR, "state: payload read failed: %s", sqlite3_errstr(rc));
            err = WEFT_EIO;
        }
    }
    release(st, stmt);
    return err;
}

static const struct weft__payload_sink *
payload_sink(struct lite_state *st, struct weft__payload_sink *sink)
{
    sink->has = payload_has;
    sink->put = payload_put;
    sink->user = st;
    return sink;
}

/* The text of column @p col, resolved through its reference in column @p ref_col when that is
 * set, into @p buf. NULL when the row's text cannot be had (logged): a missing or damaged
 * record, or out of memory (*is_oom). */
static const char *
column_text(struct lite_state *st,
            sqlite3_stmt *stmt,
            int col,
            int ref_col,
            struct weft__buf *buf,
            bool *is_oom)
{
    const struct weft__payload_source src = {.get = payload_get, .user = st};
    const char *ref = (const char *)sqlite3_column_text(stmt, ref_col);
    weft_err err = WEFT_OK;

    if (ref == NULL) {
        return (const char *)sqlite3_column_text(stmt, col);
    }
    weft__buf_reset(buf);
    err = weft__payload_get(ref, &src, buf);
    if (err != WEFT_OK) {
        *is_oom = err == WEFT_ENOMEM;
        WEFT_LOG(WEFT_LOG_WARN, "state: payload %.12s: %s", ref, weft_strerror(err));
        return NULL;
    }
    return buf->data;
}

static weft_err
lite_exchange_add(struct rt_state *base,
                  const char *run_id,
                  const char *who,
                  const char *purpose,
                  const json_t *entry)
{
    struct lite_state *st = lite(base);
    char *raw = weft__json_compact(entry); /* json_dumps()'s text, at a fraction of its cost */
    char *text = raw != NULL ? weft__redact_text(raw) : NULL;
    struct weft__payload_sink sink;
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    sqlite3_stmt *stmt = NULL;
    bool is_ref = false;
    bool is_tx = false;
    weft_err err = WEFT_OK;

    weft__free(raw);
    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    /* Secrets are redacted before the text is hashed: the reference stands for what is
     * stored. The records and the row commit together. */
    is_tx = strlen(text) >= WEFT__PAYLOAD_MIN && weft__payload_enabled();
    if (is_tx && lite_begin(base) != WEFT_OK) {
        weft__free(text);
        return WEFT_EIO;
    }
    if (is_tx) {
        err = weft__state_payload_put(text, payload_sink(st, &sink), ref, &is_ref);
    }
    stmt = err == WEFT_OK ? cached(st, "INSERT INTO llm_exchanges (run_id, seq, who, purpose,"
                                       " entry, created_ns, entry_ref) VALUES (?, (SELECT"
                                       " COALESCE(MAX(seq), 0) + 1 FROM llm_exchanges"
                                       " WHERE run_id = ?), ?, ?, ?, ?, ?)")
                          : NULL;
    if (err == WEFT_OK && stmt == NULL) {
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        bind_key(stmt, 1, run_id); /* a key: bind_text() would store "" when out of memory */
        bind_key(stmt, 2, run_id);
        bind_text(stmt, 3, who);
        bind_text(stmt, 4, purpose);
        bind_text(stmt, 5, is_ref ? "" : text);
        sqlite3_bind_int64(stmt, 6, (sqlite3_int64)weft__now_ns());
        if (is_ref) {
            bind_key(stmt, 7, ref);
        }
        err = finish(st, stmt, "exchange insert");
    }
    if (is_tx) {
        err = tx_end(st, err);
    }
    weft__free(text);
    return err;
}

static weft_err
lite_exchanges_script(struct rt_state *base, const char *run_id, json_t **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT who, purpose, entry, entry_ref FROM llm_exchanges"
                                     " WHERE run_id = ? ORDER BY seq");
    json_t *responses = json_object();
    struct weft__buf buf;
    bool is_oom = false;
    size_t n = 0;
    int rc = 0;

    *out = NULL;
    if (stmt == NULL || responses == NULL) {
        sqlite3_finalize(stmt);
        json_decref(responses);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    weft__buf_init(&buf, 0);
    bind_text(stmt, 1, run_id);
    while (!is_oom && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *who = (const char *)sqlite3_column_text(stmt, 0);
        const char *purpose = (const char *)sqlite3_column_text(stmt, 1);
        const char *text = column_text(st, stmt, 2, 3, &buf, &is_oom);
        json_t *entry = text != NULL ? json_loads(text, 0, NULL) : NULL;
        /* A damaged row is skipped: the replay then reports the missing answer. */
        n += weft__state_script_add(responses, who, purpose, entry) ? 1 : 0;
    }
    sqlite3_finalize(stmt);
    weft__buf_cleanup(&buf);
    if (is_oom || rc != SQLITE_DONE || n == 0) {
        json_decref(responses);
        return is_oom ? WEFT_ENOMEM : rc != SQLITE_DONE ? WEFT_EIO : WEFT_ENOTFOUND;
    }
    *out = json_pack("{s:i, s:o}", "version", 1, "responses", responses);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
lite_exchange_counts(struct rt_state *base, const char *run_id, uint64_t before_ns, json_t **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT who, purpose, COUNT(*) FROM llm_exchanges"
                                     " WHERE run_id = ? AND created_ns < ? GROUP BY who, purpose");
    json_t *counts = json_object();
    char key[512];
    int rc = 0;

    *out = NULL;
    if (stmt == NULL || counts == NULL) {
        sqlite3_finalize(stmt);
        json_decref(counts);
        return stmt == NULL ? WEFT_EIO : WEFT_ENOMEM;
    }
    bind_text(stmt, 1, run_id);
    sqlite3_bind_int64(stmt, 2, before_ns > INT64_MAX ? INT64_MAX : (sqlite3_int64)before_ns);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        snprintf(key, sizeof(key), "%s/%s", (const char *)sqlite3_column_text(stmt, 0),
                 (const char *)sqlite3_column_text(stmt, 1));
        if (json_object_set_new(counts, key, json_integer(sqlite3_column_int64(stmt, 2))) != 0) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        json_decref(counts);
        return rc == SQLITE_NOMEM ? WEFT_ENOMEM : WEFT_EIO;
    }
    *out = counts;
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tool results and run origins (docs/replay.md)                                               */

static weft_err
lite_tool_result_add(struct rt_state *base,
                     const char *run_id,
                     const struct weft__state_tool_result *r)
{
    struct lite_state *st = lite(base);
    struct weft__payload_sink sink;
    char *request = r->request != NULL ? weft__redact_text(r->request) : NULL;
    char *outcome = r->outcome != NULL ? weft__redact_text(r->outcome) : NULL;
    char request_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    char outcome_ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    sqlite3_stmt *stmt = NULL;
    bool has_request_ref = false;
    bool has_outcome_ref = false;
    bool is_tx = false;
    weft_err err = WEFT_OK;

    if ((r->request != NULL && request == NULL) || (r->outcome != NULL && outcome == NULL)) {
        err = WEFT_ENOMEM;
        goto out;
    }
    /* Redacted first, then hashed; records and row in one transaction (lite_exchange_add). */
    is_tx = weft__payload_enabled() && ((request != NULL && strlen(request) >= WEFT__PAYLOAD_MIN) ||
                                        (outcome != NULL && strlen(outcome) >= WEFT__PAYLOAD_MIN));
    if (is_tx && lite_begin(base) != WEFT_OK) {
        is_tx = false;
        err = WEFT_EIO;
        goto out;
    }
    if (is_tx) {
        err = weft__state_payload_put(request, payload_sink(st, &sink), request_ref,
                                      &has_request_ref);
    }
    if (is_tx && err == WEFT_OK) {
        err = weft__state_payload_put(outcome, &sink, outcome_ref, &has_outcome_ref);
    }
    stmt = err == WEFT_OK ? cached(st, "INSERT OR REPLACE INTO tool_results (run_id, step_id,"
                                       " attempt, seq, tool, kind, request, outcome, created_ns,"
                                       " request_ref, outcome_ref)"
                                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                          : NULL;
    if (err == WEFT_OK && stmt == NULL) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        goto out;
    }
    bind_key(stmt, 1, run_id);
    bind_key(stmt, 2, r->step_id);
    sqlite3_bind_int64(stmt, 3, r->attempt);
    sqlite3_bind_int64(stmt, 4, r->seq);
    bind_key(stmt, 5, r->tool);
    bind_key(stmt, 6, r->kind);
    bind_key(stmt, 7, has_request_ref ? "" : request); /* redacted above */
    bind_key(stmt, 8, has_outcome_ref ? "" : outcome);
    sqlite3_bind_int64(stmt, 9, (sqlite3_int64)weft__now_ns());
    if (has_request_ref) {
        bind_key(stmt, 10, request_ref);
    }
    if (has_outcome_ref) {
        bind_key(stmt, 11, outcome_ref);
    }
    err = finish(st, stmt, "tool result insert");
out:
    if (is_tx) {
        err = tx_end(st, err);
    }
    weft__free(request);
    weft__free(outcome);
    return err;
}

static weft_err
lite_tool_results_each(struct rt_state *base,
                       const char *run_id,
                       state_tool_result_fn fn,
                       void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT step_id, attempt, seq, tool, kind, request, outcome,"
                                     " request_ref, outcome_ref FROM tool_results WHERE run_id = ?"
                                     " ORDER BY created_ns, rowid");
    struct weft__buf request;
    struct weft__buf outcome;
    bool is_oom = false;
    weft_err err = WEFT_OK;
    int rc = 0;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    weft__buf_init(&request, 0);
    weft__buf_init(&outcome, 0);
    bind_key(stmt, 1, run_id);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft__state_tool_result r;
        r.step_id = (const char *)sqlite3_column_text(stmt, 0);
        r.attempt = (unsigned)sqlite3_column_int64(stmt, 1);
        r.seq = (unsigned)sqlite3_column_int64(stmt, 2);
        r.tool = (const char *)sqlite3_column_text(stmt, 3);
        r.kind = (const char *)sqlite3_column_text(stmt, 4);
        r.request = column_text(st, stmt, 5, 7, &request, &is_oom);
        r.outcome = column_text(st, stmt, 6, 8, &outcome, &is_oom);
        if (is_oom) {
            err = WEFT_ENOMEM;
        } else if (r.request != NULL && r.outcome != NULL) {
            err = fn(&r, user_data); /* a row whose payload is missing is skipped, as above */
        }
    }
    sqlite3_finalize(stmt);
    weft__buf_cleanup(&request);
    weft__buf_cleanup(&outcome);
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    return err;
}

static weft_err
lite_run_origin(struct rt_state *base,
                const char *run_id,
                const char *kind,
                const char *origin_run_id,
                const char *origin_step)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET origin_kind = ?, origin_run_id = ?,"
                                     " origin_step = ? WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, kind);
    bind_key(stmt, 2, origin_run_id);
    bind_key(stmt, 3, origin_step);
    bind_key(stmt, 4, run_id);
    return finish(st, stmt, "run origin update");
}

/* ------------------------------------------------------------------------------------------ */
/* Durability: damage, one owner per run, heartbeats, interrupted runs (docs/durability.md)    */

static void
state_note_error(struct lite_state *st, int rc)
{
    if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) {
        st->is_damaged = true;
    }
}

static weft_err
lite_check(struct rt_state *base, char *err, size_t err_len)
{
    struct lite_state *st = lite(base);
    const char *path = NULL;

    if (!st->is_damaged) {
        return WEFT_OK;
    }
    path = sqlite3_db_filename(st->db, "main");
    snprintf(err, err_len,
             "state database %s is damaged (database disk image is malformed): the run's "
             "state cannot be saved; move the file away or restore it from a backup",
             path != NULL && path[0] != '\0' ? path : "(in memory)");
    return WEFT_EIO;
}

static char *
state_col_text(sqlite3_stmt *stmt, int i)
{
    return (char *)sqlite3_column_text(stmt, i);
}

static void
state_owner_view(sqlite3_stmt *stmt, int first, struct weft_run_info *info, bool *is_oom)
{
    weft__state_owner_view(info, sqlite3_column_int64(stmt, first), state_col_text(stmt, first + 1),
                           (uint64_t)sqlite3_column_int64(stmt, first + 2),
                           (uint64_t)sqlite3_column_int64(stmt, first + 3), is_oom);
}

/* End a transaction of weft__state_begin(): committed when @p err is WEFT_OK or a refusal that
 * wrote nothing (WEFT_ESTATE, WEFT_ENOTFOUND), else rolled back. @return @p err, or the
 * commit's failure. */
static weft_err
tx_end(struct lite_state *st, weft_err err)
{
    weft_err commit_err = WEFT_OK;

    if (err != WEFT_OK && err != WEFT_ESTATE && err != WEFT_ENOTFOUND) {
        st->is_tx_failed = true;
    }
    commit_err = lite_commit(&st->base);
    return err != WEFT_OK ? err : commit_err;
}

static weft_err
lite_lease_acquire(struct rt_state *base, const char *run_id, struct state_owner *holder)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    char host[256];
    char token[33];
    uint64_t now = weft__now_ns();
    weft_err err = WEFT_OK;
    int rc = 0;

    memset(holder, 0, sizeof(*holder));
    weft__state_hostname(host, sizeof(host));
    /* IMMEDIATE (weft__state_begin): two processes cannot both read "no owner" and both take the
     * run. */
    if (lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    stmt = prepare(st, "SELECT owner_pid, owner_host, owner_token, owner_since_ns, heartbeat_ns"
                       " FROM runs WHERE id = ?");
    if (stmt == NULL) {
        return tx_end(st, WEFT_EIO);
    }
    bind_key(stmt, 1, run_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 2) != SQLITE_NULL &&
        strcmp(state_col_text(stmt, 2), st->owner_token) != 0 &&
        weft__state_owner_is_alive(sqlite3_column_int64(stmt, 0), state_col_text(stmt, 1),
                                   (uint64_t)sqlite3_column_int64(stmt, 4), now)) {
        holder->pid = sqlite3_column_int64(stmt, 0);
        snprintf(holder->host, sizeof(holder->host), "%s",
                 state_col_text(stmt, 1) != NULL ? state_col_text(stmt, 1) : "?");
        holder->since_ns = (uint64_t)sqlite3_column_int64(stmt, 3);
        holder->heartbeat_ns = (uint64_t)sqlite3_column_int64(stmt, 4);
        err = WEFT_ESTATE;
    } else if (rc == SQLITE_DONE) {
        err = WEFT_ENOTFOUND;
    } else if (rc != SQLITE_ROW) {
        state_note_error(st, rc);
        err = WEFT_EIO;
    }
    release(st, stmt);
    if (err != WEFT_OK) {
        return tx_end(st, err);
    }
    weft__state_new_token(token);
    stmt = prepare(st, "UPDATE runs SET owner_pid = ?, owner_host = ?, owner_token = ?,"
                       " owner_since_ns = ?, heartbeat_ns = ? WHERE id = ?");
    if (stmt == NULL) {
        return tx_end(st, WEFT_EIO);
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)getpid());
    bind_key(stmt, 2, host);
    bind_key(stmt, 3, token);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)now);
    sqlite3_bind_int64(stmt, 5, (sqlite3_int64)now);
    bind_key(stmt, 6, run_id);
    err = tx_end(st, finish(st, stmt, "lease"));
    if (err != WEFT_OK) {
        return err;
    }
    memcpy(st->owner_token, token, sizeof(st->owner_token));
    st->last_heartbeat_mono = weft__monotonic_ns();
    return WEFT_OK;
}

static weft_err
lite_lease_release(struct rt_state *base, const char *run_id)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    weft_err err = WEFT_OK;

    if (st->owner_token[0] == '\0') {
        return WEFT_OK;
    }
    stmt = prepare(st, "UPDATE runs SET owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
                       " owner_since_ns = NULL, heartbeat_ns = ? WHERE id = ? AND owner_token = ?");
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)weft__now_ns());
    bind_key(stmt, 2, run_id);
    bind_key(stmt, 3, st->owner_token);
    err = finish(st, stmt, "lease release");
    st->owner_token[0] = '\0';
    return err;
}

static weft_err
lite_heartbeat(struct rt_state *base, const char *run_id)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    uint64_t mono = weft__monotonic_ns();

    if (st->owner_token[0] == '\0' ||
        mono - st->last_heartbeat_mono < STATE_HEARTBEAT_MIN_INTERVAL_NS) {
        return WEFT_OK;
    }
    st->last_heartbeat_mono = mono;
    /* At each checkpoint (throttled): a cached statement, as for the step it follows. */
    stmt = cached(st, "UPDATE runs SET heartbeat_ns = ? WHERE id = ? AND owner_token = ?");
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)weft__now_ns());
    bind_key(stmt, 2, run_id);
    bind_key(stmt, 3, st->owner_token);
    return finish(st, stmt, "heartbeat");
}

static weft_err
lite_run_root(struct rt_state *base,
              const char *run_id,
              const char *name,
              const char *parent_span_id,
              uint64_t started_ns)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET root_span_name = ?, root_parent_span_id = ?,"
                                     " root_started_ns = ? WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_text(stmt, 1, name);
    bind_key(stmt, 2, parent_span_id);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)started_ns);
    bind_key(stmt, 4, run_id);
    return finish(st, stmt, "run root");
}

static weft_err
lite_run_hash_set(struct rt_state *base, const char *run_id, const char *hash)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET workflow_hash = ? WHERE id = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, hash);
    bind_key(stmt, 2, run_id);
    return finish(st, stmt, "workflow hash");
}

static weft_err
lite_run_hash_get(struct rt_state *base, const char *run_id, char *out, size_t out_len)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT workflow_hash FROM runs WHERE id = ?");
    weft_err err = WEFT_ENOTFOUND;
    int rc = 0;

    out[0] = '\0';
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 0) != SQLITE_NULL) {
        snprintf(out, out_len, "%s", state_col_text(stmt, 0));
        err = WEFT_OK;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        state_note_error(st, rc);
        err = WEFT_EIO;
    }
    sqlite3_finalize(stmt);
    return err;
}

static weft_err
lite_run_snapshot_set(struct rt_state *base, const char *run_id, const char *snapshot)
{
    struct lite_state *st = lite(base);
    struct weft__payload_sink sink;
    char ref[WEFT__PAYLOAD_HEX_LEN + 1] = "";
    sqlite3_stmt *stmt = NULL;
    bool is_ref = false;
    bool is_tx = strlen(snapshot) >= WEFT__PAYLOAD_MIN && weft__payload_enabled();
    weft_err err = WEFT_OK;

    /* A long snapshot is a payload: the records and the row commit together. */
    if (is_tx && lite_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    if (is_tx) {
        err = weft__state_payload_put(snapshot, payload_sink(st, &sink), ref, &is_ref);
    }
    stmt = err == WEFT_OK ? prepare(st, "UPDATE runs SET workflow_snapshot = ?,"
                                        " workflow_snapshot_ref = ? WHERE id = ?")
                          : NULL;
    if (err == WEFT_OK && stmt == NULL) {
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        /* Bound as is: the files' bytes are the point (bind_text would rewrite them). */
        if (!is_ref) {
            sqlite3_bind_text(stmt, 1, snapshot, -1, SQLITE_TRANSIENT);
        }
        if (is_ref) {
            bind_key(stmt, 2, ref);
        }
        bind_key(stmt, 3, run_id);
        err = finish(st, stmt, "workflow snapshot");
    }
    if (is_tx) {
        err = tx_end(st, err);
    }
    return err;
}

static weft_err
lite_run_snapshot_get(struct rt_state *base, const char *run_id, char **out)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt =
        prepare(st, "SELECT workflow_snapshot, workflow_snapshot_ref FROM runs WHERE id = ?");
    struct weft__buf buf;
    const char *text = NULL;
    weft_err err = WEFT_ENOTFOUND;
    bool is_oom = false;
    int rc = 0;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    weft__buf_init(&buf, 0);
    bind_key(stmt, 1, run_id);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW && (sqlite3_column_type(stmt, 0) != SQLITE_NULL ||
                             sqlite3_column_type(stmt, 1) != SQLITE_NULL)) {
        text = column_text(st, stmt, 0, 1, &buf, &is_oom);
        *out = text != NULL ? weft__strdup(text) : NULL;
        err = is_oom || (text != NULL && *out == NULL) ? WEFT_ENOMEM
              : text == NULL                           ? WEFT_EIO
                                                       : WEFT_OK;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        state_note_error(st, rc);
        err = WEFT_EIO;
    }
    sqlite3_finalize(stmt);
    weft__buf_cleanup(&buf);
    return err;
}

/* The steps of @p d's run that were in progress, with the spans the kill left open. */
static weft_err
open_steps(struct lite_state *st, struct weft__state_dead *d)
{
    sqlite3_stmt *stmt = prepare(st, "SELECT span_id, span_parent_id, agent, started_ns FROM steps"
                                     " WHERE run_id = ? AND status = 'in_progress'"
                                     " AND span_id IS NOT NULL ORDER BY idx");
    weft_err err = WEFT_OK;
    int rc = 0;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, d->text[0]);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        err = weft__state_dead_add_step(d, state_col_text(stmt, 0), state_col_text(stmt, 1),
                                        state_col_text(stmt, 2),
                                        (uint64_t)sqlite3_column_int64(stmt, 3));
    }
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        state_note_error(st, rc);
        err = WEFT_EIO;
    }
    sqlite3_finalize(stmt);
    return err;
}

/* Copy the row of a run found dead (the SELECT of lite_dead_collect()) into @p d, which owns the
 * copies. Its end is the latest sign of life: the heartbeat, the last step's start or end, the
 * last LLM exchange, or the start (STATE_LAST_LIFE). */
static weft_err
dead_copy(sqlite3_stmt *stmt, struct weft__state_dead *d)
{
    weft_err err = WEFT_OK;

    memset(d, 0, sizeof(*d));
    for (int i = 0; i < 7; i++) {
        const char *v = state_col_text(stmt, i);
        d->text[i] = v != NULL ? weft__strdup(v) : NULL;
        if (v != NULL && d->text[i] == NULL) {
            err = WEFT_ENOMEM;
        }
    }
    d->pid = sqlite3_column_int64(stmt, 7);
    d->root_started_ns = (uint64_t)sqlite3_column_int64(stmt, 9);
    d->ended_ns = weft__state_dead_end(d, (uint64_t)sqlite3_column_int64(stmt, 8),
                                       (uint64_t)sqlite3_column_int64(stmt, 11),
                                       (uint64_t)sqlite3_column_int64(stmt, 10));
    return err;
}

/* The running runs whose owner is gone at @p now, appended to *dead (grown as needed, *n
 * entries, owned by the caller even on error, free with weft__state_dead_free()). */
static weft_err
lite_dead_collect(struct rt_state *base, uint64_t now, struct weft__state_dead **dead, size_t *n)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    size_t cap = 0;
    weft_err err = WEFT_OK;
    int rc = 0;

    stmt = prepare(st, "SELECT id, workflow, owner_host, trace_id, root_span_id,"
                       " root_parent_span_id, root_span_name, owner_pid, heartbeat_ns,"
                       " root_started_ns, started_ns," STATE_LAST_LIFE
                       " FROM runs WHERE status = 'running' AND owner_token IS NOT NULL");
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        if (weft__state_owner_is_alive(sqlite3_column_int64(stmt, 7), state_col_text(stmt, 2),
                                       (uint64_t)sqlite3_column_int64(stmt, 8), now)) {
            continue;
        }
        if (*n == cap) {
            struct weft__state_dead *grown = weft__realloc(*dead, (cap * 2 + 4) * sizeof(*grown));
            if (grown == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
            *dead = grown;
            cap = cap * 2 + 4;
        }
        err = dead_copy(stmt, &(*dead)[(*n)++]);
    }
    if (err == WEFT_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        state_note_error(st, rc);
        err = WEFT_EIO;
    }
    sqlite3_finalize(stmt);
    return err;
}

/* Mark @p d's run interrupted (the reason names its process and `weft resume`, kept in
 * d->text[7]) and read the steps it left in progress into @p d. */
static weft_err
lite_dead_mark(struct rt_state *base, struct weft__state_dead *d)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    weft_err err = weft__state_dead_reason(d);

    stmt = err == WEFT_OK
               ? prepare(st, "UPDATE runs SET status = 'interrupted', reason = ?, ended_ns = ?,"
                             " owner_pid = NULL, owner_host = NULL, owner_token = NULL,"
                             " owner_since_ns = NULL WHERE id = ? AND status = 'running'")
               : NULL;
    if (stmt == NULL) {
        return err == WEFT_OK ? WEFT_EIO : err;
    }
    bind_text(stmt, 1, d->text[7]);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)d->ended_ns);
    bind_key(stmt, 3, d->text[0]);
    err = finish(st, stmt, "mark interrupted");
    if (err == WEFT_OK) {
        err = open_steps(st, d);
    }
    return err;
}

static weft_err
lite_end(struct rt_state *base, weft_err err)
{
    return tx_end(lite(base), err);
}

/* ------------------------------------------------------------------------------------------ */
/* Skill memory (state.h, docs/memory.md)                                                      */

#define SKILL_COLUMNS                                                                           \
    "s.id, s.agent, s.task, s.solution, s.workflow, s.run_id, s.trace_id, s.span_id, s.reward," \
    " s.created_ns, s.last_used_ns, s.uses"

/* Bind free text redacted, failing (instead of binding "") when the redaction runs out of
 * memory: a skill saved with an empty task would be found by nothing and never replaced. */
static bool
bind_redacted(sqlite3_stmt *stmt, int i, const char *s)
{
    char *clean = NULL;

    if (s == NULL) {
        sqlite3_bind_null(stmt, i);
        return true;
    }
    clean = weft__redact_text(s);
    if (clean == NULL) {
        return false;
    }
    sqlite3_bind_text(stmt, i, clean, -1, SQLITE_TRANSIENT);
    weft__free(clean);
    return true;
}

static void
bind_hex(sqlite3_stmt *stmt, int i, const char *hex)
{
    if (hex[0] == '\0') {
        sqlite3_bind_null(stmt, i);
    } else {
        bind_key(stmt, i, hex);
    }
}

/* One row of SKILL_COLUMNS from column @p first into @p s (which owns the copies). */
static void
read_skill(sqlite3_stmt *stmt, int first, struct weft__skill *s, bool *is_oom)
{
    const char *v = NULL;

    memset(s, 0, sizeof(*s));
    v = state_col_text(stmt, first);
    snprintf(s->id, sizeof(s->id), "%s", v != NULL ? v : "");
    s->agent = col_dup(stmt, first + 1, is_oom);
    s->task = col_dup(stmt, first + 2, is_oom);
    s->solution = col_dup(stmt, first + 3, is_oom);
    s->workflow = col_dup(stmt, first + 4, is_oom);
    s->run_id = col_dup(stmt, first + 5, is_oom);
    v = state_col_text(stmt, first + 6);
    snprintf(s->trace_id, sizeof(s->trace_id), "%s", v != NULL ? v : "");
    v = state_col_text(stmt, first + 7);
    snprintf(s->span_id, sizeof(s->span_id), "%s", v != NULL ? v : "");
    s->reward = sqlite3_column_double(stmt, first + 8);
    s->created_ns = (uint64_t)sqlite3_column_int64(stmt, first + 9);
    s->last_used_ns = (uint64_t)sqlite3_column_int64(stmt, first + 10);
    s->uses = (uint64_t)sqlite3_column_int64(stmt, first + 11);
}

/* Step @p stmt to its end, appending each row (SKILL_COLUMNS, then the rank when @p has_rank)
 * to *out; a ranked row whose score is below @p min_score ends the walk (rows come best
 * first). The statement is released. */
static weft_err
collect_skills(struct lite_state *st,
               sqlite3_stmt *stmt,
               size_t cap,
               bool has_rank,
               double min_score,
               struct weft__skill **out,
               size_t *count)
{
    struct weft__skill *rows = NULL;
    size_t n = 0;
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    while (err == WEFT_OK && n < cap && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        bool is_oom = false;
        double score = 0.0;

        if (has_rank) {
            double s = sqlite3_column_double(stmt, 12); /* weft_skill_rank(): >= 0 */
            score = s > 0.0 ? s / (s + 1.0) : 0.0;
            if (score < min_score) {
                rc = SQLITE_DONE;
                break;
            }
        }
        if (rows == NULL) {
            rows = weft__calloc(cap, sizeof(*rows));
            if (rows == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
        }
        read_skill(stmt, 0, &rows[n], &is_oom);
        rows[n++].score = score;
        err = is_oom ? WEFT_ENOMEM : WEFT_OK;
    }
    if (err == WEFT_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: skills read failed: %s", sqlite3_errstr(rc));
        err = WEFT_EIO;
    }
    release(st, stmt);
    if (err != WEFT_OK) {
        weft__skills_free(rows, n);
        return err;
    }
    *out = rows;
    *count = n;
    return WEFT_OK;
}

/* Retention after a new row (state.h): two indexed deletes that find nothing to do in the
 * usual case. */
static weft_err
skills_retain(struct lite_state *st, const char *agent)
{
    sqlite3_stmt *stmt = NULL;
    uint64_t now = weft__now_ns();
    weft_err err = WEFT_OK;

    if (st->base.skills_max_age_ns > 0 && now > st->base.skills_max_age_ns) {
        stmt = cached(st, "DELETE FROM skills WHERE created_ns < ?");
        if (stmt == NULL) {
            return WEFT_EIO;
        }
        sqlite3_bind_int64(stmt, 1, (sqlite3_int64)(now - st->base.skills_max_age_ns));
        err = finish(st, stmt, "skills age retention");
    }
    if (err == WEFT_OK && st->base.skills_max_per_agent > 0) {
        stmt = cached(st, "DELETE FROM skills WHERE rid IN (SELECT rid FROM skills"
                          " WHERE agent = ? ORDER BY reward DESC, created_ns DESC"
                          " LIMIT -1 OFFSET ?)");
        if (stmt == NULL) {
            return WEFT_EIO;
        }
        bind_key(stmt, 1, agent);
        sqlite3_bind_int64(stmt, 2, (sqlite3_int64)st->base.skills_max_per_agent);
        err = finish(st, stmt, "skills count retention");
    }
    return err;
}

/* A word in at least this many tasks is "common": its count is kept in skills_terms. Rarer
 * words are looked up there in vain and count as rare, which they are. */
#define SKILL_COMMON_DOCS 64
#define WEFT__STR2(x)     #x
#define WEFT__STR(x)      WEFT__STR2(x)
/* A search ranks at most about this many postings: the rarest words of the query are kept
 * while the documents they occur in add up to no more (the rarest one always). Words left out
 * are the most common ones, whose IDF adds least to BM25; what a search costs is then bounded
 * by this whatever the store's size (docs/PERFORMANCE.md, "Skill memory"). */
#define SKILL_DF_BUDGET 12000

/* Rebuild skills_terms from the index's vocabulary when the store's size has moved by more
 * than an eighth (at least 256 rows) since the last rebuild: one scan of the vocabulary (80
 * ms at 100,000 skills), every 12,500 saves at that size. */
static weft_err
skills_terms_refresh(struct lite_state *st)
{
    sqlite3_stmt *stmt = cached(st, "SELECT stored, stored_at_terms FROM skills_meta"
                                    " WHERE id = 1");
    sqlite3_int64 stored = 0;
    sqlite3_int64 at = 0;
    sqlite3_int64 slack = 0;
    char *errmsg = NULL;
    int rc = 0;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        stored = sqlite3_column_int64(stmt, 0);
        at = sqlite3_column_int64(stmt, 1);
    }
    release(st, stmt);
    if (rc != SQLITE_ROW) {
        state_note_error(st, rc);
        return WEFT_EIO;
    }
    slack = at / 8 > 256 ? at / 8 : 256;
    if (stored <= at + slack && stored >= at - slack) {
        return WEFT_OK;
    }
    if (sqlite3_exec(
            st->db,
            "DELETE FROM skills_terms;"
            "INSERT INTO skills_terms (term, docs) SELECT term, doc FROM skills_vocab"
            " WHERE col = 'task' AND doc >= " WEFT__STR(
                SKILL_COMMON_DOCS) ";"
                                   "UPDATE skills_meta SET stored_at_terms = stored WHERE id = 1",
            NULL, NULL, &errmsg) != SQLITE_OK) {
        state_note_error(st, sqlite3_errcode(st->db));
        WEFT_LOG(WEFT_LOG_ERROR, "state: skills terms rebuild failed: %s",
                 errmsg != NULL ? errmsg : "?");
        sqlite3_free(errmsg);
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* The agent's one-token key in the full-text index: "k" and 16 hex digits of FNV-1a over the
 * name's bytes (the letter keeps FTS5 from reading it as a number). */
static void
agent_key(const char *agent, char out[18])
{
    uint64_t h = 1469598103934665603ull;

    for (const unsigned char *p = (const unsigned char *)agent; *p != '\0'; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    snprintf(out, 18, "k%016llx", (unsigned long long)h);
}

/* The id of the skill at row @p rid into @p out. */
static weft_err
skill_id_of(struct lite_state *st, sqlite3_int64 rid, char out[WEFT_UUID_LEN + 1])
{
    sqlite3_stmt *stmt = cached(st, "SELECT id FROM skills WHERE rid = ?");
    int rc = 0;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, rid);
    rc = sqlite3_step(stmt);
    snprintf(out, WEFT_UUID_LEN + 1, "%s",
             rc == SQLITE_ROW && state_col_text(stmt, 0) != NULL ? state_col_text(stmt, 0) : "");
    release(st, stmt);
    if (rc != SQLITE_ROW) {
        state_note_error(st, rc);
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* The vector of the skill at row @p rid (its id @p id), replacing the one it had. */
static weft_err
vector_put(struct lite_state *st,
           sqlite3_int64 rid,
           const char *id,
           const char *agent,
           const struct weft__state_vec_blob *vec)
{
    sqlite3_stmt *stmt = cached(st, "INSERT OR REPLACE INTO skill_vectors (rid, id, agent, model,"
                                    " vec) VALUES (?, ?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, rid);
    bind_key(stmt, 2, id);
    bind_key(stmt, 3, agent);
    bind_key(stmt, 4, vec->model);
    sqlite3_bind_blob(stmt, 5, vec->bytes, (int)vec->len, SQLITE_TRANSIENT);
    return finish(st, stmt, "skill vector");
}

/* The vector of the skill just written at row @p rid: @p id is the new row's, NULL for an
 * updated row, which keeps its own id (looked up rather than taken from the caller). */
static weft_err
vector_save(struct lite_state *st,
            sqlite3_int64 rid,
            const char *id,
            const char *agent,
            const struct weft__state_vec_blob *vec)
{
    char kept_id[WEFT_UUID_LEN + 1];
    weft_err err = id == NULL ? skill_id_of(st, rid, kept_id) : WEFT_OK;

    return err == WEFT_OK ? vector_put(st, rid, id != NULL ? id : kept_id, agent, vec) : err;
}

static weft_err
lite_skill_vectors(struct rt_state *base,
                   const char *agent,
                   const char *model,
                   size_t len,
                   size_t limit,
                   state_blob_fn fn,
                   void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = cached(st, "SELECT id, vec FROM skill_vectors WHERE agent = ?"
                                    " AND model = ? AND length(vec) = ? LIMIT ?");
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, agent);
    bind_key(stmt, 2, model);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)len);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)limit);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *id = state_col_text(stmt, 0);
        const unsigned char *bytes = sqlite3_column_blob(stmt, 1);

        if (id != NULL && bytes != NULL && (size_t)sqlite3_column_bytes(stmt, 1) == len &&
            !fn(id, bytes, user_data)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    release(st, stmt);
    if (rc != SQLITE_DONE) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: skill vectors read failed: %s", sqlite3_errstr(rc));
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static weft_err
lite_skill_save(struct rt_state *base,
                const struct weft__skill *s,
                const char *hash,
                const struct weft__state_vec_blob *vec,
                bool *is_new)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 rid = 0;
    double old_reward = 0.0;
    bool is_same = false;
    weft_err err = WEFT_OK;
    int rc = 0;

    *is_new = false;
    if (lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    stmt = cached(st, "SELECT rid, reward, solution FROM skills WHERE agent = ? AND task_hash = ?");
    if (stmt == NULL) {
        return tx_end(st, WEFT_EIO);
    }
    bind_key(stmt, 1, s->agent);
    bind_key(stmt, 2, hash);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        const unsigned char *old_solution = sqlite3_column_text(stmt, 2);

        rid = sqlite3_column_int64(stmt, 0);
        old_reward = sqlite3_column_double(stmt, 1);
        is_same = old_solution != NULL && s->solution != NULL &&
                  strcmp((const char *)old_solution, s->solution) == 0;
    }
    release(st, stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        state_note_error(st, rc);
        return tx_end(st, WEFT_EIO);
    }
    if (rc == SQLITE_ROW && s->reward < old_reward) {
        return tx_end(st, WEFT_OK); /* the stored solution earned more: it stays */
    }
    if (rc == SQLITE_ROW && s->reward <= old_reward && is_same) {
        /* The same solution again, typically from a run that was shown it: the skill is the
         * one an earlier run made, so its run, trace and creation time stay that run's (its
         * use was counted when it was retrieved); only a vector given now replaces its own. */
        err = vec != NULL ? vector_save(st, rid, NULL, s->agent, vec) : WEFT_OK;
        return tx_end(st, err);
    }
    if (rc == SQLITE_ROW) {
        stmt = cached(st, "UPDATE skills SET task = ?, solution = ?, workflow = ?, run_id = ?,"
                          " trace_id = ?, span_id = ?, reward = ?, created_ns = ? WHERE rid = ?");
    } else {
        stmt = cached(st, "INSERT INTO skills (task, solution, workflow, run_id, trace_id,"
                          " span_id, reward, created_ns, id, agent, task_hash, agent_key)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    }
    if (stmt == NULL) {
        return tx_end(st, WEFT_EIO);
    }
    if (!bind_redacted(stmt, 1, s->task) || !bind_redacted(stmt, 2, s->solution)) {
        release(st, stmt);
        return tx_end(st, WEFT_ENOMEM);
    }
    bind_key(stmt, 3, s->workflow);
    bind_key(stmt, 4, s->run_id);
    bind_hex(stmt, 5, s->trace_id);
    bind_hex(stmt, 6, s->span_id);
    sqlite3_bind_double(stmt, 7, s->reward);
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)s->created_ns);
    if (rc == SQLITE_ROW) {
        sqlite3_bind_int64(stmt, 9, rid);
    } else {
        char key[18];

        agent_key(s->agent, key);
        bind_key(stmt, 9, s->id);
        bind_key(stmt, 10, s->agent);
        bind_key(stmt, 11, hash);
        bind_key(stmt, 12, key);
    }
    err = finish(st, stmt, rc == SQLITE_ROW ? "skill update" : "skill insert");
    if (err == WEFT_OK && vec != NULL) {
        err = vector_save(st, rc == SQLITE_ROW ? rid : sqlite3_last_insert_rowid(st->db),
                          rc == SQLITE_ROW ? NULL : s->id, s->agent, vec);
    }
    if (err == WEFT_OK && rc == SQLITE_DONE) {
        err = skills_retain(st, s->agent);
    }
    if (err == WEFT_OK && rc == SQLITE_DONE) {
        err = skills_terms_refresh(st);
    }
    err = tx_end(st, err);
    *is_new = err == WEFT_OK && rc == SQLITE_DONE;
    return err;
}

/* The document frequency of the index token @p w[0..len) in tasks: from skills_terms for a
 * common word, else counted in the index's vocabulary (cheap: fewer than SKILL_COMMON_DOCS
 * documents, or a word that became common since the last rebuild). -1 on failure. */
static int64_t
term_docs(struct lite_state *st, const char *w, size_t len)
{
    static const char *const sql[2] = {
        "SELECT docs FROM skills_terms WHERE term = ?",
        "SELECT doc FROM skills_vocab WHERE term = ? AND col = 'task'",
    };
    int64_t docs = 0;

    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *stmt = cached(st, sql[i]);
        int rc = 0;

        if (stmt == NULL) {
            return -1;
        }
        sqlite3_bind_text(stmt, 1, w, (int)len, SQLITE_TRANSIENT);
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            docs = sqlite3_column_int64(stmt, 0);
        }
        release(st, stmt);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
            state_note_error(st, rc);
            return -1;
        }
        if (rc == SQLITE_ROW) {
            return docs;
        }
    }
    return 0;
}

/* The match expression of @p words (space-separated, from weft__skill_query_terms()) into
 * @p match: the rarest of them (in no task: left out) while their documents add up to at most
 * SKILL_DF_BUDGET, each quoted, ORed; and their IDF weights in the same order into
 * @p weights (@p has_agent: a 0 first, for the agent's phrase). *is_empty when no word is in
 * any task. */
static weft_err
select_terms(struct lite_state *st,
             const char *words,
             bool has_agent,
             struct weft__buf *match,
             struct weft__buf *weights,
             bool *is_empty)
{
    const char *w[WEFT_SKILL_QUERY_TERMS];
    size_t len[WEFT_SKILL_QUERY_TERMS];
    int64_t df[WEFT_SKILL_QUERY_TERMS];
    size_t order[WEFT_SKILL_QUERY_TERMS];
    sqlite3_stmt *stmt = cached(st, "SELECT stored FROM skills_meta WHERE id = 1");
    double rows = 0.0;
    size_t n = 0;
    size_t kept = 0;
    int64_t sum = 0;
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        rows = (double)sqlite3_column_int64(stmt, 0);
    }
    release(st, stmt);
    for (const char *p = words; *p != '\0' && n < WEFT_SKILL_QUERY_TERMS;) {
        size_t l = strcspn(p, " ");

        w[n] = p;
        len[n] = l;
        df[n] = term_docs(st, p, l);
        p += l;
        p += *p == ' ' ? 1 : 0;
        if (df[n] < 0) {
            return WEFT_EIO;
        }
        if (df[n] == 0) {
            continue; /* in no task: it could only slow the match down */
        }
        /* Insertion by document frequency, rarest first (at most 32 words). */
        order[n] = n;
        for (size_t j = n; j > 0 && df[order[j - 1]] > df[order[j]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
        n++;
    }
    err = has_agent ? weft__buf_append(weights, "0", 1) : WEFT_OK;
    for (size_t i = 0; err == WEFT_OK && i < n; i++) {
        size_t k = order[i];
        double d = (double)df[k];
        /* BM25's IDF (the form that stays positive for words in most tasks). */
        double idf = log(1.0 + (rows - d + 0.5) / (d + 0.5));

        if (i > 0 && sum + df[k] > SKILL_DF_BUDGET) {
            break;
        }
        sum += df[k];
        err = weft__buf_printf(match, "%s\"%.*s\"", i > 0 ? " OR " : "", (int)len[k], w[k]);
        if (err == WEFT_OK) {
            err = weft__buf_printf(weights, "%s%.6g", has_agent || i > 0 ? " " : "",
                                   idf > 0.0 ? idf : 1e-6);
        }
        kept++;
    }
    *is_empty = kept == 0;
    return err;
}

static weft_err
lite_skills_search(struct rt_state *base,
                   const char *agent,
                   const char *terms,
                   size_t k,
                   double min_score,
                   struct weft__skill **out,
                   size_t *count)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    bool is_empty = false;
    char key[18];
    struct weft__buf match;
    struct weft__buf weights;
    weft_err err = WEFT_OK;

    /* The agent's key ANDed into the match: FTS5 ranks only that agent's rows. */
    agent_key(agent, key);
    weft__buf_init(&match, 0);
    weft__buf_init(&weights, 0);
    err = weft__buf_printf(&match, "agent_key : \"%s\" AND (", key);
    if (err == WEFT_OK) {
        err = select_terms(st, terms, true, &match, &weights, &is_empty);
    }
    if (err == WEFT_OK) {
        err = weft__buf_append(&match, ")", 1);
    }
    if (err != WEFT_OK || is_empty) {
        weft__buf_cleanup(&match);
        weft__buf_cleanup(&weights);
        return err;
    }
    /* The k best rows are picked inside the full-text index (weft_skill_rank() is BM25 over
     * the query's words with the IDFs computed here, see skill_rank()), and only those k are
     * read from skills: a join per candidate row was half of a search's time. The agent's
     * equality is checked again on them (a 64-bit key collision would only lose hits). */
    stmt =
        cached(st, "WITH r AS MATERIALIZED (SELECT rowid AS rid,"
                   " weft_skill_rank(skills_fts, ?3) AS score FROM skills_fts"
                   " WHERE skills_fts MATCH ?1 ORDER BY score DESC LIMIT ?4)"
                   " SELECT " SKILL_COLUMNS ", r.score FROM r JOIN skills s ON s.rid = r.rid"
                   " WHERE s.agent = ?2 ORDER BY r.score DESC, s.reward DESC, s.created_ns DESC");
    if (stmt == NULL) {
        weft__buf_cleanup(&match);
        weft__buf_cleanup(&weights);
        return WEFT_EIO;
    }
    sqlite3_bind_text(stmt, 1, match.data, -1, SQLITE_TRANSIENT);
    bind_key(stmt, 2, agent);
    sqlite3_bind_text(stmt, 3, weights.data, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)k);
    weft__buf_cleanup(&match);
    weft__buf_cleanup(&weights);
    return collect_skills(st, stmt, k, true, min_score, out, count);
}

static weft_err
lite_skill_used(struct rt_state *base, const char *id, uint64_t now_ns)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt =
        cached(st, "UPDATE skills SET uses = uses + 1, last_used_ns = ? WHERE id = ?");
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)now_ns);
    bind_key(stmt, 2, id);
    err = finish(st, stmt, "skill used");
    if (err == WEFT_OK && sqlite3_changes(st->db) == 0) {
        err = WEFT_ENOTFOUND;
    }
    return err;
}

static weft_err
lite_skills_list(
    struct rt_state *base, const char *agent, size_t limit, struct weft__skill **out, size_t *count)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;

    if (agent != NULL) {
        stmt = prepare(st, "SELECT " SKILL_COLUMNS " FROM skills s WHERE agent = ?"
                           " ORDER BY created_ns DESC LIMIT ?");
    } else {
        stmt = prepare(st, "SELECT " SKILL_COLUMNS " FROM skills s"
                           " ORDER BY created_ns DESC LIMIT ?");
    }
    if (stmt == NULL) {
        return WEFT_EIO;
    }
    if (agent != NULL) {
        bind_key(stmt, 1, agent);
    }
    sqlite3_bind_int64(stmt, agent != NULL ? 2 : 1, (sqlite3_int64)limit);
    return collect_skills(st, stmt, limit, false, 0.0, out, count);
}

static weft_err
lite_team_save(struct rt_state *base, const struct weft__state_team *t)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "INSERT INTO teams (id, name, path, goal, document, run_id,"
                                     " created_ns) VALUES (?, ?, ?, ?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, t->id);
    bind_key(stmt, 2, t->name);
    bind_key(stmt, 3, t->path);
    bind_text(stmt, 4, t->goal);
    bind_text(stmt, 5, t->document);
    bind_key(stmt, 6, t->run_id);
    sqlite3_bind_int64(stmt, 7, (sqlite3_int64)t->created_ns);
    return finish(st, stmt, "team save");
}

static weft_err
lite_teams_list(struct rt_state *base,
                const char *run_id,
                size_t limit,
                struct weft__state_team **out,
                size_t *count)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(
        st, run_id != NULL ? "SELECT id, name, path, goal, document, run_id, created_ns FROM teams"
                             " WHERE run_id = ?1 ORDER BY created_ns LIMIT ?2"
                           : "SELECT id, name, path, goal, document, run_id, created_ns FROM teams"
                             " WHERE ?1 IS NULL ORDER BY created_ns DESC LIMIT ?2");
    struct weft__state_team *rows = NULL;
    size_t n = 0;
    bool is_oom = false;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    sqlite3_bind_int64(stmt, 2, (sqlite3_int64)limit);
    while (!is_oom && n < limit && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *id = state_col_text(stmt, 0);
        rows = rows != NULL ? rows : weft__calloc(limit, sizeof(*rows));
        if (rows == NULL) {
            is_oom = true;
            break;
        }
        snprintf(rows[n].id, sizeof(rows[n].id), "%s", id != NULL ? id : "");
        rows[n].name = col_dup(stmt, 1, &is_oom);
        rows[n].path = col_dup(stmt, 2, &is_oom);
        rows[n].goal = col_dup(stmt, 3, &is_oom);
        rows[n].document = col_dup(stmt, 4, &is_oom);
        rows[n].run_id = col_dup(stmt, 5, &is_oom);
        rows[n++].created_ns = (uint64_t)sqlite3_column_int64(stmt, 6);
    }
    release(st, stmt);
    if (is_oom || (rc != SQLITE_DONE && rc != SQLITE_ROW)) {
        weft__state_teams_free(rows, n);
        if (!is_oom) {
            state_note_error(st, rc);
        }
        return is_oom ? WEFT_ENOMEM : WEFT_EIO;
    }
    *out = rows;
    *count = n;
    return WEFT_OK;
}

static weft_err
lite_skill_get(struct rt_state *base, const char *prefix, struct weft__skill **out, size_t *count)
{
    struct lite_state *st = lite(base);
    /* Ids are lowercase hex and hyphens, all below 'z': every id starting with the prefix lies
     * between it and it followed by 'z', a range of the unique index. */
    sqlite3_stmt *stmt = prepare(st, "SELECT " SKILL_COLUMNS " FROM skills s"
                                     " WHERE id >= ?1 AND id < ?1 || 'z'"
                                     " ORDER BY id = ?1 DESC, id LIMIT 2");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, prefix);
    return collect_skills(st, stmt, 2, false, 0.0, out, count);
}

static weft_err
lite_skills_forget(struct rt_state *base, const char *id, const char *agent, size_t *removed)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "DELETE FROM skills WHERE (?1 IS NULL OR id = ?1)"
                                     " AND (?2 IS NULL OR agent = ?2)");
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, id);
    bind_key(stmt, 2, agent);
    err = finish(st, stmt, "skills forget");
    if (err == WEFT_OK && removed != NULL) {
        *removed = (size_t)sqlite3_changes(st->db);
    }
    return err;
}

static weft_err
lite_skills_prune(struct rt_state *base,
                  size_t max_per_agent,
                  uint64_t max_age_ns,
                  uint64_t now_ns,
                  size_t *removed)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = NULL;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    if (max_age_ns > 0 && now_ns > max_age_ns) {
        stmt = prepare(st, "DELETE FROM skills WHERE created_ns < ?");
        if (stmt == NULL) {
            return tx_end(st, WEFT_EIO);
        }
        sqlite3_bind_int64(stmt, 1, (sqlite3_int64)(now_ns - max_age_ns));
        err = finish(st, stmt, "skills prune by age");
        n += err == WEFT_OK ? (size_t)sqlite3_changes(st->db) : 0;
    }
    if (err == WEFT_OK && max_per_agent > 0) {
        stmt = prepare(st, "DELETE FROM skills WHERE rid IN (SELECT rid FROM (SELECT rid,"
                           " row_number() OVER (PARTITION BY agent ORDER BY reward DESC,"
                           " created_ns DESC) AS n FROM skills) WHERE n > ?)");
        if (stmt == NULL) {
            return tx_end(st, WEFT_EIO);
        }
        sqlite3_bind_int64(stmt, 1, (sqlite3_int64)max_per_agent);
        err = finish(st, stmt, "skills prune by count");
        n += err == WEFT_OK ? (size_t)sqlite3_changes(st->db) : 0;
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
lite_run_pin(struct rt_state *base, const char *run_id, bool is_pinned)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "UPDATE runs SET pinned = ? WHERE id = ?");
    weft_err err = WEFT_OK;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int(stmt, 1, is_pinned ? 1 : 0);
    bind_key(stmt, 2, run_id);
    err = finish(st, stmt, "run pin");
    if (err == WEFT_OK && sqlite3_changes(st->db) == 0) {
        err = WEFT_ENOTFOUND;
    }
    return err;
}

static sqlite3_int64
ns_param(uint64_t ns)
{
    return ns > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)ns;
}

static weft_err
lite_gc_scan(struct rt_state *base,
             uint64_t cutoff_ns,
             uint64_t after_ns,
             const char *after_id,
             size_t limit,
             state_gc_fn fn,
             void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(st, "SELECT id, ended_ns FROM runs WHERE status <> 'running'"
                                     " AND ended_ns IS NOT NULL AND ended_ns < ?1 AND pinned = 0"
                                     " AND (?3 IS NULL OR ended_ns > ?2 OR (ended_ns = ?2"
                                     " AND id > ?3)) ORDER BY ended_ns, id LIMIT ?4");
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, ns_param(cutoff_ns));
    sqlite3_bind_int64(stmt, 2, ns_param(after_ns));
    if (after_id != NULL) {
        bind_key(stmt, 3, after_id);
    }
    sqlite3_bind_int64(stmt, 4, limit > INT64_MAX ? INT64_MAX : (sqlite3_int64)limit);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        err = fn((const char *)sqlite3_column_text(stmt, 0),
                 (uint64_t)sqlite3_column_int64(stmt, 1), user_data);
    }
    sqlite3_finalize(stmt);
    if (err == WEFT_OK && rc != SQLITE_DONE) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc scan failed: %s", sqlite3_errstr(rc));
        err = WEFT_EIO;
    }
    return err;
}

static weft_err
lite_gc_kept(struct rt_state *base, uint64_t cutoff_ns, size_t *pinned, size_t *running)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = prepare(
        st, "SELECT COALESCE(SUM(pinned <> 0 AND status <> 'running' AND ended_ns IS NOT NULL"
            " AND ended_ns < ?1), 0), COALESCE(SUM(status = 'running' AND started_ns < ?1), 0)"
            " FROM runs");
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, ns_param(cutoff_ns));
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        *pinned = (size_t)sqlite3_column_int64(stmt, 0);
        *running = (size_t)sqlite3_column_int64(stmt, 1);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc count failed: %s", sqlite3_errstr(rc));
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* A session's rows (messages, scripted cursors) go with its last run: later runs of the same
 * session read its conversation back (?1 the run, ?2 its session). */
#define LITE_SESSION_GONE \
    " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_id = ?2 AND r.id <> ?1)"

/* Every table with rows of a run, the run's own row last: the same WHERE counted (dry run) or
 * deleted. run_metrics is created by metrics_store.c on the first snapshot, so it may be
 * missing. Skills (lessons are skills) and teams keep their own retention and are not here. */
static const struct lite_gc_table {
    const char *name;
    const char *count;
    const char *del;
} lite_gc_tables[] = {
    {"steps", "SELECT count(*) FROM steps WHERE run_id = ?1",
     "DELETE FROM steps WHERE run_id = ?1"},
    {"llm_exchanges", "SELECT count(*) FROM llm_exchanges WHERE run_id = ?1",
     "DELETE FROM llm_exchanges WHERE run_id = ?1"},
    {"tool_results", "SELECT count(*) FROM tool_results WHERE run_id = ?1",
     "DELETE FROM tool_results WHERE run_id = ?1"},
    {"corrections", "SELECT count(*) FROM corrections WHERE run_id = ?1",
     "DELETE FROM corrections WHERE run_id = ?1"},
    {"run_metrics", "SELECT count(*) FROM run_metrics WHERE run_id = ?1",
     "DELETE FROM run_metrics WHERE run_id = ?1"},
    {"messages", "SELECT count(*) FROM messages WHERE session_id = ?2" LITE_SESSION_GONE,
     "DELETE FROM messages WHERE session_id = ?2" LITE_SESSION_GONE},
    {"script_cursors",
     "SELECT count(*) FROM script_cursors WHERE session_id = ?2" LITE_SESSION_GONE,
     "DELETE FROM script_cursors WHERE session_id = ?2" LITE_SESSION_GONE},
    {"script_cursor_keys",
     "SELECT count(*) FROM script_cursor_keys WHERE session_id = ?2" LITE_SESSION_GONE,
     "DELETE FROM script_cursor_keys WHERE session_id = ?2" LITE_SESSION_GONE},
    {"runs", "SELECT count(*) FROM runs WHERE id = ?1", "DELETE FROM runs WHERE id = ?1"},
};

static bool
lite_has_table(struct lite_state *st, const char *name)
{
    sqlite3_stmt *stmt =
        prepare(st, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
    bool has = false;

    if (stmt != NULL) {
        bind_key(stmt, 1, name);
        has = sqlite3_step(stmt) == SQLITE_ROW;
    }
    sqlite3_finalize(stmt);
    return has;
}

/* Count or delete one table's rows of the run. */
static weft_err
lite_gc_table(struct lite_state *st,
              const struct lite_gc_table *t,
              const char *run_id,
              const char *session_id,
              bool is_dry_run,
              uint64_t *rows)
{
    sqlite3_stmt *stmt = NULL;
    int rc = SQLITE_DONE;

    if (strcmp(t->name, "run_metrics") == 0 && !lite_has_table(st, t->name)) {
        return WEFT_OK;
    }
    stmt = prepare(st, is_dry_run ? t->count : t->del);
    if (stmt == NULL) {
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    if (sqlite3_bind_parameter_count(stmt) >= 2) {
        bind_key(stmt, 2, session_id);
    }
    rc = sqlite3_step(stmt);
    if (is_dry_run && rc == SQLITE_ROW) {
        *rows += (uint64_t)sqlite3_column_int64(stmt, 0);
        rc = SQLITE_DONE;
    } else if (rc == SQLITE_DONE) {
        *rows += (uint64_t)sqlite3_changes(st->db);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s: %s failed: %s", run_id, t->name,
                 sqlite3_errstr(rc));
        st->is_tx_failed = st->tx_depth > 0;
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* The run being deleted, for the payload collection's callbacks. */
struct lite_gc {
    struct lite_state *st;
    const char *run_id;
};

static weft_err
gc_is_referenced(void *user, const char *hash, bool *is_live)
{
    struct lite_gc *gc = user;
    sqlite3_stmt *stmt = prepare(
        gc->st, "SELECT EXISTS (SELECT 1 FROM llm_exchanges WHERE entry_ref = ?1 AND run_id <> ?2)"
                " OR EXISTS (SELECT 1 FROM tool_results WHERE request_ref = ?1 AND run_id <> ?2)"
                " OR EXISTS (SELECT 1 FROM tool_results WHERE outcome_ref = ?1 AND run_id <> ?2)"
                " OR EXISTS (SELECT 1 FROM runs WHERE workflow_snapshot_ref = ?1 AND id <> ?2)");
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, hash);
    bind_key(stmt, 2, gc->run_id);
    rc = sqlite3_step(stmt);
    *is_live = rc == SQLITE_ROW && sqlite3_column_int(stmt, 0) != 0;
    sqlite3_finalize(stmt);
    return rc == SQLITE_ROW ? WEFT_OK : WEFT_EIO;
}

static weft_err
gc_lists_each(void *user, weft__payload_each_fn each, void *each_user)
{
    struct lite_gc *gc = user;
    sqlite3_stmt *stmt = prepare(gc->st, "SELECT hash, size, data FROM payloads WHERE kind = 1");
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft__payload_record rec = {.kind = WEFT__PAYLOAD_CHUNKS};
        const char *hash = (const char *)sqlite3_column_text(stmt, 0);

        if (!weft__payload_is_ref(hash)) {
            continue;
        }
        memcpy(rec.hash, hash, sizeof(rec.hash));
        rec.raw_len = (size_t)sqlite3_column_int64(stmt, 1);
        rec.data = sqlite3_column_blob(stmt, 2);
        rec.len = (size_t)sqlite3_column_bytes(stmt, 2);
        err = each(&rec, each_user);
    }
    sqlite3_finalize(stmt);
    return err == WEFT_OK && rc != SQLITE_DONE ? WEFT_EIO : err;
}

static weft_err
gc_del(void *user, const char *hash)
{
    struct lite_gc *gc = user;
    sqlite3_stmt *stmt = prepare(gc->st, "DELETE FROM payloads WHERE hash = ?");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, hash);
    return finish(gc->st, stmt, "payload delete");
}

/* The payload references run @p run_id's rows hold, into @p refs. */
static weft_err
gc_run_refs(struct lite_state *st, const char *run_id, struct weft__hash_set *refs)
{
    sqlite3_stmt *stmt = prepare(
        st, "SELECT entry_ref FROM llm_exchanges WHERE run_id = ?1 AND entry_ref IS NOT NULL"
            " UNION SELECT request_ref FROM tool_results WHERE run_id = ?1"
            " AND request_ref IS NOT NULL"
            " UNION SELECT outcome_ref FROM tool_results WHERE run_id = ?1"
            " AND outcome_ref IS NOT NULL"
            " UNION SELECT workflow_snapshot_ref FROM runs WHERE id = ?1"
            " AND workflow_snapshot_ref IS NOT NULL");
    weft_err err = WEFT_OK;
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    bind_key(stmt, 1, run_id);
    while (err == WEFT_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        err = weft__hash_set_add(refs, (const char *)sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return err == WEFT_OK && rc != SQLITE_DONE ? WEFT_EIO : err;
}

/* After the run's rows (or, dry, instead of deleting them): the payload records only they
 * held, counted into *rows like any table's rows. */
static weft_err
gc_payloads(struct lite_state *st,
            const char *run_id,
            struct weft__hash_set *refs,
            bool is_dry_run,
            uint64_t *rows)
{
    struct lite_gc gc = {.st = st, .run_id = run_id};
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
    err = weft__state_payloads_collect(&ops, refs, is_dry_run, &n);
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s: payloads: %s", run_id, weft_strerror(err));
        st->is_tx_failed = st->tx_depth > 0;
        return err;
    }
    *rows += n;
    return WEFT_OK;
}

static weft_err
lite_gc_run(struct rt_state *base,
            const char *run_id,
            uint64_t cutoff_ns,
            bool is_dry_run,
            uint64_t *rows,
            bool *is_deleted)
{
    struct lite_state *st = lite(base);
    struct weft__hash_set refs;
    sqlite3_stmt *stmt = NULL;
    char *session_id = NULL;
    uint64_t n = 0;
    weft_err err = WEFT_OK;

    int rc = SQLITE_DONE;

    rows_forget(st); /* its step rows may go */
    weft__hash_set_init(&refs);
    /* The write lock first (BEGIN IMMEDIATE), then the check: a run resumed or pinned by
     * another process after the scan is seen here and kept. A dry run reads without it. */
    if (!is_dry_run && lite_begin(base) != WEFT_OK) {
        return WEFT_EIO;
    }
    stmt = prepare(st, "SELECT session_id FROM runs WHERE id = ?1 AND status <> 'running'"
                       " AND ended_ns IS NOT NULL AND ended_ns < ?2 AND pinned = 0");
    if (stmt == NULL) {
        err = WEFT_EIO;
        goto out;
    }
    bind_key(stmt, 1, run_id);
    sqlite3_bind_int64(stmt, 2, ns_param(cutoff_ns));
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        session_id = weft__strdup((const char *)sqlite3_column_text(stmt, 0));
        err = session_id == NULL ? WEFT_ENOMEM : WEFT_OK;
    } else if (rc != SQLITE_DONE) {
        state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: gc of run %s: %s", run_id, sqlite3_errstr(rc));
        err = WEFT_EIO;
    }
    sqlite3_finalize(stmt);
    if (err != WEFT_OK || rc != SQLITE_ROW) {
        goto out; /* an error, or the run may no longer go: nothing written */
    }
    /* Its references are read before its rows go; what they alone held goes after them, in
     * the same transaction (the write lock keeps any writer from taking a record up meanwhile). */
    err = gc_run_refs(st, run_id, &refs);
    for (size_t i = 0; err == WEFT_OK && i < sizeof(lite_gc_tables) / sizeof(lite_gc_tables[0]);
         i++) {
        err = lite_gc_table(st, &lite_gc_tables[i], run_id, session_id, is_dry_run, &n);
    }
    if (err == WEFT_OK) {
        err = gc_payloads(st, run_id, &refs, is_dry_run, &n);
    }
out:
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

static const struct weft__state_ops lite_ops = {
    .name = "sqlite",
    .close = lite_close,
    .begin = lite_begin,
    .begin_lazy = lite_begin, /* synchronous=NORMAL: no commit waits for the disk */
    .commit = lite_commit,
    .in_transaction = lite_in_transaction,
    .run_begin = lite_run_begin,
    .run_trace = lite_run_trace,
    .run_end = lite_run_end,
    .step_save = lite_step_save,
    .surgery = lite_surgery,
    .messages_load = lite_messages_load,
    .message_add = lite_message_add,
    .cursors_load = lite_cursors_load,
    .cursors_save = lite_cursors_save,
    .runs_each = lite_runs_each,
    .run_resolve = lite_run_resolve,
    .run_info = lite_run_info,
    .steps_each = lite_steps_each,
    .corrections_each = lite_corrections_each,
    .exchange_add = lite_exchange_add,
    .exchanges_script = lite_exchanges_script,
    .exchange_counts = lite_exchange_counts,
    .tool_result_add = lite_tool_result_add,
    .tool_results_each = lite_tool_results_each,
    .run_origin = lite_run_origin,
    .check = lite_check,
    .lease_acquire = lite_lease_acquire,
    .lease_release = lite_lease_release,
    .heartbeat = lite_heartbeat,
    .run_root = lite_run_root,
    .run_hash_set = lite_run_hash_set,
    .run_hash_get = lite_run_hash_get,
    .run_snapshot_set = lite_run_snapshot_set,
    .run_snapshot_get = lite_run_snapshot_get,
    .end = lite_end,
    .dead_collect = lite_dead_collect,
    .dead_mark = lite_dead_mark,
    .skill_save = lite_skill_save,
    .skill_vectors = lite_skill_vectors,
    .skills_search = lite_skills_search,
    .skill_used = lite_skill_used,
    .skills_list = lite_skills_list,
    .team_save = lite_team_save,
    .teams_list = lite_teams_list,
    .skill_get = lite_skill_get,
    .skills_forget = lite_skills_forget,
    .skills_prune = lite_skills_prune,
    .run_pin = lite_run_pin,
    .gc_scan = lite_gc_scan,
    .gc_kept = lite_gc_kept,
    .gc_run = lite_gc_run,
};
