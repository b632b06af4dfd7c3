/* cli/dataset_cmd.c - `weft dataset create|add|list|show|rm`: datasets of inputs and
 * expectations kept in the state store (include/weft/dataset.h, docs/experiments.md), made from
 * stored runs (each with its failing step) or from JSONL / CSV files. */
#define _GNU_SOURCE /* timegm */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

#include "report/experiment.h"

#define RUN_IDS_MAX 1000

void
cli_dataset_usage(FILE *out)
{
    fputs("usage: weft dataset create NAME [SOURCES] [--evaluators FILE.json]\n"
          "                              [--description TEXT]\n"
          "       weft dataset add NAME SOURCES\n"
          "       weft dataset list [--json]\n"
          "       weft dataset show NAME[@VERSION] [--json]\n"
          "       weft dataset rm NAME ITEM_ID...\n"
          "       weft dataset rm NAME --all --force\n"
          "\n"
          "  create   a new dataset, empty or with the items of SOURCES (version 1)\n"
          "  add      the items of SOURCES added to a dataset: a new version\n"
          "  list     every dataset: latest version, items, description\n"
          "  show     a version's items (default the latest): id, input, expected, source run\n"
          "           and its failing step\n"
          "  rm       remove items (an id or a prefix of 4+ characters): a new version; with\n"
          "           --all --force, delete the dataset and every version (experiments stay)\n"
          "\n"
          "sources (all the run conditions hold for a run taken):\n"
          "      --from-runs         stored runs matching the options below\n"
          "      --workflow W        runs of workflow W\n"
          "      --status S          runs that ended S: failed, completed (or succeeded), stuck,\n"
          "                          budget_exhausted, timed_out, aborted, interrupted\n"
          "      --stuck             runs where the watchdog found a stuck loop\n"
          "      --reward-below X    runs whose reward is below X\n"
          "      --verdict REJECTED  runs with a step a reflection rejected\n"
          "      --from ISO          runs started at or after (2026-11-28 or\n"
          "                          2026-11-28T10:00:00Z, UTC)\n"
          "      --to ISO            runs started before\n"
          "      --run ID            this run (repeatable; with --from-runs, filtered too)\n"
          "      --file PATH         items of a .jsonl file (one object a line: \"input\",\n"
          "                          optional \"expected\", \"assertions\", \"metadata\") or a\n"
          "                          .csv file (a header with an \"input\" column)\n"
          "\n"
          "options:\n"
          "      --evaluators FILE   the dataset's evaluators, a JSON file\n"
          "      --description TEXT  what the dataset is for\n"
          "      --state PATH        state: a SQLite file or a postgresql:// URL (default\n"
          "                          $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --json              one JSON document\n"
          "\n"
          "An item made from a run keeps the run, its trace and its failing step: the first\n"
          "failed step, else the first step a reflection rejected, else (a stuck run) the\n"
          "step where it was stuck. A bad file line stops everything: FILE:LINE: field: ...\n"
          "\n"
          "exit status: 0 ok, 1 failed (no such dataset or item, a bad file, no database),\n"
          "2 bad usage\n",
          out);
}

/* The options every source-taking subcommand shares. */
struct ds_flags {
    const char *state;
    const char *workflow;
    const char *status;
    const char *reward_below;
    const char *verdict;
    const char *from;
    const char *to;
    const char *file;
    const char *evaluators;
    const char *description;
    bool from_runs;
    bool stuck;
    bool is_help;
    bool is_json;
    bool is_all;
    bool is_force;
    const char *run_ids[RUN_IDS_MAX];
    size_t run_id_count;
};

/* "2026-11-28", "2026-11-28T10:00:00" or with a trailing Z: UTC nanoseconds. */
static bool
parse_iso(const char *text, uint64_t *ns)
{
    struct tm tm;
    char tail = '\0';
    int n = 0;
    time_t secs = 0;

    memset(&tm, 0, sizeof(tm));
    n = sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &tail);
    if (!(n == 3 && strlen(text) == 10) && n != 6 && !(n == 7 && tail == 'Z')) {
        return false;
    }
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970) {
        return false;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    secs = timegm(&tm);
    if (secs < 0) {
        return false;
    }
    *ns = (uint64_t)secs * 1000000000u;
    return true;
}

/* Take every "--run ID" / "--run=ID" out of argv (cli_parse keeps one value an option). */
static int
take_runs(const char *cmd, int *argc, char **argv, struct ds_flags *f)
{
    int out = 1;

    for (int i = 1; i < *argc; i++) {
        const char *id = NULL;

        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc) {
                argv[out++] = argv[i++];
            }
            break;
        }
        if (strcmp(argv[i], "--run") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "weft %s: --run: expected a run id\n", cmd);
                return CLI_EXIT_USAGE;
            }
            id = argv[++i];
        } else if (strncmp(argv[i], "--run=", 6) == 0) {
            id = argv[i] + 6;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (f->run_id_count == RUN_IDS_MAX) {
            fprintf(stderr, "weft %s: --run: at most %d runs\n", cmd, RUN_IDS_MAX);
            return CLI_EXIT_USAGE;
        }
        f->run_ids[f->run_id_count++] = id;
    }
    *argc = out;
    return CLI_EXIT_OK;
}

