/* cli/trace_cmd.c - `weft trace list` and `weft trace show`: browse the local span store
 * through the read API of include/weft/store.h.
 */
#include "cli.h"
#include "report/docs.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/store.h>
#include <weft/weft.h>

#define LIST_DEFAULT  20
#define LIST_MAX      10000
#define ROOT_MAX_COLS 48
#define SVC_MAX_COLS  20

static int trace_list(int argc, char **argv);
static int trace_show(int argc, char **argv);

static const struct cli_command subcommands[] = {
    {"list", "trace list [--limit N] [--db PATH] [--json]", "list recent traces, newest first",
     trace_list, NULL},
    {"show",
     "trace show <trace-id|prefix|last|run-id> [--db PATH] [--state PATH] [--all] [--json] "
     "[--color=auto|always|never]",
     "print one trace as a tree with durations and errors", trace_show, NULL},
};

#define SUBCOMMAND_COUNT (sizeof(subcommands) / sizeof(subcommands[0]))

void
cli_trace_usage(FILE *out)
{
    fputs("usage: weft trace list [--limit N] [--db PATH] [--json]\n"
          "       weft trace show <trace-id|prefix|last> [--db PATH] [--all] [--json]\n"
          "                       [--color[=WHEN]]\n"
          "       weft trace show <run-id|run:prefix> [--state PATH] [same options]\n"
          "\n"
          "  list   recent traces in the local store, newest first\n"
          "  show   one trace as a tree: durations, status, errors, key attributes, events\n"
          "         and links; the trace is a full id, a unique prefix of one, 'last', or a\n"
          "         run (an id or unique prefix from `weft runs`, or run:REF): the run's\n"
          "         latest trace. A large trace is summarised: repeated sibling spans are\n"
          "         counted on one line, errors and notable events stay visible\n"
          "\n"
          "options:\n"
          "  -n, --limit N        traces to list (default 20, at most 10000)\n"
          "      --db PATH|URL    the span store: a SQLite file or a postgresql:// URL\n"
          "                       (default $WEFT_TRACE_STORE_URL, a PostgreSQL $WEFT_STATE_URL,\n"
          "                       $WEFT_HOME/weft.db, else ./.weft/weft.db)\n"
          "      --state PATH     the run state database, to find a run's trace\n"
          "                       (a file or a postgresql:// URL; default $WEFT_STATE_URL,\n"
          "                       else $WEFT_HOME/state.db)\n"
          "      --all            print every span, never summarise\n"
          "      --json           one JSON document (schema weft.traces/v1, weft.trace/v1:\n"
          "                       docs/cli-json.md)\n"
          "      --color[=WHEN]   auto (default: only on a terminal), always or never;\n"
          "                       a bare --color means always\n"
          "  -h, --help           this help\n"
          "\n"
          "exit status: 0 ok, 1 not found or unreadable store, 2 bad usage\n",
          out);
}

