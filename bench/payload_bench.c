/* bench/payload_bench.c - measures content-addressed payloads (store/payload.h,
 * docs/payloads.md): what storing a chat span's conversation costs the span store's writer,
 * and the bytes it saves.
 *
 * The workload is a conversation of --turns turns (default 50): at turn t the model is sent the
 * system prompt and every message so far (about 700 bytes a message, seeded pseudo-prose), as
 * gen_ai.input.messages and again as langfuse.observation.input, the way weft's chat spans
 * carry it. Prints one JSON object per line (JSON Lines):
 *   {"bench":"payload_bench","case":"cut","mb_per_sec":...}
 *       weft__payload_put() of every turn's text into an in-memory table that answers has():
 *       chunking, SHA-256 and DEFLATE of the new chunks (the writer's CPU per text).
 *   {"bench":"payload_bench","case":"store","payloads":"on"|"off","spans_per_sec":...,
 *    "text_mb_per_sec":...,"file_bytes":...}
 *       the SQLite span store's exporter writing --runs copies of the conversation (one chat
 *       span per turn, one batch per run) into a fresh store, then the file's bytes after a
 *       WAL checkpoint: payloads on against inline text (WEFT_PAYLOADS=off), in the same run.
 * Rates are the median of --repeat repetitions (default 5).
 * Usage: payload_bench [--turns N] [--runs N] [--repeat N] [--dir DIR]  (the store's file goes
 *   to DIR, default $TMPDIR or /tmp, and is removed)
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "bench_util.h"
#include "store/payload.h"
#include "store/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <weft/weft.h>

#define MAX_REPEAT 31

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The conversation's text at each turn: texts[t] (owned). */
static char **
conversation(int turns)
{
    static const char *const words[] = {"span",  "trace",  "agent",   "tool",   "plan",
                                        "model", "token",  "loop",    "reward", "store",
                                        "retry", "export", "history", "answer", "context"};
    char **texts = calloc((size_t)turns, sizeof(*texts));
    struct weft__buf b;
    uint32_t x = 28;

    weft__buf_init(&b, 0);
    weft__buf_append_str(&b, "[{\"role\":\"system\",\"content\":\"You write one section of a"
                             " report at a time, carefully, citing the earlier sections.\"}");
    for (int t = 0; t < turns && texts != NULL; t++) {
        weft__buf_printf(&b, ",{\"role\":\"%s\",\"content\":\"", t % 2 == 0 ? "user" : "assistant");
        for (int w = 0; w < 100; w++) {
            x = x * 1103515245u + 12345u;
            weft__buf_printf(&b, "%s%s", w > 0 ? " " : "", words[(x >> 16) % 15]);
        }
        weft__buf_append_str(&b, "\"}]");
        texts[t] = strdup(b.data);
        weft__buf_truncate(&b, b.len - 1);
    }
    weft__buf_cleanup(&b);
    return texts;
}

/* --- cut: an in-memory table (a sorted-free linear probe on the first hex digits) --------- */

#define TABLE_SLOTS (1u << 16)

struct table {
    char (*hash)[WEFT__PAYLOAD_HEX_LEN + 1];
    size_t bytes;
};

static size_t
slot(const char *hash)
{
    return (size_t)strtoul(
               (char[9]){hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], hash[6], hash[7], 0},
               NULL, 16) &
           (TABLE_SLOTS - 1);
}

static bool
table_has(void *user, const char *hash)
{
    struct table *t = user;

    for (size_t i = slot(hash); t->hash[i][0] != '\0'; i = (i + 1) & (TABLE_SLOTS - 1)) {
        if (strcmp(t->hash[i], hash) == 0) {
            return true;
        }
    }
    return false;
}

static weft_err
table_put(void *user, const struct weft__payload_record *rec)
{
    struct table *t = user;
    size_t i = slot(rec->hash);

    while (t->hash[i][0] != '\0') {
        i = (i + 1) & (TABLE_SLOTS - 1);
    }
    memcpy(t->hash[i], rec->hash, sizeof(t->hash[i]));
    t->bytes += rec->len;
    return WEFT_OK;
}

static void
bench_cut(char **texts, int turns, int repeat)
{
    double rates[MAX_REPEAT];
    size_t total = 0;
    size_t stored = 0;

    for (int t = 0; t < turns; t++) {
        total += strlen(texts[t]);
    }
    for (int r = 0; r < repeat; r++) {
        struct table tab = {calloc(TABLE_SLOTS, sizeof(*tab.hash)), 0};
        struct weft__payload_sink sink = {table_has, table_put, &tab};
        char ref[WEFT__PAYLOAD_HEX_LEN + 1];
        double t0 = now_s();

        for (int t = 0; t < turns; t++) {
            if (weft__payload_put(texts[t], strlen(texts[t]), &sink, ref) != WEFT_OK) {
                fprintf(stderr, "payload_bench: put failed\n");
                exit(1);
            }
        }
        rates[r] = (double)total / 1e6 / (now_s() - t0);
        stored = tab.bytes;
        free(tab.hash);
    }
    printf("{\"bench\":\"payload_bench\",\"case\":\"cut\",\"turns\":%d,\"text_bytes\":%zu,"
           "\"stored_bytes\":%zu,\"mb_per_sec\":%.1f}\n",
           turns, total, stored, median(rates, repeat));
}

