/* cli/mcp_cmd.c - `weft mcp list FILE SERVER [--json]`: start one MCP server of a workflow or
 * of an mcpServers file, and print its tools with their input schemas.
 */
#include "cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

void
cli_mcp_usage(FILE *out)
{
    fputs("usage: weft mcp list FILE SERVER [--json]\n"
          "\n"
          "Start MCP server SERVER of FILE (a workflow, or a JSON file {\"mcpServers\": {...}}\n"
          "as editors and desktop clients write it), initialize it, print its tools with their\n"
          "input schemas, and stop it.\n"
          "\n"
          "options:\n"
          "      --json       the listing as one JSON document (docs/mcp.md)\n"
          "  -h, --help       this help\n"
          "\n"
          "exit status: 0 ok, 1 the server did not start or answer, 2 bad usage or file\n",
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
