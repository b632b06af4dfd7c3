/* cli/eval_cmd.c - `weft eval WORKFLOW --dataset NAME[@VERSION]`: an experiment
 * (include/weft/experiment.h, docs/experiments.md) with a progress bar on stderr, then its table
 * or --json; `weft eval list|show|compare` are cli/eval_show.c's. */
#define _GNU_SOURCE /* realpath */
#include "cli.h"
#include "runtime/dist/amqp_executor.h"
#include "runtime/workflow/workflow.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#include <weft/dataset.h>
#include <weft/experiment.h>

void
cli_eval_usage(FILE *out)
{
    fputs("usage: weft eval WORKFLOW --dataset NAME[@VERSION] [--name N] [--concurrency K]\n"
          "                 [--from-failure] [--fail-under RATE] [--evaluators FILE.json]\n"
          "                 [--executor in_process|amqp] [--broker URL] [--queue-prefix P]\n"
          "                 [--max-in-flight N] [--tags A,B] [--state PATH] [--json] [-q]\n"
          "       weft eval list [--dataset NAME] [--json]\n"
          "       weft eval show EXPERIMENT [--json]\n"
          "       weft eval compare A B [--json]\n"
          "\n"
          "Run WORKFLOW on every item of a dataset version (an experiment), score each run with\n"
          "the evaluators (--evaluators, else the dataset's; with none an item passes when its\n"
          "run completed) and print the table: items, passed, failed, errored, pass rate, mean\n"
          "reward, cost, tokens, duration, loops, stuck loops, corrections. Every item's run is\n"
          "an ordinary stored run tagged \"experiment\", with weft.experiment.* and\n"
          "weft.dataset.* on its root span. EXPERIMENT is an id, a prefix of one, or a name\n"
          "(its latest experiment).\n"
          "\n"
          "options:\n"
          "      --dataset NAME[@V]   the dataset and version (default its latest)\n"
          "      --name N             the experiment's name (default WORKFLOW@DATASET)\n"
          "      --concurrency K      item runs at once, 1 to 64 (default 4)\n"
          "      --from-failure       items made from a failed run fork it from its failing\n"
          "                           step (the steps before reuse their stored results);\n"
          "                           the table shows the LLM calls, tokens and cost saved\n"
          "      --fail-under RATE    exit 1 when the pass rate is below RATE (0 to 1)\n"
          "      --evaluators FILE    evaluators (a JSON array) over the dataset's\n"
          "      --executor KIND      in_process (default) or amqp: every item run's steps go to\n"
          "                           `weft worker` processes over RabbitMQ (as weft run);\n"
          "                           --concurrency item runs at once, each with its own\n"
          "                           executor and results queue\n"
          "      --broker URL         amqp://user:pass@host:5672/vhost ($WEFT_BROKER_URL)\n"
          "      --queue-prefix P     prefix of the exchange and queue names\n"
          "      --max-in-flight N    amqp: tasks of one run dispatched at once (default 64)\n"
          "      --tags A,B           more tags of every item run\n"
          "      --state PATH|URL     state: a SQLite file or a postgresql:// URL (default\n"
          "                           $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --json               one JSON document (schema weft.experiment/v1)\n"
          "  -q, --quiet              no progress bar\n"
          "\n"
          "exit status: 0 every item was judged and the pass rate reached --fail-under (when\n"
          "             given), 1 the pass rate is below --fail-under (or list/show/compare\n"
          "             failed), 2 bad usage or configuration, 6 items errored (a run that\n"
          "             could not start, an evaluator that could not decide) or the experiment\n"
          "             did not finish (interrupted, the state store failed)\n",
          out);
}

static volatile sig_atomic_t abort_requested = 0;

static void
on_sigint(int sig)
{
    (void)sig;
    abort_requested = 1;
}

/* The progress bar: one line rewritten on a terminal, a plain line per 10% otherwise. */
struct bar {
    bool is_tty;
    bool is_quiet;
    size_t last_tenth;
};

