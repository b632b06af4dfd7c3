/* tracing/attrs.c - attribute constructors, UTF-8 aware truncation, deep copies of attribute
 * lists, and redaction (the built-in secret rules plus the user's callback).
 *
 * The built-in rules are a hand-written scanner rather than regular expressions: they run on
 * every string attribute on the recording thread, and one pass over the bytes with a switch
 * on the first character costs about a nanosecond per byte, far below a regex engine.
 */
#include "base/buf.h"
#include "base/mem.h"
#include "sdk.h"
#include "tracing/redact.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct weft_attr
weft_attr_str(const char *key, const char *value)
{
    struct weft_attr a = {.key = key};

    a.value.type = WEFT_VALUE_STRING;
    a.value.u.str = value;
    a.value.len = value == NULL ? 0 : strlen(value);
    return a;
}

struct weft_attr
weft_attr_strn(const char *key, const char *value, size_t len)
{
    struct weft_attr a = {.key = key};

    a.value.type = WEFT_VALUE_STRING;
    a.value.u.str = value;
    a.value.len = value == NULL ? 0 : len;
    return a;
}

struct weft_attr
weft_attr_bool(const char *key, bool value)
{
    struct weft_attr a = {.key = key};

    a.value.type = WEFT_VALUE_BOOL;
    a.value.u.b = value;
    return a;
}

struct weft_attr
weft_attr_int(const char *key, int64_t value)
{
    struct weft_attr a = {.key = key};

    a.value.type = WEFT_VALUE_INT;
    a.value.u.i = value;
    return a;
}

struct weft_attr
weft_attr_double(const char *key, double value)
{
    struct weft_attr a = {.key = key};

    a.value.type = WEFT_VALUE_DOUBLE;
    a.value.u.d = value;
    return a;
}

const struct weft_value *
weft_span_data_attr(const struct weft_span_data *span, const char *key)
{
    if (span == NULL || key == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->attr_count; i++) {
        if (strcmp(span->attrs[i].key, key) == 0) {
            return &span->attrs[i].value;
        }
    }
    return NULL;
}

/* ---- deep copies ---------------------------------------------------------------------- */

static size_t
value_extra_size(const struct weft_value *v)
{
    size_t n = 0;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return v->len + 1;
    case WEFT_VALUE_STRING_ARRAY:
        n = v->len * sizeof(char *);
        for (size_t i = 0; i < v->len; i++) {
            n += strlen(v->u.strs[i]) + 1;
        }
        return n;
    case WEFT_VALUE_BOOL_ARRAY:
        return v->len * sizeof(bool);
    case WEFT_VALUE_INT_ARRAY:
        return v->len * sizeof(int64_t);
    case WEFT_VALUE_DOUBLE_ARRAY:
        return v->len * sizeof(double);
    default:
        return 0;
    }
}

weft_err
weft__attrs_copy(const struct weft_attr *in, size_t count, struct weft_attr **out)
{
    size_t total = count * sizeof(struct weft_attr);
    struct weft_attr *attrs = NULL;
    char *p = NULL;

    *out = NULL;
    for (size_t i = 0; i < count; i++) {
        total += strlen(in[i].key) + 1 + value_extra_size(&in[i].value) + 8;
    }
    attrs = weft__malloc(total);
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    p = (char *)(attrs + count);
    for (size_t i = 0; i < count; i++) {
        const struct weft_value *v = &in[i].value;
        size_t klen = strlen(in[i].key) + 1;

        attrs[i] = in[i];
        memcpy(p, in[i].key, klen);
        attrs[i].key = p;
        p += klen;
        /* Keep the arrays that follow 8-byte aligned. */
        p += (8 - ((uintptr_t)p & 7)) & 7;
        switch (v->type) {
        case WEFT_VALUE_STRING:
            memcpy(p, v->u.str, v->len);
            p[v->len] = '\0';
            attrs[i].value.u.str = p;
            p += v->len + 1;
            break;
        case WEFT_VALUE_STRING_ARRAY: {
            char **ptrs = (char **)(void *)p;

            p += v->len * sizeof(char *);
            for (size_t j = 0; j < v->len; j++) {
                size_t n = strlen(v->u.strs[j]) + 1;

                memcpy(p, v->u.strs[j], n);
                ptrs[j] = p;
                p += n;
            }
            attrs[i].value.u.strs = (const char *const *)ptrs;
            break;
        }
        case WEFT_VALUE_BOOL_ARRAY:
        case WEFT_VALUE_INT_ARRAY:
        case WEFT_VALUE_DOUBLE_ARRAY: {
            size_t n = value_extra_size(v);

            if (n > 0) {
                memcpy(p, v->u.ints, n);
            }
            attrs[i].value.u.ints = (const int64_t *)(void *)p;
            p += n;
            break;
        }
        default:
            break;
        }
    }
    *out = attrs;
    return WEFT_OK;
}

