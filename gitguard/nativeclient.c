/* gitguard's native hook client: a gitguard command line answered by the daemon without
 * a Python interpreter start.
 *
 *     nativeclient PYTHON ARGS...
 *
 * It finds the store as client.find_store does, reads stdin to its end (unless it is a
 * terminal: only the hook commands gitguard writes run this, and their stdin is the
 * hook's payload, a file or /dev/null), connects to <store>/daemon.sock, checks the
 * peer's uid (and that it is not this process) and sends ARGS, its directory, its
 * environment and stdin as one "cli" request in gitguard/ipc/wire.py's framing. Which
 * command lines the daemon runs is the daemon's to say (entry.forwarded), not this
 * program's: it writes the daemon's stdout and stderr and exits with its code, or,
 * whenever the daemon does not run the command (no store, no daemon, a refusal, a
 * fallback answer), it execs `PYTHON -S -P <package>/hookmain.py ARGS...` with the bytes
 * of stdin it read, so the result is the Python entry's, byte for byte.
 *
 * setup.py compiles it with the package (nativeclient.py says where it lands); without
 * a C compiler there is none, and the hook commands start Python themselves. Standard
 * C and POSIX, plus Linux's SO_PEERCRED, O_PATH and /proc/self/exe (the Python client
 * uses the first two).
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

/* client.TAKEN and client.TAKE_S (a test compares them): the daemon's worker writes TAKEN
 * when it starts on the request; nothing within TAKE_S seconds, and the client does the
 * work itself. */
#define GG_TAKEN ' '
#define GG_TAKE_S 5
/* The Python entry the fallback runs, beside this program in the package */
#define GG_LAUNCHER "hookmain.py"
#define MAGIC "GGW1"
#define MAX_DEPTH 128       /* wire.MAX_DEPTH */
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

/* wire.py's str and bytes: a tag, a u32 length, the bytes */
static void put_blob(buf_t *b, char tag, const void *data, size_t n) {
    put(b, &tag, 1);
    put_u32(b, (uint32_t)n);
    put(b, data, n);
}

static void put_str(buf_t *b, const char *text) { put_blob(b, 's', text, strlen(text)); }

static void put_head(buf_t *b, char tag, uint32_t count) {
    put(b, &tag, 1);
    put_u32(b, count);
}

/* The package directory this program lives in (the launcher is there), or 0 */
static int own_dir(char *out) {
    ssize_t n = readlink("/proc/self/exe", out, MAX_PATH_LEN - 1);
    if (n <= 0) return 0;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) return 0;
    *slash = '\0';
    return 1;
}

