/*
 * spank_iosets: a Slurm SPANK plugin giving a job an iosets I/O priority.
 *
 * User options (srun, sbatch, salloc):
 *   --io-priority=P   the job's I/O priority: a finite positive number (IO-SETS set i has
 *                     priority 10^-i). Anything else refuses the job with a clear message.
 *   --io-auto         the job's priority comes from the servers' period detection: any
 *                     priority set through the control path is cleared at job start.
 *                     Mutually exclusive with --io-priority.
 *
 * Plugin arguments (plugstack.conf), exactly one mechanism per site:
 *   mount=DIR             write through DIR/.iosets/jobs/<job id>/priority of an `iosets mount`
 *   ctl=PATH servers=H:P[,H:P...] [token_file=FILE] [auth_file=FILE]
 *                         run `PATH ctl --server H:P [--token-file FILE] [--auth-file FILE]
 *                         set-priority|clear-priority` once per server. Without auth_file= ctl
 *                         finds the node's default secret (/etc/iosets/secret for root; the
 *                         job epilog runs with slurmd's environment, not the job's)
 *   on_error=fail|continue  what a failed write at step start does (default fail: every task
 *                         of the step refuses to start, printing why, so srun exits non-zero
 *                         and a job that asked for a priority never runs silently without it;
 *                         continue: logged in slurmd's log, the step runs unprioritised)
 *   timeout=SECONDS       bound on one write or one `iosets ctl` run (default 10, 1..300);
 *                         a stuck mount is killed and counts as a failure
 *   shares=on|off         (with ctl= only; default off) tell the servers every job's Slurm
 *                         account and node count at step start (`iosets ctl job-info JOB
 *                         --account A --nodes N`), and forget them at job end (`--clear`): the
 *                         servers' fair-share tree (`wfq key=account,user,job`, `size-fair`)
 *                         places and weighs jobs by them. The account is SLURM_JOB_ACCOUNT of
 *                         the job's environment, which slurmd sets from the job's record (a
 *                         value the user exported is overwritten). A failure is treated as a
 *                         failed priority write (on_error=).
 *
 * When it acts:
 *   - in srun/sbatch/salloc (local and allocator contexts) the option callbacks validate P and
 *     the exclusion of the two options; a bad value refuses the command before any job exists.
 *   - at step start, in slurmstepd (remote context, still root: slurm_spank_init_post_opt),
 *     it writes P (or `clear` for --io-auto) for the step's job id, once per step and node.
 *     Every step of a job that carries the option writes it again (idempotent); the batch step
 *     carries sbatch's options. A failure is not returned there: slurmstepd would then not
 *     launch the step, yet srun (22.05) only prints "Plugin initialization failed" and exits
 *     0. Each task refuses instead, in slurm_spank_task_init_privileged, before it execs.
 *   - at job end, in slurmd's job epilog (slurm_spank_job_epilog, root; there the options come
 *     from spank_option_getopt and slurm_spank_init is not called), it writes `clear` if the
 *     job carried --io-priority. The clear is per job, not per step: a step ending while the
 *     job goes on (another step, the batch script) leaves the priority alone. On a multi-node
 *     job every node's epilog clears (harmless: clearing twice is clearing once). A failed
 *     clear is logged and never fails the epilog (that would drain the node).
 *
 * Writes run in a forked child bounded by `timeout`, so a hung FUSE mount or server cannot hang
 * slurmstepd or slurmd. They happen before slurmstepd forks any task (and in the epilog, which
 * has none), so slurmstepd's wait for any child cannot reap the plugin's child first.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(iosets, 1);

#define OPT_PRIORITY 1
#define OPT_AUTO 2

#define MAX_SERVERS 64
#define MSG_LEN 512

/* Plugin configuration, from plugstack.conf. */
static char *mount_dir;
static char *ctl_path;
/* shares=on: pass every job's account and node count (ctl= only). */
static int pass_shares;
static char *token_file;
static char *auth_file;
static char *servers[MAX_SERVERS];
static int n_servers;
static int fail_on_error = 1;
static int timeout_s = 10;

/* What the options callbacks saw (in this process), the priority formatted for the mount. */
static int seen_priority;
static int seen_auto;
static char seen_value[64];

static int opt_cb(int val, const char *optarg, int remote);

static struct spank_option opt_priority = {
    "io-priority", "P",
    "iosets I/O priority of the job: a finite positive number "
    "(IO-SETS set i has priority 10^-i)",
    1, OPT_PRIORITY, opt_cb};
