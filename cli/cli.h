/* cli/cli.h - what the `weft` commands share: exit codes, the command table entry, option
 * parsing and terminal helpers.
 *
 * The CLI is a program, not the library: it builds only on include/weft/, it is the one place
 * that prints, and its cross-file names carry a cli_ prefix (as curl's tool_ in src/).
 * Adding a command means writing its run and usage functions and adding one line to the
 * table in main.c.
 */
#ifndef WEFT_CLI_CLI_H
#define WEFT_CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <weft/runtime.h>
#include <weft/sampling.h>

/* Exit codes. */
#define CLI_EXIT_OK    0 /* success */
#define CLI_EXIT_FAIL  1 /* the command ran and failed (not found, I/O error, ...) */
#define CLI_EXIT_USAGE 2 /* bad command line or configuration (workflow, exporters, env) */
#define CLI_EXIT_STUCK 3 /* weft run: the watchdog ended the run on a stuck loop (break, fail) */
#define CLI_EXIT_TELEMETRY \
    4 /* weft run: the run completed but an exporter delivered none of its spans */
#define CLI_EXIT_DIVERGED 5 /* weft replay: the replay differs from the original run */
/* weft eval: items errored, or the experiment did not finish */
#define CLI_EXIT_EVAL_ERRORED 6

/* One entry of a command table. @p run gets argv with argv[0] = the command's name. */
struct cli_command {
    const char *name;
    const char *synopsis; /* shown in the top-level usage, e.g. "trace list [--limit N]" */
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *out); /* full help of the command; may be NULL */
};

/* Options of one command. @c value receives the argument (for takes_value options: from
 * "--name VALUE", "--name=VALUE" or "-x VALUE"; for optional_value options only from
 * "--name=VALUE", else NULL); @c is_set is raised when the option appears. */
struct cli_option {
    const char *long_name;
    char short_name; /* 0 for none */
    bool takes_value;
    bool optional_value;
    const char **value;
    bool *is_set;
};

/* Parse argv[1..argc) of command @p cmd: options anywhere, "--" ends them, everything else is
 * positional (at most @p max_positional). Errors print "weft CMD: ..." on stderr.
 * @return CLI_EXIT_OK or CLI_EXIT_USAGE. */
int cli_parse(const char *cmd,
              int argc,
              char **argv,
              const struct cli_option *options,
              size_t option_count,
              char **positional,
              size_t max_positional,
              size_t *positional_count);

/* Parse a whole decimal number in [min, max]. */
bool cli_parse_size(const char *text, size_t min, size_t max, size_t *out);

/* A positive duration "90s", "30m", "12h" or "14d" into nanoseconds; false otherwise. */
bool cli_parse_duration(const char *text, uint64_t *ns);

/* A positive size "2147483648", "512K", "2GiB" (binary multiples K, M, G, T with or without
 * "iB") into bytes; false otherwise. */
bool cli_parse_bytes(const char *text, uint64_t *out);

/* Print every diagnostic of loading @p path to stderr (and how many more there were, or, with
 * none, @p err itself). @return CLI_EXIT_USAGE. */
int cli_print_diags(const char *path, weft_err err, const struct weft_diags *diags);

/* Resolve --color=WHEN ("auto", "always", "never"; NULL means auto) for @p stream: auto means
 * a terminal, NO_COLOR unset and TERM not "dumb". @return false for an unknown WHEN. */
bool cli_color(const char *when, FILE *stream, bool *is_color);

/* Print @p s with control characters replaced by '?' (stored text must not drive the
 * terminal); text longer than @p max_cols characters is cut to fit, "..." included.
 * @return the columns printed (at most max_cols when max_cols >= 3). */
size_t cli_put_clean(FILE *out, const char *s, size_t max_cols);

/* "1.2ms", "3.45s", "2m05s" ... */
void cli_format_duration(uint64_t ns, char *buf, size_t len);

