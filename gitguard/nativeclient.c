/* gitguard's native hook client: `gitguard call begin|end ...`, `gitguard hook ...`,
 * `gitguard resume ...` and `gitguard explain ...` without a Python interpreter start,
 * while a daemon answers for the workspace.
 *
 * It does what gitguard/entry.py's try_daemon does, in the same order, and nothing
 * more: find the store as client.find_store does, read stdin when the command wants
 * it, connect to <store>/daemon.sock, check the peer's uid (and that it is not this
 * process), send the request in the binary framing of gitguard/server.py, write the
 * daemon's stdout and stderr and exit with its code. Whenever the Python client would
 * work in-process instead (no store, no daemon, a refused or declining daemon, an
 * unusual command line, GITGUARD_FAULT set), this program execs the Python entry with
 * the same arguments and the bytes of stdin it read, so the result is identical.
 *
 * gitguard/nativeclient.py builds it with the system `cc`, with GG_PYTHON and
 * GG_LAUNCHER defined in a generated prefix. Standard C and POSIX, plus Linux's
 * SO_PEERCRED and O_PATH (the Python client uses the same two).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef GG_HAVE_CONFIG
static const char GG_PYTHON[] = "python3";
static const char GG_LAUNCHER[] = "";
#define GG_TAKEN ' '
#define GG_TAKE_S 5
#endif

#define MAGIC "GGB1"
#define MAX_SUN_PATH 100
#define MAX_PATH_LEN 8192

extern char **environ;

typedef struct { unsigned char *data; size_t len, cap; } buf_t;

static void die_oom(void) {
    fputs("Error: gitguard's hook client is out of memory\n", stderr);
    exit(3);
}

static void put(buf_t *b, const void *data, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown) die_oom();
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void put_u32(buf_t *b, uint32_t v) {
    unsigned char be[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                           (unsigned char)(v >> 8), (unsigned char)v};
    put(b, be, 4);
}

static void put_field(buf_t *b, const void *data, size_t n) {
    put_u32(b, (uint32_t)n);
    put(b, data, n);
}

/* Run the Python entry instead, stdin given back when it was read. Never returns. */
static void fallback(int argc, char **argv, const buf_t *in, int was_read) {
    if (was_read) {
        FILE *tmp = tmpfile();
        if (tmp && (in->len == 0 || fwrite(in->data, 1, in->len, tmp) == in->len)
                && fflush(tmp) == 0 && lseek(fileno(tmp), 0, SEEK_SET) == 0) {
            dup2(fileno(tmp), 0);
        } else {
            fputs("Error: gitguard's hook client cannot keep stdin for the fallback\n"
                  "Hint: check that $TMPDIR (or /tmp) is writable\n", stderr);
            exit(3);
        }
    }
    char **av = calloc((size_t)argc + 5, sizeof *av);
    if (!av) die_oom();
    int n = 0;
    av[n++] = (char *)GG_PYTHON;
    if (GG_LAUNCHER[0] && access(GG_LAUNCHER, R_OK) == 0) {
        av[n++] = "-S";     /* hookmain.py: no site-packages while the daemon answers */
        av[n++] = "-P";
        av[n++] = (char *)GG_LAUNCHER;
    } else {
        av[n++] = "-m";
        av[n++] = "gitguard";
    }
    for (int i = 1; i < argc; i++) av[n++] = argv[i];
    av[n] = NULL;
    execv(GG_PYTHON, av);
    fprintf(stderr, "Error: gitguard's hook client cannot start %s: %s\n"
            "Hint: gitguard was installed with that interpreter; run `gitguard hooks install` "
            "(or `gitguard integrate ...`) again with the one that has it\n",
            GG_PYTHON, strerror(errno));
    exit(127);      /* what sh says of a missing program: not "block the tool" (2) */
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void parent_of(char *path) {
    char *slash = strrchr(path, '/');
    if (!slash) return;
    if (slash == path) path[1] = '\0';
    else *slash = '\0';
}

/* os.path.normpath of an absolute path, in place. */
static void normpath(char *path) {
    char out[MAX_PATH_LEN];
    size_t len = 0;
    const char *p = path;
    while (*p) {
        while (*p == '/') p++;
        const char *start = p;
        while (*p && *p != '/') p++;
        size_t n = (size_t)(p - start);
        if (n == 0 || (n == 1 && start[0] == '.')) continue;
        if (n == 2 && start[0] == '.' && start[1] == '.') {
            while (len > 0 && out[len - 1] != '/') len--;
            if (len > 0) len--;
            continue;
        }
        if (len + n + 2 >= sizeof out) return;
        out[len++] = '/';
        memcpy(out + len, start, n);
        len += n;
    }
    if (len == 0) out[len++] = '/';
    out[len] = '\0';
    memcpy(path, out, len + 1);
}

/* The git dir a `.git` file names ("gitdir: ..."), or 0. */
static int gitfile_target(const char *dot_git, char *out) {
    char text[MAX_PATH_LEN];
    FILE *fh = fopen(dot_git, "r");
    if (!fh) return 0;
    size_t n = fread(text, 1, sizeof text - 1, fh);
    fclose(fh);
    text[n] = '\0';
    char *s = text;
    while (*s && strchr(" \t\n\r\v\f", *s)) s++;
    if (strncmp(s, "gitdir:", 7) != 0) return 0;
    s += 7;
    while (*s && strchr(" \t\n\r\v\f", *s)) s++;
    size_t end = strlen(s);
    while (end > 0 && strchr(" \t\n\r\v\f", s[end - 1])) s[--end] = '\0';
    if (s[0] == '/') {
        snprintf(out, MAX_PATH_LEN, "%s", s);
    } else {
        char dir[MAX_PATH_LEN];
        snprintf(dir, sizeof dir, "%s", dot_git);
        parent_of(dir);
        if ((size_t)snprintf(out, MAX_PATH_LEN, "%s/%s", dir, s) >= MAX_PATH_LEN) return 0;
    }
    normpath(out);
    return 1;
}

/* client.find_store: GIT_DIR wins, then a git repository, then a directory with
   .agent-runtime. */
static int find_store(const char *cwd, char *store) {
    char here[MAX_PATH_LEN], probe[MAX_PATH_LEN + 32];
    const char *env_dir = getenv("GIT_DIR");
    if (env_dir && *env_dir) {
        if (env_dir[0] == '/') snprintf(probe, sizeof probe, "%s", env_dir);
        else snprintf(probe, sizeof probe, "%s/%s", cwd, env_dir);
        if (strlen(probe) >= MAX_PATH_LEN - 16) return 0;
        normpath(probe);
        if (is_file(probe)) {       /* a `.git` file names the git dir */
            char git_dir[MAX_PATH_LEN];
            if (!gitfile_target(probe, git_dir)) return 0;
            snprintf(probe, sizeof probe, "%s", git_dir);
        }
        snprintf(store, MAX_PATH_LEN, "%s%sgitguard", probe, strcmp(probe, "/") ? "/" : "");
        return 1;
    }
    snprintf(here, sizeof here, "%s", cwd);
    for (;;) {
        snprintf(probe, sizeof probe, "%s%s.git", here, strcmp(here, "/") ? "/" : "");
        if (is_dir(probe)) {
            snprintf(store, MAX_PATH_LEN, "%s/gitguard", probe);
            return 1;
        }
        if (is_file(probe)) {
            char git_dir[MAX_PATH_LEN];
            if (!gitfile_target(probe, git_dir)) return 0;
            snprintf(store, MAX_PATH_LEN, "%s/gitguard", git_dir);
            return 1;
        }
        if (strcmp(here, "/") == 0) break;
        parent_of(here);
    }
    snprintf(here, sizeof here, "%s", cwd);
    for (;;) {
        snprintf(probe, sizeof probe, "%s%s.agent-runtime", here, strcmp(here, "/") ? "/" : "");
        if (is_dir(probe)) {
            snprintf(store, MAX_PATH_LEN, "%s", probe);
            return 1;
        }
        if (strcmp(here, "/") == 0) return 0;
        parent_of(here);
    }
}

static int wants_stdin(int argc, char **argv) {
    if (strcmp(argv[1], "hook") == 0) return fcntl(0, F_GETFD) != -1 && !isatty(0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--input-file") || !strcmp(a, "--result-file"))
                && i + 1 < argc && !strcmp(argv[i + 1], "-"))
            return 1;
        if (!strcmp(a, "--input-file=-") || !strcmp(a, "--result-file=-")) return 1;
    }
    return 0;
}

