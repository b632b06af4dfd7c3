/* serve/ui.h - the explorer's web UI assets, embedded in the library at build time
 * (cmake/embed_assets.cmake from dashboards/ui: our index.html, app.js and app.css, and the
 * pinned dagre and Chart.js builds). */
#ifndef WEFT_SERVE_UI_H
#define WEFT_SERVE_UI_H

#include <stdbool.h>
#include <stddef.h>

struct weft__ui_asset {
    const char *name; /* base name: "index.html", "app.js", "dagre.min.js", ... */
    const unsigned char *data;
    size_t len;
};

extern const struct weft__ui_asset weft__ui_assets[];
extern const size_t weft__ui_asset_count;

/* The asset named @p name and its Content-Type; false when there is none. Borrowed, static. */
bool weft__ui_find(const char *name, const struct weft__ui_asset **asset, const char **type);

#endif /* WEFT_SERVE_UI_H */