/* --- store: the SQLite exporter ------------------------------------------------------------ */

static long long
file_bytes(const char *path)
{
    sqlite3 *db = NULL;
    struct stat st;

    if (sqlite3_open(path, &db) == SQLITE_OK) {
        sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    }
    sqlite3_close(db);
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void
bench_store(char **texts, int turns, int runs, int repeat, const char *dir, bool is_on)
{
    struct weft_span_data *spans = calloc((size_t)turns, sizeof(*spans));
    struct weft_attr(*attrs)[3] = calloc((size_t)turns, sizeof(*attrs));
    const struct weft_span_data **views = calloc((size_t)turns, sizeof(*views));
    double rates[MAX_REPEAT];
    double text_rates[MAX_REPEAT];
    long long bytes = 0;
    size_t text = 0;
    char path[4096];

    setenv("WEFT_PAYLOADS", is_on ? "on" : "off", 1);
    for (int t = 0; t < turns; t++) {
        text += 2 * strlen(texts[t]);
    }
    for (int r = 0; r < repeat; r++) {
        struct weft_exporter *ex = NULL;
        double t0 = 0.0;

        snprintf(path, sizeof(path), "%s/payload_bench-%d.db", dir, (int)getpid());
        unlink(path);
        if (weft_store_exporter_new(path, &ex) != WEFT_OK) {
            fprintf(stderr, "payload_bench: cannot open %s\n", path);
            exit(1);
        }
        t0 = now_s();
        for (int run = 0; run < runs; run++) {
            for (int t = 0; t < turns; t++) {
                spans[t].trace_id[0] = (uint8_t)(run + 1);
                spans[t].trace_id[15] = 1;
                spans[t].span_id[7] = (uint8_t)(t + 1);
                spans[t].name = "chat gpt-4o-mini";
                spans[t].kind = WEFT_SPAN_KIND_CLIENT;
                spans[t].start_time_ns = 1700000000000000000ull + (uint64_t)t * 1000000;
                spans[t].end_time_ns = spans[t].start_time_ns + 500000;
                attrs[t][0] = weft_attr_str("gen_ai.input.messages", texts[t]);
                attrs[t][1] = weft_attr_str("langfuse.observation.input", texts[t]);
                attrs[t][2] = weft_attr_str("gen_ai.request.model", "gpt-4o-mini");
                spans[t].attrs = attrs[t];
                spans[t].attr_count = 3;
                views[t] = &spans[t];
            }
            if (weft__store_export_texts(ex, views, (size_t)turns, NULL) != WEFT_OK) {
                fprintf(stderr, "payload_bench: export failed\n");
                exit(1);
            }
        }
        rates[r] = (double)runs * turns / (now_s() - t0);
        text_rates[r] = (double)runs * (double)text / 1e6 / (now_s() - t0);
        weft_exporter_free(ex);
        bytes = file_bytes(path);
        unlink(path);
    }
    printf("{\"bench\":\"payload_bench\",\"case\":\"store\",\"payloads\":\"%s\",\"turns\":%d,"
           "\"runs\":%d,\"spans_per_sec\":%.0f,\"text_mb_per_sec\":%.1f,\"file_bytes\":%lld}\n",
           is_on ? "on" : "off", turns, runs, median(rates, repeat), median(text_rates, repeat),
           bytes);
    unsetenv("WEFT_PAYLOADS");
    free(spans);
    free(attrs);
    free(views);
}

int
main(int argc, char **argv)
{
    int turns = 50;
    int runs = 5;
    int repeat = 5;
    const char *dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    char **texts = NULL;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--turns") == 0) {
            turns = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--runs") == 0) {
            runs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--repeat") == 0) {
            repeat = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--dir") == 0) {
            dir = argv[i + 1];
        }
    }
    if (turns < 2 || turns > 250 || runs < 1 || runs > 250 || repeat < 1 || repeat > MAX_REPEAT ||
        (argc % 2) == 0) {
        fprintf(stderr, "usage: payload_bench [--turns 2..250] [--runs 1..250] [--repeat 1..31]"
                        " [--dir DIR]\n");
        return 2;
    }
    texts = conversation(turns);
    bench_cut(texts, turns, repeat);
    bench_store(texts, turns, runs, repeat, dir, false);
    bench_store(texts, turns, runs, repeat, dir, true);
    for (int t = 0; t < turns; t++) {
        free(texts[t]);
    }
    free(texts);
    return 0;
}
