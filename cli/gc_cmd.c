/* cli/gc_cmd.c - `weft gc --older-than AGE`: retention (docs/retention.md). Deletes what weft
 * keeps about runs that ended more than AGE ago, store by store, and prints what each store
 * freed (or, with --dry-run, would free).
 *
 * Shape: one function per store (gc_runs(), ...), each filling its own section of one report,
 * printed per store as text or as the weft.gc/v1 JSON document (docs/cli-json.md). A store
 * that fails does not stop the others; the exit status is then 1.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

#define NS_PER_S        1000000000ull
#define GC_MAX_AGE_DAYS 36500ull /* about a century: a longer age is a typo */

void
cli_gc_usage(FILE *out)
{
    fputs("usage: weft gc --older-than AGE [--dry-run] [--state PATH] [--store PATH] [--json]\n"
          "\n"
          "Delete what weft keeps about runs that ended more than AGE ago: their rows in the\n"
          "state database (steps, LLM exchanges, tool results, corrections, metric snapshots,\n"
          "and a session's messages with its last run) and their workspace folders under\n"
          "$WEFT_HOME/workspaces; and the traces that ended before then, whole, from the span\n"
          "store (a SQLite file gives the space back; PostgreSQL drops whole partitions).\n"
          "Kept whatever their age: runs still running, pinned runs\n"
          "(weft runs pin), skills and lessons (weft skills forget prunes those), composed\n"
          "teams. A --workspace given elsewhere is never touched; symbolic links are removed\n"
          "as links, never followed. Runs whose process died are first marked interrupted,\n"
          "as weft runs does. docs/retention.md has the rules.\n"
          "\n"
          "options:\n"
          "      --older-than AGE  a whole number and a unit: 14d (days), 12h, 30m, 90s\n"
          "      --dry-run         print what would be deleted; delete nothing\n"
          "      --state PATH      state: a SQLite file or a postgresql:// URL (default\n"
          "                        $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --store PATH      the span store: a SQLite file or a postgresql:// URL (default\n"
          "                        $WEFT_TRACE_STORE_URL, a PostgreSQL $WEFT_STATE_URL, else\n"
          "                        $WEFT_HOME/weft.db)\n"
          "      --json            one JSON document (schema weft.gc/v1: docs/cli-json.md)\n"
          "\n"
          "exit status: 0 ok (also when there was nothing to delete), 1 a store failed,\n"
          "             2 bad usage\n",
          out);
}

/* AGE as cli_parse_duration() reads it ("14d", "12h", "30m", "90s"), at most GC_MAX_AGE_DAYS
 * days. @return false (with *why set) otherwise. */
static bool
parse_age(const char *text, uint64_t *ns, const char **why)
{
    size_t zeros = text != NULL ? strspn(text, "0") : 0;

    if (!cli_parse_duration(text, ns)) {
        *why = zeros > 0 && text[zeros] != '\0' && strchr("dhms", text[zeros]) != NULL &&
                       text[zeros + 1] == '\0'
                   ? "must be more than 0"
                   : "expected a whole number and a unit: 14d, 12h, 30m or 90s";
        return false;
    }
    if (*ns > GC_MAX_AGE_DAYS * 86400ull * NS_PER_S) {
        *why = "too long (at most 36500d)";
        return false;
    }
    return true;
}

/* "1.5 MiB", "812 B" ... */
static void
format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;

    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    } else {
        snprintf(buf, len, "%.1f %s", v, units[u]);
    }
}

