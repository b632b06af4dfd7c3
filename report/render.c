/* report/render.c - the terminal renderer of traces: a header and an indented tree of spans
 * with durations, errors, key attributes, events and links, behind `weft trace show`, `weft run`
 * and the console exporter, so that all three print a trace the same way.
 *
 * A large trace is summarised so that the output stays bounded whatever the span count (see
 * weft_trace_render() in include/weft/store.h): summarise() decides which spans are printed
 * and which are folded into one line per name, the put_* functions print.
 *
 * Dependencies: the span data of <weft/export.h>, the store's tree order (weft__trace_tree)
 * and, for weft_trace_render(), the loaded traces of the read API. Nothing below report/
 * depends on it except the console exporter, which prints through it. Stored text is never
 * trusted: control characters and invalid UTF-8 are replaced before they reach the terminal.
 */
#include "render.h"

#include "base/mem.h"
#include "base/utf8.h"
#include "store/store.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/store.h>

/* ------------------------------------------------------------------------------------------ */
/* Rendering                                                                                   */

#define NAME_MAX_COLS      60 /* longer span names are cut with an ellipsis */
#define ALIGN_MAX_COLS     72 /* durations line up in one column up to here */
#define VALUE_MAX_COLS     40
#define STATUS_MAX_COLS    120
#define ATTRS_MAX          4 /* key attributes shown per span or event */
#define ATTRS_MAX_COLS     100
#define EVENTS_MAX         3  /* events shown per span, besides the notable ones */
#define LINKS_MAX          3  /* links shown per span */
#define NOTABLE_EVENTS_MAX 10 /* notable events (weft.*, exception) shown per span */

struct style {
    FILE *out;
    bool is_ascii;
    const char *red;
    const char *green;
    const char *bold;
    const char *dim;
    const char *reset;
    const char *tee;    /* a child with siblings after it */
    const char *elbow;  /* the last child */
    const char *pipe;   /* an ancestor with siblings after it */
    const char *blank;  /* an ancestor without */
    const char *bullet; /* an event */
    const char *ellipsis;
};

static void
style_init(struct style *st, FILE *out, unsigned flags)
{
    bool is_color = (flags & WEFT_RENDER_COLOR) != 0;

    st->out = out;
    st->is_ascii = (flags & WEFT_RENDER_ASCII) != 0;
    st->red = is_color ? "\x1b[31m" : "";
    st->green = is_color ? "\x1b[32m" : "";
    st->bold = is_color ? "\x1b[1m" : "";
    st->dim = is_color ? "\x1b[2m" : "";
    st->reset = is_color ? "\x1b[0m" : "";
    st->tee = st->is_ascii ? "|- " : "\xe2\x94\x9c\xe2\x94\x80 ";
    st->elbow = st->is_ascii ? "`- " : "\xe2\x94\x94\xe2\x94\x80 ";
    st->pipe = st->is_ascii ? "|  " : "\xe2\x94\x82  ";
    st->blank = "   ";
    st->bullet = st->is_ascii ? "* " : "\xe2\x80\xa2 ";
    st->ellipsis = st->is_ascii ? "..." : "\xe2\x80\xa6";
}

/* A C0 or C1 control character or DEL: the well-formed sequence s[0..n). */
static bool
is_control(const unsigned char *s, size_t n)
{
    return (n == 1 && (s[0] < 0x20 || s[0] == 0x7f)) || (n == 2 && s[0] == 0xc2 && s[1] < 0xa0);
}

/* Print at most @p max_cols characters of @p s, replacing control characters (C0, DEL, C1)
 * and invalid UTF-8 with '?' (tabs and newlines with a space) so that stored text cannot
 * move the cursor or recolour the terminal. @return the columns printed, counting one per
 * code point. */
static size_t
put_clean(const struct style *st, const char *s, size_t len, size_t max_cols)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    size_t cols = 0;

    if (s == NULL) {
        return 0;
    }
    while (i < len) {
        bool is_valid = true;
        size_t n = weft__utf8_seq(p + i, len - i, &is_valid);

        if (cols == max_cols) {
            fputs(st->ellipsis, st->out);
            return cols + 1;
        }
        if (!is_valid) {
            fputc('?', st->out);
        } else if (p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
            fputc(' ', st->out);
        } else if (is_control(p + i, n)) {
            fputc('?', st->out);
        } else {
            fwrite(p + i, 1, n, st->out);
        }
        i += n;
        cols++;
    }
    return cols;
}

/* Columns put_clean() would print. */
static size_t
clean_width(const char *s, size_t max_cols)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = s != NULL ? strlen(s) : 0;
    size_t i = 0;
    size_t cols = 0;

    while (i < len) {
        bool is_valid = true;

        if (cols == max_cols) {
            return cols + 1;
        }
        i += weft__utf8_seq(p + i, len - i, &is_valid);
        cols++;
    }
    return cols;
}

