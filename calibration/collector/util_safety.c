/*
 * The safety layer: every system setting is recorded before it is changed and
 * restored on every exit path (normal return, exit(), SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT); every child process is tracked, dies with us
 * (PR_SET_PDEATHSIG covers even SIGKILL of the collector) and is reaped.
 * Namespaces are only ever held by such children, so they die with them.
 *
 * The signal handler uses only async-signal-safe calls (kill, waitpid, open,
 * write, close, unlink) on data kept in fixed static arrays.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SETTINGS 64
#define MAX_CHILDREN 8192

struct setting {
	char path[256];
	char original[256];
	char value[64];
	volatile sig_atomic_t active; /* changed and not yet restored */
	int restore_errno;            /* 0 when restored fine */
	int restored;
};

static struct setting settings[MAX_SETTINGS];
static volatile sig_atomic_t nsettings;
static volatile pid_t children[MAX_CHILDREN];
static volatile pid_t spawner_pid; /* tracked too, but spared by tracked_kill_strays() */
static int spawner_fd = -1;
static volatile sig_atomic_t in_child;
static char tmp_out[4096];
#define MAX_CLEANUPS 8
static void (*volatile cleanups[MAX_CLEANUPS])(void);
static const int term_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void block_term_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < ARRAY_LEN(term_signals); i++)
		sigaddset(&set, term_signals[i]);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

/* async-signal-safe write of a setting */
static int raw_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = strlen(s);
	ssize_t w = write(fd, s, n);
	int e = errno;
	close(fd);
	if (w < 0)
		return -e;
	return (size_t)w == n ? 0 : -EIO;
}

int setting_change(const char *path, const char *new_value, char *err, size_t errlen)
{
	if (nsettings >= MAX_SETTINGS) {
		snprintf(err, errlen, "too many changed settings");
		return -ENOSPC;
	}
	char *orig = read_file_trim(path);
	if (!orig) {
		int e = errno;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
		return -e;
	}
	if (strlen(path) >= sizeof(settings[0].path) || strlen(orig) >= sizeof(settings[0].original)) {
		free(orig);
		snprintf(err, errlen, "setting path or value too long: %s", path);
		return -ENAMETOOLONG;
	}
	struct setting *s = &settings[nsettings];
	memset(s, 0, sizeof(*s));
	strcpy(s->path, path);
	strcpy(s->original, orig);
	snprintf(s->value, sizeof(s->value), "%s", new_value);
	free(orig);
	/* recorded (and armed for restore) before the write happens */
	s->active = 1;
	nsettings++;
	int rc = raw_write(path, new_value);
	if (rc < 0) {
		/* the kernel refused the value: the original is still in place */
		s->active = 0;
		s->restored = 1;
		s->restore_errno = 0;
		snprintf(err, errlen, "cannot write %s to %s: %s", new_value, path, strerror(-rc));
		return rc;
	}
	return 0;
}

static int restore_one(struct setting *s)
{
	if (!s->active)
		return 0;
	int rc = raw_write(s->path, s->original);
	s->active = 0;
	s->restored = rc == 0;
	s->restore_errno = -rc;
	return rc;
}

int setting_restore(const char *path)
{
	for (int i = nsettings - 1; i >= 0; i--)
		if (settings[i].active && strcmp(settings[i].path, path) == 0)
			return restore_one(&settings[i]);
	return 0;
}

int settings_restore_all(void)
{
	int failures = 0;
	for (int i = nsettings - 1; i >= 0; i--)
		if (restore_one(&settings[i]) < 0)
			failures++;
	return failures;
}

jv *settings_log_json(void)
{
	jv *a = jv_arr();
	for (int i = 0; i < nsettings; i++) {
		jv *o = jv_push(a, jv_obj());
		jv_set(o, "path", jv_str(settings[i].path));
		jv_set(o, "original", jv_str(settings[i].original));
		jv_set(o, "value", jv_str(settings[i].value));
		jv_set(o, "restored", jv_bool(settings[i].restored && !settings[i].active));
		if (settings[i].restore_errno)
			jv_set(o, "restore_error", jv_str(strerror(settings[i].restore_errno)));
	}
	return a;
}

pid_t tracked_fork(void)
{
	sigset_t old;
	pid_t parent = getpid();
	block_term_signals(&old);
	int slot = -1;
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == 0) {
			slot = i;
			break;
		}
	if (slot < 0) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		errno = EAGAIN;
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		in_child = 1;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127); /* the parent died before prctl took effect */
		for (size_t i = 0; i < ARRAY_LEN(term_signals); i++)
			signal(term_signals[i], SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return 0;
	}
	if (pid > 0)
		children[slot] = pid;
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return pid;
}

static void untrack(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid) {
			children[i] = 0;
			return;
		}
}

