/* runtime/state/state_pg_schema.c - the PostgreSQL backend's schema: an ordered array of
 * migrations (version N is migrations[N - 1]), each applied in a transaction of its own under
 * pg_advisory_xact_lock(MIGRATION_LOCK) and recorded in weft_schema_migrations (state_pg.c's
 * file comment, "Migrations"). A database with a version this weft does not know is refused.
 */
#include "runtime/state/state_payloads.h"
#include "runtime/state/state_pg.h"

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

#define MIGRATION_LOCK 2003134068 /* pg_advisory_xact_lock key of the migrations: "weft" */

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

/* Datasets and experiments (docs/experiments.md): a dataset's items are versioned by the version
 * that added them and the one that removed them (NULL: still there). seq keeps the order items
 * and experiments were added in. JSON columns are kept as text, as given. SQLite's version 16. */
static const char migration_12[] =
    "CREATE TABLE datasets (name TEXT PRIMARY KEY, description TEXT, evaluators TEXT,"
    " created_ns BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0);"
    "CREATE TABLE dataset_items (id TEXT PRIMARY KEY, seq BIGINT GENERATED ALWAYS AS IDENTITY,"
    " dataset TEXT NOT NULL, input TEXT NOT NULL, expected TEXT, assertions TEXT,"
    " metadata TEXT NOT NULL, run_id TEXT, trace_id TEXT, fail_step TEXT,"
    " added_version BIGINT NOT NULL, removed_version BIGINT);"
    "CREATE INDEX dataset_items_dataset_idx ON dataset_items (dataset, added_version);"
    "CREATE TABLE experiments (id TEXT PRIMARY KEY, seq BIGINT GENERATED ALWAYS AS IDENTITY,"
    " name TEXT NOT NULL, dataset TEXT NOT NULL, dataset_version BIGINT NOT NULL,"
    " workflow TEXT NOT NULL, workflow_hash TEXT, from_failure BOOLEAN NOT NULL DEFAULT false,"
    " started_ns BIGINT NOT NULL, ended_ns BIGINT, status TEXT NOT NULL, summary TEXT);"
    "CREATE INDEX experiments_dataset_idx ON experiments (dataset, started_ns);"
    "CREATE TABLE experiment_items (experiment_id TEXT NOT NULL, item_id TEXT NOT NULL,"
    " seq BIGINT GENERATED ALWAYS AS IDENTITY, run_id TEXT, status TEXT NOT NULL,"
    " scores TEXT NOT NULL, tokens BIGINT NOT NULL DEFAULT 0,"
    " cost DOUBLE PRECISION NOT NULL DEFAULT 0, duration_ns BIGINT NOT NULL DEFAULT 0,"
    " loops BIGINT NOT NULL DEFAULT 0, stuck_loops BIGINT NOT NULL DEFAULT 0,"
    " corrections BIGINT NOT NULL DEFAULT 0, llm_calls BIGINT NOT NULL DEFAULT 0, error TEXT,"
    " PRIMARY KEY (experiment_id, item_id));";

static const char *const migrations[] = {migration_1, migration_2,  migration_3,  migration_4,
                                         migration_5, migration_6,  migration_7,  migration_8,
                                         migration_9, migration_10, migration_11, migration_12};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

static weft_err
migrate_one(struct pg_state *st, int version, char *err, size_t err_len)
{
    struct params p;
    struct params lock;
    PGresult *res = NULL;
    int applied = 0;
    weft_err rc = WEFT_EIO;

    weft__pg_params_init(&p);
    weft__pg_p_i64(&p, version);
    weft__pg_params_init(&lock);
    weft__pg_p_i64(&lock, MIGRATION_LOCK);
    if (weft__pg_exec_sql(st, "migration begin", "BEGIN", NULL) != WEFT_OK) {
        snprintf(err, err_len, "state database %s: cannot begin a migration", st->where);
        return WEFT_EIO;
    }
    st->tx_depth = 1;
    weft__pg_journal_drop(st); /* nothing below is sent again after a reconnect */
    /* The lock is the transaction's: the table that records versions is created under it too,
     * so the first two processes on an empty database do not both create it. */
    if (weft__pg_exec_sql(st, "migration lock", "SELECT pg_advisory_xact_lock($1)", &lock) !=
            WEFT_OK ||
        weft__pg_exec_sql(
            st, "migration table",
            "CREATE TABLE IF NOT EXISTS weft_schema_migrations (version INT PRIMARY KEY,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
            NULL) != WEFT_OK) {
        snprintf(err, err_len, "state database %s: cannot lock or create weft_schema_migrations",
                 st->where);
        goto out;
    }
    res = weft__pg_query(st, "migration version",
                         "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations", NULL);
    if (res == NULL) {
        snprintf(err, err_len, "state database %s: cannot read weft_schema_migrations", st->where);
        goto out;
    }
    applied = (int)weft__pg_col_i64(res, 0, 0);
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
    /* A migration is several statements without values: the simple weft__pg_query protocol runs
     * them in the open transaction. */
    res = PQexec(st->conn, migrations[version - 1]);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        char why[512];
        weft__pg_error_text(st, res, why, sizeof(why));
        snprintf(err, err_len, "state database %s: migration %d failed: %s", st->where, version,
                 why);
        PQclear(res);
        goto out;
    }
    PQclear(res);
    if (weft__pg_exec_sql(st, "migration record",
                          "INSERT INTO weft_schema_migrations (version) VALUES ($1)",
                          &p) != WEFT_OK) {
        snprintf(err, err_len, "state database %s: cannot record migration %d", st->where, version);
        goto out;
    }
    rc = WEFT_OK;
out:
    st->tx_depth = 0;
    weft__pg_journal_clear(st);
    if (rc == WEFT_OK) {
        res = weft__pg_run_sql(st, "migration commit", "COMMIT", NULL, false);
        if (res == NULL || strcmp(PQcmdStatus(res), "COMMIT") != 0) {
            snprintf(err, err_len, "state database %s: migration %d did not commit", st->where,
                     version);
            rc = WEFT_EIO;
        }
        PQclear(res);
    } else {
        PQclear(weft__pg_run_sql(st, "migration rollback", "ROLLBACK", NULL, false));
    }
    weft__pg_params_cleanup(&p);
    weft__pg_params_cleanup(&lock);
    return rc;
}

weft_err
weft__pg_migrate(struct pg_state *st, char *err, size_t err_len)
{
    PGresult *res = NULL;
    int applied = -1;

    /* The common case, an up-to-date database, costs one weft__pg_query and takes no lock. Its
     * failure (no table yet) is expected, so it is not logged: PQexec, not weft__pg_query(). */
    res = PQexec(st->conn, "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations");
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        applied = (int)weft__pg_col_i64(res, 0, 0);
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