static struct spank_option opt_auto = {
    "io-auto", NULL,
    "iosets I/O priority from the servers' period detection "
    "(clears a priority set by hand)",
    0, OPT_AUTO, opt_cb};

/*
 * Parses a priority: the whole string is a finite number > 0 that does not underflow. Returns 0
 * and sets *out, or -1.
 */
static int parse_priority(const char *s, double *out)
{
    char *end;
    double v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || !(v > 0.0))
        return -1;
    *out = v;
    return 0;
}

/* Formats a priority in the fewest digits (up to 17) that read back as the same double. */
static void format_priority(double p, char *buf, size_t len)
{
    int digits;

    for (digits = 1; digits < 17; digits++) {
        snprintf(buf, len, "%.*g", digits, p);
        if (strtod(buf, NULL) == p)
            return;
    }
    snprintf(buf, len, "%.17g", p);
}

static int opt_cb(int val, const char *optarg, int remote)
{
    double p;

    (void)remote;
    if (val == OPT_PRIORITY) {
        if (parse_priority(optarg, &p) != 0) {
            slurm_error("iosets: --io-priority=%s: not a finite positive number "
                        "(e.g. 1, 0.1, 1e-3)",
                        optarg ? optarg : "");
            return -1;
        }
        seen_priority = 1;
        format_priority(p, seen_value, sizeof seen_value);
    } else if (val == OPT_AUTO) {
        seen_auto = 1;
    }
    if (seen_priority && seen_auto) {
        slurm_error("iosets: --io-priority and --io-auto are mutually exclusive");
        return -1;
    }
    return 0;
}

/* Set once parse_args has accepted the plugin arguments. */
static int configured;

/*
 * Parses the plugstack.conf arguments, once per process: every entry point calls it, because
 * the job epilog (S_CTX_JOB_SCRIPT) calls slurm_spank_job_epilog without slurm_spank_init.
 */
static int parse_args(int ac, char **av)
{
    int i;

    if (configured)
        return 0;
    for (i = 0; i < ac; i++) {
        const char *a = av[i];
        if (strncmp(a, "mount=", 6) == 0) {
            mount_dir = strdup(a + 6);
        } else if (strncmp(a, "ctl=", 4) == 0) {
            ctl_path = strdup(a + 4);
        } else if (strncmp(a, "token_file=", 11) == 0) {
            token_file = strdup(a + 11);
        } else if (strncmp(a, "auth_file=", 10) == 0) {
            auth_file = strdup(a + 10);
        } else if (strncmp(a, "servers=", 8) == 0) {
            char *list = strdup(a + 8), *save = NULL, *tok;
            for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (n_servers == MAX_SERVERS) {
                    slurm_error("iosets: servers=: more than %d servers", MAX_SERVERS);
                    return -1;
                }
                servers[n_servers++] = strdup(tok);
            }
            free(list);
        } else if (strcmp(a, "shares=on") == 0) {
            pass_shares = 1;
        } else if (strcmp(a, "shares=off") == 0) {
            pass_shares = 0;
        } else if (strcmp(a, "on_error=fail") == 0) {
            fail_on_error = 1;
        } else if (strcmp(a, "on_error=continue") == 0) {
            fail_on_error = 0;
        } else if (strncmp(a, "timeout=", 8) == 0) {
            char *end;
            long t = strtol(a + 8, &end, 10);
            if (end == a + 8 || *end != '\0' || t < 1 || t > 300) {
                slurm_error("iosets: %s: timeout must be whole seconds in 1..300", a);
                return -1;
            }
            timeout_s = (int)t;
        } else {
            slurm_error("iosets: unknown plugin argument '%s' (known: mount=, ctl=, "
                        "servers=, token_file=, auth_file=, on_error=fail|continue, timeout=, "
                        "shares=on|off)",
                        a);
            return -1;
        }
    }
    if ((mount_dir != NULL) == (ctl_path != NULL)) {
        slurm_error("iosets: plugstack.conf must give exactly one of mount=DIR or ctl=PATH");
        return -1;
    }
    if (mount_dir && (mount_dir[0] != '/' || n_servers || token_file || auth_file)) {
        slurm_error("iosets: mount= needs an absolute path and takes no "
                    "servers=/token_file=/auth_file=");
        return -1;
    }
    if (pass_shares && !ctl_path) {
        slurm_error("iosets: shares=on needs ctl=PATH (the mount has no account file)");
        return -1;
    }
    if (ctl_path && (ctl_path[0] != '/' || n_servers == 0)) {
        slurm_error("iosets: ctl= needs an absolute path and servers=HOST:PORT[,...]");
        return -1;
    }
    configured = 1;
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (parse_args(ac, av) != 0)
        return -1;
    if (spank_option_register(sp, &opt_priority) != ESPANK_SUCCESS ||
        spank_option_register(sp, &opt_auto) != ESPANK_SUCCESS) {
        slurm_error("iosets: cannot register --io-priority/--io-auto");
        return -1;
    }
    return 0;
}