static void
put_spaces(FILE *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fputc(' ', out);
    }
}

void
weft__format_duration(uint64_t ns, bool is_ascii, char *buf, size_t len)
{
    if (ns < 1000u) {
        snprintf(buf, len, "%uns", (unsigned)ns);
    } else if (ns < 1000000u) {
        snprintf(buf, len, "%.1f%s", (double)ns / 1e3, is_ascii ? "us" : "\xc2\xb5s");
    } else if (ns < 100000000u) {
        snprintf(buf, len, "%.1fms", (double)ns / 1e6);
    } else if (ns < 1000000000u) {
        snprintf(buf, len, "%.0fms", (double)ns / 1e6);
    } else if (ns < 60000000000u) {
        snprintf(buf, len, "%.2fs", (double)ns / 1e9);
    } else if (ns < 3600000000000u) {
        uint64_t s = ns / 1000000000u;

        snprintf(buf, len, "%um%02us", (unsigned)(s / 60), (unsigned)(s % 60));
    } else {
        uint64_t m = ns / 60000000000u;

        snprintf(buf, len, "%" PRIu64 "h%02um", m / 60, (unsigned)(m % 60));
    }
}

static uint64_t
span_duration(const struct weft_span_data *s)
{
    return s->end_time_ns > s->start_time_ns ? s->end_time_ns - s->start_time_ns : 0;
}

static const char *
kind_label(weft_span_kind kind)
{
    switch (kind) {
    case WEFT_SPAN_KIND_SERVER:
        return "server";
    case WEFT_SPAN_KIND_CLIENT:
        return "client";
    case WEFT_SPAN_KIND_PRODUCER:
        return "producer";
    case WEFT_SPAN_KIND_CONSUMER:
        return "consumer";
    default:
        return NULL; /* INTERNAL and UNSPECIFIED are the default: not worth a word */
    }
}

/* Attributes that explain a span at a glance. Message content is opt-in and long, and the
 * operation name, run-wide ids and names repeat what the header and span name say, so those
 * stay out. */
static bool
is_key_attr(const char *key, bool is_event)
{
    static const char *const skipped[] = {
        "gen_ai.operation.name",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.tool.definitions",
        "exception.stacktrace",
        /* Run-wide (the same on every span of a run) or repeated by the span name. */
        "gen_ai.conversation.id",
        "weft.run.id",
        "gen_ai.agent.name",
        "gen_ai.request.model",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.tool.type",
        "weft.iteration",
        "weft.plan.version",
    };

    for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++) {
        if (strcmp(key, skipped[i]) == 0) {
            return false;
        }
    }
    return strcmp(key, "error.type") == 0 || strncmp(key, "gen_ai.", 7) == 0 ||
           strncmp(key, "weft.", 5) == 0 || (is_event && strncmp(key, "exception.", 10) == 0);
}

static void
put_value(const struct style *st, const struct weft_value *v)
{
    char num[64];
    size_t shown = v->len < 3 ? v->len : 3;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        put_clean(st, v->u.str, v->len, VALUE_MAX_COLS);
        return;
    case WEFT_VALUE_BOOL:
        fputs(v->u.b ? "true" : "false", st->out);
        return;
    case WEFT_VALUE_INT:
        fprintf(st->out, "%" PRId64, v->u.i);
        return;
    case WEFT_VALUE_DOUBLE:
        fprintf(st->out, "%g", v->u.d);
        return;
    default:
        break;
    }
    fputc('[', st->out);
    for (size_t i = 0; i < shown; i++) {
        if (i > 0) {
            fputc(',', st->out);
        }
        switch (v->type) {
        case WEFT_VALUE_STRING_ARRAY:
            put_clean(st, v->u.strs[i], strlen(v->u.strs[i]), VALUE_MAX_COLS / 2);
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            fputs(v->u.bools[i] ? "true" : "false", st->out);
            break;
        case WEFT_VALUE_INT_ARRAY:
            snprintf(num, sizeof(num), "%" PRId64, v->u.ints[i]);
            fputs(num, st->out);
            break;
        default:
            snprintf(num, sizeof(num), "%g", v->u.doubles[i]);
            fputs(num, st->out);
            break;
        }
    }
    if (shown < v->len) {
        fprintf(st->out, ",%s", st->ellipsis);
    }
    fputc(']', st->out);
}

/* Attributes that say how a run, a loop or a step ended, or why: always shown, whatever the
 * per-line budget, and with room for a sentence. */
