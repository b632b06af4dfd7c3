/* cli/serve_access.c - what `weft serve` and `weft mcp serve --http` share about who may reach
 * them: a token read from a file (--token-file), and the repeatable --allow-host NAME.
 *
 * Why a file: a token on the command line (--token T) is in /proc/PID/cmdline, which `ps` shows
 * to every local user. A file keeps it out of there; the environment (WEFT_SERVE_TOKEN,
 * WEFT_MCP_TOKEN) does too, as /proc/PID/environ is readable by the same user only. The file
 * must be readable and writable by its owner only (mode 0600 or 0400): a token that other
 * users can read, or replace with their own, guards nothing, so such a file is refused (as
 * ssh refuses a private key with loose permissions) rather than warned about, since a warning
 * scrolls away in a service's log while the token stays exposed.
 */
#include "cli.h"

#include "base/http_host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN_FILE_MAX 4096 /* bytes read at most; a token is far shorter */

int
cli_read_token_file(const char *cmd, const char *path, char **out)
{
    char buf[TOKEN_FILE_MAX + 1];
    struct stat st;
    ssize_t n = 0;
    size_t len = 0;
    int fd = -1;
    int rc = CLI_EXIT_USAGE;

    *out = NULL;
    /* Opened first and then checked through the descriptor: what is checked is what is read,
     * even when the path is a symbolic link (a Kubernetes secret is one). */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        fprintf(stderr, "weft %s: --token-file %s: %s\n", cmd, path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "weft %s: --token-file %s: not a regular file\n", cmd, path);
        goto out;
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        fprintf(stderr,
                "weft %s: --token-file %s: mode %04o lets other users read or replace the "
                "token; make it the owner's only (chmod 600 %s)\n",
                cmd, path, (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    n = read(fd, buf, sizeof(buf));
    if (n < 0) {
        fprintf(stderr, "weft %s: --token-file %s: %s\n", cmd, path, strerror(errno));
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    len = (size_t)n;
    if (len > TOKEN_FILE_MAX) {
        fprintf(stderr, "weft %s: --token-file %s: larger than %d bytes\n", cmd, path,
                TOKEN_FILE_MAX);
        goto out;
    }
    /* The token is the file's text without its trailing newline (and blanks): `echo T > F`
     * and editors add one. */
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                       buf[len - 1] == '\t')) {
        len--;
    }
    buf[len] = '\0';
    if (len == 0 || strlen(buf) != len) {
        fprintf(stderr, "weft %s: --token-file %s: %s\n", cmd, path,
                len == 0 ? "empty" : "holds a NUL byte");
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)buf[i] < 0x21 || (unsigned char)buf[i] == 0x7f) {
            fprintf(stderr,
                    "weft %s: --token-file %s: the token is one line without spaces or control "
                    "characters\n",
                    cmd, path);
            goto out;
        }
    }
    *out = strdup(buf);
    if (*out == NULL) {
        fprintf(stderr, "weft %s: out of memory\n", cmd);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    rc = CLI_EXIT_OK;
out:
    memset(buf, 0, sizeof(buf)); /* no copy of the token left on the stack */
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

void
cli_token_free(char *token)
{
    if (token != NULL) {
        memset(token, 0, strlen(token));
        free(token);
    }
}

int
cli_take_allow_hosts(const char *cmd, int *argc, char **argv, const char **hosts, size_t *count)
{
    int kept = 0;
    bool is_options_done = false;

    *count = 0;
    for (int i = 0; i < *argc; i++) {
        const char *value = NULL;

        if (is_options_done || strcmp(argv[i], "--") == 0) {
            is_options_done = true;
            argv[kept++] = argv[i];
            continue;
        }
        if (strcmp(argv[i], "--allow-host") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "weft %s: option '--allow-host' needs a value\n", cmd);
                return CLI_EXIT_USAGE;
            }
            value = argv[++i];
        } else if (strncmp(argv[i], "--allow-host=", 13) == 0) {
            value = argv[i] + 13;
        } else {
            argv[kept++] = argv[i];
            continue;
        }
        if (!weft__http_host_name_ok(value)) {
            fprintf(stderr,
                    "weft %s: --allow-host %s: expected a host name without a port (letters, "
                    "digits, '.', '-', '_'), an IPv4 address or an IPv6 address in brackets\n",
                    cmd, value);
            return CLI_EXIT_USAGE;
        }
        if (*count == CLI_MAX_ALLOW_HOSTS) {
            fprintf(stderr, "weft %s: --allow-host: at most %d names\n", cmd, CLI_MAX_ALLOW_HOSTS);
            return CLI_EXIT_USAGE;
        }
        hosts[(*count)++] = value;
    }
    *argc = kept;
    return CLI_EXIT_OK;
}