static int is_fast(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') return 0;    /* -C and other globals: Python */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 0;
    if (!strcmp(argv[1], "hook")) return 1;
    /* after an agent crash: the daemon has the ledger read and the tree current */
    if (!strcmp(argv[1], "resume") || !strcmp(argv[1], "explain")) return 1;
    return argc >= 3 && !strcmp(argv[1], "call")
        && (!strcmp(argv[2], "begin") || !strcmp(argv[2], "end"));
}

static void broken(const char *why) {
    fprintf(stderr, "Error: the gitguard daemon stopped while handling this: %s\n"
            "Hint: check `gitguard ledger` before repeating the call; "
            "`gitguard daemon status` says whether it runs\n", why);
    exit(3);
}

/* A connected socket to a daemon of this user, or -1 (the caller falls back). */
static int connect_daemon(const char *store) {
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    if (sock < 0) return -1;
    struct timeval two = {2, 0};
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &two, sizeof two);
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    int dir_fd = -1;
    if (strlen(store) + sizeof "/daemon.sock" - 1 > MAX_SUN_PATH) {
        dir_fd = open(store, O_PATH | O_DIRECTORY);
        if (dir_fd < 0) { close(sock); return -1; }
        snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/daemon.sock", dir_fd);
    } else {
        snprintf(addr.sun_path, sizeof addr.sun_path, "%s/daemon.sock", store);
    }
    int ok = connect(sock, (struct sockaddr *)&addr, sizeof addr) == 0;
    if (dir_fd >= 0) close(dir_fd);
    struct ucred cred;
    socklen_t size = sizeof cred;
    if (ok && getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &size) == 0
            && cred.uid == getuid() && cred.pid != getpid())
        return sock;
    close(sock);
    return -1;
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void write_all(int fd, const unsigned char *data, size_t n) {
    while (n > 0) {
        ssize_t done = write(fd, data, n);
        if (done < 0) {
            if (errno == EINTR) continue;
            return;     /* a closed stdout: Python's flush would fail the same way */
        }
        data += done;
        n -= (size_t)done;
    }
}