static bool
is_outcome_attr(const char *key)
{
    static const char *const prefixes[] = {
        "weft.loop.", "weft.stuck_loop.", "weft.circuit_breaker.", "weft.break", "weft.run.budget",
    };
    static const char *const keys[] = {
        "error.type",        "weft.run.status",         "weft.step.status", "weft.decision.reason",
        "weft.tool.outcome", "weft.reflection.verdict", "exception.type",   "exception.message",
    };

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strcmp(key, keys[i]) == 0) {
            return true;
        }
    }
    return strstr(key, "reason") != NULL && strncmp(key, "weft.", 5) == 0;
}

static void
put_attr(const struct style *st, const struct weft_attr *a, size_t max_cols)
{
    fprintf(st->out, "  %s", st->dim);
    put_clean(st, a->key, strlen(a->key), VALUE_MAX_COLS);
    fputc('=', st->out);
    if (a->value.type == WEFT_VALUE_STRING) {
        put_clean(st, a->value.u.str, a->value.len, max_cols);
    } else {
        put_value(st, &a->value);
    }
    fputs(st->reset, st->out);
}

/* The outcome attributes first (all of them), then other key attributes within the budget
 * of ATTRS_MAX attributes and ATTRS_MAX_COLS columns. */
static void
put_attrs(const struct style *st, const struct weft_attr *attrs, size_t count, bool is_event)
{
    size_t shown = 0;
    size_t cols = 0;

    for (size_t i = 0; i < count; i++) {
        if (attrs[i].key != NULL && is_outcome_attr(attrs[i].key) &&
            is_key_attr(attrs[i].key, true)) {
            put_attr(st, &attrs[i], STATUS_MAX_COLS);
            cols += 3 + strlen(attrs[i].key) +
                    (attrs[i].value.type == WEFT_VALUE_STRING ? attrs[i].value.len : 8);
            shown++;
        }
    }
    for (size_t i = 0; i < count && shown < ATTRS_MAX && cols < ATTRS_MAX_COLS; i++) {
        if (attrs[i].key == NULL || is_outcome_attr(attrs[i].key) ||
            !is_key_attr(attrs[i].key, is_event)) {
            continue;
        }
        put_attr(st, &attrs[i], VALUE_MAX_COLS);
        cols += 3 + strlen(attrs[i].key) +
                (attrs[i].value.type == WEFT_VALUE_STRING ? attrs[i].value.len : 8);
        shown++;
    }
}

