/* runtime/state/state_sqlite_schema.c - the SQLite state store's schema: each version's SQL and
 * the migration from any older version to WEFT__LITE_SCHEMA_VERSION (state_sqlite.h). The
 * caller (weft__state_sqlite_open) holds the write transaction and sets PRAGMA user_version. */
#include "runtime/state/state_sqlite.h"

#include "base/time.h"

#include <sqlite3.h>
#include <stddef.h>

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

/* Version 16 (datasets and experiments, docs/experiments.md): a dataset's items are versioned by
 * the version that added them and the one that removed them (NULL: still there), so version V
 * is the items with added_version <= V < removed_version. JSON columns are kept as text, as
 * given. Only CREATE. */
static const char state_migrate_v16[] =
    "CREATE TABLE IF NOT EXISTS datasets (name TEXT PRIMARY KEY, description TEXT,"
    " evaluators TEXT, created_ns INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS dataset_items (id TEXT PRIMARY KEY, dataset TEXT NOT NULL,"
    " input TEXT NOT NULL, expected TEXT, assertions TEXT, metadata TEXT NOT NULL,"
    " run_id TEXT, trace_id TEXT, fail_step TEXT, added_version INTEGER NOT NULL,"
    " removed_version INTEGER);"
    "CREATE INDEX IF NOT EXISTS dataset_items_dataset ON dataset_items(dataset, added_version);"
    "CREATE TABLE IF NOT EXISTS experiments (id TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " dataset TEXT NOT NULL, dataset_version INTEGER NOT NULL, workflow TEXT NOT NULL,"
    " workflow_hash TEXT, from_failure INTEGER NOT NULL DEFAULT 0, started_ns INTEGER NOT NULL,"
    " ended_ns INTEGER, status TEXT NOT NULL, summary TEXT);"
    "CREATE INDEX IF NOT EXISTS experiments_dataset ON experiments(dataset, started_ns);"
    "CREATE TABLE IF NOT EXISTS experiment_items (experiment_id TEXT NOT NULL,"
    " item_id TEXT NOT NULL, run_id TEXT, status TEXT NOT NULL, scores TEXT NOT NULL,"
    " tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,"
    " duration_ns INTEGER NOT NULL DEFAULT 0, loops INTEGER NOT NULL DEFAULT 0,"
    " stuck_loops INTEGER NOT NULL DEFAULT 0, corrections INTEGER NOT NULL DEFAULT 0,"
    " llm_calls INTEGER NOT NULL DEFAULT 0, error TEXT,"
    " PRIMARY KEY (experiment_id, item_id));";

int
weft__lite_schema_migrate(sqlite3 *db, int version, char **errmsg)
{
    static const struct {
        int version;
        const char *sql;
    } steps[] = {
        {1, schema_v1},          {2, migrate_v2},         {3, migrate_v3},
        {4, migrate_v4},         {5, state_migrate_v5},   {6, state_migrate_v6},
        {7, state_migrate_v7},   {8, state_migrate_v8},   {9, state_migrate_v9},
        {10, state_migrate_v10}, {11, state_migrate_v11}, {12, state_migrate_v12},
        {13, state_migrate_v13}, {14, state_migrate_v14}, {15, state_migrate_v15},
        {16, state_migrate_v16},
    };

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (version < steps[i].version) {
            int rc = sqlite3_exec(db, steps[i].sql, NULL, NULL, errmsg);

            if (rc != SQLITE_OK) {
                return rc;
            }
        }
    }
    return SQLITE_OK;
}

int
weft__lite_open_settings(sqlite3 *db, char **errmsg)
{
    int rc = SQLITE_OK;

    /* A page cache of up to 32 MiB (SQLite's default is 2 MiB), filled only as pages are read:
     * a skills search at 100,000 skills reads a few MiB of index, and re-reading it through
     * the kernel on every search was a third of its time (perf). */
    for (unsigned waited = 0;; waited += 10) {
        rc = sqlite3_exec(db,
                          "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                          " PRAGMA cache_size=-32768",
                          NULL, NULL, errmsg);
        if ((rc & 0xff) != SQLITE_BUSY || waited >= 5000) {
            break;
        }
        sqlite3_free(*errmsg);
        *errmsg = NULL;
        weft__sleep_ms(10);
    }
    return rc == SQLITE_OK ? sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, errmsg) : rc;
}