int main(int argc, char **argv) {
    buf_t in = {0}, req = {0}, ans = {0};
    char cwd[MAX_PATH_LEN], store[MAX_PATH_LEN];
    const char *fault = getenv("GITGUARD_FAULT");
    if ((fault && *fault) || !is_fast(argc, argv) || !getcwd(cwd, sizeof cwd)
            || !find_store(cwd, store))
        fallback(argc, argv, &in, 0);
    int was_read = wants_stdin(argc, argv);
    if (was_read) {
        unsigned char chunk[65536];
        for (;;) {
            ssize_t n = read(0, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            put(&in, chunk, (size_t)n);
        }
    }
    int sock = connect_daemon(store);
    if (sock < 0) fallback(argc, argv, &in, was_read);

    const char *op = !strcmp(argv[1], "call")
                     ? (!strcmp(argv[2], "begin") ? "call.begin" : "call.end")
                     : argv[1];     /* "hook", "resume", "explain" */
    put(&req, MAGIC, 4);
    put_field(&req, op, strlen(op));
    put_field(&req, cwd, strlen(cwd));
    put_u32(&req, (uint32_t)(argc - 1));
    for (int i = 1; i < argc; i++) put_field(&req, argv[i], strlen(argv[i]));
    uint32_t envc = 0;
    for (char **e = environ; *e; e++) envc++;
    put_u32(&req, envc);
    for (char **e = environ; *e; e++) put_field(&req, *e, strlen(*e));
    put_u32(&req, (uint32_t)was_read);
    put_field(&req, in.data, in.len);

    for (size_t sent = 0; sent < req.len;) {
        ssize_t n = send(sock, req.data + sent, req.len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { close(sock); fallback(argc, argv, &in, was_read); }
        sent += (size_t)n;
    }
    shutdown(sock, SHUT_WR);
    /* As client.request: the daemon's worker writes TAKEN (a space) when it starts on the
     * request. Nothing within GG_TAKE_S, or a close first: it has not run it and will not
     * (it skips a request whose client has gone), so do the work in-process. */
    struct timeval take = {GG_TAKE_S, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &take, sizeof take);
    for (;;) {
        unsigned char chunk[65536];
        ssize_t n = recv(sock, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            shutdown(sock, SHUT_RD);
            if (recv(sock, chunk, sizeof chunk, MSG_DONTWAIT) > 0)
                broken("the daemon took the request just as this client gave up waiting");
        }
        if (n <= 0) { close(sock); fallback(argc, argv, &in, was_read); }
        size_t skip = chunk[0] == GG_TAKEN ? 1 : 0;
        put(&ans, chunk + skip, (size_t)n - skip);
        break;
    }
    struct timeval long_wait = {300, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait);
    for (;;) {
        unsigned char chunk[65536];
        ssize_t n = recv(sock, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            char why[256];
            snprintf(why, sizeof why, "the daemon did not answer: %s", strerror(errno));
            broken(why);
        }
        if (n == 0) break;
        put(&ans, chunk, (size_t)n);
    }
    close(sock);
    if (ans.len == 0) broken("the daemon closed the connection without an answer");
    /* MAGIC, u8 fallback, i32 exit, u32 + stdout, u32 + stderr (or the reason) */
    const unsigned char *p = ans.data, *end = ans.data + ans.len;
    if (ans.len < 13 || memcmp(p, MAGIC, 4) != 0) broken("the daemon's answer is malformed");
    int declined = p[4];
    int32_t code = (int32_t)get_u32(p + 5);
    p += 9;
    uint32_t out_len = get_u32(p);
    if ((size_t)(end - p - 4) < out_len) broken("the daemon's answer is malformed");
    const unsigned char *out = p + 4;
    p = out + out_len;
    if (end - p < 4 || (size_t)(end - p - 4) < get_u32(p))
        broken("the daemon's answer is malformed");
    uint32_t err_len = get_u32(p);
    if (declined) fallback(argc, argv, &in, was_read);
    write_all(1, out, out_len);
    write_all(2, p + 4, err_len);
    return code;
}