pid_t tracked_wait(pid_t pid, int *status)
{
	pid_t r;
	do
		r = waitpid(pid, status, 0);
	while (r < 0 && errno == EINTR);
	if (r == pid || (r < 0 && errno == ECHILD))
		untrack(pid);
	return r;
}

/* SIGKILL and reap the tracked children; the spawner, unless spared, gets SIGTERM instead, so that
 * it kills and reaps the command it runs before it dies: when its waitpid() returns here, the
 * command (which may hold a namespace an item's cleanup then removes) is gone too. */
static void kill_and_reap(int spare_spawner)
{
	pid_t sp = spawner_pid;
	for (int i = 0; i < MAX_CHILDREN; i++) {
		pid_t pid = children[i];
		if (pid > 0 && pid != sp)
			kill(pid, SIGKILL);
		else if (pid > 0 && !spare_spawner)
			kill(pid, SIGTERM);
	}
	for (int i = 0; i < MAX_CHILDREN; i++) {
		pid_t pid = children[i];
		if (pid > 0 && !(spare_spawner && pid == sp)) {
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			children[i] = 0;
			if (pid == sp)
				spawner_pid = 0;
		}
	}
}

void tracked_kill_all(void) { kill_and_reap(0); }

void tracked_kill_strays(void) { kill_and_reap(1); }

int tracked_count(void)
{
	int n = 0;
	pid_t sp = spawner_pid;
	for (int i = 0; i < MAX_CHILDREN; i++)
		n += children[i] > 0 && children[i] != sp;
	return n;
}

int safety_add_cleanup(void (*fn)(void))
{
	for (int i = 0; i < MAX_CLEANUPS; i++)
		if (!cleanups[i]) {
			cleanups[i] = fn;
			return 0;
		}
	return -ENOSPC;
}

void safety_remove_cleanup(void (*fn)(void))
{
	for (int i = 0; i < MAX_CLEANUPS; i++)
		if (cleanups[i] == fn)
			cleanups[i] = NULL;
}

/* Registered cleanups run after the children are gone (they may have held what is cleaned). */
static void run_cleanups(void)
{
	for (int i = MAX_CLEANUPS - 1; i >= 0; i--) {
		void (*fn)(void) = cleanups[i];
		if (fn) {
			cleanups[i] = NULL;
			fn();
		}
	}
}