/* Run the Python entry instead, stdin given back when it was read. Never returns. */
static void fallback(const char *python, int argc, char **argv, const buf_t *in,
                     int was_read) {
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
    char launcher[MAX_PATH_LEN + sizeof GG_LAUNCHER + 1];
    if (!av) die_oom();
    int n = 0;
    av[n++] = (char *)python;
    if (own_dir(launcher)) {
        strcat(launcher, "/" GG_LAUNCHER);
        av[n++] = "-S";     /* hookmain.py: no site-packages while the daemon answers */
        av[n++] = "-P";
        av[n++] = launcher;
    } else {
        av[n++] = "-m";
        av[n++] = "gitguard";
    }
    for (int i = 2; i < argc; i++) av[n++] = argv[i];
    av[n] = NULL;
    execv(python, av);
    fprintf(stderr, "Error: gitguard's hook client cannot start %s: %s\n"
            "Hint: gitguard was installed with that interpreter; run `gitguard hooks install` "
            "(or `gitguard integrate ...`) again with the one that has it\n",
            python, strerror(errno));
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

/* Reading the daemon's answer (a dict in wire.py's framing): what this program needs of
 * it, every other value skipped. Each read checks what is left; 0 when malformed. */
typedef struct { const unsigned char *p, *end; } reader_t;

static int take(reader_t *r, size_t n, const unsigned char **out) {
    if ((size_t)(r->end - r->p) < n) return 0;
    *out = r->p;
    r->p += n;
    return 1;
}

static int take_u32(reader_t *r, uint32_t *v) {
    const unsigned char *p;
    if (!take(r, 4, &p)) return 0;
    *v = get_u32(p);
    return 1;
}

static int skip_value(reader_t *r, int depth) {
    const unsigned char *p;
    uint32_t n;
    if (depth > MAX_DEPTH || !take(r, 1, &p)) return 0;
    switch (*p) {
    case 'N': case 'T': case 'F': return 1;
    case 'i': case 'f': return take(r, 8, &p);
    case 's': case 'b': return take_u32(r, &n) && take(r, n, &p);
    case 'l':
        if (!take_u32(r, &n)) return 0;
        while (n--) if (!skip_value(r, depth + 1)) return 0;
        return 1;
    case 'd':
        if (!take_u32(r, &n)) return 0;
        while (n--) if (!skip_value(r, depth + 1) || !skip_value(r, depth + 1)) return 0;
        return 1;
    }
    return 0;
}

typedef struct {
    int declined;
    int32_t code;
    const unsigned char *out, *err;
    uint32_t out_len, err_len;
} answer_t;

/* {"exit": int, "stdout": str, "stderr": str} or {"fallback": true, ...} */
static int read_answer(const unsigned char *data, size_t len, answer_t *a) {
    reader_t r = {data, data + len};
    const unsigned char *p;
    uint32_t count, body;
    memset(a, 0, sizeof *a);
    a->code = 3;
    if (!take(&r, 4, &p) || memcmp(p, MAGIC, 4) != 0 || !take_u32(&r, &body)
            || body != (size_t)(r.end - r.p) || !take(&r, 1, &p) || *p != 'd'
            || !take_u32(&r, &count))
        return 0;
    while (count--) {
        uint32_t klen, vlen;
        const unsigned char *key, *tag, *value;
        if (!take(&r, 1, &tag) || *tag != 's' || !take_u32(&r, &klen) || !take(&r, klen, &key))
            return 0;
        const reader_t at = r;
        if (!skip_value(&r, 1)) return 0;
        tag = at.p;
        value = at.p + 1;
#define KEY_IS(name) (klen == sizeof name - 1 && !memcmp(key, name, klen))
        if (KEY_IS("fallback")) {
            a->declined = *tag == 'T';
        } else if (KEY_IS("exit") && *tag == 'i') {
            int64_t code = (int64_t)((uint64_t)get_u32(value) << 32 | get_u32(value + 4));
            a->code = code == (int32_t)code ? (int32_t)code : 3;
        } else if ((KEY_IS("stdout") || KEY_IS("stderr")) && (*tag == 's' || *tag == 'b')) {
            vlen = get_u32(value);
            if (KEY_IS("stdout")) { a->out = value + 4; a->out_len = vlen; }
            else { a->err = value + 4; a->err_len = vlen; }
        }
#undef KEY_IS
    }
    return r.p == r.end;
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
    if (argc < 2) {
        fputs("Error: gitguard's hook client needs the interpreter to fall back to\n"
              "Hint: it is run by the hook commands gitguard writes: "
              "nativeclient PYTHON ARGS...\n", stderr);
        return 2;
    }
    const char *python = argv[1];
    if (!getcwd(cwd, sizeof cwd) || !find_store(cwd, store))
        fallback(python, argc, argv, &in, 0);
    int was_read = fcntl(0, F_GETFD) != -1 && !isatty(0);
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
    if (sock < 0) fallback(python, argc, argv, &in, was_read);

    /* {"op": "cli", "args": {"argv": [...], "cwd": ..., "env": {...}, "stdin": b"..."}} */
    put(&req, MAGIC "\0\0\0\0", 8);     /* the length is filled in below */
    put_head(&req, 'd', 2);
    put_str(&req, "op");
    put_str(&req, "cli");
    put_str(&req, "args");
    put_head(&req, 'd', 4);
    put_str(&req, "argv");
    put_head(&req, 'l', (uint32_t)(argc - 2));
    for (int i = 2; i < argc; i++) put_str(&req, argv[i]);
    put_str(&req, "cwd");
    put_str(&req, cwd);
    put_str(&req, "env");
    uint32_t envc = 0;
    for (char **e = environ; *e; e++) envc++;
    char **names = calloc((size_t)envc + 1, sizeof *names);
    if (!names) die_oom();
    uint32_t kept = 0;
    size_t head = req.len;
    put_head(&req, 'd', 0);     /* the count is filled in below */
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        size_t klen = (size_t)(eq - *e);
        int seen = 0;       /* os.environ keeps the first of a repeated name */
        for (uint32_t j = 0; j < kept && !seen; j++)
            seen = !strncmp(names[j], *e, klen) && names[j][klen] == '=';
        if (seen) continue;
        names[kept++] = *e;
        put_blob(&req, 's', *e, klen);
        put_str(&req, eq + 1);
    }
    free(names);
    unsigned char be[4] = {(unsigned char)(kept >> 24), (unsigned char)(kept >> 16),
                           (unsigned char)(kept >> 8), (unsigned char)kept};
    memcpy(req.data + head + 1, be, 4);
    put_str(&req, "stdin");
    put_blob(&req, 'b', in.data, in.len);
    uint32_t body = (uint32_t)(req.len - 8);
    unsigned char len_be[4] = {(unsigned char)(body >> 24), (unsigned char)(body >> 16),
                               (unsigned char)(body >> 8), (unsigned char)body};
    memcpy(req.data + 4, len_be, 4);

    for (size_t sent = 0; sent < req.len;) {
        ssize_t n = send(sock, req.data + sent, req.len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { close(sock); fallback(python, argc, argv, &in, was_read); }
        sent += (size_t)n;
    }
    shutdown(sock, SHUT_WR);
    /* As client.request: the daemon's worker writes TAKEN when it starts on the request.
     * Nothing within GG_TAKE_S, or a close first: it has not run it and will not (it skips
     * a request whose client has gone), so do the work in-process. */
    struct timeval take_wait = {GG_TAKE_S, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &take_wait, sizeof take_wait);
    int taken = 0;
    for (;;) {
        unsigned char chunk[65536];
        ssize_t n = recv(sock, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            shutdown(sock, SHUT_RD);
            if (recv(sock, chunk, sizeof chunk, MSG_DONTWAIT) > 0)
                broken("the daemon took the request just as this client gave up waiting");
        }
        if (n <= 0) { close(sock); fallback(python, argc, argv, &in, was_read); }
        taken = chunk[0] == GG_TAKEN;
        put(&ans, chunk + taken, (size_t)n - (size_t)taken);
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
    answer_t answer;
    if (!read_answer(ans.data, ans.len, &answer)) {
        /* not run (a daemon of another gitguard version says so its own way) */
        if (!taken) fallback(python, argc, argv, &in, was_read);
        broken(ans.len == 0 ? "the daemon closed the connection without an answer"
                            : "the daemon's answer is malformed");
    }
    if (answer.declined) fallback(python, argc, argv, &in, was_read);
    write_all(1, answer.out, answer.out_len);
    write_all(2, answer.err, answer.err_len);
    return answer.code;
}
