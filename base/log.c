/* base/log.c - logging through the installed handler (weft_log_set_handler). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>

weft_log_level weft__log_max = WEFT_LOG_ERROR;
weft_log_fn weft__log_fn = NULL;
static void *log_user_data = NULL;

void
weft_log_set_handler(weft_log_fn fn, weft_log_level max_level, void *user_data)
{
    weft__log_fn = fn;
    weft__log_max = max_level;
    log_user_data = user_data;
}

const char *
weft_log_level_name(weft_log_level level)
{
    switch (level) {
    case WEFT_LOG_ERROR:
        return "error";
    case WEFT_LOG_WARN:
        return "warn";
    case WEFT_LOG_INFO:
        return "info";
    case WEFT_LOG_DEBUG:
        return "debug";
    }
    return "unknown";
}

void
weft__log(weft_log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    weft_log_fn fn = weft__log_fn;

    if (fn == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fn(level, line, log_user_data);
}
