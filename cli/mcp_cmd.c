/* cli/mcp_cmd.c - `weft mcp list FILE SERVER [--json]`: start one MCP server of a workflow or
 * of an mcpServers file, and print its tools with their input schemas; `weft mcp serve`: weft
 * as an MCP server over its own stores, on stdio or Streamable HTTP (docs/mcp.md).
 */
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define SERVE_DEFAULT_ADDR "127.0.0.1:8765"

static volatile sig_atomic_t stop_requested = 0;

static void
on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

void
cli_mcp_usage(FILE *out)
{
    fputs("usage: weft mcp list FILE SERVER [--json]\n"
          "       weft mcp serve [--http] [--addr HOST:PORT] [--workflows DIR] [--state PATH]\n"
          "                      [--db PATH] [--token-file PATH | --token T]\n"
          "                      [--allow-host NAME]...\n"
          "\n"
          "list: start MCP server SERVER of FILE (a workflow, or a JSON file\n"
          "{\"mcpServers\": {...}} as editors and desktop clients write it), initialize it,\n"
          "print its tools with their input schemas, and stop it.\n"
          "\n"
          "serve: be an MCP server for other agents and editors, with tools over weft's runs\n"
          "and traces: list_runs, show_run, get_trace, get_span, search_spans, why_failed and\n"
          "start_run. Speaks newline-delimited JSON-RPC on stdin/stdout until end of input\n"
          "(logs go to stderr), or with --http Streamable HTTP at POST /mcp until SIGINT or\n"
          "SIGTERM.\n"
          "\n"
          "options:\n"
          "      --json            list: the listing as one JSON document (docs/mcp.md)\n"
          "      --http            serve: Streamable HTTP instead of stdio\n"
          "      --addr HOST:PORT  serve --http: listen address (default " SERVE_DEFAULT_ADDR ";\n"
          "                        IPv4; port 0 picks one). Requests from a non-local Origin\n"
          "                        are refused (403); on loopback, so are those for a Host\n"
          "                        other than localhost, 127.x.y.z or [::1] (421)\n"
          "      --token-file PATH serve --http: require \"Authorization: Bearer T\", T the\n"
          "                        one line of PATH (mode 0600 or 0400, else refused)\n"
          "      --token T         serve --http: the same with T itself, which `ps` shows\n"
          "                        to every local user (default $WEFT_MCP_TOKEN, which it\n"
          "                        does not; none when unset)\n"
          "      --allow-host NAME serve --http on loopback: also answer to Host NAME (any\n"
          "                        port); repeatable\n"
          "      --workflows DIR   serve: start_run runs workflow files below DIR only\n"
          "                        (default the working directory)\n"
          "      --state PATH      serve: state, a SQLite file or a postgresql:// URL (default\n"
          "                        $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --db PATH|URL     serve: the span store read, a SQLite file or a\n"
          "                        postgresql:// URL (default: as weft trace's); runs started\n"
          "                        by start_run trace to the default span store\n"
          "  -h, --help            this help\n"
          "\n"
          "exit status: 0 ok (serve: end of input or stopped by a signal), 1 the server did\n"
          "not start or answer (serve: cannot listen, I/O error), 2 bad usage or file\n",
          out);
}

/* One tool: its name, description and input schema (indented JSON). */
static void
print_tool(const json_t *tool)
{
    const char *desc = json_string_value(json_object_get(tool, "description"));
    char *schema = json_dumps(json_object_get(tool, "input_schema"), JSON_INDENT(2));

    printf("\n%s", json_string_value(json_object_get(tool, "name")));
    if (desc != NULL) {
        printf(" - ");
        cli_put_clean(stdout, desc, 200);
    }
    printf("\n");
    if (schema != NULL) {
        for (const char *line = schema; *line != '\0';) {
            size_t len = strcspn(line, "\n");
            printf("    %.*s\n", (int)len, line);
            line += len + (line[len] == '\n');
        }
    }
    free(schema);
}

static void
print_text(const char *listing)
{
    json_t *o = json_loads(listing, 0, NULL);
    const json_t *tools = json_object_get(o, "tools");
    const char *instructions = json_string_value(json_object_get(o, "instructions"));
    size_t i = 0;
    json_t *t = NULL;

    printf("mcp server %s (%s, protocol %s): %zu tools\n",
           json_string_value(json_object_get(o, "server")),
           json_string_value(json_object_get(o, "transport")),
           json_string_value(json_object_get(o, "protocol_version")), json_array_size(tools));
    if (instructions != NULL) {
        printf("instructions: ");
        cli_put_clean(stdout, instructions, 400);
        printf("\n");
    }
    json_array_foreach(tools, i, t)
    {
        print_tool(t);
    }
    json_decref(o);
}