/* What `weft run` and `weft resume` take from the command line. */
struct cli_run_flags {
    const char *input;
    const char *session;
    const char *user;
    const char *tags; /* comma list */
    const char *record;
    const char *replay;
    const char *workspace;
    const char *state;
    const char *resume;       /* run id for `weft resume` */
    const char *metrics_addr; /* serve /metrics while the run lasts */
    const char *executor;     /* in_process or amqp; NULL: $WEFT_EXECUTOR or in_process */
    const char *broker;       /* amqp: the broker URL; NULL: $WEFT_BROKER_URL */
    const char *queue_prefix; /* amqp: NULL: $WEFT_QUEUE_PREFIX */
    const char *max_in_flight;
    const char *max_parallel; /* ready plan steps at once; NULL: the workflow decides */
    const char *sampling;     /* tail-sampling rules; NULL: $WEFT_SAMPLING, else the workflow's */
    bool is_json;
    bool is_quiet;
    bool is_no_trace;
    bool is_spool; /* `weft run --spool`: the OTLP/Langfuse exporters spool (WEFT_EXPORT_SPOOL) */
    bool is_capture;
    bool is_color;
    bool is_force;           /* `weft resume --force`: the workflow file may have changed */
    const char *replay_of;   /* `weft replay`: the run id to replay */
    const char *fork_of;     /* `weft fork`: the run id to fork */
    const char *fork_from;   /* `weft fork --from STEP` */
    const char *const *sets; /* `weft fork --set KEY=VALUE`, in order */
    size_t set_count;
    const char *fork_task;     /* `weft fork --set step.STEP.task=TEXT` */
    const char *fork_answer;   /* `weft fork --set step.STEP.answer=TEXT` */
    const char *snapshot_root; /* the workflow comes from a run's snapshot written here */
};

/* An explicit SQLite --state FILE among @p argv (argv[0] the command) names the home when
 * WEFT_HOME is unset: WEFT_HOME is set to FILE's directory, so the span store, the traces file
 * and the workspaces go beside the state (cli/state_home.c). Call before the command runs. */
void cli_state_home(int argc, char **argv);

/* The workflow file `weft replay`, `fork` and `resume` load for stored run @p d: @p workflow
 * (--workflow) when given, else the run's file while it is what the run had, else its
 * snapshot written under a new temporary directory (@p tmpdir, saying so on stderr); with
 * @p is_resume, a changed file is still used (the runtime refuses it without --force) and the
 * snapshot only replaces a missing one. @return CLI_EXIT_OK with *path_out set, or the exit
 * status after saying what is wrong (mentioning --workflow FILE). Release both with
 * cli_run_workflow_done(). */
int cli_run_workflow(const char *cmd,
                     const char *state,
                     const struct weft_run_details *d,
                     const char *workflow,
                     bool is_resume,
                     char **path_out,
                     char *tmpdir,
                     size_t tmpdir_len);
/* Free @p path and remove the snapshot directory @p tmpdir (when not ""). */
void cli_run_workflow_done(char *path, char *tmpdir);

/* The live progress of a run (cli/progress.c): weft_run_options.progress with a struct
 * cli_progress as its user data. */
struct cli_progress {
    bool is_tty;
    bool is_quiet;
    bool has_line; /* a live line is on screen */
};
struct weft_run_event;
void cli_on_progress(const struct weft_run_event *ev, void *user_data);

/* Load @p workflow_path, run it with the flags and report (summary or JSON, trace tree);
 * @p cmd names the command in messages. @return the command's exit status. */
int cli_execute(const char *cmd, const char *workflow_path, const struct cli_run_flags *flags);

struct weft_provider;
struct weft_meter;
struct weft_metrics_server;
struct weft_metric_reader;

/* What a command reports to: the tracer provider (exporters from the OTEL_* environment and
 * the local store), a meter observing it, and optionally the /metrics server and the OTLP
 * metric reader. */
struct cli_telemetry {
    struct weft_provider *provider;
    struct weft_meter *meter;
    struct weft_metrics_server *server;
    struct weft_metric_reader *reader;
    /* Set before cli_start_tracing() to put every batched exporter behind a run buffer of
     * tail sampling (include/weft/sampling.h); released by cli_telemetry_stop(). */
    struct weft_tail *tail;
    /* With tail: only the local store is sampled here; the OTLP and Langfuse exporters get
     * every span, the decision on the run's root, for `weft serve --sampling` to apply to the
     * whole trace (a distributed run: its workers' spans never pass through this process). */
    bool is_tail_store_only;
};

/* The provider (with service.instance.id = @p instance_id unless NULL) and its meter.
 * @return CLI_EXIT_OK or the exit status after saying what is wrong on stderr. */
int cli_start_tracing(const char *cmd, const char *instance_id, struct cli_telemetry *t);
/* The /metrics server on @p metrics_addr (NULL: none) and the OTLP metric reader when
 * OTEL_METRICS_EXPORTER asks for it. @return as cli_start_tracing(). */
int cli_start_metrics(const char *cmd, const char *metrics_addr, struct cli_telemetry *t);
/* Stop and free everything (flushes the last metrics and spans). */
void cli_telemetry_stop(struct cli_telemetry *t);

