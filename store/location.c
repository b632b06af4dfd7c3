/* store/location.c - where the span store is and which backend holds it: a file path
 * (SQLite, the embedded default) or a PostgreSQL URL.
 *
 * (weft__store_redact_url() is pg_schema.c's.)
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
    return location != NULL && (strncmp(location, "postgresql://", 13) == 0 ||
                                strncmp(location, "postgres://", 11) == 0);
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