static void
on_progress(size_t done, size_t total, size_t passed, void *user_data)
{
    struct bar *b = user_data;
    size_t tenth = total > 0 ? done * 10 / total : 0;

    if (b->is_quiet) {
        return;
    }
    if (b->is_tty) {
        char cells[31];
        size_t fill = total > 0 ? done * 30 / total : 0;

        for (size_t i = 0; i < 30; i++) {
            cells[i] = i < fill ? '#' : '.';
        }
        cells[30] = '\0';
        fprintf(stderr, "\r\033[K[%s] %zu/%zu items  %zu passed", cells, done, total, passed);
        if (done == total) {
            fputc('\n', stderr);
        }
        fflush(stderr);
        return;
    }
    if (tenth > b->last_tenth || done == total) {
        b->last_tenth = tenth;
        fprintf(stderr, "weft eval: %zu/%zu items (%zu%%), %zu passed\n", done, total,
                total > 0 ? done * 100 / total : 100, passed);
    }
}

/* What the amqp run function needs: the executor options of `weft run --executor amqp`. */
struct amqp_opts {
    const char *broker;
    const char *prefix;
    unsigned max_in_flight;
    struct weft_provider *provider;
    struct weft_meter *meter;
};

/* One item's run with its steps sent to the workers: an executor of its own per run, whose
 * results come back on that run's own queue, so --concurrency runs go on at once. */
static weft_err
run_amqp(const struct weft_workflow *wf,
         const struct weft_run_options *ro,
         struct weft_run_result **out,
         char *error,
         size_t error_len,
         void *user_data)
{
    const struct amqp_opts *a = user_data;
    struct weft__amqp_executor_config cfg;
    struct weft__executor *ex = NULL;
    weft_err err = WEFT_OK;

    memset(&cfg, 0, sizeof(cfg));
    cfg.url = a->broker;
    cfg.prefix = a->prefix;
    cfg.max_in_flight = a->max_in_flight;
    cfg.provider = a->provider;
    cfg.meter = a->meter;
    err = weft__amqp_executor_new(&cfg, wf, 30000, &ex, error, error_len);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__run_with_executor(wf, ro, ex, out, error, error_len);
    ex->ops->destroy(ex);
    return err;
}

struct eval_flags {
    const char *dataset;
    const char *name;
    const char *concurrency;
    const char *fail_under;
    const char *evaluators;
    const char *executor;
    const char *broker;
    const char *queue_prefix;
    const char *max_in_flight;
    const char *tags;
    const char *state;
    bool is_from_failure;
    bool is_json;
    bool is_quiet;
    bool is_help;
};

/* NAME[@VERSION] into @p name (room for WEFT_DATASET_NAME_MAX + 1) and *version (0: latest). */
static bool
split_dataset(const char *text, char *name, uint64_t *version)
{
    const char *at = strrchr(text, '@');
    size_t len = at != NULL ? (size_t)(at - text) : strlen(text);
    size_t v = 0;

    if (len == 0 || len > WEFT_DATASET_NAME_MAX) {
        return false;
    }
    memcpy(name, text, len);
    name[len] = '\0';
    if (at != NULL && !cli_parse_size(at + 1, 1, SIZE_MAX, &v)) {
        return false;
    }
    *version = v;
    return true;
}

