/* tests/support/server_proc.c - see server_proc.h.
 *
 * Children are made with fork and execve rather than posix_spawn: a child must close the
 * test's descriptors, reset signal dispositions and the mask the test may have changed, and
 * change directory before it runs the server, and posix_spawn offers only some of that in
 * C11 + POSIX. Everything a child needs (argv, the environment) is built before fork. */
#include "server_proc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Descriptors a child closes: the test opens few, and none above this. */
#define MAX_FD 1024

unsigned
weft_test_free_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    unsigned port = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        return 0;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
}

char *
weft_test_mkdtemp(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    size_t len = 0;
    char *path = NULL;

    if (tmp == NULL || tmp[0] == '\0') {
        tmp = "/tmp";
    }
    len = strlen(tmp) + strlen(prefix) + 8;
    path = malloc(len);
    if (path == NULL) {
        return NULL;
    }
    snprintf(path, len, "%s/%sXXXXXX", tmp, prefix);
    if (mkdtemp(path) == NULL) {
        free(path);
        return NULL;
    }
    return path;
}

int
weft_test_rm_rf(const char *path)
{
    struct stat st;
    DIR *dir = NULL;
    struct dirent *ent = NULL;
    int rc = 0;

    if (lstat(path, &st) != 0) {
        return errno == ENOENT ? 0 : -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    }
    dir = opendir(path);
    if (dir == NULL) {
        return -1;
    }
    for (ent = readdir(dir); ent != NULL; ent = readdir(dir)) {
        size_t len = strlen(path) + strlen(ent->d_name) + 2;
        char *child = NULL;

        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) {
            continue;
        }
        child = malloc(len);
        if (child == NULL) {
            rc = -1;
            break;
        }
        snprintf(child, len, "%s/%s", path, ent->d_name);
        if (weft_test_rm_rf(child) != 0) {
            rc = -1;
        }
        free(child);
    }
    closedir(dir);
    if (rmdir(path) != 0 && errno != ENOENT) {
        rc = -1;
    }
    return rc;
}

/* Does environment entry @p entry ("NAME=value") lose to one of the changes in @p env? */
static bool
is_replaced(const char *entry, const char *const *env)
{
    size_t name_len = strcspn(entry, "=");

    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        const char *change = env[i];
        size_t len = strlen(change);

        if (len > 0 && change[len - 1] == '*') {
            if (strncmp(entry, change, len - 1) == 0) {
                return true;
            }
        } else if (strncmp(entry, change, name_len) == 0 && change[name_len] == '=') {
            return true;
        }
    }
    return false;
}

/* This process's environment with the changes applied. @return an array to free() (the
 * strings are borrowed), or NULL. */
static char **
build_env(const char *const *env)
{
    size_t n = 0;
    size_t extra = 0;
    size_t k = 0;
    char **out = NULL;

    while (environ[n] != NULL) {
        n++;
    }
    while (env != NULL && env[extra] != NULL) {
        extra++;
    }
    out = calloc(n + extra + 1, sizeof(*out));
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_replaced(environ[i], env)) {
            out[k++] = environ[i];
        }
    }
    for (size_t i = 0; i < extra; i++) {
        size_t len = strlen(env[i]);

        if (len > 0 && env[i][len - 1] != '*') {
            out[k++] = (char *)env[i];
        }
    }
    out[k] = NULL;
    return out;
}

/* In the child, before execve: only async-signal-safe calls, and _exit on failure. */
static void
child_setup(const char *cwd, const char *log_path, bool is_new_group, int keep_fd)
{
    sigset_t none;
    int fd = -1;
    static const int sigs[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1};

    if (is_new_group) {
        setpgid(0, 0);
    }
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        signal(sigs[i], SIG_DFL);
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (cwd != NULL && chdir(cwd) != 0) {
        _exit(126);
    }
    fd = open("/dev/null", O_RDONLY);
    if (fd < 0 || dup2(fd, 0) < 0) {
        _exit(126);
    }
    fd = open(log_path != NULL ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
        _exit(126);
    }
    for (int i = 3; i < MAX_FD; i++) {
        if (i != keep_fd) {
            close(i);
        }
    }
}