/* ---- built-in redaction --------------------------------------------------------------- */

/* Secret key names by length (index), so a key is compared with at most four names.
 * maybe_secret_key() filters on the last two letters of these names: keep it in step. */
static const char *const secret_names[20][4] = {
    [5] = {"token"},
    [6] = {"apikey", "passwd", "secret", "cookie"},
    [7] = {"api_key", "api-key"},
    [8] = {"password"},
    [9] = {"x-api-key"},
    [10] = {"secret_key", "set-cookie", "auth_token"},
    [11] = {"private_key"},
    [12] = {"access_token", "bearer_token"},
    [13] = {"authorization", "client_secret", "refresh_token", "session_token"},
    [19] = {"proxy-authorization"},
};

/* Does the last dotted segment of @p key name a secret? This runs for every string
 * attribute, so it finds the segment by scanning back from the end (segments are short) and
 * compares only with the names of the same length. */
static bool
secret_key(const char *key, size_t key_len)
{
    size_t start = key_len;
    size_t len = 0;

    while (start > 0 && key[start - 1] != '.' && key_len - start < 20) {
        start--;
    }
    len = key_len - start;
    if (len >= 20 || (start > 0 && key[start - 1] != '.')) {
        return false;
    }
    for (size_t i = 0; i < 4 && secret_names[len][i] != NULL; i++) {
        if ((key[start] | 0x20) == secret_names[len][i][0] &&
            strcasecmp(key + start, secret_names[len][i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool
ascii_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool
token_char(char c)
{
    return ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' ||
           c == '=';
}

static bool
key_char(char c)
{
    return ascii_alnum(c) || c == '-' || c == '_';
}

static size_t
span_of(const char *s, size_t len, bool (*ok)(char))
{
    size_t n = 0;

    while (n < len && ok(s[n])) {
        n++;
    }
    return n;
}

static bool
upper_or_digit(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Is s[i..] the start of a secret? Sets *keep (bytes of the match to keep, e.g. "Bearer ")
 * and *skip (bytes of secret to replace). */
static bool
match_secret(const char *s, size_t len, size_t i, size_t *keep, size_t *skip)
{
    const char *p = s + i;
    size_t left = len - i;
    bool boundary = i == 0 || !ascii_alnum(s[i - 1]);
    size_t n = 0;

    if (!boundary) {
        return false;
    }
    switch (p[0]) {
    case 'B':
    case 'b':
        if (left > 7 && strncasecmp(p, "bearer ", 7) == 0) {
            n = span_of(p + 7, left - 7, token_char);
            if (n >= 8) {
                *keep = 7;
                *skip = n;
                return true;
            }
        } else if (left > 6 && strncasecmp(p, "basic ", 6) == 0) {
            n = span_of(p + 6, left - 6, token_char);
            if (n >= 8) {
                *keep = 6;
                *skip = n;
                return true;
            }
        }
        return false;
    case 's':
        /* OpenAI, Anthropic, Langfuse secret keys: "sk-" and at least 16 more key chars. */
        if (left > 3 && p[1] == 'k' && p[2] == '-') {
            n = span_of(p + 3, left - 3, key_char);
            if (n >= 16) {
                *keep = 0;
                *skip = 3 + n;
                return true;
            }
        }
        return false;
    case 'g':
        /* GitHub tokens: ghp_, gho_, ghu_, ghs_, ghr_ and 36 characters. */
        if (left > 4 && p[1] == 'h' && p[3] == '_' && strchr("pousr", p[2]) != NULL) {
            n = span_of(p + 4, left - 4, key_char);
            if (n >= 20) {
                *keep = 0;
                *skip = 4 + n;
                return true;
            }
        }
        return false;
    case 'A':
        /* AWS access key ids: AKIA or ASIA and 16 upper-case letters or digits. */
        if (left >= 20 && (strncmp(p, "AKIA", 4) == 0 || strncmp(p, "ASIA", 4) == 0)) {
            for (n = 4; n < 20 && upper_or_digit(p[n]); n++) {
            }
            if (n == 20) {
                *keep = 0;
                *skip = 20;
                return true;
            }
        }
        return false;
    default:
        return false;
    }
}

/* Is s[i] (a marker byte) preceded or followed by the rest of a secret shape? The same tests
 * as the memchr loops of maybe_secret(), one marker at a time. */
static bool
marker_starts_secret(const char *s, size_t len, size_t i)
{
    switch (s[i]) {
    case ' ':
        return (i >= 6 && strncasecmp(s + i - 6, "bearer", 6) == 0) ||
               (i >= 5 && strncasecmp(s + i - 5, "basic", 5) == 0);
    case '-':
        return i >= 2 && s[i - 2] == 's' && s[i - 1] == 'k';
    case '_':
        return i >= 3 && s[i - 3] == 'g' && s[i - 2] == 'h';
    case 'A':
        return len - i >= 20 && s[i + 2] == 'I' && s[i + 3] == 'A' &&
               (s[i + 1] == 'K' || s[i + 1] == 'S');
    default:
        return false;
    }
}

/* Could s[0..len) hold a secret shape? Every shape has a marker byte (' ' after Bearer or
 * Basic, '-' after sk, '_' after gh?, or the AKIA/ASIA prefix). Attribute values are mostly
 * short (names, ids, statuses), and for those one byte loop costs less than four memchr
 * calls; long values (prompts, payloads) use memchr, which finds the markers with vector
 * instructions. Both branches accept exactly the same values. */
static bool
maybe_secret(const char *s, size_t len)
{
    static const bool is_marker[256] = {[' '] = true, ['-'] = true, ['_'] = true, ['A'] = true};
    const char *end = s + len;
    const char *p = s;

    if (len <= 64) {
        for (size_t i = 0; i < len; i++) {
            if (is_marker[(unsigned char)s[i]] && marker_starts_secret(s, len, i)) {
                return true;
            }
        }
        return false;
    }
    while ((p = memchr(p, ' ', (size_t)(end - p))) != NULL) {
        if (marker_starts_secret(s, len, (size_t)(p - s))) {
            return true;
        }
        p++;
    }
    p = s;
    while ((p = memchr(p, '-', (size_t)(end - p))) != NULL) {
        if (marker_starts_secret(s, len, (size_t)(p - s))) {
            return true;
        }
        p++;
    }
    p = s;
    while ((p = memchr(p, '_', (size_t)(end - p))) != NULL) {
        if (marker_starts_secret(s, len, (size_t)(p - s))) {
            return true;
        }
        p++;
    }
    for (p = s; (p = memchr(p, 'A', (size_t)(end - p))) != NULL && end - p >= 20; p++) {
        if (marker_starts_secret(s, len, (size_t)(p - s))) {
            return true;
        }
    }
    return false;
}

/* Could @p key (of @p key_len bytes) name a secret? A filter in front of secret_key(), which
 * runs for every string attribute: every secret name ends in one of seven letter pairs
 * (en, ey, wd, rd, et, ie, on, in any case), so a key that does not is rejected after two
 * byte tests; "name", "id", "status" and most other keys are. Bytes >= 0x80 go on to
 * secret_key() because its strcasecmp follows the locale. */
static bool
maybe_secret_key(const char *key, size_t key_len)
{
    unsigned char a = 0;
    unsigned char b = 0;
    bool candidate = false;

    if (key_len < 5) {
        return false; /* shorter than "token", the shortest name */
    }
    a = (unsigned char)key[key_len - 2];
    b = (unsigned char)key[key_len - 1];
    if (a >= 0x80 || b >= 0x80) {
        return secret_key(key, key_len);
    }
    a |= 0x20; /* ASCII lower case; other bytes cannot become letters */
    switch (b | 0x20) {
    case 'n':
        candidate = a == 'e' || a == 'o';
        break;
    case 'y':
    case 't':
        candidate = a == 'e';
        break;
    case 'd':
        candidate = a == 'w' || a == 'r';
        break;
    case 'e':
        candidate = a == 'i';
        break;
    default:
        break;
    }
    return candidate && secret_key(key, key_len);
}

/* The shortest value that can hold a secret shape: "Basic " and 8 token characters (14);
 * "Bearer " needs 15, "sk-" 19, AKIA/ASIA 20 and "gh?_" 24. Shorter values (names, ids,
 * statuses, most enum values) skip the scan: match_secret() could not match them. */
#define SECRET_MIN_LEN WEFT__SECRET_MIN_LEN

bool
weft__may_need_redaction(const char *key, size_t key_len, const char *value, size_t len)
{
    return maybe_secret_key(key, key_len) || (len >= SECRET_MIN_LEN && maybe_secret(value, len));
}

bool
weft__value_may_hold_secret(const char *value, size_t len)
{
    return len >= SECRET_MIN_LEN && maybe_secret(value, len);
}

/* Rewrite @p value with secrets replaced into @p out; false when nothing matched. */
static bool
builtin_redact(const char *key, const char *value, size_t len, struct weft__buf *out)
{
    size_t copied = 0;
    bool matched = false;

    if (key != NULL && secret_key(key, strlen(key))) {
        weft__buf_reset(out);
        weft__buf_append_str(out, WEFT_REDACTED);
        return true;
    }
    if (len < SECRET_MIN_LEN || !maybe_secret(value, len)) {
        return false; /* shorter than any secret shape, or no marker byte */
    }
    for (size_t i = 0; i < len; i++) {
        size_t keep = 0;
        size_t skip = 0;

        if (!match_secret(value, len, i, &keep, &skip)) {
            continue;
        }
        matched = true;
        if (weft__buf_append(out, value + copied, i + keep - copied) != WEFT_OK ||
            weft__buf_append_str(out, WEFT_REDACTED) != WEFT_OK) {
            goto whole;
        }
        i += keep + skip - 1;
        copied = i + 1;
    }
    if (matched && weft__buf_append(out, value + copied, len - copied) != WEFT_OK) {
        goto whole;
    }
    return matched;
whole:
    /* The rewritten value did not fit: replace it whole rather than keep a secret. */
    weft__buf_reset(out);
    weft__buf_append_str(out, WEFT_REDACTED);
    return true;
}

const char *
weft_redact_builtin(
    const char *key, const char *value, size_t len, char *scratch, size_t scratch_len)
{
    struct weft__buf buf;
    size_t n = 0;

    if (value == NULL || scratch == NULL || scratch_len == 0) {
        return NULL;
    }
    weft__buf_init(&buf, 0);
    if (!builtin_redact(key, value, len, &buf)) {
        weft__buf_cleanup(&buf);
        return NULL;
    }
    if (buf.data == NULL) {
        weft__buf_cleanup(&buf);
        snprintf(scratch, scratch_len, "%s", WEFT_REDACTED);
        return scratch;
    }
    n = buf.len < scratch_len - 1 ? buf.len : scratch_len - 1;
    memcpy(scratch, buf.data, n);
    scratch[n] = '\0';
    weft__buf_cleanup(&buf);
    return scratch;
}

const char *
weft__redact(const struct weft_provider *provider,
             const char *key,
             const char *value,
             size_t len,
             struct weft__buf *out)
{
    const char *result = NULL;
    const char *r = NULL;
    char scratch[512];

    if (provider->builtin_redaction && builtin_redact(key, value, len, out)) {
        if (out->data == NULL) {
            /* Out of memory while rewriting: never fall back to the raw value. */
            return WEFT_REDACTED;
        }
        result = out->data;
        value = out->data;
        len = out->len;
    }
    if (provider->redact == NULL) {
        return result;
    }
    r = provider->redact(key, value, len, scratch, sizeof(scratch), provider->redact_user_data);
    if (r == NULL || r == value) {
        return result;
    }
    weft__buf_reset(out);
    if (weft__buf_append_str(out, r) != WEFT_OK) {
        return WEFT_REDACTED;
    }
    return out->data;
}

char *
weft__redact_text(const char *text)
{
    size_t len = strlen(text);
    /* A replacement marker can be longer than what it replaces: leave room for many. */
    size_t cap = len + 64 + len / 2;
    char *scratch = weft__malloc(cap);
    const char *redacted = NULL;
    char *out = NULL;

    if (scratch == NULL) {
        return NULL;
    }
    redacted = weft_redact_builtin("text", text, len, scratch, cap);
    out = weft__strdup(redacted != NULL ? redacted : text);
    weft__free(scratch);
    return out;
}