static void
put_header(const struct style *st,
           const struct weft_span_data *const *spans,
           size_t count,
           const size_t *order)
{
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char duration[32];
    char started[64];
    uint64_t start = UINT64_MAX;
    uint64_t end = 0;
    size_t errors = 0;
    const char *service = NULL;
    struct tm tm;
    time_t secs = 0;

    for (size_t i = 0; i < count; i++) {
        const struct weft_span_data *s = spans[order[i]];

        start = s->start_time_ns < start ? s->start_time_ns : start;
        end = s->end_time_ns > end ? s->end_time_ns : end;
        errors += s->status_code == WEFT_STATUS_ERROR;
        if (service == NULL) {
            service = weft__store_service_name(s);
        }
    }
    weft_hex_encode(spans[order[0]]->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    weft__format_duration(end > start ? end - start : 0, st->is_ascii, duration, sizeof(duration));
    secs = (time_t)(start / 1000000000u);
    if (gmtime_r(&secs, &tm) != NULL) {
        size_t n = strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%S", &tm);

        snprintf(started + n, sizeof(started) - n, ".%03uZ",
                 (unsigned)(start % 1000000000u / 1000000u));
    } else {
        snprintf(started, sizeof(started), "?");
    }
    fprintf(st->out, "%strace %s%s", st->bold, trace_hex, st->reset);
    if (service != NULL) {
        fputs("  service=", st->out);
        put_clean(st, service, strlen(service), VALUE_MAX_COLS);
    }
    fprintf(st->out, "  start=%s  duration=%s  spans=%zu  ", started, duration, count);
    if (errors > 0) {
        fprintf(st->out, "%serrors=%zu%s\n", st->red, errors, st->reset);
    } else {
        fputs("errors=0\n", st->out);
    }
}

/* The tree glyphs before a line: one segment per ancestor level (a bar while that ancestor
 * has later siblings), then the span's own branch. */
static void
put_prefix(const struct style *st, const bool *has_more, size_t depth, bool is_last)
{
    for (size_t k = 1; k < depth; k++) {
        fputs(has_more[k] ? st->pipe : st->blank, st->out);
    }
    if (depth > 0) {
        fputs(is_last ? st->elbow : st->tee, st->out);
    }
}

/* Events that explain a failure or a loop: up to NOTABLE_EVENTS_MAX of them are shown besides
 * the EVENTS_MAX others, and they keep a span visible in a summarised trace. */
static bool
is_notable_event(const struct weft_event_data *ev)
{
    return ev->name != NULL &&
           (strncmp(ev->name, "weft.", 5) == 0 || strcmp(ev->name, "exception") == 0);
}

/* The glyphs that continue the tree on a detail line (event, link) of a span. */
static void
put_detail_prefix(const struct style *st, const bool *has_more, size_t depth, bool has_children)
{
    for (size_t k = 1; k <= depth; k++) {
        fputs(has_more[k] ? st->pipe : st->blank, st->out);
    }
    fputs(has_children ? st->pipe : st->blank, st->out);
}

static void
put_events(const struct style *st,
           const struct weft_span_data *s,
           const bool *has_more,
           size_t depth,
           bool has_children)
{
    size_t other = 0;
    size_t notable = 0;
    size_t hidden = 0;

    for (size_t e = 0; e < s->event_count; e++) {
        const struct weft_event_data *ev = &s->events[e];
        char offset[32];

        if (is_notable_event(ev) ? notable++ >= NOTABLE_EVENTS_MAX : other++ >= EVENTS_MAX) {
            hidden++;
            continue;
        }
        put_detail_prefix(st, has_more, depth, has_children);
        weft__format_duration(ev->time_ns > s->start_time_ns ? ev->time_ns - s->start_time_ns : 0,
                              st->is_ascii, offset, sizeof(offset));
        fprintf(st->out, "%s%s", is_notable_event(ev) ? st->bold : st->dim, st->bullet);
        put_clean(st, ev->name, ev->name != NULL ? strlen(ev->name) : 0, VALUE_MAX_COLS);
        fprintf(st->out, "%s%s +%s%s", st->reset, st->dim, offset, st->reset);
        put_attrs(st, ev->attrs, ev->attr_count, true);
        fputc('\n', st->out);
    }
    if (hidden > 0 || s->dropped_events > 0) {
        put_detail_prefix(st, has_more, depth, has_children);
        fprintf(st->out, "%s%s%zu more events%s\n", st->dim, st->bullet, hidden + s->dropped_events,
                st->reset);
    }
}

/* Links: where a span points to another (a resumed run's previous trace, the failed step a
 * correction repairs, the occurrences of a stuck loop), at most LINKS_MAX per span. */
static void
put_links(const struct style *st,
          const struct weft_span_data *s,
          const bool *has_more,
          size_t depth,
          bool has_children)
{
    size_t shown = s->link_count < LINKS_MAX ? s->link_count : LINKS_MAX;

    for (size_t i = 0; i < shown; i++) {
        const struct weft_link_data *l = &s->links[i];
        char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
        char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];

        weft_hex_encode(l->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
        weft_hex_encode(l->span_id, WEFT_SPAN_ID_SIZE, span_hex);
        put_detail_prefix(st, has_more, depth, has_children);
        fprintf(st->out, "%s%slink ", st->dim, st->is_ascii ? "-> " : "\xe2\x86\xaa ");
        if (memcmp(l->trace_id, s->trace_id, WEFT_TRACE_ID_SIZE) != 0) {
            fprintf(st->out, "trace %s ", trace_hex);
        }
        fprintf(st->out, "span %s%s", span_hex, st->reset);
        put_attrs(st, l->attrs, l->attr_count, true);
        fputc('\n', st->out);
    }
    if (s->link_count > shown || s->dropped_links > 0) {
        put_detail_prefix(st, has_more, depth, has_children);
        fprintf(st->out, "%s%s%zu more links%s\n", st->dim, st->bullet,
                s->link_count - shown + s->dropped_links, st->reset);
    }
}

static size_t
name_width(const struct weft_span_data *s, size_t depth)
{
    const char *kind = kind_label(s->kind);

    return 3 * depth + clean_width(s->name, NAME_MAX_COLS) + (kind != NULL ? strlen(kind) + 3 : 0);
}

static void
put_span(const struct style *st,
         const struct weft_span_data *s,
         size_t width,
         size_t column,
         bool is_orphan,
         unsigned flags)
{
    const char *kind = kind_label(s->kind);
    char duration[32];

    put_clean(st, s->name, s->name != NULL ? strlen(s->name) : 0, NAME_MAX_COLS);
    if (kind != NULL) {
        fprintf(st->out, " %s(%s)%s", st->dim, kind, st->reset);
    }
    put_spaces(st->out, width < column ? column - width : 0);
    weft__format_duration(span_duration(s), st->is_ascii, duration, sizeof(duration));
    put_spaces(st->out, 2 + 8 - clean_width(duration, 8));
    fputs(duration, st->out);
    if (s->status_code == WEFT_STATUS_ERROR) {
        fprintf(st->out, "  %s%sERROR", st->bold, st->red);
        if (s->status_message != NULL && s->status_message[0] != '\0') {
            fputs(": ", st->out);
            put_clean(st, s->status_message, strlen(s->status_message), STATUS_MAX_COLS);
        }
        fputs(st->reset, st->out);
    } else if (s->status_code == WEFT_STATUS_OK) {
        fprintf(st->out, "  %sok%s", st->green, st->reset);
    }
    if (is_orphan) {
        fprintf(st->out, "  %s(parent span missing)%s", st->dim, st->reset);
    }
    if ((flags & WEFT_RENDER_ATTRS) != 0) {
        put_attrs(st, s->attrs, s->attr_count, false);
    }
    fputc('\n', st->out);
}

/* is_last[i]: no later sibling follows line i. Scanning backwards, seen[d] says a span at
 * depth d was met since the tree last climbed above d; climbing clears the deeper levels,
 * and each level is cleared at most once per time it is set, so the pass is linear. */
static void
mark_last_siblings(const size_t *depth, size_t count, bool *seen, bool *is_last)
{
    size_t top = 0;

    for (size_t i = count; i-- > 0;) {
        size_t d = depth[i];

        for (size_t k = d + 1; k <= top; k++) {
            seen[k] = false;
        }
        is_last[i] = !seen[d];
        seen[d] = true;
        top = d;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Summarising large traces                                                                    */

#define KEEP_PER_NAME      10  /* siblings of one name shown before the rest are summarised */
#define KEEP_PER_PARENT    40  /* ordinary siblings shown under one parent */
#define NOTABLE_PER_PARENT 20  /* siblings with an error or a notable event shown in addition */
#define KEEP_TOTAL         300 /* ordinary spans shown in the whole trace */
#define NOTABLE_TOTAL      200 /* notable spans shown in the whole trace (nested fan-outs) */
#define TALLY_NAMES        8   /* summary lines per parent; further names share one line */

/* Hidden siblings of one name under one parent. name NULL: every other name. */
struct tally {
    const char *name;
    size_t spans;
    size_t ok;
    size_t error;
    size_t descendants;
};

/* The children of the current parent at one depth. */
struct level {
    size_t plain_kept;
    size_t notable_kept;
    struct tally tallies[TALLY_NAMES + 1];
    size_t tally_count;
    size_t names_first; /* index into the names list below */
};

/* One output line: a span (pos into the tree order) or a summary (tally). */
struct line {
    size_t pos;
    size_t depth;
    struct tally tally;
    bool is_summary;
};

struct summariser {
    const struct weft_span_data *const *spans;
    const size_t *order;
    const size_t *depth;
    const bool *is_notable;      /* per tree position: the span or one below it is notable */
    const bool *is_last;         /* per tree position: the last child of its parent */
    const size_t *notable_after; /* per tree position: notable siblings after it */
    struct level *levels;        /* per depth */
    struct line *lines;
    size_t line_count;
    size_t line_cap;
    bool is_oom;
    size_t plain_total;
    size_t notable_total;
    size_t hidden_spans;
    /* Kept names per level: which names were seen how often under the current parent. */
    const char **names;
    size_t *name_seen;
    size_t name_count;
};

/* A new zeroed line, or NULL (is_oom raised) when memory ran out. */
static struct line *
push_line(struct summariser *sm)
{
    struct line *ln = NULL;

    if (sm->line_count == sm->line_cap) {
        size_t cap = sm->line_cap == 0 ? 64 : 2 * sm->line_cap;
        struct line *grown = weft__realloc(sm->lines, cap * sizeof(*grown));

        if (grown == NULL) {
            sm->is_oom = true;
            return NULL;
        }
        sm->lines = grown;
        sm->line_cap = cap;
    }
    ln = &sm->lines[sm->line_count++];
    memset(ln, 0, sizeof(*ln));
    return ln;
}

static struct tally *
tally_for(struct level *lv, const char *name)
{
    for (size_t i = 0; i < lv->tally_count; i++) {
        if (lv->tallies[i].name != NULL && name != NULL && strcmp(lv->tallies[i].name, name) == 0) {
            return &lv->tallies[i];
        }
    }
    if (lv->tally_count < TALLY_NAMES) {
        struct tally *t = &lv->tallies[lv->tally_count++];

        memset(t, 0, sizeof(*t));
        t->name = name;
        return t;
    }
    return &lv->tallies[TALLY_NAMES]; /* "other names"; its name stays NULL */
}

/* How many siblings named @p name the current parent at level @p d has shown so far
 * (incremented). The list holds the names of every open level, deepest last. */
static size_t
seen_and_count(struct summariser *sm, size_t d, const char *name)
{
    for (size_t i = sm->levels[d].names_first; i < sm->name_count; i++) {
        if (strcmp(sm->names[i], name) == 0) {
            return sm->name_seen[i]++;
        }
    }
    sm->names[sm->name_count] = name;
    sm->name_seen[sm->name_count] = 1;
    sm->name_count++;
    return 0;
}

static void
open_level(struct summariser *sm, size_t d)
{
    struct level *lv = &sm->levels[d];

    memset(lv, 0, sizeof(*lv));
    lv->names_first = sm->name_count;
}

/* Close level @p d: its summary lines follow the last child of its parent. */
static void
close_level(struct summariser *sm, size_t d)
{
    struct level *lv = &sm->levels[d];

    for (size_t i = 0; i <= TALLY_NAMES; i++) {
        const struct tally *t = &lv->tallies[i];

        if ((i < lv->tally_count || i == TALLY_NAMES) && t->spans > 0) {
            struct line *ln = push_line(sm);

            if (ln == NULL) {
                return;
            }
            ln->is_summary = true;
            ln->depth = d;
            ln->tally = *t;
        }
    }
    sm->name_count = lv->names_first;
    memset(lv, 0, sizeof(*lv));
}

/* Decide which spans are printed. Every span with an error or a notable event, and the
 * ancestors of each, stay visible (up to NOTABLE_PER_PARENT per parent); of the others, at most
 * KEEP_PER_NAME per name and KEEP_PER_PARENT per parent, KEEP_TOTAL in all. The rest are
 * counted into one summary line per name, placed after their last sibling. */
static void
summarise(struct summariser *sm, size_t count, bool is_all)
{
    size_t open_depth = 0; /* levels [0, open_depth] are open; level 0 holds the roots */
    size_t hide_below = SIZE_MAX;
    struct tally *hiding = NULL;

    open_level(sm, 0);

    for (size_t pos = 0; pos < count; pos++) {
        const struct weft_span_data *s = sm->spans[sm->order[pos]];
        size_t d = sm->depth[pos];
        struct level *lv = NULL;
        bool is_kept = true;

        if (hide_below != SIZE_MAX && d > hide_below) {
            hiding->descendants++;
            sm->hidden_spans++;
            continue;
        }
        hide_below = SIZE_MAX;
        while (open_depth > d) {
            close_level(sm, open_depth--);
        }
        lv = &sm->levels[d];
        if (!is_all) {
            size_t seen = seen_and_count(sm, d, s->name != NULL ? s->name : "");

            if (sm->is_notable[pos]) {
                /* The first and the last ones: how the trouble started and how it ended. */
                is_kept = (lv->notable_kept < NOTABLE_PER_PARENT / 2 ||
                           sm->notable_after[pos] < NOTABLE_PER_PARENT / 2) &&
                          sm->notable_total < NOTABLE_TOTAL;
                lv->notable_kept += is_kept;
                sm->notable_total += is_kept;
            } else {
                /* The last child stays: it is how the parent ended (the final decision). */
                is_kept =
                    sm->is_last[pos] || (seen < KEEP_PER_NAME && lv->plain_kept < KEEP_PER_PARENT &&
                                         sm->plain_total < KEEP_TOTAL);
                lv->plain_kept += is_kept;
                sm->plain_total += is_kept;
            }
        }
        if (!is_kept) {
            hiding = tally_for(lv, s->name);
            hiding->spans++;
            hiding->ok += s->status_code != WEFT_STATUS_ERROR;
            hiding->error += s->status_code == WEFT_STATUS_ERROR;
            sm->hidden_spans++;
            hide_below = d;
            continue;
        }
        struct line *ln = push_line(sm);

        if (ln == NULL) {
            return;
        }
        ln->pos = pos;
        ln->depth = d;
        open_level(sm, d + 1);
        open_depth = d + 1;
    }
    while (open_depth > 0) {
        close_level(sm, open_depth--);
    }
    close_level(sm, 0);
}

static bool
is_notable_span(const struct weft_span_data *s)
{
    if (s->status_code == WEFT_STATUS_ERROR) {
        return true;
    }
    for (size_t e = 0; e < s->event_count; e++) {
        if (is_notable_event(&s->events[e])) {
            return true;
        }
    }
    return false;
}

/* is_notable[pos]: the span at tree position pos, or one in its subtree, is notable. A
 * backward pass: the children of a span follow it, so they are done when it is reached;
 * below[d] gathers the subtrees at depth d since the last span at depth d - 1. */
static void
mark_notable(const struct weft_span_data *const *spans,
             const size_t *order,
             const size_t *depth,
             size_t count,
             bool *below,
             bool *is_notable)
{
    for (size_t pos = count; pos-- > 0;) {
        size_t d = depth[pos];

        is_notable[pos] = is_notable_span(spans[order[pos]]) || below[d + 1];
        below[d + 1] = false;
        below[d] = below[d] || is_notable[pos];
    }
}

/* notable_after[pos]: how many later siblings of the span at pos are notable. A backward
 * pass: per depth, the notable spans met since the tree last climbed through their parent. */
static void
count_notable_after(const size_t *depth,
                    const bool *is_notable,
                    size_t count,
                    size_t *counts,
                    size_t *notable_after)
{
    for (size_t pos = count; pos-- > 0;) {
        size_t d = depth[pos];

        counts[d + 1] = 0; /* the children of this span, done */
        notable_after[pos] = counts[d];
        counts[d] += is_notable[pos];
    }
}

static void
put_summary(const struct style *st, const struct tally *t)
{
    fprintf(st->out, "%s%s %zu more ", st->dim, st->ellipsis, t->spans);
    if (t->name != NULL) {
        fputc('`', st->out);
        put_clean(st, t->name, strlen(t->name), NAME_MAX_COLS);
        fputs("` spans", st->out);
    } else {
        fputs("spans of other names", st->out);
    }
    fprintf(st->out, " (%zu ok, ", t->ok);
    if (t->error > 0) {
        fprintf(st->out, "%s%zu error%s%s", st->red, t->error, st->reset, st->dim);
    } else {
        fputs("0 error", st->out);
    }
    if (t->descendants > 0) {
        fprintf(st->out, "; %zu spans below them", t->descendants);
    }
    fprintf(st->out, ")%s\n", st->reset);
}

/* The per-span arrays of one rendering, indexed by tree position (has_more and
 * notable_counts by depth, count + 2 entries). */
struct layout {
    size_t *order;
    size_t *depth;
    bool *is_orphan;
    bool *is_notable;
    bool *is_last_pos; /* the last child of its parent */
    size_t *notable_after;
    size_t *notable_counts;
    bool *has_more; /* scratch: does the line at that depth have later siblings? */
};

static void
layout_cleanup(struct layout *l, struct summariser *sm)
{
    weft__free(l->order);
    weft__free(l->depth);
    weft__free(l->is_orphan);
    weft__free(l->is_notable);
    weft__free(l->is_last_pos);
    weft__free(l->notable_after);
    weft__free(l->notable_counts);
    weft__free(l->has_more);
    weft__free(sm->lines);
    weft__free(sm->levels);
    weft__free(sm->names);
    weft__free(sm->name_seen);
}

static weft_err
layout_init(struct layout *l, struct summariser *sm, size_t count)
{
    memset(l, 0, sizeof(*l));
    memset(sm, 0, sizeof(*sm));
    l->order = weft__malloc(count * sizeof(*l->order));
    l->depth = weft__malloc(count * sizeof(*l->depth));
    l->is_orphan = weft__malloc(count * sizeof(*l->is_orphan));
    l->is_notable = weft__malloc(count * sizeof(*l->is_notable));
    l->is_last_pos = weft__malloc(count * sizeof(*l->is_last_pos));
    l->notable_after = weft__malloc(count * sizeof(*l->notable_after));
    l->notable_counts = weft__malloc((count + 2) * sizeof(*l->notable_counts));
    l->has_more = weft__calloc(count + 2, sizeof(*l->has_more));
    sm->levels = weft__malloc((count + 2) * sizeof(*sm->levels));
    sm->names = weft__malloc(count * sizeof(*sm->names));
    sm->name_seen = weft__malloc(count * sizeof(*sm->name_seen));
    if (l->order == NULL || l->depth == NULL || l->is_orphan == NULL || l->is_notable == NULL ||
        l->is_last_pos == NULL || l->notable_after == NULL || l->notable_counts == NULL ||
        l->has_more == NULL || sm->levels == NULL || sm->names == NULL || sm->name_seen == NULL) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

/* Order the spans as a tree and decide which lines are printed (sm->lines). */
static weft_err
decide_lines(struct layout *l,
             struct summariser *sm,
             const struct weft_span_data *const *spans,
             size_t count,
             bool is_all)
{
    weft_err err = weft__trace_tree(spans, count, l->order, l->depth, l->is_orphan);

    if (err != WEFT_OK) {
        return err;
    }
    mark_notable(spans, l->order, l->depth, count, l->has_more, l->is_notable);
    memset(l->has_more, 0, (count + 2) * sizeof(*l->has_more));
    mark_last_siblings(l->depth, count, l->has_more, l->is_last_pos);
    memset(l->notable_counts, 0, (count + 2) * sizeof(*l->notable_counts));
    count_notable_after(l->depth, l->is_notable, count, l->notable_counts, l->notable_after);
    sm->is_last = l->is_last_pos;
    sm->notable_after = l->notable_after;
    sm->spans = spans;
    sm->order = l->order;
    sm->depth = l->depth;
    sm->is_notable = l->is_notable;
    summarise(sm, count, is_all);
    return sm->is_oom ? WEFT_ENOMEM : WEFT_OK;
}

/* The column durations line up in: after the widest name, up to ALIGN_MAX_COLS. */
static size_t
align_column(const struct summariser *sm, const struct weft_span_data *const *spans)
{
    size_t column = 0;

    for (size_t i = 0; i < sm->line_count; i++) {
        if (!sm->lines[i].is_summary) {
            size_t w = name_width(spans[sm->order[sm->lines[i].pos]], sm->lines[i].depth);

            column = w > column ? w : column;
        }
    }
    return column < ALIGN_MAX_COLS ? column : ALIGN_MAX_COLS;
}

/* Print the header, @p note and the decided lines: tree glyphs, then a span (with its events
 * and links) or a summary. Nothing is printed when memory runs out. */
static weft_err
print_lines(const struct style *st,
            const struct summariser *sm,
            struct layout *l,
            const struct weft_span_data *const *spans,
            size_t count,
            unsigned flags,
            const char *note)
{
    bool *is_last = weft__malloc(sm->line_count * sizeof(*is_last)); /* per line */
    size_t *line_depth = weft__malloc(sm->line_count * sizeof(*line_depth));
    size_t column = align_column(sm, spans);
    bool *has_more = l->has_more;

    if (is_last == NULL || line_depth == NULL) {
        weft__free(is_last);
        weft__free(line_depth);
        return WEFT_ENOMEM;
    }
    put_header(st, spans, count, l->order);
    if (note != NULL) {
        fprintf(st->out, "%s(%s)%s\n", st->dim, note, st->reset);
    }
    if (sm->hidden_spans > 0) {
        fprintf(st->out,
                "%s(%zu of %zu spans summarised; errors and notable events are kept; "
                "weft trace show --all prints every span)%s\n",
                st->dim, sm->hidden_spans, count, st->reset);
    }
    for (size_t i = 0; i < sm->line_count; i++) {
        line_depth[i] = sm->lines[i].depth;
    }
    memset(has_more, 0, (count + 2) * sizeof(*has_more));
    mark_last_siblings(line_depth, sm->line_count, has_more, is_last);
    memset(has_more, 0, (count + 2) * sizeof(*has_more));
    for (size_t i = 0; i < sm->line_count; i++) {
        const struct line *ln = &sm->lines[i];
        const struct weft_span_data *s = NULL;
        bool has_children = i + 1 < sm->line_count && line_depth[i + 1] > ln->depth;

        has_more[ln->depth] = !is_last[i];
        put_prefix(st, has_more, ln->depth, is_last[i]);
        if (ln->is_summary) {
            put_summary(st, &ln->tally);
            continue;
        }
        s = spans[l->order[ln->pos]];
        put_span(st, s, name_width(s, ln->depth), column, l->is_orphan[ln->pos], flags);
        if ((flags & WEFT_RENDER_EVENTS) != 0 && s->event_count > 0) {
            put_events(st, s, has_more, ln->depth, has_children);
        }
        if ((flags & WEFT_RENDER_LINKS) != 0 && s->link_count > 0) {
            put_links(st, s, has_more, ln->depth, has_children);
        }
    }
    weft__free(is_last);
    weft__free(line_depth);
    return WEFT_OK;
}

weft_err
weft__render_spans(FILE *stream,
                   const struct weft_span_data *const *spans,
                   size_t count,
                   unsigned flags,
                   const char *note)
{
    struct style st;
    struct summariser sm;
    struct layout l;
    weft_err err = WEFT_OK;

    if (stream == NULL || (spans == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    if (count == 0) {
        return WEFT_OK;
    }
    style_init(&st, stream, flags);
    err = layout_init(&l, &sm, count);
    if (err == WEFT_OK) {
        err = decide_lines(&l, &sm, spans, count, (flags & WEFT_RENDER_ALL) != 0);
    }
    if (err == WEFT_OK) {
        err = print_lines(&st, &sm, &l, spans, count, flags, note);
    }
    if (err == WEFT_OK && ferror(stream)) {
        err = WEFT_EIO;
    }
    layout_cleanup(&l, &sm);
    return err;
}

weft_err
weft_trace_render(const struct weft_trace *trace, FILE *stream, unsigned flags)
{
    if (trace == NULL || stream == NULL) {
        return WEFT_EINVAL;
    }
    return weft__render_spans(stream, weft__trace_spans(trace), weft_trace_span_count(trace), flags,
                              NULL);
}