pid_t
weft_test_spawn(const char *const *argv,
                const char *const *env,
                const char *cwd,
                const char *log_path,
                bool is_new_group)
{
    char **envp = build_env(env);
    pid_t pid = -1;

    if (envp == NULL) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        /* Dies with the test: a test that fails before its teardown (cmocka jumps out of it)
         * leaves no `weft serve` or worker behind to hold a port or ctest's output pipe. */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1) {
            _exit(127); /* the test is already gone */
        }
        child_setup(cwd, log_path, is_new_group, -1);
        execve(argv[0], (char *const *)argv, envp);
        _exit(127);
    }
    if (pid > 0 && is_new_group) {
        setpgid(pid, pid); /* both sides set it: no window where a kill misses the group */
    }
    free(envp);
    return pid;
}

static int
decode_status(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return 255;
}

bool
weft_test_has_exited(pid_t pid, int *status)
{
    int st = 0;
    pid_t got = waitpid(pid, &st, WNOHANG);

    if (got == pid) {
        if (status != NULL) {
            *status = decode_status(st);
        }
        return true;
    }
    if (got < 0 && errno == ECHILD) {
        if (status != NULL) {
            *status = 255;
        }
        return true;
    }
    return false;
}

int
weft_test_wait(pid_t pid, long timeout_ms)
{
    long deadline = weft_test_now_ms() + timeout_ms;
    int status = 0;

    for (;;) {
        if (weft_test_has_exited(pid, &status)) {
            return status;
        }
        if (weft_test_now_ms() >= deadline) {
            return -1;
        }
        weft_test_sleep_ms(10);
    }
}

void
weft_test_kill_group(pid_t pgid, long grace_ms)
{
    if (pgid <= 0) {
        return;
    }
    kill(-pgid, SIGTERM);
    if (weft_test_wait(pgid, grace_ms) >= 0) {
        kill(-pgid, SIGKILL); /* the leader is gone; anything it forked into the group too */
        return;
    }
    kill(-pgid, SIGKILL);
    waitpid(pgid, NULL, 0);
}

int
weft_test_run(const char *const *argv,
              const char *const *env,
              const char *cwd,
              const char *log_path,
              long timeout_ms)
{
    pid_t pid = weft_test_spawn(argv, env, cwd, log_path, true);
    int status = 0;

    if (pid < 0) {
        return -1;
    }
    status = weft_test_wait(pid, timeout_ms);
    if (status < 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return status;
}

char *
weft_test_log_tail(const char *path, size_t max)
{
    FILE *fp = fopen(path, "rb");
    char *text = NULL;
    size_t got = 0;
    long size = 0;
    char *start = NULL;

    if (fp == NULL) {
        return strdup("(no log)");
    }
    text = malloc(max + 1);
    if (text == NULL) {
        fclose(fp);
        return NULL;
    }
    if (fseek(fp, 0, SEEK_END) == 0) {
        size = ftell(fp);
    }
    if (size > (long)max) {
        fseek(fp, size - (long)max, SEEK_SET);
    } else {
        fseek(fp, 0, SEEK_SET);
    }
    got = fread(text, 1, max, fp);
    fclose(fp);
    text[got] = '\0';
    start = text;
    if (size > (long)max) {
        char *nl = strchr(text, '\n');

        start = nl != NULL ? nl + 1 : text;
    }
    memmove(text, start, strlen(start) + 1);
    return text;
}

bool
weft_test_file_contains(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "rb");
    size_t keep = strlen(needle);
    char buf[65536 + 1];
    size_t have = 0;
    bool is_found = false;

    if (fp == NULL || keep == 0 || keep >= sizeof(buf) / 2) {
        if (fp != NULL) {
            fclose(fp);
        }
        return false;
    }
    /* Read in blocks, carrying the last strlen(needle) - 1 bytes over so a match that spans
     * two blocks is found. Logs hold no NUL bytes that matter here. */
    for (;;) {
        size_t got = fread(buf + have, 1, sizeof(buf) - 1 - have, fp);

        if (got == 0) {
            break;
        }
        have += got;
        buf[have] = '\0';
        if (strstr(buf, needle) != NULL) {
            is_found = true;
            break;
        }
        if (have >= keep - 1) {
            memmove(buf, buf + have - (keep - 1), keep - 1);
            have = keep - 1;
        }
    }
    fclose(fp);
    return is_found;
}