/*
 * Waits for `pid` at most timeout_s seconds (then kills it). Returns its exit status (0..255),
 * or -1 if it was killed or died of a signal (`*timed_out` says which).
 */
static int wait_bounded(pid_t pid, int *timed_out)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    long ticks = (long)timeout_s * 100;
    int status;

    *timed_out = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return -1;
        if (ticks-- <= 0) {
            *timed_out = 1;
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            return -1;
        }
        nanosleep(&tick, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Reads what a child wrote to `fd` (at most MSG_LEN-1 bytes) into msg, without a final newline. */
static void read_msg(int fd, char *msg)
{
    size_t n = 0;
    ssize_t r;

    while (n < MSG_LEN - 1 && (r = read(fd, msg + n, MSG_LEN - 1 - n)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        n += (size_t)r;
    }
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        n--;
    msg[n] = '\0';
}

/*
 * Makes a pipe in pfd and forks: returns the child's pid (0 in the child), or -1 with the reason
 * in msg and nothing left open.
 */
static pid_t fork_with_pipe(int pfd[2], char *msg)
{
    pid_t pid;

    if (pipe(pfd) != 0) {
        snprintf(msg, MSG_LEN, "pipe: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        snprintf(msg, MSG_LEN, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
    }
    return pid;
}

/*
 * Writes `value` ("0.1", "clear") to MOUNT/.iosets/jobs/<job>/priority in a child process.
 * Returns 0, or -1 with the reason in msg.
 */
static int write_mount(uint32_t job, const char *value, char *msg)
{
    char path[4096], line[64];
    int pfd[2], timed_out, rc, len;
    pid_t pid;

    if (snprintf(path, sizeof path, "%s/.iosets/jobs/%u/priority", mount_dir, job) >=
        (int)sizeof path) {
        snprintf(msg, MSG_LEN, "mount path too long");
        return -1;
    }
    len = snprintf(line, sizeof line, "%s\n", value);
    pid = fork_with_pipe(pfd, msg);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Child: only async-signal-safe calls; the errno goes back as 4 bytes. */
        int fd, err = 0;
        ssize_t w;
        close(pfd[0]);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            err = errno;
        } else {
            w = write(fd, line, (size_t)len);
            if (w != len)
                err = w < 0 ? errno : EIO;
            if (close(fd) != 0 && err == 0)
                err = errno;
        }
        if (err != 0) {
            ssize_t ignored = write(pfd[1], &err, sizeof err);
            (void)ignored;
        }
        _exit(err != 0);
    }
    close(pfd[1]);
    rc = wait_bounded(pid, &timed_out);
    if (rc == 0) {
        close(pfd[0]);
        return 0;
    }
    if (timed_out) {
        snprintf(msg, MSG_LEN, "writing %s: no answer within %d s (mount hung?)", path,
                 timeout_s);
    } else {
        int err = 0;
        if (read(pfd[0], &err, sizeof err) == (ssize_t)sizeof err)
            snprintf(msg, MSG_LEN, "writing '%s' to %s: %s", value, path, strerror(err));
        else
            snprintf(msg, MSG_LEN, "writing '%s' to %s: the writer died", value, path);
    }
    close(pfd[0]);
    return -1;
}

/*
 * Runs `CTL ctl --server S [--token-file F] [--auth-file A] TAIL...` for every server (TAIL:
 * at most 8 words, NULL-terminated). Returns 0, or -1 with the first failure's reason (and
 * ctl's stderr) in msg.
 */
static int run_ctl_all(char *const *tail, char *msg)
{
    int i;

    for (i = 0; i < n_servers; i++) {
        char *argv[18], out[MSG_LEN], what[128] = "";
        int n = 0, k, pfd[2], timed_out, rc;
        pid_t pid;

        argv[n++] = ctl_path;
        argv[n++] = "ctl";
        argv[n++] = "--server";
        argv[n++] = servers[i];
        if (token_file) {
            argv[n++] = "--token-file";
            argv[n++] = token_file;
        }
        if (auth_file) {
            argv[n++] = "--auth-file";
            argv[n++] = auth_file;
        }
        for (k = 0; tail[k] && k < 8; k++) {
            argv[n++] = tail[k];
            if (strlen(what) + strlen(tail[k]) + 2 < sizeof what) {
                strcat(what, " ");
                strcat(what, tail[k]);
            }
        }
        argv[n] = NULL;

        pid = fork_with_pipe(pfd, msg);
        if (pid < 0)
            return -1;
        if (pid == 0) {
            int devnull = open("/dev/null", O_RDWR);
            close(pfd[0]);
            if (devnull >= 0) {
                dup2(devnull, 0);
                dup2(devnull, 1);
            }
            dup2(pfd[1], 2);
            execv(ctl_path, argv);
            _exit(127);
        }
        close(pfd[1]);
        rc = wait_bounded(pid, &timed_out);
        read_msg(pfd[0], out);
        close(pfd[0]);
        if (rc != 0) {
            if (timed_out)
                snprintf(msg, MSG_LEN, "%s ctl --server %s: no answer within %d s", ctl_path,
                         servers[i], timeout_s);
            else if (rc == 127 && out[0] == '\0')
                snprintf(msg, MSG_LEN, "cannot run %s", ctl_path);
            else
                snprintf(msg, MSG_LEN, "%s ctl --server %s%s: exit %d: %s", ctl_path,
                         servers[i], what, rc, out);
            return -1;
        }
    }
    return 0;
}

/* `set-priority JOB P` (or `clear-priority JOB`) on every server. */
static int run_ctl(uint32_t job, const char *value, char *msg)
{
    char jobstr[16];
    int clear = strcmp(value, "clear") == 0;
    char *tail[4] = {clear ? "clear-priority" : "set-priority", jobstr, NULL, NULL};

    snprintf(jobstr, sizeof jobstr, "%u", job);
    if (!clear)
        tail[2] = (char *)value;
    return run_ctl_all(tail, msg);
}

/*
 * `job-info JOB [--account A] --nodes N` (or `job-info JOB --clear` with account NULL and nodes
 * 0) on every server.
 */
static int run_job_info(uint32_t job, const char *account, uint32_t nodes, char *msg)
{
    char jobstr[16], nodestr[16];
    char *tail[8] = {"job-info", jobstr, NULL};
    int n = 2;

    snprintf(jobstr, sizeof jobstr, "%u", job);
    snprintf(nodestr, sizeof nodestr, "%u", nodes);
    if (account && account[0]) {
        tail[n++] = "--account";
        tail[n++] = (char *)account;
    }
    if (nodes > 0) {
        tail[n++] = "--nodes";
        tail[n++] = nodestr;
    }
    if (n == 2)
        tail[n++] = "--clear";
    tail[n] = NULL;
    return run_ctl_all(tail, msg);
}

/* Sets (value = a number) or clears ("clear") the job's priority: 0, or -1 and why in msg. */
static int apply(uint32_t job, const char *value, char *msg)
{
    if (!configured) {
        snprintf(msg, MSG_LEN, "plugin arguments not parsed");
        return -1;
    }
    return mount_dir ? write_mount(job, value, msg) : run_ctl(job, value, msg);
}

/*
 * The job's --io-priority (formatted for the mount) or --io-auto. In slurmstepd the option
 * callbacks have run before slurm_spank_init_post_opt (where spank_option_getopt is not
 * available); in the job epilog only spank_option_getopt knows them.
 */
static int job_options(spank_t sp, char *value, size_t len, int *is_auto)
{
    char *arg = NULL;
    double p;

    *is_auto = 0;
    value[0] = '\0';
    if (spank_context() == S_CTX_REMOTE) {
        if (seen_priority)
            snprintf(value, len, "%s", seen_value);
        *is_auto = seen_auto;
        return 0;
    }
    if (spank_option_getopt(sp, &opt_priority, &arg) == ESPANK_SUCCESS) {
        if (parse_priority(arg, &p) != 0) {
            slurm_error("iosets: --io-priority=%s: not a finite positive number",
                        arg ? arg : "");
            return -1;
        }
        format_priority(p, value, len);
    }
    if (spank_option_getopt(sp, &opt_auto, &arg) == ESPANK_SUCCESS)
        *is_auto = 1;
    if (value[0] && *is_auto) {
        slurm_error("iosets: --io-priority and --io-auto are mutually exclusive");
        return -1;
    }
    return 0;
}

/*
 * Why this step's start failed to set its priority (empty: it did not fail, or on_error=continue).
 * Set in slurmstepd by slurm_spank_init_post_opt, read in every task it forks.
 */
static char start_failure[MSG_LEN];

/*
 * Step start, in slurmstepd as root (before privileges are dropped): set or clear, once per step
 * and node. A failure does not fail here: a step whose plugin init fails is not launched, but
 * srun (22.05) then only says "Plugin initialization failed" and exits 0. Instead each task
 * refuses to start in slurm_spank_task_init_privileged, with the reason on its stderr.
 */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    char value[64], msg[MSG_LEN] = "", account[128] = "";
    uint32_t job = 0, nodes = 0;
    int is_auto, rc = 0;
    const char *what = "--io-priority";

    if (spank_context() != S_CTX_REMOTE)
        return 0;
    if (parse_args(ac, av) != 0)
        return -1;
    if (job_options(sp, value, sizeof value, &is_auto) != 0)
        return -1;
    if (!value[0] && !is_auto && !pass_shares)
        return 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
        rc = -1;
        snprintf(msg, sizeof msg, "cannot get the job id");
    }
    if (rc == 0 && pass_shares) {
        what = "shares=on";
        if (spank_getenv(sp, "SLURM_JOB_ACCOUNT", account, sizeof account) != ESPANK_SUCCESS)
            account[0] = '\0';
        if (spank_get_item(sp, S_JOB_NNODES, &nodes) != ESPANK_SUCCESS)
            nodes = 0;
        if (!account[0] && nodes == 0)
            slurm_info("iosets: job %u: no account and no node count to pass", job);
        else
            rc = run_job_info(job, account, nodes, msg);
        if (rc == 0)
            slurm_info("iosets: job %u: account '%s', %u nodes passed", job, account, nodes);
    }
    if (rc == 0 && (value[0] || is_auto)) {
        what = is_auto ? "--io-auto" : "--io-priority";
        rc = apply(job, is_auto ? "clear" : value, msg);
        if (rc == 0)
            slurm_info("iosets: job %u: %s", job,
                       is_auto ? "priority cleared (--io-auto)" : "priority set");
    }
    if (rc != 0) {
        slurm_error("iosets: %s at start of job %u: %s", what, job, msg);
        if (fail_on_error)
            snprintf(start_failure, sizeof start_failure,
                     "iosets: refusing to run job %u without its I/O %s: %s "
                     "(plugstack.conf on_error=fail)",
                     job, pass_shares && strcmp(what, "shares=on") == 0 ? "share" : "priority",
                     msg);
    }
    return 0;
}

