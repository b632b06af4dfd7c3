/* cli/trace_cmd.c - `weft trace list` and `weft trace show`: browse the local span store
 * through the read API of include/weft/store.h.
 */
#include "cli.h"

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
    {"list", "trace list [--limit N] [--db PATH]", "list recent traces, newest first", trace_list,
     NULL},
    {"show", "trace show <trace-id|prefix|last> [--db PATH] [--color=auto|always|never]",
     "print one trace as a tree with durations and errors", trace_show, NULL},
};

#define SUBCOMMAND_COUNT (sizeof(subcommands) / sizeof(subcommands[0]))

void
cli_trace_usage(FILE *out)
{
    fputs("usage: weft trace list [--limit N] [--db PATH]\n"
          "       weft trace show <trace-id|prefix|last> [--db PATH] [--color[=WHEN]]\n"
          "\n"
          "  list   recent traces in the local store, newest first\n"
          "  show   one trace as a tree: durations, status, errors and key attributes;\n"
          "         the trace is a full id, a unique prefix of one, or 'last'\n"
          "\n"
          "options:\n"
          "  -n, --limit N        traces to list (default 20, at most 10000)\n"
          "      --db PATH        the store (default $WEFT_HOME/weft.db, else ./.weft/weft.db)\n"
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
    const struct cli_option options[] = {
        {"limit", 'n', true, false, &limit_text, NULL},
        {"db", 0, true, false, &db, NULL},
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

static int
trace_show(int argc, char **argv)
{
    const char *db = NULL;
    const char *color = NULL;
    bool is_help = false;
    bool is_color = false;
    bool has_color = false;
    const struct cli_option options[] = {
        {"db", 0, true, false, &db, NULL},
        {"color", 0, false, true, &color, &has_color},
        {"help", 'h', false, false, NULL, &is_help},
    };
    char *ref[1] = {NULL};
    char trace_id[WEFT_TRACE_ID_HEX_LEN + 1];
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    size_t npos = 0;
    weft_err err = WEFT_OK;
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
        fputs("weft trace show: which trace? give an id, a prefix of one, or 'last'\n", stderr);
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
    rc = open_store(db, &store);
    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    err = weft_store_resolve(store, ref[0], trace_id);
    if (err == WEFT_OK) {
        err = weft_store_load_trace(store, trace_id, &trace);
    }
    if (err != WEFT_OK) {
        const char *detail = weft_store_errmsg(store);

        if (err == WEFT_ENOTFOUND) {
            fprintf(stderr, "weft: trace '%s' not found in %s", ref[0], weft_store_path(store));
            fprintf(stderr, "%s%s\n", detail[0] != '\0' ? ": " : "", detail);
        } else {
            fprintf(stderr, "weft: %s\n", detail[0] != '\0' ? detail : weft_strerror(err));
        }
        weft_store_close(store);
        return CLI_EXIT_FAIL;
    }
    err = weft_trace_render(trace, stdout,
                            WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS |
                                (is_color ? WEFT_RENDER_COLOR : 0u));
    weft_trace_free(trace);
    weft_store_close(store);
    if (err != WEFT_OK || fflush(stdout) != 0) {
        fprintf(stderr, "weft: cannot print the trace: %s\n", weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
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