/* An instant as RFC 3339 in UTC, seconds precision. */
static void
format_utc(uint64_t ns, char *buf, size_t len)
{
    time_t secs = (time_t)(ns / NS_PER_S);
    struct tm tm;

    if (gmtime_r(&secs, &tm) == NULL) {
        snprintf(buf, len, "?");
        return;
    }
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

struct gc_request {
    const char *state;
    const char *store; /* the span store; NULL: weft_store_default_path() */
    const char *age;   /* as given */
    uint64_t cutoff_ns;
    bool is_dry_run;
    bool is_json;
};

/* ------------------------------------------------------------------------------------------ */
/* Store: runs (the state database and the runs' workspace folders)                            */

/* Collect the runs; its section into @p stores (JSON) or onto stdout. @return CLI_EXIT_OK or
 * CLI_EXIT_FAIL (said on stderr). */
static int
gc_runs(const struct gc_request *rq, json_t *stores)
{
    struct weft_runs_gc_report r;
    weft_err err = WEFT_OK;
    char bytes[32];

    cli_recover("gc", rq->state);
    err = weft_runs_gc(rq->state, rq->cutoff_ns, rq->is_dry_run, &r);
    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        fprintf(stderr, "weft gc: runs: %s (the runs counted below were %s)\n", weft_strerror(err),
                rq->is_dry_run ? "counted" : "deleted");
    }
    if (rq->is_json) {
        json_t *o = json_pack(
            "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "ok",
            err == WEFT_OK || err == WEFT_ENOTFOUND, "runs_deleted", (json_int_t)r.runs_deleted,
            "rows_deleted", (json_int_t)r.rows_deleted, "workspaces_removed",
            (json_int_t)r.workspaces_removed, "workspace_bytes", (json_int_t)r.workspace_bytes,
            "workspace_errors", (json_int_t)r.workspace_errors, "runs_kept_pinned",
            (json_int_t)r.runs_kept_pinned, "runs_kept_running", (json_int_t)r.runs_kept_running);

        json_object_set_new(stores, "runs", o != NULL ? o : json_null());
    } else if (err == WEFT_ENOTFOUND) {
        printf("runs: no state database yet: nothing to delete\n");
    } else {
        format_bytes(r.workspace_bytes, bytes, sizeof(bytes));
        printf("runs: %s %zu run%s (%llu rows) and %zu workspace folder%s (%s)",
               rq->is_dry_run ? "would delete" : "deleted", r.runs_deleted,
               r.runs_deleted == 1 ? "" : "s", (unsigned long long)r.rows_deleted,
               r.workspaces_removed, r.workspaces_removed == 1 ? "" : "s", bytes);
        printf("; kept %zu pinned, %zu running", r.runs_kept_pinned, r.runs_kept_running);
        if (r.workspace_errors > 0) {
            printf("; %zu workspace folder%s could not be %s whole (see the warnings)",
                   r.workspace_errors, r.workspace_errors == 1 ? "" : "s",
                   rq->is_dry_run ? "read" : "removed");
        }
        printf("\n");
    }
    return err == WEFT_OK || err == WEFT_ENOTFOUND ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ------------------------------------------------------------------------------------------ */
/* Store: spans (the span store: a SQLite file or PostgreSQL, docs/fleet.md)                  */

/* Collect the traces that ended before the cutoff (whole traces; PostgreSQL drops whole
 * partitions); its section into @p stores (JSON) or onto stdout. @return CLI_EXIT_OK or
 * CLI_EXIT_FAIL (said on stderr). */
static int
gc_spans(const struct gc_request *rq, json_t *stores)
{
    struct weft_store_gc_report r;
    char error[512] = "";
    char freed[32];
    weft_err err =
        weft_store_gc(rq->store, rq->cutoff_ns, 0, rq->is_dry_run, &r, error, sizeof(error));

    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        fprintf(stderr, "weft gc: spans: %s\n", error[0] != '\0' ? error : weft_strerror(err));
    }
    if (rq->is_json) {
        json_t *o = json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "ok",
                              err == WEFT_OK || err == WEFT_ENOTFOUND, "traces_deleted",
                              (json_int_t)r.traces, "spans_deleted", (json_int_t)r.spans,
                              "partitions_dropped", (json_int_t)r.partitions, "payloads_deleted",
                              (json_int_t)r.payloads, "bytes_before", (json_int_t)r.bytes_before,
                              "bytes_after", (json_int_t)r.bytes_after);
        json_object_set_new(stores, "spans", o != NULL ? o : json_null());
    } else if (err == WEFT_ENOTFOUND) {
        printf("spans: no span store yet: nothing to delete\n");
    } else if (err == WEFT_OK) {
        printf("spans: %s %zu trace%s (%zu spans", rq->is_dry_run ? "would delete" : "deleted",
               r.traces, r.traces == 1 ? "" : "s", r.spans);
        if (r.partitions > 0) {
            printf(", %zu partition%s dropped", r.partitions, r.partitions == 1 ? "" : "s");
        }
        if (r.payloads > 0) {
            printf(", %zu payload record%s no span refers to", r.payloads,
                   r.payloads == 1 ? "" : "s");
        }
        if (!rq->is_dry_run && r.bytes_before >= 0 && r.bytes_after >= 0 &&
            r.bytes_before >= r.bytes_after) {
            format_bytes((uint64_t)(r.bytes_before - r.bytes_after), freed, sizeof(freed));
            printf(", %s freed", freed);
        }
        printf(")\n");
    }
    return err == WEFT_OK || err == WEFT_ENOTFOUND ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ------------------------------------------------------------------------------------------ */

