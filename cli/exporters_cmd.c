/* cli/exporters_cmd.c - `weft exporters`: the exporter registry (weft_exporter_info_at()),
 * the names OTEL_TRACES_EXPORTER accepts with the variables each exporter reads.
 *
 * Three forms of one table: text for a terminal, --json (schema weft.exporters/v1,
 * docs/cli-json.md) for programs, and --markdown, the block README.md carries between its
 * "weft exporters --markdown" markers; the cli/exporters test compares the two, so the docs list
 * exactly what the library accepts.
 */
#include "cli.h"
#include "report/docs.h"

#include <string.h>
#include <weft/weft.h>

#define NAME_COLS 10

void
cli_exporters_usage(FILE *out)
{
    fputs("usage: weft exporters [--json | --markdown]\n"
          "\n"
          "The exporters OTEL_TRACES_EXPORTER can name (a comma list; `weft run` always adds\n"
          "the local store), the processor each gets, and the environment variables each\n"
          "reads with their defaults.\n"
          "\n"
          "options:\n"
          "      --json       one JSON document (schema weft.exporters/v1: docs/cli-json.md)\n"
          "      --markdown   the Markdown table of README.md\n"
          "  -h, --help       this help\n"
          "\n"
          "exit status: 0 ok, 1 stdout failed, 2 bad usage\n",
          out);
}

static void
print_text(FILE *out)
{
    const struct weft_exporter_info *e = NULL;
    int var_cols = 0; /* the variables line up in one column: the longest name's */

    for (size_t i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        for (size_t v = 0; v < e->env_count; v++) {
            size_t len = strlen(e->env[v].name);

            var_cols = len > (size_t)var_cols ? (int)len : var_cols;
        }
    }
    for (size_t i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        fprintf(out, "%s%-*s %s", i > 0 ? "\n" : "", NAME_COLS, e->name, e->description);
        if (e->processor != NULL) {
            fprintf(out, " [%s processor]", e->processor);
        }
        fputc('\n', out);
        for (size_t v = 0; v < e->env_count; v++) {
            const struct weft_exporter_env *env = &e->env[v];

            fprintf(out, "  %-*s  %s", var_cols, env->name, env->meaning);
            if (env->default_value != NULL) {
                fprintf(out, " (default: %s)", env->default_value);
            }
            fputc('\n', out);
        }
    }
    fputs("\nChoose with OTEL_TRACES_EXPORTER=NAME[,NAME...] (the library's default is otlp;\n"
          "`weft run` defaults to store and always writes the local store).\n",
          out);
}

static void
print_markdown(FILE *out)
{
    const struct weft_exporter_info *e = NULL;

    fputs("| exporter | what it does | processor | variable | default | meaning |\n"
          "|---|---|---|---|---|---|\n",
          out);
    for (size_t i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        const char *processor = e->processor != NULL ? e->processor : "—";

        if (e->env_count == 0) {
            fprintf(out, "| `%s` | %s | %s | — | — | — |\n", e->name, e->description, processor);
        }
        for (size_t v = 0; v < e->env_count; v++) {
            const struct weft_exporter_env *env = &e->env[v];

            if (v == 0) {
                fprintf(out, "| `%s` | %s | %s ", e->name, e->description, processor);
            } else {
                fputs("| | | ", out);
            }
            fprintf(out, "| `%s` | ", env->name);
            if (env->default_value != NULL) {
                fprintf(out, "`%s`", env->default_value);
            } else {
                fputs("—", out);
            }
            fprintf(out, " | %s |\n", env->meaning);
        }
    }
}

static json_t *
exporters_json(void)
{
    const struct weft_exporter_info *e = NULL;
    json_t *doc = json_object();
    json_t *list = json_array();

    if (doc == NULL || list == NULL) {
        json_decref(doc);
        json_decref(list);
        return NULL;
    }
    json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_EXPORTERS));
    for (size_t i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        json_t *o = json_object();
        json_t *env = json_array();

        for (size_t v = 0; v < e->env_count && env != NULL; v++) {
            json_array_append_new(env,
                                  json_pack("{s:s, s:s?, s:s}", "name", e->env[v].name, "default",
                                            e->env[v].default_value, "meaning", e->env[v].meaning));
        }
        json_object_set_new(o, "name", json_string(e->name));
        json_object_set_new(o, "description", json_string(e->description));
        json_object_set_new(o, "processor",
                            e->processor != NULL ? json_string(e->processor) : json_null());
        json_object_set_new(o, "env", env);
        json_array_append_new(list, o);
    }
    json_object_set_new(doc, "exporters", list);
    return doc;
}

int
cli_exporters(int argc, char **argv)
{
    bool is_json = false;
    bool is_markdown = false;
    bool is_help = false;
    const struct cli_option options[] = {
        {"json", 0, false, false, NULL, &is_json},
        {"markdown", 0, false, false, NULL, &is_markdown},
        {"help", 'h', false, false, NULL, &is_help},
    };
    size_t positional_count = 0;
    int rc = cli_parse("exporters", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL,
                       0, &positional_count);

    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    if (is_help) {
        cli_exporters_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (is_json && is_markdown) {
        fputs("weft exporters: --json and --markdown exclude each other\n", stderr);
        return CLI_EXIT_USAGE;
    }
    if (is_json) {
        return cli_json_print(exporters_json());
    }
    if (is_markdown) {
        print_markdown(stdout);
    } else {
        print_text(stdout);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fputs("weft exporters: cannot write to stdout\n", stderr);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
