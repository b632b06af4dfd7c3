/* store/location.c - where the span store is and which backend holds it: a file path
 * (SQLite, the embedded default) or a PostgreSQL URL; and how a location is printed without
 * its password.
 *
 * The default location: WEFT_TRACE_STORE_URL when set (a path or a URL); else, when
 * WEFT_STATE_URL is a PostgreSQL URL, that database too (a fleet keeps its runs and their
 * spans in one place); else $WEFT_HOME/weft.db, else ./.weft/weft.db.
 */
#include "store.h"

#include "base/env.h"

#include <stdio.h>
#include <string.h>

bool
weft__store_is_pg_url(const char *location)
{
    return location != NULL &&
           (strncmp(location, "postgresql://", 13) == 0 || strncmp(location, "postgres://", 11) == 0);
}

weft_err
weft_store_default_path(char *buf, size_t buf_len)
{
    const char *url = weft__env("WEFT_TRACE_STORE_URL");
    const char *state = weft__env("WEFT_STATE_URL");
    const char *home = weft__env("WEFT_HOME");
    int n = 0;

    if (buf == NULL || buf_len == 0) {
        return WEFT_EINVAL;
    }
    if (url != NULL && url[0] != '\0') {
        n = snprintf(buf, buf_len, "%s", url);
    } else if (weft__store_is_pg_url(state)) {
        n = snprintf(buf, buf_len, "%s", state);
    } else if (home != NULL) {
        n = snprintf(buf, buf_len, "%s/weft.db", home);
    } else {
        n = snprintf(buf, buf_len, "./.weft/weft.db");
    }
    if (n < 0 || (size_t)n >= buf_len) {
        buf[0] = '\0';
        return WEFT_EINVAL;
    }
    return WEFT_OK;
}

/* Replace what follows "password=" in @p out (a query string or keyword list) up to the next
 * '&', ' ' or end by "***". */
static void
redact_keyword(char *out, size_t out_len)
{
    char *at = strstr(out, "password=");
    char rest[1024];
    size_t end = 0;

    if (at == NULL) {
        return;
    }
    at += 9;
    end = strcspn(at, "& ");
    snprintf(rest, sizeof(rest), "%s", at + end);
    snprintf(at, out_len - (size_t)(at - out), "***%s", rest);
}

void
weft__store_redact_url(const char *location, char *out, size_t out_len)
{
    const char *scheme_end = NULL;
    const char *at = NULL;
    const char *colon = NULL;

    if (out_len == 0) {
        return;
    }
    snprintf(out, out_len, "%s", location != NULL ? location : "");
    if (!weft__store_is_pg_url(location)) {
        return;
    }
    scheme_end = strstr(location, "://") + 3;
    at = strchr(scheme_end, '@');
    colon = at != NULL ? memchr(scheme_end, ':', (size_t)(at - scheme_end)) : NULL;
    if (colon != NULL) {
        snprintf(out, out_len, "%.*s:***%s", (int)(colon - location), location, at);
    }
    redact_keyword(out, out_len);
}