/* `weft mcp serve`: stdio until end of input, or HTTP until a stop signal. */
static int
mcp_serve(int argc, char **argv)
{
    const char *addr = SERVE_DEFAULT_ADDR;
    const char *workflows = NULL;
    const char *state = NULL;
    const char *db = NULL;
    const char *token = NULL;
    const char *token_file = NULL;
    char *file_token = NULL; /* read from --token-file */
    const char *allow_hosts[CLI_MAX_ALLOW_HOSTS];
    size_t allow_host_count = 0;
    const char *exporters = getenv("OTEL_TRACES_EXPORTER");
    bool is_http = false;
    bool is_help = false;
    const struct cli_option options[] = {
        {"help", 'h', false, false, NULL, &is_help},
        {"http", 0, false, false, NULL, &is_http},
        {"addr", 0, true, false, &addr, NULL},
        {"workflows", 0, true, false, &workflows, NULL},
        {"state", 0, true, false, &state, NULL},
        {"db", 0, true, false, &db, NULL},
        {"token", 0, true, false, &token, NULL},
        {"token-file", 0, true, false, &token_file, NULL},
    };
    char *pos[1];
    size_t count = 0;
    struct cli_telemetry t = {0};
    struct weft_mcp_server_options so = {0};
    struct weft_mcp_server *server = NULL;
    struct weft_mcp_http_options ho = {0};
    struct weft_mcp_http *http = NULL;
    struct sigaction sa;
    sigset_t block;
    sigset_t old;
    int status = CLI_EXIT_OK;
    weft_err err = WEFT_OK;

    if (cli_take_allow_hosts("mcp serve", &argc, argv, allow_hosts, &allow_host_count) !=
            CLI_EXIT_OK ||
        cli_parse("mcp serve", argc, argv, options, sizeof(options) / sizeof(options[0]), pos, 0,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_mcp_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (token != NULL && token_file != NULL) {
        fprintf(stderr, "weft mcp serve: --token and --token-file exclude each other\n");
        return CLI_EXIT_USAGE;
    }
    if (token_file != NULL) {
        status = cli_read_token_file("mcp serve", token_file, &file_token);
        if (status != CLI_EXIT_OK) {
            return status;
        }
        token = file_token;
    } else if (token != NULL) {
        fprintf(stderr, "weft mcp serve: note: --token shows in `ps` to every user of this "
                        "machine; --token-file PATH or WEFT_MCP_TOKEN keep it out of sight\n");
    } else {
        token = getenv("WEFT_MCP_TOKEN");
    }
    if (!is_http && exporters != NULL && strstr(exporters, "console") != NULL) {
        fprintf(stderr, "weft mcp serve: OTEL_TRACES_EXPORTER=console writes to stdout, which "
                        "carries the protocol on stdio: use --http or another exporter\n");
        return CLI_EXIT_USAGE;
    }
    status = cli_start_tracing("mcp", NULL, &t);
    if (status != CLI_EXIT_OK) {
        cli_token_free(file_token);
        return status;
    }
    cli_recover("mcp", state); /* runs killed earlier read as interrupted, not running */
    so.state_path = state;
    so.db_path = db;
    so.workflows_dir = workflows;
    so.provider = t.provider;
    so.meter = t.meter;
    so.abort_flag = &stop_requested;
    err = weft_mcp_server_new(&so, &server);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft mcp serve: %s%s\n",
                err == WEFT_ENOTFOUND ? "--workflows: no such directory: " : "",
                err == WEFT_ENOTFOUND ? workflows : weft_strerror(err));
        cli_telemetry_stop(&t);
        cli_token_free(file_token);
        return err == WEFT_ENOTFOUND ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    /* No SA_RESTART: a signal interrupts the stdio read, and the loop sees the flag. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (!is_http) {
        err = weft_mcp_server_serve_stdio(server, STDIN_FILENO, STDOUT_FILENO);
        if (err != WEFT_OK) {
            fprintf(stderr, "weft mcp serve: stdio: %s\n", weft_strerror(err));
            status = CLI_EXIT_FAIL;
        }
        goto out;
    }
    /* The server's thread must not take the stop signals: block them while it starts (it
     * inherits the mask), then wait for them here. */
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    ho.addr = addr;
    ho.token = token != NULL && token[0] != '\0' ? token : NULL;
    ho.allowed_hosts = allow_hosts;
    ho.allowed_host_count = allow_host_count;
    err = weft_mcp_http_start(server, &ho, &http);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft mcp serve: --addr %s: %s\n", addr,
                err == WEFT_EINVAL ? "expected HOST:PORT with an IPv4 host"
                                   : "cannot listen there (in use or not permitted?)");
        status = err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
        goto out;
    }
    fprintf(stderr, "weft mcp serve: MCP (Streamable HTTP) on http://%.*s:%u/mcp%s; Ctrl-C stops\n",
            (int)strcspn(addr, ":"), addr, weft_mcp_http_port(http),
            ho.token != NULL ? " (bearer token required)" : "");
    while (stop_requested == 0) {
        sigsuspend(&old);
    }
    fprintf(stderr, "weft mcp serve: stopping\n");
    weft_mcp_http_stop(http);
out:
    weft_mcp_server_free(server);
    cli_telemetry_stop(&t);
    cli_token_free(file_token);
    return status;
}

int
cli_mcp(int argc, char **argv)
{
    bool is_json = false;
    bool is_help = false;
    const struct cli_option options[] = {
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    char *pos[3];
    size_t count = 0;
    char *listing = NULL;
    char error[1024];
    weft_err err = WEFT_OK;

    if (argc >= 2 && strcmp(argv[1], "serve") == 0) {
        return mcp_serve(argc - 1, argv + 1);
    }
    if (cli_parse("mcp", argc, argv, options, 2, pos, 3, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_mcp_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 3 || strcmp(pos[0], "list") != 0) {
        cli_mcp_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    err = weft_mcp_list(pos[1], pos[2], &listing, error, sizeof(error));
    if (err != WEFT_OK) {
        fprintf(stderr, "weft mcp: %s\n", error[0] != '\0' ? error : weft_strerror(err));
        return err == WEFT_EPARSE || err == WEFT_ENOTFOUND || err == WEFT_EINVAL ? CLI_EXIT_USAGE
                                                                                 : CLI_EXIT_FAIL;
    }
    if (is_json) {
        printf("%s\n", listing);
    } else {
        print_text(listing);
    }
    weft_mcp_text_free(listing);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
