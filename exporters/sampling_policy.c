/* exporters/sampling_policy.c - the tail-sampling policy of include/weft/sampling.h: parse the
 * text form into ordered rules and decide a run from its facts.
 *
 * A share rule compares the trace id's last eight bytes (big-endian; W3C random trace ids make
 * them uniform) with share * 2^64, as OpenTelemetry's TraceIdRatioBased sampler does, so that
 * every process deciding the same trace with the same share agrees without talking.
 * Invariants: a policy holds 1 to MAX_RULES rules; names are unique, non-empty and made of
 * [a-z0-9_.-]; the canonical text is built once at parse time.
 */
#include "base/buf.h"
#include "base/mem.h"
#include "base/str.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/sampling.h>

#define MAX_RULES 32
#define MAX_NAME  48

typedef enum {
    COND_FAILED,
    COND_STUCK,
    COND_CORRECTED,
    COND_REJECTED,
    COND_ALL,
    COND_DURATION,
    COND_COST,
    COND_REWARD,
    COND_SHARE
} cond_kind;

struct rule {
    char name[MAX_NAME];
    cond_kind kind;
    double threshold; /* seconds, USD, reward, or the share in [0, 1] */
};

struct weft_sampling_policy {
    struct rule rules[MAX_RULES];
    size_t count;
    char *text;
};

static const struct {
    const char *word;
    cond_kind kind;
} words[] = {
    {"failed", COND_FAILED},     {"stuck", COND_STUCK}, {"corrected", COND_CORRECTED},
    {"rejected", COND_REJECTED}, {"all", COND_ALL},
};

/* "sampling rule 'RULE': DETAIL" into @p why. */
static void
say(char *why, size_t why_len, const char *rule, const char *detail)
{
    if (why != NULL && why_len > 0) {
        snprintf(why, why_len, "sampling rule '%s': %s", rule, detail);
    }
}

/* A number that fills all of [s, s+len). */
static bool
parse_number(const char *s, size_t len, double *out)
{
    char buf[64];
    char *end = NULL;

    if (len == 0 || len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *out = strtod(buf, &end);
    return errno == 0 && end == buf + len && isfinite(*out);
}

/* A duration "90", "90s", "500ms", "5m", "2h" into seconds. */
static bool
parse_duration(const char *s, size_t len, double *out)
{
    static const struct {
        const char *unit;
        double seconds;
    } units[] = {{"ms", 0.001}, {"s", 1}, {"m", 60}, {"h", 3600}};
    size_t digits = len;

    while (digits > 0 && isalpha((unsigned char)s[digits - 1])) {
        digits--;
    }
    if (!parse_number(s, digits, out) || *out < 0) {
        return false;
    }
    if (digits == len) {
        return true;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].unit) == len - digits &&
            memcmp(s + digits, units[i].unit, len - digits) == 0) {
            *out *= units[i].seconds;
            return true;
        }
    }
    return false;
}

/* The condition part of one rule. */
static bool
parse_condition(const char *s, size_t len, struct rule *r, const char **default_name)
{
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i].word) == len && memcmp(s, words[i].word, len) == 0) {
            r->kind = words[i].kind;
            *default_name = words[i].word;
            return true;
        }
    }
    if (len > 9 && memcmp(s, "duration>", 9) == 0) {
        r->kind = COND_DURATION;
        *default_name = "slow";
        return parse_duration(s + 9, len - 9, &r->threshold);
    }
    if (len > 5 && memcmp(s, "cost>", 5) == 0) {
        r->kind = COND_COST;
        *default_name = "costly";
        return parse_number(s + 5, len - 5, &r->threshold) && r->threshold >= 0;
    }
    if (len > 7 && memcmp(s, "reward<", 7) == 0) {
        r->kind = COND_REWARD;
        *default_name = "low_reward";
        return parse_number(s + 7, len - 7, &r->threshold);
    }
    if (len > 1 && s[len - 1] == '%') {
        r->kind = COND_SHARE;
        *default_name = "sample";
        if (!parse_number(s, len - 1, &r->threshold) || r->threshold < 0 || r->threshold > 100) {
            return false;
        }
        r->threshold /= 100.0;
        return true;
    }
    return false;
}

static bool
valid_name(const char *s, size_t len)
{
    if (len == 0 || len >= MAX_NAME) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!(islower(c) || isdigit(c) || c == '_' || c == '-' || c == '.')) {
            return false;
        }
    }
    return true;
}

/* One rule "[NAME=]CONDITION" of @p len bytes at @p s. */
static bool
parse_rule(const char *s, size_t len, struct rule *r, char *why, size_t why_len)
{
    char shown[80];
    const char *eq = memchr(s, '=', len);
    const char *cond = s;
    size_t cond_len = len;
    const char *default_name = NULL;

    snprintf(shown, sizeof(shown), "%.*s", (int)(len < 60 ? len : 60), s);
    if (eq != NULL) {
        size_t name_len = (size_t)(eq - s);
        const char *name = s;

        weft__trim(&name, &name_len);
        if (!valid_name(name, name_len)) {
            say(why, why_len, shown,
                "a rule's name is 1 to 47 characters of a-z, 0-9, '_', '-' and '.'");
            return false;
        }
        memcpy(r->name, name, name_len);
        r->name[name_len] = '\0';
        cond = eq + 1;
        cond_len = (size_t)(s + len - cond);
        weft__trim(&cond, &cond_len);
    }
    if (!parse_condition(cond, cond_len, r, &default_name)) {
        say(why, why_len, shown,
            "expected failed, stuck, corrected, rejected, all, duration>DURATION (e.g. 90s, "
            "5m), cost>USD, reward<NUMBER or PERCENT% (0 to 100)");
        return false;
    }
    if (r->name[0] == '\0') {
        snprintf(r->name, sizeof(r->name), "%s", default_name);
    }
    return true;
}

