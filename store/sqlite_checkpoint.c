/* store/sqlite_checkpoint.c - checkpoints of a store's WAL on a thread of their own, for a
 * writer whose commits should not wait for them (weft serve's OTLP ingest, ingest.c).
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past 1,000 pages:
 * that writer copies the pages into the database and syncs, about 9% of the time ingest spent
 * per span under its store lock (bench/ingest_bench.c, perf). Here the writer's connection
 * only counts WAL pages in its WAL hook and wakes this thread, which checkpoints PASSIVE
 * (never waiting for the writer or readers) through its own connection.
 *
 * SQLite starts the WAL over only when a write transaction begins with every frame copied, and
 * a checkpoint that runs alongside a writer rarely ends so: the WAL would grow without end. So
 * after each pass the thread closes the writer's gate (weft__store_checkpointer_enter() is
 * called around every write transaction) and copies the few frames committed meanwhile; the
 * next transaction then starts the WAL over. A reader holding an old snapshot keeps frames
 * from being copied whoever checkpoints; past the backstop the writer tries an inline PASSIVE
 * checkpoint after each commit too, so that the WAL starts over as soon as such a reader ends.
 */
#include "store.h"

#include "base/log.h"
#include "base/mem.h"

#include <pthread.h>
#include <stdatomic.h>

struct weft__store_checkpointer {
    sqlite3 *writer; /* the writer's connection (borrowed) */
    sqlite3 *db;     /* this thread's own connection */
    int pages;       /* WAL pages that wake the thread */
    int backstop;    /* WAL pages past which the writer checkpoints too */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t turn; /* is_writing or is_gated changed */
    bool is_wanted;      /* under lock: a commit woke the thread */
    bool is_stopping;    /* under lock */
    bool is_writing;     /* under lock: the writer is in a transaction */
    bool is_gated;       /* under lock: the thread's last pass, no transaction may start */
    atomic_ullong checkpoints;
    atomic_ullong inline_checkpoints;
};

static int
passive(sqlite3 *db)
{
    return sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
}

static void *
checkpointer_main(void *arg)
{
    struct weft__store_checkpointer *cp = arg;
    int rc = SQLITE_OK;

    pthread_mutex_lock(&cp->lock);
    for (;;) {
        while (!cp->is_wanted && !cp->is_stopping) {
            pthread_cond_wait(&cp->wake, &cp->lock);
        }
        if (cp->is_stopping) {
            break;
        }
        cp->is_wanted = false;
        pthread_mutex_unlock(&cp->lock);
        rc = passive(cp->db);
        pthread_mutex_lock(&cp->lock);
        if (rc == SQLITE_OK) {
            /* The last pass, between two transactions: the writer's next one waits for it,
             * however soon it comes (a mutex would let a busy writer take it back first). */
            cp->is_gated = true;
            while (cp->is_writing) {
                pthread_cond_wait(&cp->turn, &cp->lock);
            }
            pthread_mutex_unlock(&cp->lock);
            rc = passive(cp->db);
            pthread_mutex_lock(&cp->lock);
            cp->is_gated = false;
            pthread_cond_broadcast(&cp->turn);
            /* The commits that woke the thread meanwhile are copied now: waking again before
             * the writer's next transaction starts the WAL over would get in its way. */
            cp->is_wanted = cp->is_wanted && rc != SQLITE_OK;
        }
        if (rc == SQLITE_OK) {
            atomic_fetch_add(&cp->checkpoints, 1);
        }
    }
    pthread_mutex_unlock(&cp->lock);
    return NULL;
}

/* The writer's WAL hook, after each commit (in a transaction, so never during the last pass): @p
 * pages frames are in the WAL. */
static int
wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct weft__store_checkpointer *cp = arg;

    (void)name;
    if (pages >= cp->backstop && passive(db) == SQLITE_OK) {
        atomic_fetch_add(&cp->inline_checkpoints, 1);
    }
    if (pages >= cp->pages) {
        pthread_mutex_lock(&cp->lock);
        cp->is_wanted = true;
        pthread_cond_signal(&cp->wake);
        pthread_mutex_unlock(&cp->lock);
    }
    return SQLITE_OK;
}

