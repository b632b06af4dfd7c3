/* base/spawn.h - start a child process the way weft runs every program it starts (command
 * tools, MCP servers): in a process group of its own (so a kill reaches what it forks), with
 * default signal dispositions and an empty signal mask (whatever the parent blocked), its
 * standard descriptors on the given ones and every other descriptor closed (sockets, SQLite
 * files and exporter pipes never leak into it).
 * Thread-safety: any thread (posix_spawn). */
#ifndef WEFT_BASE_SPAWN_H
#define WEFT_BASE_SPAWN_H

#include <sys/types.h>

struct weft__spawn {
    char *const *argv; /* argv[0] is searched in PATH when it has no '/'; NULL-terminated */
    char *const *env;  /* the child's whole environment; NULL-terminated */
    int in_fd;         /* the child's stdin; -1: /dev/null */
    int out_fd;        /* its stdout */
    int err_fd;        /* its stderr */
    const char *cwd;   /* directory to start in; NULL: this one (unless cwd_fd) */
    int cwd_fd;        /* or an open directory to start in; -1: none */
};

/* Start @p s->argv. @return 0 with *pid set, or an errno value (ENOENT: no such program). */
int weft__spawn(const struct weft__spawn *s, pid_t *pid);

#endif /* WEFT_BASE_SPAWN_H */
