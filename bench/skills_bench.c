/* bench/skills_bench.c - skill memory (runtime/state/state.h, docs/memory.md): the cost of saving a
 * skill and of retrieving the top k for an agent, as the store grows to 1,000, 10,000 and
 * 100,000 skills. Prints one JSON object per line and store size:
 *
 *   {"bench":"skills","backend":"sqlite","stored":N,"insert_us_per_skill":...,
 *    "queries":Q,"k":3,"p50_us":...,"p99_us":...,"max_us":...,"mean_hits":...,
 *    "mean_top_score":...}   (the best hit's relevance, averaged: to choose a threshold)
 *
 * Task texts are generated deterministically (a fixed-seed xorshift over vocabularies of
 * verbs, components, objects and conditions, plus a ticket number), spread over four agents;
 * the queries are new tasks from the same generator with another seed, so they share words
 * with many stored tasks without being copies of them. Skills are saved through
 * weft__state_skill_save() in transactions of 500 (retention off: the default keeps 1,000 per
 * agent). Queries run weft__state_skills_search() with k = 3 and no threshold.
 *
 * Then, on the same store, the vector rerank of memory.embeddings at 1,000 skills of one agent
 * with 1,536-float vectors (text search plus a cosine scan of the agent's vectors):
 *
 *   {"bench":"skills_vectors","backend":"sqlite","per_agent":1000,"dims":1536,"queries":Q,
 *    "p50_us":...,"p99_us":...,"max_us":...}
 *
 * Usage: skills_bench [--pg] [--queries N] [--max N] [--keep DIR]
 *   --pg: PostgreSQL too, a throwaway server started like dist_bench's (tests/support/);
 *   --keep DIR: write the SQLite store to DIR/state.db and leave it there (to EXPLAIN it);
 *   --reuse: with --keep, only query the store already there (to profile the queries);
 *   --pg-url URL: PostgreSQL at URL instead of a throwaway server (with --reuse: query only).
 */
#include "base/mem.h"
#include "base/time.h"
#include "runtime/state/state.h"
#include "support/pg_server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 500

static const char *const agents[] = {"coder", "tester", "reviewer", "writer"};
static const char *const verbs[] = {"Fix",      "Refactor", "Add tests for", "Document",
                                    "Optimise", "Review",   "Port",          "Debug",
                                    "Rewrite",  "Profile",  "Validate",      "Migrate",
                                    "Simplify", "Harden",   "Benchmark",     "Implement"};
static const char *const components[] = {
    "JSON parser",   "HTTP client",    "retry loop",         "SQL migration",    "login form",
    "cache layer",   "CSV exporter",   "rate limiter",       "websocket server", "config loader",
    "PDF renderer",  "search index",   "billing job",        "email sender",     "image resizer",
    "audit log",     "OAuth flow",     "dashboard chart",    "queue consumer",   "backup script",
    "plugin loader", "date formatter", "unicode normaliser", "memory allocator"};
static const char *const objects[] = {
    "in the Python service", "in the Go gateway",  "of the React frontend", "in the C library",
    "of the mobile app",     "in the Rust worker", "of the admin panel",    "in the data pipeline",
    "of the public API",     "in the CLI tool"};
static const char *const conditions[] = {
    "when the input is empty", "under heavy load",      "after a timeout",
    "with nested arrays",      "on Windows paths",      "when the network drops",
    "for large files",         "with unicode names",    "during a deploy",
    "when two users race",     "with an expired token", "at midnight UTC"};

struct rng {
    uint64_t s;
};