long
weft_test_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
weft_test_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Read a whole small file (/proc) into a NUL-terminated buffer. @return bytes read, or -1. */
static ssize_t
read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    size_t have = 0;

    if (fd < 0) {
        return -1;
    }
    while (have + 1 < len) {
        ssize_t got = read(fd, buf + have, len - 1 - have);

        if (got <= 0) {
            break;
        }
        have += (size_t)got;
    }
    close(fd);
    buf[have] = '\0';
    return (ssize_t)have;
}

static bool
is_zombie(long pid)
{
    char path[64];
    char text[512];
    const char *paren = NULL;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (read_small(path, text, sizeof(text)) <= 0) {
        return true; /* gone meanwhile */
    }
    paren = strrchr(text, ')');
    return paren == NULL || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X';
}

size_t
weft_test_find_procs(const char *env_entry, pid_t *pids, size_t max)
{
    static char environ_text[1 << 16];
    size_t entry_len = strlen(env_entry) + 1; /* the NUL that ends it in /proc */
    DIR *proc = opendir("/proc");
    struct dirent *ent = NULL;
    size_t found = 0;

    if (proc == NULL) {
        return 0;
    }
    for (ent = readdir(proc); ent != NULL; ent = readdir(proc)) {
        char path[300];
        ssize_t len = 0;
        char *end = NULL;
        long pid = strtol(ent->d_name, &end, 10);

        if (pid <= 0 || *end != '\0') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
        len = read_small(path, environ_text, sizeof(environ_text));
        for (ssize_t i = 0; i + (ssize_t)entry_len <= len;
             i += (ssize_t)strlen(environ_text + i) + 1) {
            if (memcmp(environ_text + i, env_entry, entry_len) == 0) {
                if (!is_zombie(pid)) {
                    if (found < max) {
                        pids[found] = (pid_t)pid;
                    }
                    found++;
                }
                break;
            }
        }
    }
    closedir(proc);
    return found;
}

/* Socket inodes held by @p pid, appended to @p inodes. */
static size_t
socket_inodes(pid_t pid, unsigned long *inodes, size_t have, size_t max)
{
    char path[64];
    DIR *dir = NULL;
    struct dirent *ent = NULL;

    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
    dir = opendir(path);
    if (dir == NULL) {
        return have;
    }
    for (ent = readdir(dir); ent != NULL && have < max; ent = readdir(dir)) {
        char link_path[320];
        char target[64];
        ssize_t n = 0;
        unsigned long inode = 0;

        snprintf(link_path, sizeof(link_path), "%s/%s", path, ent->d_name);
        n = readlink(link_path, target, sizeof(target) - 1);
        if (n <= 0) {
            continue;
        }
        target[n] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) == 1) {
            inodes[have++] = inode;
        }
    }
    closedir(dir);
    return have;
}