/* Split --tags A,B in place into @p tags (at most 8). @return the count, -1 when too many. */
static int
split_tags(char *text, const char **tags)
{
    int n = 0;

    for (char *save = NULL, *t = strtok_r(text, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (n == 8) {
            return -1;
        }
        tags[n++] = t;
    }
    return n;
}

/* Check the flags into @p o; says what is wrong. @return CLI_EXIT_OK or CLI_EXIT_USAGE. */
static int
eval_options(const struct eval_flags *fl,
             char *dataset,
             struct weft_experiment_options *o,
             double *fail_under,
             struct amqp_opts *amqp)
{
    size_t k = 4;
    size_t in_flight = 64;
    char *end = NULL;
    const char *kind = fl->executor != NULL ? fl->executor : getenv("WEFT_EXECUTOR");

    if (fl->dataset == NULL || !split_dataset(fl->dataset, dataset, &o->dataset_version)) {
        fputs("weft eval: --dataset: expected NAME or NAME@VERSION (a version from 1)\n", stderr);
        return CLI_EXIT_USAGE;
    }
    o->dataset = dataset;
    if (fl->concurrency != NULL &&
        !cli_parse_size(fl->concurrency, 1, WEFT_EXPERIMENT_CONCURRENCY_MAX, &k)) {
        fprintf(stderr, "weft eval: --concurrency: expected an integer from 1 to %u\n",
                WEFT_EXPERIMENT_CONCURRENCY_MAX);
        return CLI_EXIT_USAGE;
    }
    o->concurrency = (unsigned)k;
    if (fl->fail_under != NULL) {
        *fail_under = strtod(fl->fail_under, &end);
        if (end == fl->fail_under || *end != '\0' || !(*fail_under >= 0 && *fail_under <= 1)) {
            fputs("weft eval: --fail-under: expected a pass rate from 0 to 1, e.g. 0.9\n", stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (kind != NULL && kind[0] != '\0' && strcmp(kind, "in_process") != 0) {
        if (strcmp(kind, "amqp") != 0) {
            fprintf(stderr, "weft eval: --executor: expected in_process or amqp, got \"%s\"\n",
                    kind);
            return CLI_EXIT_USAGE;
        }
        if (fl->max_in_flight != NULL && !cli_parse_size(fl->max_in_flight, 1, 256, &in_flight)) {
            fputs("weft eval: --max-in-flight: expected an integer from 1 to 256\n", stderr);
            return CLI_EXIT_USAGE;
        }
        amqp->broker = fl->broker;
        amqp->prefix = fl->queue_prefix != NULL ? fl->queue_prefix : getenv("WEFT_QUEUE_PREFIX");
        amqp->max_in_flight = (unsigned)in_flight;
        o->run = run_amqp;
        o->run_user_data = amqp;
    }
    o->from_failure = fl->is_from_failure;
    o->name = fl->name;
    o->state_path = fl->state;
    return CLI_EXIT_OK;
}

/* Run the experiment with the telemetry started; print it. @return the exit status. */
static int
eval_run(const struct eval_flags *fl, struct weft_experiment_options *o, double fail_under)
{
    struct cli_telemetry t = {0};
    struct weft_experiment_report rep;
    struct bar bar;
    struct sigaction sa;
    char err[512] = "";
    weft_err rc = WEFT_OK;
    int status = cli_start_tracing("eval", NULL, &t);

    if (status != CLI_EXIT_OK) {
        return status;
    }
    memset(&rep, 0, sizeof(rep)); /* read below even when the run refused its options */
    memset(&bar, 0, sizeof(bar));
    bar.is_tty = isatty(STDERR_FILENO) != 0;
    bar.is_quiet = fl->is_quiet;
    o->provider = t.provider;
    o->progress = on_progress;
    o->progress_user_data = &bar;
    o->abort_flag = &abort_requested;
    if (o->run_user_data != NULL) {
        ((struct amqp_opts *)o->run_user_data)->provider = t.provider;
        ((struct amqp_opts *)o->run_user_data)->meter = t.meter;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    rc = weft_experiment_run(o, &rep, err, sizeof(err));
    cli_telemetry_stop(&t);
    if (rc != WEFT_OK && rep.id[0] == '\0') {
        fprintf(stderr, "weft eval: %s\n", err[0] != '\0' ? err : weft_strerror(rc));
        return rc == WEFT_EINVAL || rc == WEFT_EPARSE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    status = cli_eval_print(fl->state, rep.id, fl->is_json);
    if (rc != WEFT_OK || rep.is_aborted) {
        fprintf(stderr, "weft eval: experiment %s did not finish: %s\n", rep.id,
                rep.is_aborted ? "interrupted" : err);
        return CLI_EXIT_EVAL_ERRORED;
    }
    if (rep.errored > 0) {
        fprintf(stderr, "weft eval: %zu item(s) errored: the experiment could not judge them\n",
                rep.errored);
        return CLI_EXIT_EVAL_ERRORED;
    }
    if (fl->fail_under != NULL && rep.pass_rate < fail_under) {
        fprintf(stderr, "weft eval: pass rate %.3f is below --fail-under %s\n", rep.pass_rate,
                fl->fail_under);
        return CLI_EXIT_FAIL;
    }
    return status;
}

static int
eval_main(const char *workflow_path, const struct eval_flags *fl)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    struct weft_experiment_options o;
    struct amqp_opts amqp;
    char dataset[WEFT_DATASET_NAME_MAX + 1];
    char abs_path[PATH_MAX];
    char *tag_text = NULL;
    char *evaluators = NULL;
    const char *tags[8];
    double fail_under = 0;
    int n = 0;
    int status = CLI_EXIT_OK;
    weft_err err = WEFT_OK;

    memset(&o, 0, sizeof(o));
    memset(&amqp, 0, sizeof(amqp));
    status = eval_options(fl, dataset, &o, &fail_under, &amqp);
    if (status != CLI_EXIT_OK) {
        return status;
    }
    if (fl->tags != NULL) {
        tag_text = strdup(fl->tags);
        n = tag_text != NULL ? split_tags(tag_text, tags) : -1;
        if (n < 0) {
            fputs("weft eval: --tags: expected at most 8 comma-separated tags\n", stderr);
            free(tag_text);
            return CLI_EXIT_USAGE;
        }
        o.tags = tags;
        o.tag_count = (size_t)n;
    }
    if (fl->evaluators != NULL &&
        (evaluators = cli_read_small_file("eval", "--evaluators", fl->evaluators,
                                          (size_t)1024 * 1024)) == NULL) {
        free(tag_text);
        return CLI_EXIT_USAGE;
    }
    o.evaluators = evaluators;
    /* By its absolute path, which the runs store (fork and replay then find it anywhere). */
    err = weft_workflow_load(realpath(workflow_path, abs_path) != NULL ? abs_path : workflow_path,
                             &wf, &diags);
    if (err != WEFT_OK) {
        status = cli_print_diags(workflow_path, err, &diags);
    } else {
        o.workflow = wf;
        status = eval_run(fl, &o, fail_under);
    }
    weft_diags_cleanup(&diags);
    weft_workflow_free(wf);
    free(evaluators);
    free(tag_text);
    return status;
}

int
cli_eval(int argc, char **argv)
{
    struct eval_flags fl;
    char *positional[1];
    size_t count = 0;
    const struct cli_option options[] = {
        {"dataset", 0, true, false, &fl.dataset, NULL},
        {"name", 0, true, false, &fl.name, NULL},
        {"concurrency", 0, true, false, &fl.concurrency, NULL},
        {"fail-under", 0, true, false, &fl.fail_under, NULL},
        {"evaluators", 0, true, false, &fl.evaluators, NULL},
        {"executor", 0, true, false, &fl.executor, NULL},
        {"broker", 0, true, false, &fl.broker, NULL},
        {"queue-prefix", 0, true, false, &fl.queue_prefix, NULL},
        {"max-in-flight", 0, true, false, &fl.max_in_flight, NULL},
        {"tags", 0, true, false, &fl.tags, NULL},
        {"state", 0, true, false, &fl.state, NULL},
        {"from-failure", 0, false, false, NULL, &fl.is_from_failure},
        {"json", 0, false, false, NULL, &fl.is_json},
        {"quiet", 'q', false, false, NULL, &fl.is_quiet},
        {"help", 'h', false, false, NULL, &fl.is_help},
    };

    memset(&fl, 0, sizeof(fl));
    if (argc >= 2 && (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "show") == 0 ||
                      strcmp(argv[1], "compare") == 0)) {
        return cli_eval_read(argc - 1, argv + 1);
    }
    if (cli_parse("eval", argc, argv, options, sizeof(options) / sizeof(options[0]), positional, 1,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (fl.is_help) {
        cli_eval_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 1 || fl.dataset == NULL) {
        fputs("weft eval: expected a WORKFLOW file and --dataset NAME\n", stderr);
        cli_eval_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return eval_main(positional[0], &fl);
}
