/* cli/validate_cmd.c - `weft validate`: workflow files checked, every problem printed as
 * FILE:PATH: MESSAGE, and (unless --offline) the MCP servers a workflow names started,
 * initialized and asked for their tools. */
#include "cli.h"

#include <stdio.h>
#include <weft/weft.h>

void
cli_validate_usage(FILE *out)
{
    fputs("usage: weft validate [--offline] WORKFLOW...\n"
          "\n"
          "Check workflow files and print every problem as FILE:PATH: MESSAGE. The MCP\n"
          "servers a workflow names are started, initialized and asked for their tools\n"
          "(each must start and list at least one), then stopped.\n"
          "\n"
          "options:\n"
          "      --offline    check the files only: start no MCP server\n"
          "  -h, --help       this help\n"
          "\n"
          "exit status: 0 valid, 2 invalid or unreadable, or an MCP server did not start\n",
          out);
}

/* One file: loaded, then (unless @p is_offline) its MCP servers started and listed. */
static int
validate_one(const char *path, bool is_offline)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    char *report = NULL;
    weft_err err = weft_workflow_load(path, &wf, &diags);
    int status = CLI_EXIT_OK;

    if (err == WEFT_OK && !is_offline) {
        err = weft_mcp_check(wf, &diags, &report);
    }
    if (report != NULL) {
        fputs(report, stdout);
    }
    if (err != WEFT_OK) {
        status = cli_print_diags(path, err, &diags);
    } else {
        char *agents = weft_workflow_describe(wf);
        printf("%s: valid (workflow '%s')\n%s", path, weft_workflow_name(wf),
               agents != NULL ? agents : "");
        weft_workflow_text_free(agents);
    }
    weft_mcp_text_free(report);
    weft_diags_cleanup(&diags);
    weft_workflow_free(wf);
    return status;
}

int
cli_validate(int argc, char **argv)
{
    bool is_help = false;
    bool is_offline = false;
    char *paths[64];
    size_t count = 0;
    int status = CLI_EXIT_OK;
    const struct cli_option options[] = {{"help", 'h', false, false, NULL, &is_help},
                                         {"offline", 0, false, false, NULL, &is_offline}};

    if (cli_parse("validate", argc, argv, options, 2, paths, 64, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_validate_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count == 0) {
        cli_validate_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    for (size_t i = 0; i < count; i++) {
        if (validate_one(paths[i], is_offline) != CLI_EXIT_OK) {
            status = CLI_EXIT_USAGE;
        }
    }
    return status;
}