/* Append the LISTEN sockets of /proc/net/@p table whose inode is in @p inodes. */
static size_t
scan_table(const char *table,
           bool is_v6,
           const unsigned long *inodes,
           size_t n_inodes,
           char *buf,
           size_t len,
           size_t count)
{
    char path[64];
    char line[512];
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "/proc/net/%s", table);
    fp = fopen(path, "r");
    if (fp == NULL) {
        return count;
    }
    if (fgets(line, sizeof(line), fp) == NULL) { /* the header */
        fclose(fp);
        return count;
    }
    while (fgets(line, sizeof(line), fp) != NULL) {
        char local[64];
        unsigned port = 0;
        unsigned state = 0;
        unsigned long inode = 0;
        bool is_ours = false;
        char addr[INET6_ADDRSTRLEN] = "?";
        size_t used = strlen(buf);

        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &port,
                   &state, &inode) != 4 ||
            state != 0x0A) {
            continue;
        }
        for (size_t i = 0; i < n_inodes; i++) {
            is_ours = is_ours || inodes[i] == inode;
        }
        if (!is_ours) {
            continue;
        }
        /* The kernel prints each 32-bit word of the address as it lies in memory, in hex. */
        if (is_v6 && strlen(local) == 32) {
            unsigned char raw[16];

            for (int w = 0; w < 4; w++) {
                char word[9];
                unsigned value = 0;

                memcpy(word, local + 8 * w, 8);
                word[8] = '\0';
                value = (unsigned)strtoul(word, NULL, 16);
                memcpy(raw + 4 * w, &value, 4);
            }
            inet_ntop(AF_INET6, raw, addr, sizeof(addr));
        } else if (!is_v6 && strlen(local) == 8) {
            unsigned value = (unsigned)strtoul(local, NULL, 16);

            inet_ntop(AF_INET, &value, addr, sizeof(addr));
        }
        snprintf(buf + used, len - used, is_v6 ? "%s[%s]:%u" : "%s%s:%u", used > 0 ? " " : "", addr,
                 port);
        count++;
    }
    fclose(fp);
    return count;
}

size_t
weft_test_listen_addrs(const pid_t *pids, size_t n, char *buf, size_t len)
{
    unsigned long inodes[512];
    size_t n_inodes = 0;
    size_t count = 0;

    if (len == 0) {
        return 0;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        n_inodes = socket_inodes(pids[i], inodes, n_inodes, sizeof(inodes) / sizeof(inodes[0]));
    }
    count = scan_table("tcp", false, inodes, n_inodes, buf, len, count);
    count = scan_table("tcp6", true, inodes, n_inodes, buf, len, count);
    return count;
}

/* The guard process: wait for a byte or the end of the stream, then act. */
static void
guard_main(int fd, const char *script)
{
    char c = 0;
    ssize_t got = 0;

    do {
        got = recv(fd, &c, 1, 0);
    } while (got < 0 && errno == EINTR);
    if (got == 1 && c == 'd') {
        _exit(0);
    }
    execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    _exit(127);
}

int
weft_test_guard_arm(const char *script)
{
    int fds[2] = {-1, -1};
    pid_t pid = -1;

    /* A socket pair rather than a pipe: disarming sends with MSG_NOSIGNAL, so a guard that
     * is already gone cannot kill the test with SIGPIPE. */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
        return -1;
    }
    /* Our end must not outlive an exec: a server holding it would keep the guard waiting
     * after the test died. */
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    pid = fork();
    if (pid == 0) {
        /* Detach twice: a new session, then the grandchild is orphaned to init, so a process
         * tree kill of the test (ctest's timeout) does not reach it. */
        setsid();
        if (fork() != 0) {
            _exit(0);
        }
        child_setup(NULL, NULL, false, fds[1]);
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        guard_main(fds[1], script);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    waitpid(pid, NULL, 0);
    return fds[0];
}

void
weft_test_guard_disarm(int fd)
{
    char c = 'd';

    if (fd < 0) {
        return;
    }
    (void)send(fd, &c, 1, MSG_NOSIGNAL);
    close(fd);
}

char *
weft_test_shell_quote(const char *s, char *buf, size_t len)
{
    size_t n = strlen(s);

    if (strchr(s, '\'') != NULL || n + 3 > len) {
        return NULL;
    }
    buf[0] = '\'';
    memcpy(buf + 1, s, n);
    buf[n + 1] = '\'';
    buf[n + 2] = '\0';
    return buf;
}
