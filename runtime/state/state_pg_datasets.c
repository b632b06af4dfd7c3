/* runtime/state/state_pg_datasets.c - datasets and experiments in the PostgreSQL state store:
 * the PostgreSQL spelling of each statement of enum weft__ds_stmt (state_backend.h); datasets.c
 * binds the values and reads the rows. The tables are migration 12 (state_pg_schema.c). */
#include "runtime/state/state_pg.h"

static const char *const statements[WEFT__DS_STMT_COUNT] = {
    [WEFT__DS_CREATE] = "INSERT INTO datasets (name, description, evaluators, created_ns, version)"
                        " VALUES ($1, $2, $3, $4, 0) ON CONFLICT (name) DO NOTHING RETURNING name",
    [WEFT__DS_GET] = "SELECT " WEFT__DS_COLUMNS " FROM datasets d WHERE d.name = $1",
    [WEFT__DS_LIST] = "SELECT " WEFT__DS_COLUMNS " FROM datasets d ORDER BY d.name",
    [WEFT__DS_VERSION] = "UPDATE datasets SET version = $2 WHERE name = $1",
    [WEFT__DS_DROP_ITEMS] = "DELETE FROM dataset_items WHERE dataset = $1",
    [WEFT__DS_DROP] = "DELETE FROM datasets WHERE name = $1 RETURNING name",
    [WEFT__DS_ITEM_ADD] = "INSERT INTO dataset_items (id, dataset, input, expected, assertions,"
                          " metadata, run_id, trace_id, fail_step, added_version)"
                          " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    [WEFT__DS_ITEM_REMOVE] = "UPDATE dataset_items SET removed_version = $3"
                             " WHERE dataset = $1 AND id = $2 AND removed_version IS NULL"
                             " RETURNING id",
    [WEFT__DS_ITEMS] = "SELECT " WEFT__DS_ITEM_COLUMNS " FROM dataset_items WHERE dataset = $1"
                       " AND added_version <= $2"
                       " AND (removed_version IS NULL OR removed_version > $2) ORDER BY seq"
                       " LIMIT $3 OFFSET $4",
    [WEFT__DS_ITEMS_COUNT] = "SELECT count(*) FROM dataset_items WHERE dataset = $1"
                             " AND added_version <= $2"
                             " AND (removed_version IS NULL OR removed_version > $2)",
    [WEFT__EXP_BEGIN] = "INSERT INTO experiments (id, name, dataset, dataset_version, workflow,"
                        " workflow_hash, from_failure, started_ns, status)"
                        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    [WEFT__EXP_ITEM_PUT] =
        "INSERT INTO experiment_items (experiment_id, " WEFT__EXP_ITEM_COLUMNS ")"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
        " ON CONFLICT (experiment_id, item_id) DO UPDATE SET"
        " run_id = excluded.run_id, status = excluded.status,"
        " scores = excluded.scores, tokens = excluded.tokens,"
        " cost = excluded.cost, duration_ns = excluded.duration_ns,"
        " loops = excluded.loops, stuck_loops = excluded.stuck_loops,"
        " corrections = excluded.corrections,"
        " llm_calls = excluded.llm_calls, error = excluded.error",
    [WEFT__EXP_END] = "UPDATE experiments SET status = $2, summary = $3, ended_ns = $4"
                      " WHERE id = $1 RETURNING id",
    [WEFT__EXP_LIST] = "SELECT " WEFT__EXP_COLUMNS " FROM experiments"
                       " WHERE $1::text IS NULL OR dataset = $1 ORDER BY started_ns DESC, seq DESC",
    [WEFT__EXP_GET] = "SELECT " WEFT__EXP_COLUMNS " FROM experiments WHERE id = $1",
    [WEFT__EXP_ITEMS] = "SELECT " WEFT__EXP_ITEM_COLUMNS " FROM experiment_items"
                        " WHERE experiment_id = $1 ORDER BY seq",
};

static const char *const names[WEFT__DS_STMT_COUNT] = {
    [WEFT__DS_CREATE] = "dataset create",
    [WEFT__DS_GET] = "dataset get",
    [WEFT__DS_LIST] = "datasets list",
    [WEFT__DS_VERSION] = "dataset version",
    [WEFT__DS_DROP_ITEMS] = "dataset drop items",
    [WEFT__DS_DROP] = "dataset drop",
    [WEFT__DS_ITEM_ADD] = "dataset item add",
    [WEFT__DS_ITEM_REMOVE] = "dataset item remove",
    [WEFT__DS_ITEMS] = "dataset items",
    [WEFT__EXP_BEGIN] = "experiment begin",
    [WEFT__EXP_ITEM_PUT] = "experiment item",
    [WEFT__EXP_END] = "experiment end",
    [WEFT__EXP_LIST] = "experiments list",
    [WEFT__EXP_GET] = "experiment get",
    [WEFT__EXP_ITEMS] = "experiment items",
};

weft_err
weft__pg_ds_run(struct rt_state *base,
                enum weft__ds_stmt which,
                const struct weft__state_arg *args,
                size_t n,
                state_row_fn fn,
                void *ctx)
{
    struct pg_state *st = weft__pg(base);

    if ((unsigned)which >= WEFT__DS_STMT_COUNT) {
        return WEFT_EINVAL;
    }
    return weft__pg_each(st, names[which], statements[which], args, n, fn, ctx);
}
