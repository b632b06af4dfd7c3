/* serve/ui.c - the embedded assets looked up by name (ui.h). */
#include "ui.h"

#include <string.h>

bool
weft__ui_find(const char *name, const struct weft__ui_asset **asset, const char **type)
{
    const char *dot = name != NULL ? strrchr(name, '.') : NULL;

    for (size_t i = 0; name != NULL && i < weft__ui_asset_count; i++) {
        if (strcmp(weft__ui_assets[i].name, name) == 0) {
            *asset = &weft__ui_assets[i];
            *type = dot == NULL                 ? "application/octet-stream"
                    : strcmp(dot, ".html") == 0 ? "text/html; charset=utf-8"
                    : strcmp(dot, ".js") == 0   ? "text/javascript; charset=utf-8"
                    : strcmp(dot, ".css") == 0  ? "text/css; charset=utf-8"
                    : strcmp(dot, ".txt") == 0  ? "text/plain; charset=utf-8"
                                                : "application/octet-stream";
            return true;
        }
    }
    return false;
}
