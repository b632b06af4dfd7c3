/* runtime/state/retention.c - what weft keeps, and for how long (include/weft/runtime.h,
 * docs/retention.md): pinning a run, and deleting the runs that ended before a cutoff with
 * their rows and their workspace folders (`weft runs pin`, `weft gc`).
 *
 * Shape. The store is scanned a page of GC_PAGE runs at a time (oldest end first, keyed by
 * end and id, so a dry run that deletes nothing still moves on), the page's ids are copied,
 * and each run is then deleted in a transaction of its own by the backend, which checks again
 * inside it that the run may go: a run resumed or pinned since the scan is kept. A run's rows
 * go before its folder, so a crash between the two leaves a folder without a run (the next gc
 * does not see it, but nothing refers to it), never a run without its folder.
 *
 * The workspace rule. Only ROOT/ID is ever removed, ROOT being the workspaces root a run's
 * default workspace is made under ($WEFT_HOME/workspaces, else ./.weft/workspaces, as
 * runtime/engine/engine.c's setup_workspace() makes it) and ID the run's id, checked to be one
 * plain file name. The tree is walked through directory descriptors (openat with O_NOFOLLOW,
 * unlinkat), never by path: a symbolic link is removed as a link and never followed, however
 * it got there, and a directory on another device (a mount) is neither entered nor removed. A
 * run given --workspace DIR elsewhere has no ROOT/ID, so DIR is never looked at.
 *
 * Invariants: the report counts only what was done (or, dry, what would be); a workspace
 * that cannot be removed whole is logged and counted, never an error of the call.
 */
#include "runtime/state/state.h"

#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GC_PAGE       256 /* runs scanned, then deleted, per page */
#define GC_ID_MAX     96  /* bytes of a run id, NUL included (weft_run_load's buffer) */
#define GC_TREE_DEPTH 128 /* directory levels a workspace walk enters (one fd each) */