int cli_worker(int argc, char **argv);
void cli_worker_usage(FILE *out);

/* Mark the runs whose process died as interrupted and close their open spans in the local
 * span store (docs/durability.md); says so on stderr. @p state may be NULL. */
void cli_recover(const char *cmd, const char *state);

/* A replay's verdict for people: "identical" with counts, or the first differing span with what
 * the original had and what the replay made. NULL @p report prints nothing. */
struct weft_replay_report;
void cli_print_replay(FILE *out, const struct weft_replay_report *report);

/* Print stored multi-line text, each line after @p indent spaces: UTF-8 kept whole, control
 * characters and invalid bytes shown as '?' (stored text must not drive the terminal), at most
 * a screenful of lines with a note on how many more there are (cli/runs_cmd.c). */
void cli_put_block(FILE *out, const char *text, int indent);

/* Commands. */
int cli_run_show(int argc, char **argv);
int cli_run_why(int argc, char **argv);
int cli_serve(int argc, char **argv);

/* Who may reach `weft serve` and `weft mcp serve --http` (cli/serve_access.c). */
#define CLI_MAX_ALLOW_HOSTS 16
/* Read the token of --token-file @p path into *out (free with cli_token_free()): the file's
 * text without its trailing newline, one line without blanks or control characters. A file
 * that group or others may access (mode beyond 0700) is refused. Errors print "weft CMD: ...".
 * @return CLI_EXIT_OK, CLI_EXIT_USAGE (missing, loose mode, empty, not one token) or
 * CLI_EXIT_FAIL (cannot read it). */
int cli_read_token_file(const char *cmd, const char *path, char **out);
/* Zero and free a token of cli_read_token_file(); NULL is a no-op. */
void cli_token_free(char *token);
/* Take every "--allow-host NAME" and "--allow-host=NAME" out of @p argv (before any "--"),
 * into @p hosts (at most CLI_MAX_ALLOW_HOSTS; borrowed from argv), checking each name; *argc
 * is what is left. @return CLI_EXIT_OK or CLI_EXIT_USAGE (printed). */
int
cli_take_allow_hosts(const char *cmd, int *argc, char **argv, const char **hosts, size_t *count);
void cli_serve_usage(FILE *out);
int cli_runs(int argc, char **argv);
void cli_runs_usage(FILE *out);
int cli_gc(int argc, char **argv);
void cli_gc_usage(FILE *out);
int cli_teams(int argc, char **argv);
void cli_teams_usage(FILE *out);
int cli_dataset(int argc, char **argv);
void cli_dataset_usage(FILE *out);
/* The whole of file @p path (an option's small file: @p flag names it in errors) as a new
 * NUL-terminated string (free()), at most @p max bytes; NULL after printing "weft CMD: FLAG
 * PATH: ..." (cannot open, cannot read, too long). In cli/dataset_cmd.c. */
char *cli_read_small_file(const char *cmd, const char *flag, const char *path, size_t max);
int cli_skills(int argc, char **argv);
void cli_skills_usage(FILE *out);
int cli_replay(int argc, char **argv);
void cli_replay_usage(FILE *out);
int cli_fork(int argc, char **argv);
void cli_fork_usage(FILE *out);
int cli_resume(int argc, char **argv);
void cli_resume_usage(FILE *out);
int cli_run(int argc, char **argv);
void cli_run_usage(FILE *out);
int cli_validate(int argc, char **argv);
void cli_validate_usage(FILE *out);
int cli_trace(int argc, char **argv);
void cli_trace_usage(FILE *out);
int cli_exporters(int argc, char **argv);
void cli_exporters_usage(FILE *out);
int cli_mcp(int argc, char **argv);
int cli_compose(int argc, char **argv);
/* `weft eval` (cli/eval_cmd.c) and its list/show/compare (cli/eval_show.c; argv[0] is the
 * subcommand). cli_eval_print() prints experiment @p id (an id, a prefix or a name) as a table
 * or one JSON document. @return the exit status. */
int cli_eval(int argc, char **argv);
void cli_eval_usage(FILE *out);
int cli_eval_read(int argc, char **argv);
int cli_eval_print(const char *state, const char *id, bool is_json);
void cli_compose_usage(FILE *out);
void cli_mcp_usage(FILE *out);

/* Print @p doc (taken; NULL: out of memory) to stdout as indented JSON.
 * @return CLI_EXIT_OK or CLI_EXIT_FAIL (said on stderr). */
int cli_json_print(json_t *doc);

#endif /* WEFT_CLI_CLI_H */