static uint64_t
next(struct rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

#define PICK(r, a) ((a)[next(r) % (sizeof(a) / sizeof((a)[0]))])

static void
make_task(struct rng *r, char *out, size_t len)
{
    snprintf(out, len, "%s the %s %s %s (ticket %llu)", PICK(r, verbs), PICK(r, components),
             PICK(r, objects), PICK(r, conditions), (unsigned long long)(next(r) % 100000));
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Save skills until the store holds @p target; @return µs per skill, or -1. */
static double
fill(struct rt_state *st, struct rng *r, size_t *stored, size_t target)
{
    char task[256];
    char solution[512];
    uint64_t t0 = weft__monotonic_ns();
    size_t added = 0;

    while (*stored < target) {
        if (weft__state_begin(st) != WEFT_OK) {
            return -1;
        }
        for (size_t i = 0; i < BATCH && *stored < target; i++) {
            struct weft__skill s;
            bool is_new = false;

            memset(&s, 0, sizeof(s));
            make_task(r, task, sizeof(task));
            snprintf(solution, sizeof(solution),
                     "Read the failing case, wrote a regression test, changed the %s, ran the "
                     "suite: green. Tool calls: read_file, run_tests, apply_patch.",
                     task);
            s.agent = (char *)agents[*stored % 4];
            s.task = task;
            s.solution = solution;
            s.workflow = "bench";
            s.reward = 1.0 + (double)(next(r) % 5) / 10.0;
            if (weft__state_skill_save(st, &s, &is_new) != WEFT_OK) {
                weft__state_commit(st);
                return -1;
            }
            *stored += is_new ? 1 : 0;
            added++;
        }
        if (weft__state_commit(st) != WEFT_OK) {
            return -1;
        }
    }
    return added > 0 ? (double)(weft__monotonic_ns() - t0) / 1e3 / (double)added : 0.0;
}

static int
measure(const char *backend, struct rt_state *st, size_t stored, double insert_us, size_t queries)
{
    uint64_t *lat = calloc(queries, sizeof(*lat));
    struct rng qr = {0x9e3779b97f4a7c15ull};
    char task[256];
    size_t hits = 0;
    double top = 0.0;

    if (lat == NULL) {
        return 1;
    }
    for (size_t i = 0; i < queries; i++) {
        struct weft__skill *out = NULL;
        size_t n = 0;
        uint64_t t0 = 0;

        make_task(&qr, task, sizeof(task));
        t0 = weft__monotonic_ns();
        if (weft__state_skills_search(st, agents[i % 4], task, 3, 0.0, &out, &n) != WEFT_OK) {
            fprintf(stderr, "skills_bench: search failed\n");
            free(lat);
            return 1;
        }
        lat[i] = weft__monotonic_ns() - t0;
        hits += n;
        top += n > 0 ? out[0].score : 0.0;
        weft__skills_free(out, n);
    }
    qsort(lat, queries, sizeof(*lat), cmp_u64);
    printf("{\"bench\":\"skills\",\"backend\":\"%s\",\"stored\":%zu,\"insert_us_per_skill\":%.1f,"
           "\"queries\":%zu,\"k\":3,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
           "\"mean_hits\":%.2f,\"mean_top_score\":%.3f}\n",
           backend, stored, insert_us, queries, (double)lat[queries / 2] / 1e3,
           (double)lat[(queries * 99) / 100] / 1e3, (double)lat[queries - 1] / 1e3,
           (double)hits / (double)queries, top / (double)queries);
    fflush(stdout);
    free(lat);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Vector rerank (memory.embeddings): one agent with VEC_AGENT_SKILLS skills, each with a
 * VEC_DIMS-float vector (text-embedding-3-small's length), and per query what a lookup with
 * embeddings adds to the text search: one scan of the agent's vectors with a cosine each and the
 * 4 k nearest kept (runtime/memory/memory.c does the same; its embeddings call is the endpoint's
 * time, not measured here). */

#define VEC_AGENT_SKILLS 1000
#define VEC_DIMS         1536
#define VEC_NEAREST      12 /* 4 k with k = 3 */

struct vec_query {
    const float *q;
    double best[VEC_NEAREST];
};

static bool
vec_row(const char *id, const float *v, void *user_data)
{
    struct vec_query *vq = user_data;
    double dot = 0.0;
    double norm = 0.0;
    double cos = 0.0;
    size_t at = VEC_NEAREST;

    (void)id;
    for (size_t i = 0; i < VEC_DIMS; i++) {
        dot += (double)vq->q[i] * (double)v[i];
        norm += (double)v[i] * (double)v[i];
    }
    cos = norm > 0.0 ? dot / sqrt(norm) : 0.0;
    while (at > 0 && vq->best[at - 1] < cos) {
        if (at < VEC_NEAREST) {
            vq->best[at] = vq->best[at - 1];
        }
        at--;
    }
    if (at < VEC_NEAREST) {
        vq->best[at] = cos;
    }
    return true;
}

static void
random_vector(struct rng *r, float *v)
{
    for (size_t i = 0; i < VEC_DIMS; i++) {
        v[i] = (float)((double)(next(r) % 2001) / 1000.0 - 1.0);
    }
}

static int
vec_fill(struct rt_state *st, struct rng *r, float *v)
{
    char task[256];
    int rc = weft__state_begin(st) == WEFT_OK ? 0 : 1;

    for (size_t i = 0; rc == 0 && i < VEC_AGENT_SKILLS; i++) {
        struct weft__skill s;
        struct weft__skill_vector vec = {"bench-embed", v, VEC_DIMS};

        make_task(r, task, sizeof(task));
        random_vector(r, v);
        memset(&s, 0, sizeof(s));
        s.agent = "vec-agent";
        s.task = task;
        s.solution = "a solution";
        s.reward = 1.0;
        rc = weft__state_skill_save_vec(st, &s, &vec, NULL) == WEFT_OK ? 0 : 1;
    }
    return weft__state_commit(st) == WEFT_OK ? rc : 1;
}

static int
measure_vectors(const char *backend, struct rt_state *st, size_t queries)
{
    uint64_t *lat = calloc(queries, sizeof(*lat));
    float *v = malloc(VEC_DIMS * sizeof(float));
    struct rng r = {0x51ed270b2f1d3b4bull};
    char task[256];
    int rc = lat != NULL && v != NULL ? vec_fill(st, &r, v) : 1;

    for (size_t i = 0; rc == 0 && i < queries; i++) {
        struct weft__skill *out = NULL;
        struct vec_query vq;
        size_t n = 0;
        uint64_t t0 = 0;

        make_task(&r, task, sizeof(task));
        random_vector(&r, v);
        memset(&vq, 0, sizeof(vq));
        vq.q = v;
        t0 = weft__monotonic_ns();
        rc = weft__state_skills_search(st, "vec-agent", task, VEC_NEAREST, 0.0, &out, &n) ==
                         WEFT_OK &&
                     weft__state_skill_vectors_each(st, "vec-agent", "bench-embed", VEC_DIMS,
                                                    vec_row, &vq) == WEFT_OK
                 ? 0
                 : 1;
        lat[i] = weft__monotonic_ns() - t0;
        weft__skills_free(out, n);
    }
    if (rc == 0) {
        qsort(lat, queries, sizeof(*lat), cmp_u64);
        printf("{\"bench\":\"skills_vectors\",\"backend\":\"%s\",\"per_agent\":%d,"
               "\"dims\":%d,\"queries\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,"
               "\"max_us\":%.1f}\n",
               backend, VEC_AGENT_SKILLS, VEC_DIMS, queries, (double)lat[queries / 2] / 1e3,
               (double)lat[(queries * 99) / 100] / 1e3, (double)lat[queries - 1] / 1e3);
        fflush(stdout);
    } else {
        fprintf(stderr, "skills_bench: vector rerank failed\n");
    }
    free(v);
    free(lat);
    return rc;
}

static bool is_reuse;

static int
run(const char *backend, const char *location, size_t queries, size_t max)
{
    static const size_t sizes[] = {1000, 10000, 100000};
    struct rt_state *st = NULL;
    struct rng r = {0x2545f4914f6cdd1dull};
    char err[512];
    size_t stored = 0;
    int rc = 0;

    if (weft__state_open(location, &st, err, sizeof(err)) != WEFT_OK) {
        fprintf(stderr, "skills_bench: %s\n", err);
        return 1;
    }
    weft__state_skills_retention(st, 0, 0);
    if (is_reuse) {
        rc = measure(backend, st, max, 0.0, queries);
        weft__state_close(st);
        return rc;
    }
    for (size_t i = 0; rc == 0 && i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= max; i++) {
        double us = fill(st, &r, &stored, sizes[i]);

        if (us < 0) {
            fprintf(stderr, "skills_bench: save failed\n");
            rc = 1;
            break;
        }
        rc = measure(backend, st, stored, us, queries);
    }
    if (rc == 0) {
        rc = measure_vectors(backend, st, queries);
    }
    weft__state_close(st);
    return rc;
}

int
main(int argc, char **argv)
{
    bool is_pg = false;
    size_t queries = 1000;
    size_t max = 100000;
    char dir[] = "/tmp/weft-skills-bench-XXXXXX";
    const char *keep = NULL;
    const char *pg_url = NULL;
    char path[128];
    char cmd[160];
    int rc = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pg") == 0) {
            is_pg = true;
        } else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc) {
            queries = (size_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--pg-url") == 0 && i + 1 < argc) {
            pg_url = argv[++i];
        } else if (strcmp(argv[i], "--reuse") == 0) {
            is_reuse = true;
        } else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
            keep = argv[++i];
        } else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            max = (size_t)strtoul(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: skills_bench [--pg | --pg-url URL] [--queries N] [--max N] "
                            "[--keep DIR] [--reuse]\n");
            return 2;
        }
    }
    if (queries == 0 || mkdtemp(dir) == NULL) {
        return 2;
    }
    snprintf(path, sizeof(path), "%s/state.db", keep != NULL ? keep : dir);
    if (pg_url != NULL) {
        rc = run("postgresql", pg_url, queries, max);
        rmdir(dir);
        return rc;
    }
    rc = run("sqlite", path, queries, max);
    if (rc == 0 && is_pg) {
        struct weft_test_pg *pg = weft_test_pg_start(NULL, cmd, sizeof(cmd));
        char url[256];

        if (pg == NULL || weft_test_pg_createdb(pg, "weft_bench", url, sizeof(url)) != 0) {
            fprintf(stderr, "skills_bench: PostgreSQL did not start: %s\n", cmd);
            rc = 1;
        } else {
            rc = run("postgresql", url, queries, max);
        }
        weft_test_pg_stop(pg);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "skills_bench: could not remove %s\n", dir);
    }
    return rc;
}