/* Open the store at @p db (NULL: the default) and explain failures on stderr. */
static int
open_store(const char *db, struct weft_store **out)
{
    char path[4096];
    weft_err err = WEFT_OK;

    if (db == NULL) {
        if (weft_store_default_path(path, sizeof(path)) != WEFT_OK) {
            fputs("weft: $WEFT_HOME is too long\n", stderr);
            return CLI_EXIT_FAIL;
        }
        db = path;
    }
    err = weft_store_open(db, out);
    if (err == WEFT_ENOTFOUND) {
        fprintf(stderr,
                "weft: no trace store at %s\n"
                "hint: record traces with OTEL_TRACES_EXPORTER=store, or pass --db PATH\n",
                db);
        return CLI_EXIT_FAIL;
    }
    if (err != WEFT_OK) {
        fprintf(stderr, "weft: cannot open the trace store %s: %s\n", db, weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static void
format_local_time(uint64_t ns, char *buf, size_t len)
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;

    if (localtime_r(&secs, &tm) == NULL || strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm) == 0) {
        snprintf(buf, len, "?");
    }
}

static void
print_summary(const struct weft_trace_summary *s, bool is_color)
{
    char started[32];
    char duration[32];
    size_t cols = 0;

    format_local_time(s->start_ns, started, sizeof(started));
    cli_format_duration(s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0, duration,
                        sizeof(duration));
    printf("%s  %-19s  %8s  %5zu  ", s->trace_id, started, duration, s->span_count);
    if (s->error_count > 0 && is_color) {
        printf("\x1b[31m%6zu\x1b[0m  ", s->error_count);
    } else {
        printf("%6zu  ", s->error_count);
    }
    cols = cli_put_clean(stdout, s->service_name != NULL ? s->service_name : "-", SVC_MAX_COLS);
    for (; cols < SVC_MAX_COLS; cols++) {
        fputc(' ', stdout);
    }
    fputs("  ", stdout);
    cli_put_clean(stdout, s->root_name, ROOT_MAX_COLS);
    if (!s->has_root) {
        fputs(" (root span not stored yet)", stdout);
    }
    fputc('\n', stdout);
}

static int
trace_list(int argc, char **argv)
{
    const char *db = NULL;
    const char *limit_text = NULL;
    bool is_help = false;
    bool is_json = false;
    const struct cli_option options[] = {
        {"limit", 'n', true, false, &limit_text, NULL},
        {"db", 0, true, false, &db, NULL},
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    struct weft_store *store = NULL;
    struct weft_trace_summary *list = NULL;
    size_t count = 0;
    size_t limit = LIST_DEFAULT;
    size_t npos = 0;
    weft_err err = WEFT_OK;
    int rc = cli_parse("trace list", argc, argv, options, sizeof(options) / sizeof(options[0]),
                       NULL, 0, &npos);

    if (rc != CLI_EXIT_OK) {
        cli_trace_usage(stderr);
        return rc;
    }
    if (is_help) {
        cli_trace_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (limit_text != NULL && !cli_parse_size(limit_text, 1, LIST_MAX, &limit)) {
        fprintf(stderr, "weft trace list: --limit wants a number from 1 to %d, not '%s'\n",
                LIST_MAX, limit_text);
        return CLI_EXIT_USAGE;
    }
    rc = open_store(db, &store);
    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    err = weft_store_list_traces(store, limit, &list, &count);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft: cannot list traces in %s: %s\n", weft_store_path(store),
                weft_store_errmsg(store)[0] != '\0' ? weft_store_errmsg(store)
                                                    : weft_strerror(err));
        weft_store_close(store);
        return CLI_EXIT_FAIL;
    }
    if (is_json) {
        rc = cli_json_print(weft__doc_traces(weft_store_path(store), list, count));
        weft_trace_summaries_free(list, count);
        weft_store_close(store);
        return rc;
    }
    if (count == 0) {
        printf("no traces in %s\n", weft_store_path(store));
    } else {
        bool is_color = false;

        cli_color(NULL, stdout, &is_color);
        printf("%-32s  %-19s  %8s  %5s  %6s  %-*s  %s\n", "TRACE ID", "STARTED", "DURATION",
               "SPANS", "ERRORS", SVC_MAX_COLS, "SERVICE", "ROOT");
        for (size_t i = 0; i < count; i++) {
            print_summary(&list[i], is_color);
        }
    }
    weft_trace_summaries_free(list, count);
    weft_store_close(store);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* A trace reference that names a run: its latest trace id. The run's earlier trace (a
 * resumed run) goes to @p earlier (or ""). @return CLI_EXIT_OK, CLI_EXIT_FAIL (no such run:
 * nothing printed when @p is_quiet; a run without a trace is always explained). */
static int
run_trace(const char *state,
          const char *ref,
          bool is_quiet,
          char trace_id[WEFT_TRACE_ID_HEX_LEN + 1],
          char *run_id,
          size_t run_id_len,
          char earlier[WEFT_TRACE_ID_HEX_LEN + 1])
{
    struct weft_run_details *d = NULL;
    weft_err err = weft_run_load(state, ref, &d);

    earlier[0] = '\0';
    if (err != WEFT_OK) {
        if (!is_quiet) {
            fprintf(stderr, "weft trace show: no run '%s' in the state database: %s\n", ref,
                    err == WEFT_ENOTFOUND ? "not found" : weft_strerror(err));
        }
        return CLI_EXIT_FAIL;
    }
    if (d->info.trace_id == NULL || strlen(d->info.trace_id) != WEFT_TRACE_ID_HEX_LEN) {
        fprintf(stderr, "weft trace show: run %s has no trace (it ran with --no-trace?)\n",
                d->info.run_id);
        weft_run_details_free(d);
        return CLI_EXIT_FAIL;
    }
    memcpy(trace_id, d->info.trace_id, WEFT_TRACE_ID_HEX_LEN + 1);
    snprintf(run_id, run_id_len, "%s", d->info.run_id);
    if (d->info.resumed_from_trace != NULL &&
        strlen(d->info.resumed_from_trace) == WEFT_TRACE_ID_HEX_LEN) {
        memcpy(earlier, d->info.resumed_from_trace, WEFT_TRACE_ID_HEX_LEN + 1);
    }
    weft_run_details_free(d);
    return CLI_EXIT_OK;
}

/* Whether @p ref is exactly the id of a stored run (run ids are hex too, so an exact run id
 * wins over a trace-id prefix). */
static bool
is_exact_run(const char *state, const char *ref)
{
    struct weft_run_details *d = NULL;
    bool is_exact = false;

    if (strcmp(ref, "last") == 0 || strlen(ref) == WEFT_TRACE_ID_HEX_LEN ||
        weft_run_load(state, ref, &d) != WEFT_OK) {
        return false;
    }
    is_exact = strcmp(d->info.run_id, ref) == 0;
    weft_run_details_free(d);
    return is_exact;
}

static int
print_trace_json(const struct weft_trace *trace, const char *run_id, const char *earlier)
{
    return cli_json_print(weft__doc_trace(trace, run_id, earlier, 0, SIZE_MAX));
}

/* Why the trace @p ref (or run @p run_id's trace @p trace_id) could not be loaded. */
static void
say_not_loaded(const struct weft_store *store,
               weft_err err,
               const char *ref,
               const char *run_id,
               const char *trace_id)
{
    const char *detail = weft_store_errmsg(store);

    if (err == WEFT_ENOTFOUND && run_id[0] != '\0') {
        fprintf(stderr, "weft: run %s's trace %s is not in %s (was the store exporter on?)\n",
                run_id, trace_id, weft_store_path(store));
    } else if (err == WEFT_ENOTFOUND) {
        fprintf(stderr, "weft: trace '%s' not found in %s", ref, weft_store_path(store));
        fprintf(stderr, "%s%s\n", detail[0] != '\0' ? ": " : "", detail);
    } else {
        fprintf(stderr, "weft: %s\n", detail[0] != '\0' ? detail : weft_strerror(err));
    }
}

/* The tree of @p trace, after a line naming the run when it was shown for one. */
static int
print_trace_text(const struct weft_trace *trace,
                 const char *run_id,
                 const char *earlier,
                 unsigned flags)
{
    weft_err err = WEFT_OK;

    if (run_id[0] != '\0') {
        printf("run %s: its latest trace", run_id);
        if (earlier[0] != '\0') {
            printf(" (the run was resumed: its earlier trace is %s, shown by "
                   "`weft trace show %s`)",
                   earlier, earlier);
        }
        printf("\n");
    }
    err = weft_trace_render(trace, stdout, flags);
    if (err != WEFT_OK || fflush(stdout) != 0) {
        fprintf(stderr, "weft: cannot print the trace: %s\n", weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* Open the store and load the trace @p ref names. run:REF always names a run; an exact run id
 * is a run; otherwise a trace id or prefix, and failing that a run id prefix. For a run,
 * @p run_id and @p earlier are filled as run_trace() does. On success the caller owns *store
 * and *trace. @return CLI_EXIT_OK, or the exit status after saying what went wrong. */
static int
load_shown(const char *db,
           const char *state,
           const char *ref,
           struct weft_store **store,
           struct weft_trace **trace,
           char trace_id[WEFT_TRACE_ID_HEX_LEN + 1],
           char *run_id,
           size_t run_id_len,
           char earlier[WEFT_TRACE_ID_HEX_LEN + 1])
{
    weft_err err = WEFT_OK;
    int rc = CLI_EXIT_OK;

    if (strncmp(ref, "run:", 4) == 0) {
        rc = run_trace(state, ref + 4, false, trace_id, run_id, run_id_len, earlier);
    } else if (is_exact_run(state, ref)) {
        rc = run_trace(state, ref, false, trace_id, run_id, run_id_len, earlier);
    }
    if (rc == CLI_EXIT_OK) {
        rc = open_store(db, store);
    }
    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    if (run_id[0] == '\0') {
        err = weft_store_resolve(*store, ref, trace_id);
        if (err == WEFT_ENOTFOUND &&
            run_trace(state, ref, true, trace_id, run_id, run_id_len, earlier) == CLI_EXIT_OK) {
            err = WEFT_OK;
        }
    }
    if (err == WEFT_OK) {
        err = weft_store_load_trace(*store, trace_id, trace);
    }
    if (err != WEFT_OK) {
        say_not_loaded(*store, err, ref, run_id, trace_id);
        weft_store_close(*store);
        *store = NULL;
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static int
trace_show(int argc, char **argv)
{
    const char *db = NULL;
    const char *state = NULL;
    const char *color = NULL;
    bool is_help = false;
    bool is_color = false;
    bool has_color = false;
    bool is_json = false;
    bool is_all = false;
    const struct cli_option options[] = {
        {"db", 0, true, false, &db, NULL},
        {"state", 0, true, false, &state, NULL},
        {"color", 0, false, true, &color, &has_color},
        {"json", 0, false, false, NULL, &is_json},
        {"all", 0, false, false, NULL, &is_all},
        {"help", 'h', false, false, NULL, &is_help},
    };
    char *ref[1] = {NULL};
    char trace_id[WEFT_TRACE_ID_HEX_LEN + 1];
    char earlier[WEFT_TRACE_ID_HEX_LEN + 1] = "";
    char run_id[96] = "";
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    size_t npos = 0;
    int rc = cli_parse("trace show", argc, argv, options, sizeof(options) / sizeof(options[0]), ref,
                       1, &npos);

    if (rc != CLI_EXIT_OK) {
        cli_trace_usage(stderr);
        return rc;
    }
    if (is_help) {
        cli_trace_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (npos == 0) {
        fputs("weft trace show: which trace? give an id, a prefix of one, 'last' or a run id\n",
              stderr);
        cli_trace_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (has_color && color == NULL) {
        color = "always"; /* a bare --color, as in GNU ls and grep */
    }
    if (!cli_color(color, stdout, &is_color)) {
        fprintf(stderr, "weft trace show: --color wants auto, always or never, not '%s'\n", color);
        return CLI_EXIT_USAGE;
    }
    rc = load_shown(db, state, ref[0], &store, &trace, trace_id, run_id, sizeof(run_id), earlier);
    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    if (is_json) {
        rc = print_trace_json(trace, run_id[0] != '\0' ? run_id : NULL, earlier);
        weft_trace_free(trace);
        weft_store_close(store);
        return rc;
    }
    rc =
        print_trace_text(trace, run_id, earlier,
                         WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS | WEFT_RENDER_LINKS |
                             (is_all ? WEFT_RENDER_ALL : 0u) | (is_color ? WEFT_RENDER_COLOR : 0u));
    weft_trace_free(trace);
    weft_store_close(store);
    return rc;
}

int
cli_trace(int argc, char **argv)
{
    if (argc < 2) {
        fputs("weft trace: which subcommand? list or show\n", stderr);
        cli_trace_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cli_trace_usage(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < SUBCOMMAND_COUNT; i++) {
        if (strcmp(subcommands[i].name, argv[1]) == 0) {
            return subcommands[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "weft trace: unknown subcommand '%s'\n", argv[1]);
    cli_trace_usage(stderr);
    return CLI_EXIT_USAGE;
}
