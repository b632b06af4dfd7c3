/* cli/worker_cmd.c - `weft worker`: consume tasks from RabbitMQ and run them
 * (runtime/dist/worker.h, docs/distributed.md). */
#include "cli.h"
#include "runtime/dist/worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

static volatile sig_atomic_t stop_requested;

static void
on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

void
cli_worker_usage(FILE *out)
{
    fputs(
        "usage: weft worker [--broker URL] [--queue-prefix P] [--concurrency N]\n"
        "                   [--max-redeliveries N] [--grace SECONDS] [--id ID]\n"
        "                   [--metrics-addr H:P] [--allow-commands CMD,...]\n"
        "\n"
        "Run steps of distributed runs: consume task messages from the dispatch queue, run\n"
        "each step (its agent, LLM calls, tools and reflection) and publish the result. The\n"
        "workflow travels in the task message; API keys come from this process's environment.\n"
        "Spans go where OTEL_* and LANGFUSE_* say, with service.instance.id = the worker id;\n"
        "batches an endpoint does not take wait in an on-disk spool (WEFT_EXPORT_SPOOL=off:\n"
        "none).\n"
        "SIGTERM or SIGINT: take no new task, finish the running ones (at most --grace\n"
        "seconds), give back the rest, exit 0.\n"
        "Trust: with WEFT_DIST_KEY or WEFT_DIST_KEY_FILE set, tasks must carry the\n"
        "orchestrator's signature (HMAC-SHA256) and unsigned or forged ones are refused;\n"
        "WEFT_DIST_KEY_PREVIOUS(_FILE) is still accepted during a key rotation.\n"
        "\n"
        "options:\n"
        "      --broker URL          amqp://user:pass@host:5672/vhost ($WEFT_BROKER_URL)\n"
        "      --queue-prefix P      prefix of the exchange and queue names ($WEFT_QUEUE_PREFIX)\n"
        "      --concurrency N       tasks at once, 1 to 256 ($WEFT_WORKER_CONCURRENCY, default "
        "4)\n"
        "      --max-redeliveries N  deliveries of a task before the dead-letter queue, when this\n"
        "                            worker creates the queue (default 5)\n"
        "      --grace SECONDS       how long running tasks may finish after SIGTERM (default 30)\n"
        "      --id ID               the worker's id (default HOST/PID)\n"
        "      --metrics-addr H:P    serve this worker's Prometheus /metrics on H:P\n"
        "      --allow-commands LIST programs tasks may start, comma-separated, each compared\n"
        "                            with argv[0] exactly (\"sh\": sh from PATH, \"/bin/sh\":\n"
        "                            that path); others fail their step\n"
        "                            ($WEFT_WORKER_ALLOW_COMMANDS; default: any)\n"
        "\n"
        "exit status: 0 stopped by a signal, 1 the broker could not be reached,\n"
        "             2 bad usage or configuration\n",
        out);
}

/* The stop line: what the worker did. */
static void
print_stopped(const char *id, const struct weft__worker_stats *stats)
{
    fprintf(stderr,
            "weft worker %s: stopped: %llu received, %llu succeeded, %llu failed, %llu "
            "rejected, %llu given back, %llu reconnect(s), %llu refused unsigned or forged, "
            "%llu command(s) refused, %llu result(s) to the shared queue (run's queue gone)\n",
            id, (unsigned long long)stats->received, (unsigned long long)stats->succeeded,
            (unsigned long long)stats->failed, (unsigned long long)stats->rejected,
            (unsigned long long)stats->requeued, (unsigned long long)stats->reconnects,
            (unsigned long long)stats->refused, (unsigned long long)stats->commands_refused,
            (unsigned long long)stats->fallbacks);
}