/* In each task, as root, before it execs: refuse if the step start failed (on_error=fail). */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (start_failure[0] == '\0')
        return 0;
    slurm_error("%s", start_failure);
    return -1;
}

/* Job end, in slurmd's epilog as root: clear what --io-priority set, forget the account. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    char value[64], msg[MSG_LEN] = "";
    uint32_t job = 0;
    int is_auto;

    if (parse_args(ac, av) != 0)
        return 0; /* logged; failing the epilog would drain the node */
    if (pass_shares) {
        if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
            slurm_error("iosets: epilog: cannot get the job id");
            return 0;
        }
        if (run_job_info(job, NULL, 0, msg) != 0)
            slurm_error("iosets: forgetting the account of job %u at its end: %s", job, msg);
        else
            slurm_info("iosets: job %u ended: account and node count forgotten", job);
    }
    if (job_options(sp, value, sizeof value, &is_auto) != 0 || !value[0])
        return 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
        slurm_error("iosets: epilog: cannot get the job id");
        return 0;
    }
    /* A failed clear is logged, never fails the epilog: that would drain the node. */
    if (apply(job, "clear", msg) != 0)
        slurm_error("iosets: clearing the priority of job %u at its end: %s", job, msg);
    else
        slurm_info("iosets: job %u ended: priority cleared", job);
    return 0;
}