static int
parse_flags(const char *cmd,
            int argc,
            char **argv,
            struct ds_flags *f,
            char **pos,
            size_t max,
            size_t *count)
{
    const struct cli_option options[] = {
        {"state", 0, true, false, &f->state, NULL},
        {"from-runs", 0, false, false, NULL, &f->from_runs},
        {"workflow", 0, true, false, &f->workflow, NULL},
        {"status", 0, true, false, &f->status, NULL},
        {"stuck", 0, false, false, NULL, &f->stuck},
        {"reward-below", 0, true, false, &f->reward_below, NULL},
        {"verdict", 0, true, false, &f->verdict, NULL},
        {"from", 0, true, false, &f->from, NULL},
        {"to", 0, true, false, &f->to, NULL},
        {"file", 0, true, false, &f->file, NULL},
        {"evaluators", 0, true, false, &f->evaluators, NULL},
        {"description", 0, true, false, &f->description, NULL},
        {"json", 0, false, false, NULL, &f->is_json},
        {"all", 0, false, false, NULL, &f->is_all},
        {"force", 0, false, false, NULL, &f->is_force},
        {"help", 'h', false, false, NULL, &f->is_help},
    };

    if (take_runs(cmd, &argc, argv, f) != CLI_EXIT_OK ||
        cli_parse(cmd, argc, argv, options, sizeof(options) / sizeof(options[0]), pos, max,
                  count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The source the flags describe into @p src. */
static int
source_of(const char *cmd, const struct ds_flags *f, struct weft_dataset_source *src)
{
    char *end = NULL;

    memset(src, 0, sizeof(*src));
    src->from_runs = f->from_runs || f->workflow != NULL || f->status != NULL || f->stuck ||
                     f->reward_below != NULL || f->verdict != NULL || f->from != NULL ||
                     f->to != NULL;
    src->workflow = f->workflow;
    src->status = f->status;
    src->stuck = f->stuck;
    src->verdict = f->verdict;
    src->run_ids = f->run_ids;
    src->run_id_count = f->run_id_count;
    src->file = f->file;
    if (f->reward_below != NULL) {
        src->has_reward_below = true;
        src->reward_below = strtod(f->reward_below, &end);
        if (end == f->reward_below || *end != '\0') {
            fprintf(stderr, "weft %s: --reward-below: expected a number, not '%s'\n", cmd,
                    f->reward_below);
            return CLI_EXIT_USAGE;
        }
    }
    if ((f->from != NULL && !parse_iso(f->from, &src->from_ns)) ||
        (f->to != NULL && !parse_iso(f->to, &src->to_ns))) {
        fprintf(stderr,
                "weft %s: --%s: expected a UTC date or time: 2026-11-28 or 2026-11-28T10:00:00Z\n",
                cmd, f->from != NULL && !parse_iso(f->from, &src->from_ns) ? "from" : "to");
        return CLI_EXIT_USAGE;
    }
    if (f->verdict != NULL && strcmp(f->verdict, "REJECTED") != 0) {
        fprintf(stderr, "weft %s: --verdict: expected REJECTED, not '%s'\n", cmd, f->verdict);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

char *
cli_read_small_file(const char *cmd, const char *flag, const char *path, size_t max)
{
    FILE *in = fopen(path, "rb");
    char *text = NULL;
    size_t n = 0;
    bool is_error = false;

    if (in == NULL) {
        fprintf(stderr, "weft %s: %s %s: cannot open: %s\n", cmd, flag, path, strerror(errno));
        return NULL;
    }
    text = malloc(max + 2);
    if (text != NULL) {
        n = fread(text, 1, max + 1, in);
        text[n] = '\0';
        is_error = ferror(in) != 0;
    }
    if (text == NULL || is_error) {
        fprintf(stderr, "weft %s: %s %s: cannot read it: %s\n", cmd, flag, path,
                text == NULL ? "out of memory" : strerror(errno));
    } else if (n > max) {
        fprintf(stderr, "weft %s: %s %s: expected at most %zu bytes\n", cmd, flag, path, max);
        is_error = true;
    }
    fclose(in);
    if (is_error) {
        free(text);
        return NULL;
    }
    return text;
}

static int
failed(const char *cmd, weft_err err, const char *msg)
{
    fprintf(stderr, "weft %s: %s\n", cmd, msg[0] != '\0' ? msg : weft_strerror(err));
    return CLI_EXIT_FAIL;
}

static int
dataset_create_or_add(int argc, char **argv, bool is_create)
{
    const char *cmd = is_create ? "dataset create" : "dataset add";
    static struct ds_flags f;
    struct weft_dataset_source src;
    char *name[1] = {NULL};
    char *evaluators = NULL;
    char msg[1024] = "";
    size_t count = 0;
    size_t added = 0;
    uint64_t version = 0;
    weft_err err = WEFT_OK;

    memset(&f, 0, sizeof(f));
    if (parse_flags(cmd, argc, argv, &f, name, 1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (f.is_help) {
        cli_dataset_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 1) {
        fprintf(stderr, "weft %s: which dataset? give its NAME\n", cmd);
        return CLI_EXIT_USAGE;
    }
    if (source_of(cmd, &f, &src) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (!is_create && !src.from_runs && src.run_id_count == 0 && src.file == NULL) {
        fprintf(stderr, "weft %s: add what? give --from-runs, --run ID or --file PATH\n", cmd);
        return CLI_EXIT_USAGE;
    }
    if (!is_create && (f.evaluators != NULL || f.description != NULL)) {
        fprintf(stderr, "weft %s: --evaluators and --description are for create\n", cmd);
        return CLI_EXIT_USAGE;
    }
    if (f.evaluators != NULL && (evaluators = cli_read_small_file(cmd, "--evaluators", f.evaluators,
                                                                  WEFT_DATASET_EVAL_MAX)) == NULL) {
        return CLI_EXIT_FAIL;
    }
    if (is_create) {
        err = weft_dataset_create(f.state, name[0], f.description, evaluators, &src, &added, msg,
                                  sizeof(msg));
        version = added > 0 ? 1 : 0;
    } else {
        err = weft_dataset_add(f.state, name[0], &src, &added, &version, msg, sizeof(msg));
    }
    free(evaluators);
    if (err != WEFT_OK) {
        return failed(cmd, err, msg);
    }
    printf("%s %s: %zu item%s added, version %llu\n", is_create ? "created" : "dataset", name[0],
           added, added == 1 ? "" : "s", (unsigned long long)version);
    return CLI_EXIT_OK;
}

static int
dataset_list(int argc, char **argv)
{
    static struct ds_flags f;
    struct weft_dataset *ds = NULL;
    size_t count = 0;
    weft_err err = WEFT_OK;

    memset(&f, 0, sizeof(f));
    if (parse_flags("dataset list", argc, argv, &f, NULL, 0, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (f.is_help) {
        cli_dataset_usage(stdout);
        return CLI_EXIT_OK;
    }
    err = weft_datasets_list(f.state, &ds, &count);
    if (err == WEFT_ENOTFOUND) {
        err = WEFT_OK; /* no database yet: no datasets */
    }
    if (err != WEFT_OK) {
        return failed("dataset list", err, "");
    }
    if (f.is_json) {
        json_t *doc = weft__doc_datasets(ds, count);

        weft_datasets_free(ds, count);
        return cli_json_print(doc);
    }
    if (count == 0) {
        printf("no datasets yet\n");
    } else {
        printf("%-24s %7s %6s  %s\n", "NAME", "VERSION", "ITEMS", "DESCRIPTION");
    }
    for (size_t i = 0; i < count; i++) {
        printf("%*s", (int)(25 - cli_put_clean(stdout, ds[i].name, 24)), "");
        printf("%7llu %6zu  ", (unsigned long long)ds[i].version, ds[i].items);
        cli_put_clean(stdout, ds[i].description != NULL ? ds[i].description : "", 60);
        putchar('\n');
    }
    weft_datasets_free(ds, count);
    return CLI_EXIT_OK;
}

/* NAME[@VERSION] split in place. */
static bool
split_ref(char *ref, uint64_t *version)
{
    char *at = strrchr(ref, '@');
    char *end = NULL;

    *version = 0;
    if (at == NULL) {
        return true;
    }
    *at = '\0';
    *version = strtoull(at + 1, &end, 10);
    return end != at + 1 && *end == '\0' && *version > 0;
}

static void
show_table(const struct weft_dataset *ds,
           uint64_t version,
           const struct weft_dataset_item *items,
           size_t count)
{
    printf("dataset %s, version %llu of %llu: %zu item%s\n", ds->name,
           (unsigned long long)(version != 0 ? version : ds->version),
           (unsigned long long)ds->version, count, count == 1 ? "" : "s");
    if (count > 0) {
        printf("%-8s %-36s %-24s %-8s %s\n", "ID", "INPUT", "EXPECTED", "RUN", "FAIL STEP");
    }
    for (size_t i = 0; i < count; i++) {
        printf("%-8.8s ", items[i].id);
        printf("%*s", (int)(37 - cli_put_clean(stdout, items[i].input, 36)), "");
        printf("%*s",
               (int)(25 - cli_put_clean(stdout, items[i].expected != NULL ? items[i].expected : "-",
                                        24)),
               "");
        printf("%-8.8s ", items[i].run_id != NULL ? items[i].run_id : "-");
        cli_put_clean(stdout, items[i].fail_step != NULL ? items[i].fail_step : "-", 40);
        putchar('\n');
    }
}

static int
dataset_show(int argc, char **argv)
{
    static struct ds_flags f;
    struct weft_dataset ds;
    struct weft_dataset_item *items = NULL;
    char *ref[1] = {NULL};
    size_t count = 0;
    uint64_t version = 0;
    weft_err err = WEFT_OK;

    memset(&f, 0, sizeof(f));
    if (parse_flags("dataset show", argc, argv, &f, ref, 1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (f.is_help) {
        cli_dataset_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 1 || !split_ref(ref[0], &version)) {
        fputs("weft dataset show: expected NAME or NAME@VERSION (a version from 1)\n", stderr);
        return CLI_EXIT_USAGE;
    }
    err = weft_dataset_show(f.state, ref[0], version, &ds, &items, &count);
    if (err == WEFT_ENOTFOUND) {
        fprintf(stderr, "weft dataset show: no dataset '%s'\n", ref[0]);
        return CLI_EXIT_FAIL;
    }
    if (err == WEFT_EINVAL) {
        fprintf(stderr, "weft dataset show: %s has no version %llu\n", ref[0],
                (unsigned long long)version);
        return CLI_EXIT_FAIL;
    }
    if (err != WEFT_OK) {
        return failed("dataset show", err, "");
    }
    if (f.is_json) {
        json_t *doc = weft__doc_dataset(&ds, version, items, count);

        weft_dataset_items_free(items, count);
        weft_dataset_cleanup(&ds);
        return cli_json_print(doc);
    }
    show_table(&ds, version, items, count);
    weft_dataset_items_free(items, count);
    weft_dataset_cleanup(&ds);
    return CLI_EXIT_OK;
}

static int
dataset_rm(int argc, char **argv)
{
    static struct ds_flags f;
    static char *pos[RUN_IDS_MAX + 1];
    char msg[1024] = "";
    size_t count = 0;
    size_t removed = 0;
    uint64_t version = 0;
    weft_err err = WEFT_OK;

    memset(&f, 0, sizeof(f));
    if (parse_flags("dataset rm", argc, argv, &f, pos, RUN_IDS_MAX + 1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (f.is_help) {
        cli_dataset_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count == 0) {
        fputs("weft dataset rm: which dataset? give NAME and ITEM_ID..., or NAME --all --force\n",
              stderr);
        return CLI_EXIT_USAGE;
    }
    if (f.is_all) {
        if (count != 1 || !f.is_force) {
            fputs("weft dataset rm: --all deletes the whole dataset: give NAME alone, and "
                  "--force to confirm\n",
                  stderr);
            return CLI_EXIT_USAGE;
        }
        err = weft_dataset_drop(f.state, pos[0]);
        if (err != WEFT_OK) {
            fprintf(stderr, "weft dataset rm: %s: %s\n", pos[0],
                    err == WEFT_ENOTFOUND ? "no such dataset" : weft_strerror(err));
            return CLI_EXIT_FAIL;
        }
        printf("deleted dataset %s\n", pos[0]);
        return CLI_EXIT_OK;
    }
    if (count < 2) {
        fputs("weft dataset rm: which items? give their ids (or --all --force)\n", stderr);
        return CLI_EXIT_USAGE;
    }
    err = weft_dataset_rm(f.state, pos[0], (const char *const *)pos + 1, count - 1, &removed,
                          &version, msg, sizeof(msg));
    if (err != WEFT_OK) {
        return failed("dataset rm", err, msg);
    }
    printf("dataset %s: %zu item%s removed, version %llu\n", pos[0], removed,
           removed == 1 ? "" : "s", (unsigned long long)version);
    return CLI_EXIT_OK;
}

int
cli_dataset(int argc, char **argv)
{
    if (argc < 2) {
        fputs("weft dataset: which subcommand? create, add, list, show or rm\n", stderr);
        cli_dataset_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cli_dataset_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "create") == 0 || strcmp(argv[1], "add") == 0) {
        return dataset_create_or_add(argc - 1, argv + 1, strcmp(argv[1], "create") == 0);
    }
    if (strcmp(argv[1], "list") == 0) {
        return dataset_list(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "show") == 0) {
        return dataset_show(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "rm") == 0) {
        return dataset_rm(argc - 1, argv + 1);
    }
    fprintf(stderr, "weft dataset: unknown subcommand '%s'\n", argv[1]);
    cli_dataset_usage(stderr);
    return CLI_EXIT_USAGE;
}