static void
destroy(struct weft__store_checkpointer *cp)
{
    sqlite3_close_v2(cp->db);
    pthread_cond_destroy(&cp->turn);
    pthread_cond_destroy(&cp->wake);
    pthread_mutex_destroy(&cp->lock);
    weft__free(cp);
}

weft_err
weft__store_checkpointer_start(sqlite3 *writer,
                               const char *path,
                               int pages,
                               int backstop,
                               struct weft__store_checkpointer **out)
{
    struct weft__store_checkpointer *cp = weft__calloc(1, sizeof(*cp));
    bool has_lock = false;
    bool has_wake = false;

    *out = NULL;
    if (cp == NULL) {
        return WEFT_ENOMEM;
    }
    cp->writer = writer;
    cp->pages = pages > 0 ? pages : 1;
    cp->backstop = backstop > cp->pages ? backstop : cp->pages + 1;
    has_lock = pthread_mutex_init(&cp->lock, NULL) == 0;
    has_wake = has_lock && pthread_cond_init(&cp->wake, NULL) == 0;
    if (!has_wake || pthread_cond_init(&cp->turn, NULL) != 0) {
        if (has_wake) {
            pthread_cond_destroy(&cp->wake);
        }
        if (has_lock) {
            pthread_mutex_destroy(&cp->lock);
        }
        weft__free(cp);
        return WEFT_ENOMEM;
    }
    /* A connection learns that the database is in WAL mode when it first reads it; until then
     * a checkpoint through it does nothing. */
    if (sqlite3_open_v2(path, &cp->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(cp->db, STORE_BUSY_TIMEOUT_MS) != SQLITE_OK ||
        sqlite3_exec(cp->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK) {
        weft__store_log_db_error(WEFT_LOG_ERROR, path, cp->db, "cannot open for checkpoints");
        destroy(cp);
        return WEFT_EIO;
    }
    if (pthread_create(&cp->thread, NULL, checkpointer_main, cp) != 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: cannot start the checkpoint thread", path);
        destroy(cp);
        return WEFT_EIO;
    }
    /* Replaces SQLite's automatic checkpoint, which is a WAL hook too. */
    sqlite3_wal_hook(writer, wal_hook, cp);
    *out = cp;
    return WEFT_OK;
}

void
weft__store_checkpointer_enter(struct weft__store_checkpointer *cp)
{
    if (cp == NULL) {
        return;
    }
    pthread_mutex_lock(&cp->lock);
    while (cp->is_gated) {
        pthread_cond_wait(&cp->turn, &cp->lock);
    }
    cp->is_writing = true;
    pthread_mutex_unlock(&cp->lock);
}

void
weft__store_checkpointer_leave(struct weft__store_checkpointer *cp)
{
    if (cp == NULL) {
        return;
    }
    pthread_mutex_lock(&cp->lock);
    cp->is_writing = false;
    pthread_cond_broadcast(&cp->turn);
    pthread_mutex_unlock(&cp->lock);
}

void
weft__store_checkpointer_stats(const struct weft__store_checkpointer *cp,
                               uint64_t *checkpoints,
                               uint64_t *inline_checkpoints)
{
    *checkpoints = cp != NULL ? atomic_load(&cp->checkpoints) : 0;
    *inline_checkpoints = cp != NULL ? atomic_load(&cp->inline_checkpoints) : 0;
}

void
weft__store_checkpointer_stop(struct weft__store_checkpointer *cp)
{
    if (cp == NULL) {
        return;
    }
    /* SQLite's automatic checkpoint again for whatever the writer still commits. */
    sqlite3_wal_autocheckpoint(cp->writer, SQLITE_DEFAULT_WAL_AUTOCHECKPOINT);
    pthread_mutex_lock(&cp->lock);
    cp->is_stopping = true;
    pthread_cond_signal(&cp->wake);
    pthread_mutex_unlock(&cp->lock);
    pthread_join(cp->thread, NULL);
    destroy(cp);
}