static const char *
cond_text(const struct rule *r, char *buf, size_t len)
{
    switch (r->kind) {
    case COND_DURATION:
        snprintf(buf, len, "duration>%gs", r->threshold);
        return buf;
    case COND_COST:
        snprintf(buf, len, "cost>%g", r->threshold);
        return buf;
    case COND_REWARD:
        snprintf(buf, len, "reward<%g", r->threshold);
        return buf;
    case COND_SHARE:
        snprintf(buf, len, "%g%%", r->threshold * 100.0);
        return buf;
    default:
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
            if (words[i].kind == r->kind) {
                return words[i].word;
            }
        }
        return "?";
    }
}

static weft_err
build_text(struct weft_sampling_policy *p)
{
    struct weft__buf b;
    weft_err err = WEFT_OK;

    weft__buf_init(&b, 0);
    for (size_t i = 0; i < p->count && err == WEFT_OK; i++) {
        char cond[64];

        err = weft__buf_printf(&b, "%s%s=%s", i > 0 ? "," : "", p->rules[i].name,
                               cond_text(&p->rules[i], cond, sizeof(cond)));
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(&b);
        return err;
    }
    p->text = b.data; /* the buffer's bytes are the policy's now */
    return WEFT_OK;
}

weft_err
weft_sampling_policy_parse(const char *text,
                           struct weft_sampling_policy **out,
                           char *why,
                           size_t why_len)
{
    struct weft_sampling_policy *p = NULL;
    const char *s = text;
    size_t all_len = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (text == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    all_len = strlen(text);
    weft__trim(&s, &all_len);
    if (all_len == 0 || (all_len == 3 && memcmp(s, "off", 3) == 0)) {
        return WEFT_OK;
    }
    p = weft__calloc(1, sizeof(*p));
    if (p == NULL) {
        return WEFT_ENOMEM;
    }
    for (const char *end = s + all_len; s <= end;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma != NULL ? comma : end;
        const char *rule = s;
        size_t len = (size_t)(stop - s);

        weft__trim(&rule, &len);
        if (len == 0) {
            say(why, why_len, "", "empty (two commas in a row, or a trailing comma)");
            err = WEFT_EPARSE;
            goto fail;
        }
        if (p->count == MAX_RULES) {
            say(why, why_len, "", "a policy has at most 32 rules");
            err = WEFT_EPARSE;
            goto fail;
        }
        if (!parse_rule(rule, len, &p->rules[p->count], why, why_len)) {
            err = WEFT_EPARSE;
            goto fail;
        }
        for (size_t i = 0; i < p->count; i++) {
            if (strcmp(p->rules[i].name, p->rules[p->count].name) == 0) {
                say(why, why_len, p->rules[i].name,
                    "two rules have this name; name one of them (NAME=CONDITION)");
                err = WEFT_EPARSE;
                goto fail;
            }
        }
        p->count++;
        s = stop + 1;
    }
    err = build_text(p);
    if (err != WEFT_OK) {
        goto fail;
    }
    *out = p;
    return WEFT_OK;
fail:
    weft_sampling_policy_free(p);
    return err;
}

void
weft_sampling_policy_free(struct weft_sampling_policy *policy)
{
    if (policy == NULL) {
        return;
    }
    weft__free(policy->text);
    weft__free(policy);
}

const char *
weft_sampling_policy_text(const struct weft_sampling_policy *policy)
{
    return policy != NULL && policy->text != NULL ? policy->text : "";
}

/* The trace id's last eight bytes, big-endian, below share * 2^64. */
static bool
in_share(const uint8_t *trace_id, double share)
{
    uint64_t v = 0;

    if (share >= 1.0) {
        return true;
    }
    if (share <= 0.0) {
        return false;
    }
    for (int i = 8; i < 16; i++) {
        v = (v << 8) | trace_id[i];
    }
    return (double)v < share * 18446744073709551616.0;
}

static bool
matches(const struct rule *r, const struct weft_sampling_facts *f)
{
    switch (r->kind) {
    case COND_FAILED:
        return !f->is_completed;
    case COND_STUCK:
        return f->is_stuck;
    case COND_CORRECTED:
        return f->is_corrected;
    case COND_REJECTED:
        return f->is_rejected;
    case COND_ALL:
        return true;
    case COND_DURATION:
        return f->duration_s > r->threshold;
    case COND_COST:
        return f->cost_usd > r->threshold;
    case COND_REWARD:
        return f->has_reward && f->reward < r->threshold;
    case COND_SHARE:
        return in_share(f->trace_id, r->threshold);
    }
    return false;
}

bool
weft_sampling_decide(const struct weft_sampling_policy *policy,
                     const struct weft_sampling_facts *facts,
                     const char **rule)
{
    const char *dropped_by = "none";

    if (policy == NULL || facts == NULL) {
        if (rule != NULL) {
            *rule = "all";
        }
        return true;
    }
    for (size_t i = 0; i < policy->count; i++) {
        const struct rule *r = &policy->rules[i];

        if (matches(r, facts)) {
            if (rule != NULL) {
                *rule = r->name;
            }
            return true;
        }
        if (r->kind == COND_SHARE) {
            dropped_by = r->name;
        }
    }
    if (rule != NULL) {
        *rule = dropped_by;
    }
    return false;
}