weft_err
weft_run_pin(const char *state_path, const char *ref, bool is_pinned, char *id_out, size_t id_len)
{
    struct rt_state *st = NULL;
    char id[GC_ID_MAX];
    char why[160];
    weft_err err = WEFT_OK;

    if (ref == NULL) {
        return WEFT_EINVAL;
    }
    if (id_out != NULL && id_len > 0) {
        id_out[0] = '\0';
    }
    err = weft__state_open_existing(state_path, &st);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__state_run_resolve(st, ref, id, sizeof(id), why, sizeof(why));
    if (err == WEFT_EINVAL) {
        WEFT_LOG(WEFT_LOG_WARN, "%s", why);
    }
    if (err == WEFT_OK) {
        err = weft__state_run_pin(st, id, is_pinned);
    }
    weft__state_close(st);
    if (err == WEFT_OK && id_out != NULL && id_len > 0) {
        snprintf(id_out, id_len, "%s", id);
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Workspace folders                                                                           */

/* Is @p id usable as one file name under the root: not empty, not "." or "..", and only
 * letters, digits, '-', '_' and '.' (weft's run ids are hex; anything else is left alone). */
static bool
is_plain_name(const char *id)
{
    size_t len = strlen(id);

    if (len == 0 || len >= NAME_MAX || strcmp(id, ".") == 0 || strcmp(id, "..") == 0) {
        return false;
    }
    for (const char *p = id; *p != '\0'; p++) {
        bool is_ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.';
        if (!is_ok) {
            return false;
        }
    }
    return true;
}

struct tree {
    dev_t dev;       /* the root's device: another one is a mount, never entered */
    bool is_remove;  /* false: only count (dry run) */
    bool is_partial; /* something was left behind */
    uint64_t bytes;  /* regular files' sizes */
};

/* Count, and with t->is_remove delete, the entry @p name of directory @p parent_fd: a
 * directory's contents first, then itself. Nothing is followed: the entry is looked at with
 * AT_SYMLINK_NOFOLLOW and entered with O_NOFOLLOW, so a link (even one swapped in meanwhile)
 * is removed as a link or the walk stops there. */
static void
tree_walk(struct tree *t, int parent_fd, const char *name, unsigned depth)
{
    struct stat sb;
    struct dirent *e = NULL;
    DIR *dir = NULL;
    int fd = -1;

    if (fstatat(parent_fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        t->is_partial = t->is_partial || errno != ENOENT;
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        t->bytes += S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
        if (t->is_remove && unlinkat(parent_fd, name, 0) != 0 && errno != ENOENT) {
            t->is_partial = true;
        }
        return;
    }
    if (sb.st_dev != t->dev || depth >= GC_TREE_DEPTH) {
        t->is_partial = true; /* a mount point, or deeper than the walk goes: left whole */
        return;
    }
    fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (dir == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        t->is_partial = true;
        return;
    }
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            tree_walk(t, dirfd(dir), e->d_name, depth + 1);
        }
    }
    closedir(dir);
    if (t->is_remove && unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        t->is_partial = true;
    }
}

/* The workspaces root, opened (the root itself may be a link: it is weft's own, as the user
 * set WEFT_HOME). -1 when there is none. */
static int
open_root(void)
{
    const char *home = weft__env("WEFT_HOME");
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/workspaces", home != NULL ? home : ".weft");

    if (n < 0 || (size_t)n >= sizeof(path)) {
        return -1;
    }
    return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Remove (or, dry, measure) ROOT/@p run_id into @p out; nothing when it does not exist. */
static void
workspace_drop(int root_fd, const char *run_id, bool is_dry_run, struct weft_runs_gc_report *out)
{
    struct tree t;
    struct stat root_sb;
    struct stat sb;

    if (root_fd < 0 || !is_plain_name(run_id) ||
        fstatat(root_fd, run_id, &sb, AT_SYMLINK_NOFOLLOW) != 0 || fstat(root_fd, &root_sb) != 0) {
        return;
    }
    memset(&t, 0, sizeof(t));
    t.dev = root_sb.st_dev;
    t.is_remove = !is_dry_run;
    tree_walk(&t, root_fd, run_id, 0);
    out->workspace_bytes += t.bytes;
    if (t.is_partial) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "gc: run %s: its workspace folder could not be %s whole (a mount, a permission,"
                 " or deeper than %d levels); what is left stays",
                 run_id, is_dry_run ? "read" : "removed", GC_TREE_DEPTH);
        out->workspace_errors++;
    } else {
        out->workspaces_removed++;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Runs                                                                                        */

struct gc_page {
    char ids[GC_PAGE][GC_ID_MAX];
    uint64_t ended[GC_PAGE];
    size_t count;
};

/* Keep one scanned run. An id longer than weft's own is kept as "" and skipped (the scan's
 * limit is the page's size, so the page never overflows). */
static weft_err
page_add(const char *run_id, uint64_t ended_ns, void *user_data)
{
    struct gc_page *page = user_data;
    size_t len = strlen(run_id);

    if (page->count == GC_PAGE) {
        return WEFT_ELIMIT;
    }
    page->ids[page->count][0] = '\0';
    if (len < GC_ID_MAX) {
        memcpy(page->ids[page->count], run_id, len + 1);
    }
    page->ended[page->count++] = ended_ns;
    return WEFT_OK;
}

weft_err
weft_runs_gc(const char *state_path,
             uint64_t cutoff_ns,
             bool is_dry_run,
             struct weft_runs_gc_report *out)
{
    struct rt_state *st = NULL;
    struct gc_page *page = NULL;
    char after_id[GC_ID_MAX] = "";
    uint64_t after_ns = 0;
    bool has_after = false;
    int root_fd = -1;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    page = weft__calloc(1, sizeof(*page));
    if (page == NULL) {
        return WEFT_ENOMEM;
    }
    err = weft__state_open_existing(state_path, &st);
    if (err != WEFT_OK) {
        weft__free(page);
        return err;
    }
    err = weft__state_gc_kept(st, cutoff_ns, &out->runs_kept_pinned, &out->runs_kept_running);
    root_fd = open_root();
    while (err == WEFT_OK) {
        page->count = 0;
        err = weft__state_gc_scan(st, cutoff_ns, after_ns, has_after ? after_id : NULL, GC_PAGE,
                                  page_add, page);
        for (size_t i = 0; err == WEFT_OK && i < page->count; i++) {
            uint64_t rows = 0;
            bool is_deleted = false;

            if (page->ids[i][0] == '\0') {
                continue;
            }
            err = weft__state_gc_run(st, page->ids[i], cutoff_ns, is_dry_run, &rows, &is_deleted);
            if (err == WEFT_OK && is_deleted) {
                out->runs_deleted++;
                out->rows_deleted += rows;
                workspace_drop(root_fd, page->ids[i], is_dry_run, out);
            }
        }
        if (err != WEFT_OK || page->count < GC_PAGE) {
            break;
        }
        /* The last id of a page; an id too long to keep ends the walk (never weft's own). */
        if (page->ids[page->count - 1][0] == '\0') {
            break;
        }
        after_ns = page->ended[page->count - 1];
        snprintf(after_id, sizeof(after_id), "%s", page->ids[page->count - 1]);
        has_after = true;
    }
    if (root_fd >= 0) {
        close(root_fd);
    }
    weft__state_close(st);
    weft__free(page);
    return err;
}