int
cli_worker(int argc, char **argv)
{
    const char *broker = NULL, *prefix = NULL, *concurrency = NULL, *redeliveries = NULL;
    const char *grace = NULL, *id = NULL, *metrics_addr = NULL, *allow_commands = NULL;
    bool is_help = false;
    size_t count = 0;
    char *positional[1];
    const struct cli_option options[] = {
        {"broker", 0, true, false, &broker, NULL},
        {"queue-prefix", 0, true, false, &prefix, NULL},
        {"concurrency", 'c', true, false, &concurrency, NULL},
        {"max-redeliveries", 0, true, false, &redeliveries, NULL},
        {"grace", 0, true, false, &grace, NULL},
        {"id", 0, true, false, &id, NULL},
        {"metrics-addr", 0, true, false, &metrics_addr, NULL},
        {"allow-commands", 0, true, false, &allow_commands, NULL},
        {"help", 'h', false, false, NULL, &is_help},
    };
    struct weft__worker_config cfg;
    struct weft__worker_stats stats;
    struct cli_telemetry t;
    struct sigaction sa;
    size_t n_conc = 4, n_redeliveries = 5, n_grace = 30;
    char hostid[300];
    char err[512] = "";
    weft_err e = WEFT_OK;
    int status = CLI_EXIT_OK;

    if (cli_parse("worker", argc, argv, options, sizeof(options) / sizeof(options[0]), positional,
                  0, &count) != CLI_EXIT_OK) {
        cli_worker_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_worker_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (concurrency == NULL) {
        concurrency = getenv("WEFT_WORKER_CONCURRENCY");
    }
    if ((concurrency != NULL && !cli_parse_size(concurrency, 1, 256, &n_conc)) ||
        (redeliveries != NULL && !cli_parse_size(redeliveries, 1, 1000, &n_redeliveries)) ||
        (grace != NULL && !cli_parse_size(grace, 1, 86400, &n_grace))) {
        fputs("weft worker: --concurrency expects 1 to 256, --max-redeliveries 1 to 1000, "
              "--grace 1 to 86400\n",
              stderr);
        return CLI_EXIT_USAGE;
    }
    if (id == NULL) {
        char host[256] = "localhost";
        (void)gethostname(host, sizeof(host) - 1);
        snprintf(hostid, sizeof(hostid), "%s/%ld", host, (long)getpid());
        id = hostid;
    }
    memset(&t, 0, sizeof(t));
    /* A worker runs for days: batches its retries give up on wait in the on-disk spool
     * (docs/spool.md) unless WEFT_EXPORT_SPOOL says otherwise. */
    setenv("WEFT_EXPORT_SPOOL", "on", 0);
    status = cli_start_tracing("worker", id, &t);
    if (status == CLI_EXIT_OK) {
        status = cli_start_metrics("worker", metrics_addr, &t);
    }
    if (status != CLI_EXIT_OK) {
        cli_telemetry_stop(&t);
        return status;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    memset(&cfg, 0, sizeof(cfg));
    cfg.url = broker;
    cfg.prefix = prefix;
    cfg.concurrency = (unsigned)n_conc;
    cfg.max_redeliveries = (unsigned)n_redeliveries;
    cfg.grace_ms = (unsigned)n_grace * 1000u;
    cfg.id = id;
    cfg.provider = t.provider;
    cfg.meter = t.meter;
    cfg.stop = &stop_requested;
    cfg.connect_timeout_ms = 0;
    cfg.allow_commands = allow_commands; /* NULL: $WEFT_WORKER_ALLOW_COMMANDS */
    fprintf(stderr, "weft worker %s: starting (%zu slot%s)\n", id, n_conc, n_conc == 1 ? "" : "s");
    e = weft__worker_run(&cfg, &stats, err, sizeof(err));
    if (e != WEFT_OK) {
        fprintf(stderr, "weft worker: %s\n", err[0] != '\0' ? err : weft_strerror(e));
        status = e == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    } else {
        print_stopped(id, &stats);
    }
    cli_telemetry_stop(&t);
    return status;
}
