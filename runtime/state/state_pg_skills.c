/* runtime/state/state_pg_skills.c - skill memory and teams in PostgreSQL (state.h,
 * docs/memory.md): one upsert decides a save, full-text search over a tsvector with its
 * rarest lexemes kept (skills_terms), vectors as bytea, retention; through the backend's query
 * helpers (state_pg.h).
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

/* ------------------------------------------------------------------------------------------ */
/* Skill memory (state.h, docs/memory.md)                                                      */

#define SKILL_COLUMNS STATE_SKILL_COLUMNS

/* Retention after a new row (state.h): two indexed deletes, nothing to do in the usual case. */
static weft_err
skills_retain(struct pg_state *st, const char *agent)
{
    uint64_t now = weft__now_ns();
    weft_err err = WEFT_OK;

    if (st->base.skills_max_age_ns > 0 && now > st->base.skills_max_age_ns) {
        err = weft__pg_exec(st, "skills age retention", "DELETE FROM skills WHERE created_ns < $1",
                            SQL_ARGS(SQL_U64(now - st->base.skills_max_age_ns)));
    }
    if (err == WEFT_OK && st->base.skills_max_per_agent > 0) {
        err = weft__pg_exec(st, "skills count retention",
                            "DELETE FROM skills WHERE id IN (SELECT id FROM skills WHERE agent = $1"
                            " ORDER BY reward DESC, created_ns DESC OFFSET $2)",
                            SQL_ARGS(SQL_KEY(agent), SQL_U64(st->base.skills_max_per_agent)));
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
    int64_t meta[2] = {0, 0}; /* stored, stored_at_terms */
    int64_t slack = 0;
    weft_err err = weft__pg_one(st, "skills meta",
                                "SELECT stored, stored_at_terms FROM skills_meta WHERE id = 1",
                                NULL, 0, weft__state_row_int_pair, meta);

    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        return err;
    }
    slack = meta[1] / 8 > 256 ? meta[1] / 8 : 256;
    if (meta[0] <= meta[1] + slack && meta[0] >= meta[1] - slack) {
        return WEFT_OK;
    }
    err = weft__pg_exec(st, "skills terms clear", "DELETE FROM skills_terms", NULL, 0);
    if (err == WEFT_OK) {
        err = weft__pg_exec(st, "skills terms rebuild",
                            "INSERT INTO skills_terms (term, docs) SELECT word, ndoc"
                            " FROM ts_stat('SELECT tsv FROM skills') WHERE ndoc >= 64",
                            NULL, 0);
    }
    if (err == WEFT_OK) {
        err =
            weft__pg_exec(st, "skills terms mark",
                          "UPDATE skills_meta SET stored_at_terms = stored WHERE id = 1", NULL, 0);
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

    weft__pg_params_init(&p);
    weft__pg_p_key(&p, id);
    weft__pg_p_key(&p, agent);
    weft__pg_p_key(&p, vec->model);
    weft__pg_p_bytes(&p, vec->bytes, vec->len);
    err =
        weft__pg_exec_sql(st, "skill vector",
                          "INSERT INTO skill_vectors (id, agent, model, vec)"
                          " VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE"
                          " SET agent = excluded.agent, model = excluded.model, vec = excluded.vec",
                          &p);
    weft__pg_params_cleanup(&p);
    return err;
}

weft_err
weft__pg_skill_vectors(struct rt_state *base,
                       const char *agent,
                       const char *model,
                       size_t len,
                       size_t limit,
                       state_blob_fn fn,
                       void *user_data)
{
    struct pg_state *st = weft__pg(base);
    PGresult *res = NULL;
    struct params p;
    bool is_bad = false;

    weft__pg_params_init(&p);
    weft__pg_p_key(&p, agent);
    weft__pg_p_key(&p, model);
    weft__pg_p_u64(&p, len);
    weft__pg_p_u64(&p, limit);
    /* In binary, a vector comes back as its bytes: as text it was hex, twice the bytes to send
     * and decode (p99 283 ms for 1,000 vectors of 1,536 dimensions). */
    p.is_binary_result = true;
    res = weft__pg_query(st, "skill vectors",
                         "SELECT id, vec FROM skill_vectors WHERE agent = $1"
                         " AND model = $2 AND length(vec) = $3 LIMIT $4",
                         &p);
    weft__pg_params_cleanup(&p);
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

/* In weft__pg_skill_save()'s upsert: the stored row has the solution and reward being saved. */
#define PG_SAME_SKILL "skills.solution = excluded.solution AND skills.reward = excluded.reward"

/* The row a skill save wrote (RETURNING xmax = 0, id) into the struct skill_kept @p ctx. */
struct skill_kept {
    bool is_new;
    char id[WEFT_UUID_LEN + 1];
};

static weft_err
skill_kept_row(const struct weft__state_row *row, void *ctx)
{
    struct skill_kept *k = ctx;

    k->is_new = weft__row_flag(row, 0);
    weft__row_copy(row, 1, k->id, sizeof(k->id)); /* a replaced row keeps its id */
    return WEFT_OK;
}

weft_err
weft__pg_skill_save(struct rt_state *base,
                    const struct weft__skill *s,
                    const char *hash,
                    const struct weft__state_vec_blob *vec,
                    bool *is_new)
{
    struct pg_state *st = weft__pg(base);
    struct skill_kept kept = {.is_new = false};
    weft_err err = WEFT_OK;

    *is_new = false;
    if (weft__pg_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    /* One statement decides, so two processes saving the same task cannot both insert: the
     * row is replaced only by an equal or better reward (no row comes back otherwise), and
     * xmax = 0 tells an insert from an update. The same solution at the same reward, from a
     * run that was shown it, keeps the provenance of the run that made it (run, trace, span,
     * workflow, creation time): the CASEs. */
    err = weft__pg_one(st, "skill save",
                       "INSERT INTO skills (id, agent, task_hash, task, solution, workflow, run_id,"
                       " trace_id, span_id, reward, created_ns)"
                       " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                       " ON CONFLICT (agent, task_hash) DO UPDATE SET task = excluded.task,"
                       " solution = excluded.solution, reward = excluded.reward,"
                       " workflow = CASE WHEN " PG_SAME_SKILL " THEN skills.workflow"
                       " ELSE excluded.workflow END,"
                       " run_id = CASE WHEN " PG_SAME_SKILL
                       " THEN skills.run_id ELSE excluded.run_id END,"
                       " trace_id = CASE WHEN " PG_SAME_SKILL " THEN skills.trace_id"
                       " ELSE excluded.trace_id END,"
                       " span_id = CASE WHEN " PG_SAME_SKILL " THEN skills.span_id"
                       " ELSE excluded.span_id END,"
                       " created_ns = CASE WHEN " PG_SAME_SKILL " THEN skills.created_ns"
                       " ELSE excluded.created_ns END WHERE skills.reward <= excluded.reward"
                       " RETURNING xmax = 0, id",
                       SQL_ARGS(SQL_KEY(s->id), SQL_KEY(s->agent), SQL_KEY(hash), SQL_TEXT(s->task),
                                SQL_TEXT(s->solution), SQL_KEY(s->workflow), SQL_KEY(s->run_id),
                                SQL_KEY(s->trace_id[0] != '\0' ? s->trace_id : NULL),
                                SQL_KEY(s->span_id[0] != '\0' ? s->span_id : NULL),
                                SQL_F64(s->reward), SQL_U64(s->created_ns)),
                       skill_kept_row, &kept);
    if (err == WEFT_ENOTFOUND) {
        err = WEFT_OK; /* a better row is kept */
    } else if (err != WEFT_OK) {
        return weft__pg_tx_end(st, WEFT_EIO);
    }
    *is_new = kept.is_new;
    if (vec != NULL && kept.id[0] != '\0') {
        err = vector_put(st, kept.id, s->agent, vec);
    }
    if (*is_new && err == WEFT_OK) {
        err = skills_retain(st, s->agent);
    }
    if (*is_new && err == WEFT_OK) {
        err = skills_terms_refresh(st);
    }
    err = weft__pg_tx_end(st, err);
    if (err != WEFT_OK) {
        *is_new = false;
    }
    return err;
}

/* The search's words and the agent's lexeme, copied from their row. */
struct search_words {
    char *words;
    char *agent_lexeme;
    bool is_oom;
};

static weft_err
search_words_row(const struct weft__state_row *row, void *ctx)
{
    struct search_words *w = ctx;

    if (weft__row_text(row, 0) != NULL) {
        w->words = weft__row_dup(row, 0, &w->is_oom);
        w->agent_lexeme = weft__row_dup(row, 1, &w->is_oom);
    }
    return WEFT_OK;
}

weft_err
weft__pg_skills_search(struct rt_state *base,
                       const char *agent,
                       const char *terms,
                       size_t k,
                       double min_score,
                       struct weft__skill **out,
                       size_t *count)
{
    struct pg_state *st = weft__pg(base);
    struct weft__state_skills_read r = {.cap = k, .has_score = true, .min_score = min_score};
    struct search_words w = {.words = NULL};
    weft_err err = WEFT_OK;

    /* The weft__pg_query's lexemes (stemmed as the index's are), the rarest first while the tasks
     * they occur in add up to SKILL_DF_BUDGET, ORed; and the agent's lexeme. */
    err = weft__pg_one(st, "skills search words",
                       "WITH w AS (SELECT DISTINCT u.lexeme, COALESCE(t.docs, 0) AS docs"
                       " FROM unnest(to_tsvector('english', $1)) u"
                       " LEFT JOIN skills_terms t ON t.term = u.lexeme),"
                       " r AS (SELECT lexeme, sum(docs) OVER (ORDER BY docs, lexeme) AS cum,"
                       " row_number() OVER (ORDER BY docs, lexeme) AS n FROM w)"
                       " SELECT (SELECT string_agg(quote_literal(lexeme), ' | ') FROM r"
                       " WHERE n = 1 OR cum <= $2), quote_literal('k' || left(md5($3), 16))",
                       SQL_ARGS(SQL_KEY(terms), SQL_I64(SKILL_DF_BUDGET), SQL_KEY(agent)),
                       search_words_row, &w);
    if (err == WEFT_EIO) {
        return err;
    }
    if (w.is_oom || w.words == NULL) {
        weft__free(w.words);
        weft__free(w.agent_lexeme);
        return w.is_oom ? WEFT_ENOMEM : WEFT_OK; /* no word left: no hits */
    }
    /* GIN intersects the agent's lexeme with the words, and the k best are picked before the
     * agent's name is compared (an index on agent ANDed into the bitmap cost more than it
     * saved). Normalisation 32 maps the rank into [0, 1) as rank / (rank + 1). */
    err = weft__pg_each(
        st, "skills search",
        "SELECT * FROM (SELECT " SKILL_COLUMNS ", ts_rank_cd(tsv, $2::tsquery, 32) AS"
        " score FROM skills WHERE tsv @@ ($1::tsquery && $2::tsquery)"
        " ORDER BY score DESC, reward DESC, created_ns DESC LIMIT $4) r"
        " WHERE agent = $3 ORDER BY score DESC, reward DESC, created_ns DESC",
        SQL_ARGS(SQL_RAW(w.agent_lexeme), SQL_RAW(w.words), SQL_KEY(agent), SQL_U64(k)),
        weft__state_row_skills, &r);
    weft__free(w.words);
    weft__free(w.agent_lexeme);
    return weft__state_skills_take(&r, err, out, count);
}

weft_err
weft__pg_skill_used(struct rt_state *base, const char *id, uint64_t now_ns)
{
    size_t n = 0;
    weft_err err =
        weft__pg_run(weft__pg(base), "skill used",
                     "UPDATE skills SET uses = uses + 1, last_used_ns = $1 WHERE id = $2", NULL,
                     SQL_ARGS(SQL_U64(now_ns), SQL_KEY(id)), NULL, NULL, &n);

    return err == WEFT_OK && n == 0 ? WEFT_ENOTFOUND : err;
}

weft_err
weft__pg_skills_list(
    struct rt_state *base, const char *agent, size_t limit, struct weft__skill **out, size_t *count)
{
    struct weft__state_skills_read r = {.cap = limit};
    weft_err err =
        weft__pg_each(weft__pg(base), "skills list",
                      "SELECT " SKILL_COLUMNS " FROM skills WHERE $1::text IS NULL OR agent = $1"
                      " ORDER BY created_ns DESC LIMIT $2",
                      SQL_ARGS(SQL_KEY(agent), SQL_U64(limit)), weft__state_row_skills, &r);

    return weft__state_skills_take(&r, err, out, count);
}

weft_err
weft__pg_team_save(struct rt_state *base, const struct weft__state_team *t)
{
    struct pg_state *st = weft__pg(base);

    return weft__pg_append(
        st, "team save",
        "INSERT INTO teams (id, name, path, goal, document, run_id, created_ns)"
        " VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7)",
        "INSERT INTO teams (id, name, path, goal, document, run_id, created_ns)"
        " VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7) ON CONFLICT (id) DO NOTHING",
        SQL_ARGS(SQL_RAW(t->id), SQL_KEY(t->name), SQL_KEY(t->path), SQL_TEXT(t->goal),
                 SQL_TEXT(t->document), SQL_KEY(t->run_id), SQL_U64(t->created_ns)));
}

weft_err
weft__pg_teams_list(struct rt_state *base,
                    const char *run_id,
                    size_t limit,
                    struct weft__state_team **out,
                    size_t *count)
{
    struct weft__state_teams_read r = {.cap = limit};
    weft_err err = weft__pg_each(
        weft__pg(base), "teams list",
        run_id != NULL ? "SELECT id, name, path, goal, document::text, run_id, created_ns"
                         " FROM teams WHERE run_id = $1 ORDER BY created_ns LIMIT $2"
                       : "SELECT id, name, path, goal, document::text, run_id, created_ns"
                         " FROM teams WHERE $1::text IS NULL ORDER BY created_ns DESC"
                         " LIMIT $2",
        SQL_ARGS(SQL_KEY(run_id), SQL_U64(limit)), weft__state_row_teams, &r);

    return weft__state_teams_take(&r, err, out, count);
}

weft_err
weft__pg_skill_get(struct rt_state *base,
                   const char *prefix,
                   struct weft__skill **out,
                   size_t *count)
{
    struct weft__state_skills_read r = {.cap = 2};
    /* Ids are lowercase hex and hyphens, all below 'z' in the C collation of the column. */
    weft_err err =
        weft__pg_each(weft__pg(base), "skill get",
                      "SELECT " SKILL_COLUMNS " FROM skills WHERE id >= $1 AND id < $1 || 'z'"
                      " ORDER BY id = $1 DESC, id LIMIT 2",
                      SQL_ARGS(SQL_KEY(prefix)), weft__state_row_skills, &r);

    return weft__state_skills_take(&r, err, out, count);
}

weft_err
weft__pg_skills_forget(struct rt_state *base, const char *id, const char *agent, size_t *removed)
{
    size_t n = 0;
    weft_err err = weft__pg_run(weft__pg(base), "skills forget",
                                "DELETE FROM skills WHERE ($1::text IS NULL OR id = $1)"
                                " AND ($2::text IS NULL OR agent = $2)",
                                NULL, SQL_ARGS(SQL_KEY(id), SQL_KEY(agent)), NULL, NULL, &n);

    if (err == WEFT_OK && removed != NULL) {
        *removed = n;
    }
    return err;
}

weft_err
weft__pg_skills_prune(struct rt_state *base,
                      size_t max_per_agent,
                      uint64_t max_age_ns,
                      uint64_t now_ns,
                      size_t *removed)
{
    struct pg_state *st = weft__pg(base);
    size_t by_age = 0;
    size_t by_count = 0;
    weft_err err = WEFT_OK;

    if (weft__pg_begin(&st->base) != WEFT_OK) {
        return WEFT_EIO;
    }
    if (max_age_ns > 0 && now_ns > max_age_ns) {
        err = weft__pg_run(st, "skills prune by age", "DELETE FROM skills WHERE created_ns < $1",
                           NULL, SQL_ARGS(SQL_U64(now_ns - max_age_ns)), NULL, NULL, &by_age);
    }
    if (err == WEFT_OK && max_per_agent > 0) {
        err = weft__pg_run(st, "skills prune by count",
                           "DELETE FROM skills WHERE id IN (SELECT id FROM (SELECT id, row_number()"
                           " OVER (PARTITION BY agent ORDER BY reward DESC, created_ns DESC) AS n"
                           " FROM skills) r WHERE n > $1)",
                           NULL, SQL_ARGS(SQL_U64(max_per_agent)), NULL, NULL, &by_count);
    }
    err = weft__pg_tx_end(st, err);
    if (err == WEFT_OK && removed != NULL) {
        *removed = by_age + by_count;
    }
    return err;
}
