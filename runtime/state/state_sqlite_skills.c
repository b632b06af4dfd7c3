/* runtime/state/state_sqlite_skills.c - skill memory and teams in SQLite (state.h,
 * docs/memory.md): an FTS5 index over skill tasks ranked by its own BM25 function,
 * weft_skill_rank(), with the query's rarest words kept (skills_terms), vectors as blobs, and
 * retention; through the backend's query helpers (state_sqlite.h).
 */
#include "runtime/state/state_payloads.h"
#include "runtime/state/state_sqlite.h"

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
bool
weft__lite_register_rank(sqlite3 *db)
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
        weft__lite_bind_key(stmt, i, hex);
    }
}

/* The skills read (weft__state_row_skills()) handed over, a failed read logged. */
static weft_err
skills_take(struct lite_state *st,
            struct weft__state_skills_read *r,
            weft_err err,
            struct weft__skill **out,
            size_t *count)
{
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "state: skills read failed: %s", sqlite3_errstr(st->last_rc));
    }
    return weft__state_skills_take(r, err, out, count);
}

/* Retention after a new row (state.h): two indexed deletes that find nothing to do in the
 * usual case. */
static weft_err
skills_retain(struct lite_state *st, const char *agent)
{
    uint64_t now = weft__now_ns();
    weft_err err = WEFT_OK;

    if (st->base.skills_max_age_ns > 0 && now > st->base.skills_max_age_ns) {
        err = weft__lite_exec(st, "skills age retention",
                              weft__lite_cached(st, "DELETE FROM skills WHERE created_ns < ?"),
                              SQL_ARGS(SQL_I64(now - st->base.skills_max_age_ns)));
    }
    if (err == WEFT_OK && st->base.skills_max_per_agent > 0) {
        err = weft__lite_exec(
            st, "skills count retention",
            weft__lite_cached(st, "DELETE FROM skills WHERE rid IN (SELECT rid FROM skills"
                                  " WHERE agent = ? ORDER BY reward DESC, created_ns DESC"
                                  " LIMIT -1 OFFSET ?)"),
            SQL_ARGS(SQL_KEY(agent), SQL_I64(st->base.skills_max_per_agent)));
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
    sqlite3_stmt *stmt = weft__lite_cached(st, "SELECT stored, stored_at_terms FROM skills_meta"
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
    weft__lite_release(st, stmt);
    if (rc != SQLITE_ROW) {
        weft__lite_state_note_error(st, rc);
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
        weft__lite_state_note_error(st, sqlite3_errcode(st->db));
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
    sqlite3_stmt *stmt = weft__lite_cached(st, "SELECT id FROM skills WHERE rid = ?");
    int rc = 0;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, rid);
    rc = sqlite3_step(stmt);
    snprintf(out, WEFT_UUID_LEN + 1, "%s",
             rc == SQLITE_ROW && weft__lite_state_col_text(stmt, 0) != NULL
                 ? weft__lite_state_col_text(stmt, 0)
                 : "");
    weft__lite_release(st, stmt);
    if (rc != SQLITE_ROW) {
        weft__lite_state_note_error(st, rc);
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
    sqlite3_stmt *stmt =
        weft__lite_cached(st, "INSERT OR REPLACE INTO skill_vectors (rid, id, agent, model,"
                              " vec) VALUES (?, ?, ?, ?, ?)");

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    sqlite3_bind_int64(stmt, 1, rid);
    weft__lite_bind_key(stmt, 2, id);
    weft__lite_bind_key(stmt, 3, agent);
    weft__lite_bind_key(stmt, 4, vec->model);
    sqlite3_bind_blob(stmt, 5, vec->bytes, (int)vec->len, SQLITE_TRANSIENT);
    return weft__lite_finish(st, stmt, "skill vector");
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

weft_err
weft__lite_skill_vectors(struct rt_state *base,
                         const char *agent,
                         const char *model,
                         size_t len,
                         size_t limit,
                         state_blob_fn fn,
                         void *user_data)
{
    struct lite_state *st = lite(base);
    sqlite3_stmt *stmt = weft__lite_cached(st, "SELECT id, vec FROM skill_vectors WHERE agent = ?"
                                               " AND model = ? AND length(vec) = ? LIMIT ?");
    int rc = SQLITE_DONE;

    if (stmt == NULL) {
        return WEFT_EIO;
    }
    weft__lite_bind_key(stmt, 1, agent);
    weft__lite_bind_key(stmt, 2, model);
    sqlite3_bind_int64(stmt, 3, (sqlite3_int64)len);
    sqlite3_bind_int64(stmt, 4, (sqlite3_int64)limit);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *id = weft__lite_state_col_text(stmt, 0);
        const unsigned char *bytes = sqlite3_column_blob(stmt, 1);

        if (id != NULL && bytes != NULL && (size_t)sqlite3_column_bytes(stmt, 1) == len &&
            !fn(id, bytes, user_data)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    weft__lite_release(st, stmt);
    if (rc != SQLITE_DONE) {
        weft__lite_state_note_error(st, rc);
        WEFT_LOG(WEFT_LOG_ERROR, "state: skill vectors read failed: %s", sqlite3_errstr(rc));
        return WEFT_EIO;
    }
    return WEFT_OK;
}

weft_err
weft__lite_skill_save(struct rt_state *base,
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
    if (weft__lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    stmt = weft__lite_cached(
        st, "SELECT rid, reward, solution FROM skills WHERE agent = ? AND task_hash = ?");
    if (stmt == NULL) {
        return weft__lite_tx_end(st, WEFT_EIO);
    }
    weft__lite_bind_key(stmt, 1, s->agent);
    weft__lite_bind_key(stmt, 2, hash);
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        const unsigned char *old_solution = sqlite3_column_text(stmt, 2);

        rid = sqlite3_column_int64(stmt, 0);
        old_reward = sqlite3_column_double(stmt, 1);
        is_same = old_solution != NULL && s->solution != NULL &&
                  strcmp((const char *)old_solution, s->solution) == 0;
    }
    weft__lite_release(st, stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        weft__lite_state_note_error(st, rc);
        return weft__lite_tx_end(st, WEFT_EIO);
    }
    if (rc == SQLITE_ROW && s->reward < old_reward) {
        return weft__lite_tx_end(st, WEFT_OK); /* the stored solution earned more: it stays */
    }
    if (rc == SQLITE_ROW && s->reward <= old_reward && is_same) {
        /* The same solution again, typically from a run that was shown it: the skill is the
         * one an earlier run made, so its run, trace and creation time stay that run's (its
         * use was counted when it was retrieved); only a vector given now replaces its own. */
        err = vec != NULL ? vector_save(st, rid, NULL, s->agent, vec) : WEFT_OK;
        return weft__lite_tx_end(st, err);
    }
    if (rc == SQLITE_ROW) {
        stmt = weft__lite_cached(
            st, "UPDATE skills SET task = ?, solution = ?, workflow = ?, run_id = ?,"
                " trace_id = ?, span_id = ?, reward = ?, created_ns = ? WHERE rid = ?");
    } else {
        stmt =
            weft__lite_cached(st, "INSERT INTO skills (task, solution, workflow, run_id, trace_id,"
                                  " span_id, reward, created_ns, id, agent, task_hash, agent_key)"
                                  " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    }
    if (stmt == NULL) {
        return weft__lite_tx_end(st, WEFT_EIO);
    }
    if (!bind_redacted(stmt, 1, s->task) || !bind_redacted(stmt, 2, s->solution)) {
        weft__lite_release(st, stmt);
        return weft__lite_tx_end(st, WEFT_ENOMEM);
    }
    weft__lite_bind_key(stmt, 3, s->workflow);
    weft__lite_bind_key(stmt, 4, s->run_id);
    bind_hex(stmt, 5, s->trace_id);
    bind_hex(stmt, 6, s->span_id);
    sqlite3_bind_double(stmt, 7, s->reward);
    sqlite3_bind_int64(stmt, 8, (sqlite3_int64)s->created_ns);
    if (rc == SQLITE_ROW) {
        sqlite3_bind_int64(stmt, 9, rid);
    } else {
        char key[18];

        agent_key(s->agent, key);
        weft__lite_bind_key(stmt, 9, s->id);
        weft__lite_bind_key(stmt, 10, s->agent);
        weft__lite_bind_key(stmt, 11, hash);
        weft__lite_bind_key(stmt, 12, key);
    }
    err = weft__lite_finish(st, stmt, rc == SQLITE_ROW ? "skill update" : "skill insert");
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
    err = weft__lite_tx_end(st, err);
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
        sqlite3_stmt *stmt = weft__lite_cached(st, sql[i]);
        int rc = 0;

        if (stmt == NULL) {
            return -1;
        }
        sqlite3_bind_text(stmt, 1, w, (int)len, SQLITE_TRANSIENT);
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            docs = sqlite3_column_int64(stmt, 0);
        }
        weft__lite_release(st, stmt);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
            weft__lite_state_note_error(st, rc);
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
    sqlite3_stmt *stmt = weft__lite_cached(st, "SELECT stored FROM skills_meta WHERE id = 1");
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
    weft__lite_release(st, stmt);
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

weft_err
weft__lite_skills_search(struct rt_state *base,
                         const char *agent,
                         const char *terms,
                         size_t k,
                         double min_score,
                         struct weft__skill **out,
                         size_t *count)
{
    struct lite_state *st = lite(base);
    struct weft__state_skills_read r = {
        .cap = k, .has_score = true, .is_rank = true, .min_score = min_score};
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
    stmt = weft__lite_cached(
        st, "WITH r AS MATERIALIZED (SELECT rowid AS rid,"
            " weft_skill_rank(skills_fts, ?3) AS score FROM skills_fts"
            " WHERE skills_fts MATCH ?1 ORDER BY score DESC LIMIT ?4)"
            " SELECT " SKILL_COLUMNS ", r.score FROM r JOIN skills s ON s.rid = r.rid"
            " WHERE s.agent = ?2 ORDER BY r.score DESC, s.reward DESC, s.created_ns DESC");
    if (stmt == NULL) {
        weft__buf_cleanup(&match);
        weft__buf_cleanup(&weights);
        return WEFT_EIO;
    }
    err = weft__lite_each(
        st, stmt, SQL_ARGS(SQL_RAW(match.data), SQL_KEY(agent), SQL_RAW(weights.data), SQL_I64(k)),
        weft__state_row_skills, &r);
    weft__buf_cleanup(&match);
    weft__buf_cleanup(&weights);
    return skills_take(st, &r, err, out, count);
}

weft_err
weft__lite_skill_used(struct rt_state *base, const char *id, uint64_t now_ns)
{
    struct lite_state *st = lite(base);
    size_t n = 0;
    weft_err err = weft__lite_exec_count(
        st, "skill used",
        weft__lite_cached(st, "UPDATE skills SET uses = uses + 1, last_used_ns = ? WHERE id = ?"),
        SQL_ARGS(SQL_I64(now_ns), SQL_KEY(id)), &n);

    return err == WEFT_OK && n == 0 ? WEFT_ENOTFOUND : err;
}

weft_err
weft__lite_skills_list(
    struct rt_state *base, const char *agent, size_t limit, struct weft__skill **out, size_t *count)
{
    struct lite_state *st = lite(base);
    struct weft__state_skills_read r = {.cap = limit};
    weft_err err = WEFT_OK;

    if (agent != NULL) {
        err = weft__lite_each(st,
                              weft__lite_prepare(st, "SELECT " SKILL_COLUMNS
                                                     " FROM skills s WHERE agent = ?"
                                                     " ORDER BY created_ns DESC LIMIT ?"),
                              SQL_ARGS(SQL_KEY(agent), SQL_I64(limit)), weft__state_row_skills, &r);
    } else {
        err = weft__lite_each(st,
                              weft__lite_prepare(st, "SELECT " SKILL_COLUMNS " FROM skills s"
                                                     " ORDER BY created_ns DESC LIMIT ?"),
                              SQL_ARGS(SQL_I64(limit)), weft__state_row_skills, &r);
    }
    return skills_take(st, &r, err, out, count);
}

weft_err
weft__lite_team_save(struct rt_state *base, const struct weft__state_team *t)
{
    struct lite_state *st = lite(base);

    return weft__lite_exec(
        st, "team save",
        weft__lite_prepare(st, "INSERT INTO teams (id, name, path, goal, document, run_id,"
                               " created_ns) VALUES (?, ?, ?, ?, ?, ?, ?)"),
        SQL_ARGS(SQL_KEY(t->id), SQL_KEY(t->name), SQL_KEY(t->path), SQL_TEXT(t->goal),
                 SQL_TEXT(t->document), SQL_KEY(t->run_id), SQL_I64(t->created_ns)));
}

weft_err
weft__lite_teams_list(struct rt_state *base,
                      const char *run_id,
                      size_t limit,
                      struct weft__state_team **out,
                      size_t *count)
{
    struct lite_state *st = lite(base);
    struct weft__state_teams_read r = {.cap = limit};
    weft_err err = weft__lite_each(
        st,
        weft__lite_prepare(
            st, run_id != NULL
                    ? "SELECT id, name, path, goal, document, run_id, created_ns FROM teams"
                      " WHERE run_id = ?1 ORDER BY created_ns LIMIT ?2"
                    : "SELECT id, name, path, goal, document, run_id, created_ns FROM teams"
                      " WHERE ?1 IS NULL ORDER BY created_ns DESC LIMIT ?2"),
        SQL_ARGS(SQL_KEY(run_id), SQL_I64(limit)), weft__state_row_teams, &r);

    return weft__state_teams_take(&r, err, out, count);
}

weft_err
weft__lite_skill_get(struct rt_state *base,
                     const char *prefix,
                     struct weft__skill **out,
                     size_t *count)
{
    struct lite_state *st = lite(base);
    struct weft__state_skills_read r = {.cap = 2};
    /* Ids are lowercase hex and hyphens, all below 'z': every id starting with the prefix lies
     * between it and it followed by 'z', a range of the unique index. */
    weft_err err = weft__lite_each(st,
                                   weft__lite_prepare(st, "SELECT " SKILL_COLUMNS " FROM skills s"
                                                          " WHERE id >= ?1 AND id < ?1 || 'z'"
                                                          " ORDER BY id = ?1 DESC, id LIMIT 2"),
                                   SQL_ARGS(SQL_KEY(prefix)), weft__state_row_skills, &r);

    return skills_take(st, &r, err, out, count);
}

weft_err
weft__lite_skills_forget(struct rt_state *base, const char *id, const char *agent, size_t *removed)
{
    struct lite_state *st = lite(base);
    size_t n = 0;
    weft_err err = weft__lite_exec_count(
        st, "skills forget",
        weft__lite_prepare(st, "DELETE FROM skills WHERE (?1 IS NULL OR id = ?1)"
                               " AND (?2 IS NULL OR agent = ?2)"),
        SQL_ARGS(SQL_KEY(id), SQL_KEY(agent)), &n);

    if (err == WEFT_OK && removed != NULL) {
        *removed = n;
    }
    return err;
}

weft_err
weft__lite_skills_prune(struct rt_state *base,
                        size_t max_per_agent,
                        uint64_t max_age_ns,
                        uint64_t now_ns,
                        size_t *removed)
{
    struct lite_state *st = lite(base);
    size_t by_age = 0;
    size_t by_count = 0;
    weft_err err = WEFT_OK;

    if (weft__lite_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    if (max_age_ns > 0 && now_ns > max_age_ns) {
        err =
            weft__lite_exec_count(st, "skills prune by age",
                                  weft__lite_prepare(st, "DELETE FROM skills WHERE created_ns < ?"),
                                  SQL_ARGS(SQL_I64(now_ns - max_age_ns)), &by_age);
    }
    if (err == WEFT_OK && max_per_agent > 0) {
        err = weft__lite_exec_count(
            st, "skills prune by count",
            weft__lite_prepare(st, "DELETE FROM skills WHERE rid IN (SELECT rid FROM"
                                   " (SELECT rid, row_number() OVER (PARTITION BY agent"
                                   " ORDER BY reward DESC, created_ns DESC) AS n"
                                   " FROM skills) WHERE n > ?)"),
            SQL_ARGS(SQL_I64(max_per_agent)), &by_count);
    }
    err = weft__lite_tx_end(st, err);
    if (err == WEFT_OK && removed != NULL) {
        *removed = by_age + by_count;
    }
    return err;
}
