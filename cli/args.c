/* cli/args.c - option parsing and terminal helpers shared by the `weft` commands.
 *
 * getopt_long is a GNU extension outside the POSIX level the project builds at, and the
 * commands need little: long options with "=" or a separate value, a few short ones, options
 * after positionals, and "--".
 */
#include "cli.h"
#include "report/render.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_option *
find_long(const struct cli_option *options, size_t count, const char *name, size_t len)
{
    for (size_t i = 0; i < count; i++) {
        if (strlen(options[i].long_name) == len && strncmp(options[i].long_name, name, len) == 0) {
            return &options[i];
        }
    }
    return NULL;
}

static const struct cli_option *
find_short(const struct cli_option *options, size_t count, char name)
{
    for (size_t i = 0; i < count; i++) {
        if (options[i].short_name != 0 && options[i].short_name == name) {
            return &options[i];
        }
    }
    return NULL;
}

static void
mark(const struct cli_option *opt, const char *value)
{
    if (opt->is_set != NULL) {
        *opt->is_set = true;
    }
    if (opt->value != NULL) {
        *opt->value = value;
    }
}

int
cli_parse(const char *cmd,
          int argc,
          char **argv,
          const struct cli_option *options,
          size_t option_count,
          char **positional,
          size_t max_positional,
          size_t *positional_count)
{
    bool is_options_done = false;

    *positional_count = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const struct cli_option *opt = NULL;
        const char *value = NULL;

        if (is_options_done || arg[0] != '-' || arg[1] == '\0') {
            if (*positional_count == max_positional) {
                fprintf(stderr, "weft %s: unexpected argument '%s'\n", cmd, arg);
                return CLI_EXIT_USAGE;
            }
            positional[(*positional_count)++] = argv[i];
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            is_options_done = true;
            continue;
        }
        if (arg[1] == '-') {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);

            opt = find_long(options, option_count, name, len);
            if (opt == NULL) {
                fprintf(stderr, "weft %s: unknown option '--%.*s'\n", cmd, (int)len, name);
                return CLI_EXIT_USAGE;
            }
            if (eq != NULL && !opt->takes_value && !opt->optional_value) {
                fprintf(stderr, "weft %s: option '--%s' takes no value\n", cmd, opt->long_name);
                return CLI_EXIT_USAGE;
            }
            value = eq != NULL ? eq + 1 : NULL;
        } else {
            opt = find_short(options, option_count, arg[1]);
            if (opt == NULL || arg[2] != '\0') {
                fprintf(stderr, "weft %s: unknown option '%s'\n", cmd, arg);
                return CLI_EXIT_USAGE;
            }
        }
        if (opt->takes_value && value == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "weft %s: option '%s' needs a value\n", cmd, arg);
                return CLI_EXIT_USAGE;
            }
            value = argv[++i];
        }
        mark(opt, value);
    }
    return CLI_EXIT_OK;
}

bool
cli_parse_size(const char *text, size_t min, size_t max, size_t *out)
{
    char *end = NULL;
    unsigned long long v = 0;

    if (text == NULL || text[0] < '0' || text[0] > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = (size_t)v;
    return true;
}

bool
cli_parse_duration(const char *text, uint64_t *ns)
{
    static const struct {
        char unit;
        uint64_t ns;
    } units[] = {{'s', 1000000000ull},
                 {'m', 60000000000ull},
                 {'h', 3600000000000ull},
                 {'d', 86400000000000ull}};
    char *end = NULL;
    unsigned long long v = 0;

    if (text == NULL || text[0] < '0' || text[0] > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || v == 0 || end[0] == '\0' || end[1] != '\0') {
        return false;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (end[0] == units[i].unit && v <= UINT64_MAX / units[i].ns) {
            *ns = (uint64_t)v * units[i].ns;
            return true;
        }
    }
    return false;
}

bool
cli_parse_bytes(const char *text, uint64_t *out)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {{"", 0},     {"K", 10}, {"k", 10}, {"KiB", 10}, {"M", 20}, {"m", 20},
                 {"MiB", 20}, {"G", 30}, {"g", 30}, {"GiB", 30}, {"T", 40}, {"TiB", 40}};
    char *end = NULL;
    unsigned long long v = 0;

    if (text == NULL || text[0] < '0' || text[0] > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || v == 0) {
        return false;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0 && v <= (UINT64_MAX >> units[i].shift)) {
            *out = (uint64_t)v << units[i].shift;
            return true;
        }
    }
    return false;
}

bool
cli_color(const char *when, FILE *stream, bool *is_color)
{
    const char *term = getenv("TERM");
    const char *no_color = getenv("NO_COLOR");

    if (when == NULL || strcmp(when, "auto") == 0) {
        *is_color = isatty(fileno(stream)) && (no_color == NULL || no_color[0] == '\0') &&
                    (term == NULL || strcmp(term, "dumb") != 0);
        return true;
    }
    if (strcmp(when, "always") == 0) {
        *is_color = true;
        return true;
    }
    if (strcmp(when, "never") == 0) {
        *is_color = false;
        return true;
    }
    return false;
}

size_t
cli_put_clean(FILE *out, const char *s, size_t max_cols)
{
    const unsigned char *p = (const unsigned char *)(s != NULL ? s : "");
    size_t total = 0;
    size_t limit = 0;
    size_t cols = 0;

    /* One column per character: count lead bytes, not UTF-8 continuation bytes. */
    for (const unsigned char *q = p; *q != '\0'; q++) {
        total += (*q & 0xc0) != 0x80;
    }
    /* Too long: keep room for the "..." within max_cols. */
    limit = total <= max_cols ? total : (max_cols > 3 ? max_cols - 3 : 0);
    while (*p != '\0') {
        bool is_lead = (*p & 0xc0) != 0x80;

        if (is_lead && cols == limit) {
            break;
        }
        if (*p < 0x20 || *p == 0x7f) {
            fputc('?', out);
        } else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            fputc('?', out); /* a C1 control character, which some terminals obey */
            p++;
        } else {
            fputc(*p, out);
        }
        cols += is_lead;
        p++;
    }
    if (cols < total) {
        fputs("...", out);
        cols += 3;
    }
    return cols;
}

void
cli_format_duration(uint64_t ns, char *buf, size_t len)
{
    weft__format_duration(ns, true, buf, len);
}

int
cli_json_print(json_t *doc)
{
    int rc = CLI_EXIT_OK;

    if (doc == NULL || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 ||
        fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
        fputs("weft: cannot write the JSON document (out of memory or stdout closed)\n", stderr);
        rc = CLI_EXIT_FAIL;
    }
    json_decref(doc);
    return rc;
}

int
cli_print_diags(const char *path, weft_err err, const struct weft_diags *diags)
{
    char line[1024];

    for (size_t i = 0; i < diags->count; i++) {
        fprintf(stderr, "%s\n", weft_diag_format(&diags->items[i], line, sizeof(line)));
    }
    if (diags->dropped > 0) {
        fprintf(stderr, "%s: ... and %zu more problems\n", path, diags->dropped);
    }
    if (diags->count == 0) {
        fprintf(stderr, "%s: %s\n", path, weft_strerror(err));
    }
    return CLI_EXIT_USAGE;
}
