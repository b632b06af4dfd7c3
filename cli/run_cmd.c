/* cli/run_cmd.c - `weft run`: its options, then cli_execute() (cli/execute.c) does the run. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

void
cli_run_usage(FILE *out)
{
    fputs("usage: weft run WORKFLOW [--input TEXT] [--session ID] [--record FILE | --replay FILE]\n"
          "                [--user ID] [--tags A,B] [--metrics-addr H:P]\n"
          "                [--workspace DIR] [--state PATH] [--capture-content] [--json]\n"
          "                [--quiet] [--no-trace] [--color[=WHEN]] [--spool] [--sampling RULES]\n"
          "                [--executor in_process|amqp] [--broker URL] [--queue-prefix P]\n"
          "                [--max-in-flight N] [--max-parallel N]\n"
          "\n"
          "Run a workflow. Spans go to the local store ($WEFT_HOME/weft.db) and to the\n"
          "exporters OTEL_TRACES_EXPORTER names (otlp, langfuse, file, console);\n"
          "LANGFUSE_* adds Langfuse. OTEL_METRICS_EXPORTER=otlp sends metrics too.\n"
          "\n"
          "options:\n"
          "  -i, --input TEXT       the user's request or message\n"
          "  -s, --session ID       conversation id: continues a conversational workflow\n"
          "      --user ID          the end user the run acts for (user.id on every span)\n"
          "      --tags A,B         labels of the run (weft.run.tags on every span; at most 16)\n"
          "      --record FILE      write every LLM exchange to FILE (a replayable script)\n"
          "      --replay FILE      answer every LLM call from FILE (no network); run:RUN_ID\n"
          "                         replays a stored run's exchanges from the state database\n"
          "      --workspace DIR    directory file and command tools are confined to\n"
          "      --state PATH|URL   state: a SQLite file or a postgresql:// URL (default\n"
          "                         $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --metrics-addr H:P serve Prometheus /metrics on H:P while the run lasts\n"
          "      --executor KIND    in_process (default; $WEFT_EXECUTOR) or amqp: steps go to\n"
          "                         `weft worker` processes over RabbitMQ\n"
          "      --broker URL       amqp://user:pass@host:5672/vhost ($WEFT_BROKER_URL)\n"
          "      --queue-prefix P   prefix of the exchange and queue names ($WEFT_QUEUE_PREFIX)\n"
          "      --max-in-flight N  amqp: tasks dispatched at once, 1 to 256 (default 64)\n"
          "      --max-parallel N   plan steps whose dependencies are met run at once, 1 to\n"
          "                         256 (default: supervisor.max_parallel, else 1 in process\n"
          "                         and --max-in-flight with amqp)\n"
          "      --capture-content  record prompts and outputs on spans (after redaction)\n"
          "      --json             print the result as JSON instead of the summary\n"
          "  -q, --quiet            no progress display\n"
          "      --no-trace         do not print the trace tree after the summary\n"
          "      --color[=WHEN]     auto (default), always or never\n"
          "      --sampling RULES   tail sampling: keep the run's trace only when a rule matches,\n"
          "                         e.g. \"failed,stuck,reward<0.5,5%\" (WEFT_SAMPLING too; over "
          "the\n"
          "                         workflow's \"sampling\"; off: none; docs/sampling.md)\n"
          "      --spool            keep OTLP/Langfuse batches whose retries give up in an\n"
          "                         on-disk spool, sent when the endpoint answers (also by the\n"
          "                         next weft process); same as WEFT_EXPORT_SPOOL=on\n"
          "\n"
          "exit status: 0 the run completed, 1 it failed, hit a budget or was aborted,\n"
          "             2 bad usage or configuration (workflow, script, exporter, --record),\n"
          "             3 stuck, 4 completed but an exporter delivered none of its spans,\n"
          "             130 interrupted twice (exits without waiting for telemetry)\n",
          out);
}

int
cli_run(int argc, char **argv)
{
    struct cli_run_flags fl;
    const char *color = NULL;
    bool is_help = false;
    bool is_color_set = false;
    char *positional[1];
    size_t count = 0;
    const struct cli_option options[] = {
        {"input", 'i', true, false, &fl.input, NULL},
        {"session", 's', true, false, &fl.session, NULL},
        {"user", 0, true, false, &fl.user, NULL},
        {"tags", 0, true, false, &fl.tags, NULL},
        {"record", 0, true, false, &fl.record, NULL},
        {"replay", 0, true, false, &fl.replay, NULL},
        {"workspace", 0, true, false, &fl.workspace, NULL},
        {"state", 0, true, false, &fl.state, NULL},
        {"metrics-addr", 0, true, false, &fl.metrics_addr, NULL},
        {"executor", 0, true, false, &fl.executor, NULL},
        {"broker", 0, true, false, &fl.broker, NULL},
        {"queue-prefix", 0, true, false, &fl.queue_prefix, NULL},
        {"max-in-flight", 0, true, false, &fl.max_in_flight, NULL},
        {"max-parallel", 0, true, false, &fl.max_parallel, NULL},
        {"sampling", 0, true, false, &fl.sampling, NULL},
        {"capture-content", 0, false, false, NULL, &fl.is_capture},
        {"json", 0, false, false, NULL, &fl.is_json},
        {"quiet", 'q', false, false, NULL, &fl.is_quiet},
        {"no-trace", 0, false, false, NULL, &fl.is_no_trace},
        {"color", 0, false, true, &color, &is_color_set},
        {"spool", 0, false, false, NULL, &fl.is_spool},
        {"help", 'h', false, false, NULL, &is_help},
    };

    memset(&fl, 0, sizeof(fl));
    if (argc >= 2 && strcmp(argv[1], "show") == 0) {
        return cli_run_show(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "why") == 0) {
        return cli_run_why(argc - 1, argv + 1);
    }
    if (cli_parse("run", argc, argv, options, sizeof(options) / sizeof(options[0]), positional, 1,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_run_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 1) {
        fputs("weft run: expected one WORKFLOW file\n", stderr);
        cli_run_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (fl.record != NULL && fl.replay != NULL) {
        fputs("weft run: --record and --replay exclude each other\n", stderr);
        return CLI_EXIT_USAGE;
    }
    if (is_color_set && color == NULL) {
        color = "always";
    }
    if (!cli_color(color, stdout, &fl.is_color)) {
        fprintf(stderr, "weft run: --color: expected auto, always or never\n");
        return CLI_EXIT_USAGE;
    }
    if (fl.is_spool) {
        /* The exporters are built from the environment (OTEL_TRACES_EXPORTER, LANGFUSE_*). */
        setenv("WEFT_EXPORT_SPOOL", "on", 1);
    }
    return cli_execute("run", positional[0], &fl);
}
