/* base/spawn.c - see spawn.h. posix_spawn (vfork-like, no copy of the parent's memory) rather
 * than fork/exec: a run with large heaps and several threads starts children cheaply and
 * without the fork-in-a-threaded-program hazards. The file actions run in order in the child:
 * the directory change comes before closefrom, which closes cwd_fd with everything else. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addclosefrom_np, _addchdir_np, _addfchdir_np */

#include "base/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

static int
file_actions(const struct weft__spawn *s, posix_spawn_file_actions_t *fa)
{
    int rc = s->in_fd >= 0 ? posix_spawn_file_actions_adddup2(fa, s->in_fd, 0)
                           : posix_spawn_file_actions_addopen(fa, 0, "/dev/null", O_RDONLY, 0);

    if (rc == 0) {
        rc = posix_spawn_file_actions_adddup2(fa, s->out_fd, 1);
    }
    if (rc == 0) {
        rc = posix_spawn_file_actions_adddup2(fa, s->err_fd, 2);
    }
    if (rc == 0 && s->cwd_fd >= 0) {
        rc = posix_spawn_file_actions_addfchdir_np(fa, s->cwd_fd);
    } else if (rc == 0 && s->cwd != NULL) {
        rc = posix_spawn_file_actions_addchdir_np(fa, s->cwd);
    }
    if (rc == 0) {
        rc = posix_spawn_file_actions_addclosefrom_np(fa, 3);
    }
    return rc;
}

static int
attributes(posix_spawnattr_t *attr)
{
    sigset_t none;
    sigset_t all;
    int rc = 0;

    sigemptyset(&none);
    sigfillset(&all);
    rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
    if (rc == 0) {
        rc = posix_spawnattr_setpgroup(attr, 0);
    }
    if (rc == 0) {
        rc = posix_spawnattr_setsigmask(attr, &none);
    }
    if (rc == 0) {
        rc = posix_spawnattr_setsigdefault(attr, &all);
    }
    return rc;
}

int
weft__spawn(const struct weft__spawn *s, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&fa);

    if (rc != 0) {
        return rc;
    }
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return rc;
    }
    rc = file_actions(s, &fa);
    if (rc == 0) {
        rc = attributes(&attr);
    }
    if (rc == 0) {
        rc = posix_spawnp(pid, s->argv[0], &fa, &attr, s->argv, s->env);
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}