int
cli_gc(int argc, char **argv)
{
    struct gc_request rq;
    const char *why = NULL;
    bool is_help = false;
    size_t count = 0;
    uint64_t age_ns = 0;
    uint64_t now_ns = 0;
    struct timespec ts;
    json_t *doc = NULL;
    json_t *stores = NULL;
    char cutoff[40];
    int rc = CLI_EXIT_OK;
    const struct cli_option options[] = {
        {"older-than", 0, true, false, &rq.age, NULL},
        {"dry-run", 0, false, false, NULL, &rq.is_dry_run},
        {"state", 0, true, false, &rq.state, NULL},
        {"store", 0, true, false, &rq.store, NULL},
        {"json", 0, false, false, NULL, &rq.is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };

    memset(&rq, 0, sizeof(rq));
    if (cli_parse("gc", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL, 0,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_gc_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (rq.age == NULL) {
        fprintf(stderr, "weft gc: --older-than AGE is required (for example --older-than 14d)\n");
        return CLI_EXIT_USAGE;
    }
    if (!parse_age(rq.age, &age_ns, &why)) {
        fprintf(stderr, "weft gc: --older-than '%s': %s\n", rq.age, why);
        return CLI_EXIT_USAGE;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    now_ns = (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
    rq.cutoff_ns = now_ns > age_ns ? now_ns - age_ns : 0;
    format_utc(rq.cutoff_ns, cutoff, sizeof(cutoff));
    if (rq.is_json) {
        doc = json_object();
        stores = json_object();
        if (doc == NULL || stores == NULL) {
            json_decref(doc);
            json_decref(stores);
            return cli_json_print(NULL);
        }
        json_object_set_new(doc, "schema", json_string("weft.gc/v1"));
        json_object_set_new(doc, "dry_run", json_boolean(rq.is_dry_run));
        json_object_set_new(doc, "older_than", json_string(rq.age));
        json_object_set_new(doc, "cutoff_ns", json_integer((json_int_t)rq.cutoff_ns));
        json_object_set_new(doc, "cutoff", json_string(cutoff));
    } else {
        printf("%s what ended before %s (older than %s)\n",
               rq.is_dry_run ? "dry run: nothing is deleted; counting" : "deleting", cutoff,
               rq.age);
    }
    if (gc_runs(&rq, stores) != CLI_EXIT_OK) {
        rc = CLI_EXIT_FAIL;
    }
    if (gc_spans(&rq, stores) != CLI_EXIT_OK) {
        rc = CLI_EXIT_FAIL;
    }
    if (rq.is_json) {
        json_object_set_new(doc, "stores", stores);
        if (cli_json_print(doc) != CLI_EXIT_OK) {
            rc = CLI_EXIT_FAIL;
        }
    }
    return rc;
}