static void say(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

static void on_signal(int sig)
{
	static volatile sig_atomic_t busy;
	if (busy)
		return;
	busy = 1;
	say(COLLECTOR_NAME ": interrupted by ");
	say(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGQUIT");
	say("; killing children and restoring settings\n");
	tracked_kill_all();
	run_cleanups();
	if (settings_restore_all() > 0)
		say(COLLECTOR_NAME ": WARNING: some settings could not be restored\n");
	if (tmp_out[0])
		unlink(tmp_out);
	/* die of the same signal so that the caller sees how we ended */
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);
}

static void at_exit_cleanup(void)
{
	if (in_child)
		return;
	tracked_kill_all();
	run_cleanups();
	settings_restore_all();
}

void safety_install(const char *tmp_out_path)
{
	if (tmp_out_path)
		snprintf(tmp_out, sizeof(tmp_out), "%s", tmp_out_path);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_LEN(term_signals); i++)
		sigaddset(&sa.sa_mask, term_signals[i]);
	for (size_t i = 0; i < ARRAY_LEN(term_signals); i++)
		sigaction(term_signals[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	atexit(at_exit_cleanup);
}

int spawn_thread(void *(*fn)(void *), void *arg, void *thread_out)
{
	sigset_t old;
	block_term_signals(&old);
	int rc = pthread_create((pthread_t *)thread_out, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

const char *find_tool(const char *name, char *buf, size_t len)
{
	const char *dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/local/bin"};
	for (size_t i = 0; i < ARRAY_LEN(dirs); i++) {
		snprintf(buf, len, "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

/* ------------------------------------------------------------ spawner
 *
 * Workloads that fork (run_cmd's commands, the messaging item's senders and receivers) are
 * forked from a small process forked at start-up, not from the collector itself, so that no
 * measurement depends on the items that ran before it. Forked from the collector late in a full
 * run, fork + exec + wait of /bin/true took 1.0-1.2 ms against 0.7 ms early (collector 0.8.0;
 * `perf` showed more time in the page-table copy and teardown, copy_page_range and
 * unmap_page_range: the collector's memory grows as items add their results, about 3 MB
 * resident at start and 9-12 MB late), while the same command forked by the spawner takes
 * 0.7 ms at any point. (fork_exec's own loop in the grown collector did not slow down, so size
 * is not the whole story; the spawner removes the dependence whatever its cause.)
 *
 * Protocol over a SOCK_SEQPACKET socketpair: a request is a struct spawner_req followed by the
 * job's input; the spawner runs the job (a function of this same binary: the spawner is a fork,
 * so its addresses are the collector's) and sends back exactly `outlen` bytes of output.
 */
struct spawner_req {
	spawner_job fn;
	size_t outlen;
};

#define SPAWNER_MSG_MAX 8192
#define SPAWN_MAX_ARGS 63

/* In the spawner (SIGINT from the terminal, SIGTERM from the collector's cleanup): whatever it
 * forked dies and is reaped first. Async-signal-safe. */
static void spawner_on_signal(int sig)
{
	(void)sig;
	tracked_kill_all(); /* the spawner's own table: only what it forked */
	_exit(0);
}

static void spawner_main(int fd)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = spawner_on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_LEN(term_signals); i++)
		sigaction(term_signals[i], &sa, NULL);
	static _Alignas(16) char in[SPAWNER_MSG_MAX], out[SPAWNER_MSG_MAX];
	for (;;) {
		ssize_t n = recv(fd, in, sizeof(in), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < (ssize_t)sizeof(struct spawner_req))
			_exit(0); /* the collector closed its end (or died) */
		struct spawner_req req;
		memcpy(&req, in, sizeof(req));
		if (req.outlen > sizeof(out))
			_exit(1);
		memset(out, 0, req.outlen);
		req.fn(in + sizeof(req), (size_t)n - sizeof(req), out, req.outlen);
		if (send(fd, out, req.outlen, MSG_NOSIGNAL) != (ssize_t)req.outlen)
			_exit(1);
	}
}

int spawner_start(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -errno;
	pid_t pid = tracked_fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		close(sv[0]);
		spawner_main(sv[1]);
	}
	close(sv[1]);
	spawner_fd = sv[0];
	spawner_pid = pid;
	return 0;
}

void spawner_stop(void)
{
	pid_t pid = spawner_pid;
	if (spawner_fd >= 0) {
		close(spawner_fd); /* end of requests: the spawner exits */
		spawner_fd = -1;
	}
	if (pid > 0) {
		tracked_wait(pid, NULL);
		spawner_pid = 0;
	}
}

int spawner_call(spawner_job fn, const void *in, size_t inlen, void *out, size_t outlen)
{
	if (spawner_fd < 0 || spawner_pid <= 0) {
		/* no spawner (spawner_start() was not called or failed): run it here */
		memset(out, 0, outlen);
		fn(in, inlen, out, outlen);
		return 0;
	}
	static _Alignas(16) char msg[SPAWNER_MSG_MAX];
	struct spawner_req req = {fn, outlen};
	if (inlen > sizeof(msg) - sizeof(req) || outlen > SPAWNER_MSG_MAX)
		return -E2BIG;
	memcpy(msg, &req, sizeof(req));
	memcpy(msg + sizeof(req), in, inlen);
	if (send(spawner_fd, msg, sizeof(req) + inlen, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) + inlen))
		return -errno;
	ssize_t n;
	do
		n = recv(spawner_fd, out, outlen, 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)outlen)
		return n < 0 ? -errno : -EPIPE; /* the spawner died */
	return 0;
}

/* fork (tracked) + exec + wait, from the calling process */
static int run_cmd_local(char *const argv[], int64_t *ns)
{
	int64_t t0 = now_ns();
	pid_t pid = tracked_fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	int status = 0;
	tracked_wait(pid, &status);
	*ns = now_ns() - t0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : (status ? status : -1);
}

struct exec_reply {
	int64_t ns;
	int rc;
};

/* spawner job: the input is the argv strings, each NUL-ended */
static void exec_job(const void *in, size_t inlen, void *out, size_t outlen)
{
	struct exec_reply *r = out;
	static char buf[SPAWNER_MSG_MAX + 1];
	(void)outlen;
	memcpy(buf, in, inlen);
	buf[inlen] = '\0';
	char *argv[SPAWN_MAX_ARGS + 1];
	int argc = 0;
	for (char *p = buf; p < buf + inlen && argc < SPAWN_MAX_ARGS; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	r->rc = argc ? run_cmd_local(argv, &r->ns) : -EINVAL;
}

int run_cmd(char *const argv[], int64_t *ns)
{
	char buf[SPAWNER_MSG_MAX - sizeof(struct spawner_req)];
	size_t len = 0;
	int argc = 0;
	for (char *const *p = argv; *p; p++, argc++) {
		size_t l = strlen(*p) + 1;
		if (argc >= SPAWN_MAX_ARGS || len + l > sizeof(buf))
			return -E2BIG;
		memcpy(buf + len, *p, l);
		len += l;
	}
	struct exec_reply r = {0, 0};
	int rc = spawner_call(exec_job, buf, len, &r, sizeof(r));
	if (rc < 0)
		return rc;
	*ns = r.ns;
	return r.rc;
}
