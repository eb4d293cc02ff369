// SPDX-License-Identifier: MIT
/*
 * fusecore entry point: command line (libfuse style, also the argument order
 * of mount(8)'s helper: `prog SOURCE MOUNTPOINT -o opts`), option splitting
 * between core, policy and libfuse, checks before mounting (source exists,
 * mountpoint is a directory and not already a mount point), the session loop,
 * the housekeeping thread (policy tick + SIGUSR1 dump of the counters and
 * the request log), and the orderly unmount (policy stop, then both dumps).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fc_internal.h"

static pthread_t fc_house_thread;
static atomic_bool fc_house_stop;

struct fc_kv {
	char *key;
	char *val;		/* NULL for a bare key */
};

/* Collected while fuse_opt_parse runs (single threaded, before mounting). */
static struct fc_kv *fc_opts;
static size_t fc_nopts;
static char *fc_nonopt[2];
static unsigned int fc_nnonopt;
static bool fc_help, fc_version;
static bool fc_bad_args;

static void fc_usage(const char *prog)
{
	printf("usage: %s [-f] [-d] -o preset=NAME[,key=value...] SOURCE "
	       "MOUNTPOINT\n"
	       "       mount -t fuse.%s SOURCE MOUNTPOINT -o "
	       "preset=NAME[,key=value...]\n\n"
	       "Mirrors the directory SOURCE at MOUNTPOINT.\n\n"
	       "core options:\n"
	       "    -f                   stay in the foreground\n"
	       "    -d                   libfuse debug output (implies -f)\n"
	       "    -o io_unit=SIZE      FUSE max_write, 4k..1M (4k, 512k)\n"
	       "    -o threads=N         worker threads (1 = one loop thread)\n"
	       "    -o splice=BOOL       zero-copy splice in and out\n"
	       "    -o writeback_cache=BOOL  kernel writeback cache\n"
	       "    -o own_loop=BOOL     fusecore's receive loop: write data may\n"
	       "                         stay in its receive buffer (splice off)\n"
	       "    -o passthrough=BOOL  kernel FUSE passthrough (Linux >= 6.9):\n"
	       "                         no READ/WRITE reaches the daemon\n"
	       "    -o timeout=SECONDS   entry/attr cache timeout (1)\n"
	       "    -o counters=PATH     JSON counters at unmount and on "
	       "SIGUSR1\n"
	       "    -o requests=PATH     one line per FUSE request (ids, times)"
	       "\n                         at unmount and on SIGUSR1\n",
	       prog, fc_pol->name);
	if (fc_pol->options_help)
		printf("\n%s options:\n%s", fc_pol->name, fc_pol->options_help);
	printf("\nother -o options go to libfuse (allow_other, "
	       "default_permissions, ...)\n");
}

static int fc_opt_proc(void *data, const char *arg, int key,
		       struct fuse_args *outargs)
{
	(void)data;
	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT) {
		if (fc_nnonopt == 2) {
			fprintf(stderr, "%s: too many arguments: '%s'\n",
				fc_cfg.progname, arg);
			fc_bad_args = true;
			return 0;
		}
		fc_nonopt[fc_nnonopt++] = strdup(arg);
		return 0;
	}
	if (key == FUSE_OPT_KEY_OPT) {
		const char *eq;
		struct fc_kv *kv;

		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			fc_help = true;
			return 0;
		}
		if (!strcmp(arg, "-V") || !strcmp(arg, "--version")) {
			fc_version = true;
			return 0;
		}
		if (!strcmp(arg, "-f")) {
			fc_cfg.foreground = true;
			return 0;
		}
		if (!strcmp(arg, "-d") || !strcmp(arg, "debug")) {
			fc_cfg.debug = true;
			fc_cfg.foreground = true;
			return 1;
		}
		if (arg[0] == '-')
			return 1;	/* libfuse's (-s is refused there) */
		kv = realloc(fc_opts, (fc_nopts + 1) * sizeof(*fc_opts));
		if (!kv)
			return -1;
		fc_opts = kv;
		kv = &fc_opts[fc_nopts++];
		eq = strchr(arg, '=');
		kv->key = eq ? strndup(arg, eq - arg) : strdup(arg);
		kv->val = eq ? strdup(eq + 1) : NULL;
		return 0;
	}
	return 1;
}

/* Print "bad value" and return -1. */
static int fc_bad(const char *key, const char *val, const char *why)
{
	fprintf(stderr, "%s: invalid option %s=%s: %s\n", fc_cfg.progname,
		key, val ? val : "", why);
	return -1;
}

/* The core's boolean options (-o key=BOOL). */
static const struct {
	const char *key;
	bool *value;
} fc_bool_opts[] = {
	{ "splice", &fc_cfg.splice },
	{ "own_loop", &fc_cfg.own_loop },
	{ "passthrough", &fc_cfg.passthrough },
	{ "writeback_cache", &fc_cfg.writeback_cache },
};

/* 1 = core option handled, 0 = not a core option, -1 = bad value. */
static int fc_core_opt(const char *key, const char *val)
{
	uint64_t v;
	size_t k;

	if (!strcmp(key, "io_unit")) {
		if (fc_parse_size(val, &v))
			return fc_bad(key, val, "not a size (4k, 512k, 1M)");
		if (v < 4096 || v > (1 << 20) || v % 4096)
			return fc_bad(key, val, "must be a multiple of 4k "
				      "between 4k and 1M");
		fc_cfg.io_unit = v;
		return 1;
	}
	if (!strcmp(key, "threads")) {
		char *end;
		long n = val ? strtol(val, &end, 10) : 0;

		if (!val || !*val || *end || n < 1 || n > 64)
			return fc_bad(key, val, "must be 1..64");
		fc_cfg.threads = n;
		return 1;
	}
	for (k = 0; k < sizeof(fc_bool_opts) / sizeof(fc_bool_opts[0]); k++) {
		if (strcmp(key, fc_bool_opts[k].key))
			continue;
		if (fc_parse_bool(val, fc_bool_opts[k].value))
			return fc_bad(key, val, "must be 0/1, yes/no, on/off");
		return 1;
	}
	if (!strcmp(key, "timeout")) {
		char *end;
		double t = val ? strtod(val, &end) : -1;

		if (!val || !*val || *end || t < 0 || t > 86400)
			return fc_bad(key, val, "must be seconds, 0..86400");
		fc_cfg.timeout = t;
		return 1;
	}
	if (!strcmp(key, "counters") || !strcmp(key, "requests")) {
		char **path = key[0] == 'c' ? &fc_cfg.counters_path :
					      &fc_cfg.requests_path;

		if (!val || !*val)
			return fc_bad(key, val, "needs a path");
		free(*path);
		*path = strdup(val);
		return 1;
	}
	return 0;
}

/*
 * Apply the collected -o options: preset first, then the rest in order.
 * Unclaimed ones are handed to libfuse through args.  0 or -1.
 */
static int fc_apply_options(struct fuse_args *args)
{
	size_t k;
	int res;

	for (k = 0; k < fc_nopts; k++) {
		if (strcmp(fc_opts[k].key, "preset"))
			continue;
		if (!fc_pol->preset || !fc_opts[k].val ||
		    fc_pol->preset(fc_opts[k].val, &fc_cfg) < 0) {
			fprintf(stderr, "%s: unknown preset '%s'\n",
				fc_cfg.progname,
				fc_opts[k].val ? fc_opts[k].val : "");
			return -1;
		}
		free(fc_cfg.preset);
		fc_cfg.preset = strdup(fc_opts[k].val);
	}
	for (k = 0; k < fc_nopts; k++) {
		const char *key = fc_opts[k].key, *val = fc_opts[k].val;
		char *joined;

		if (!strcmp(key, "preset"))
			continue;
		res = fc_core_opt(key, val);
		if (res == 0 && fc_pol->parse_opt)
			res = fc_pol->parse_opt(key, val, &fc_cfg);
		if (res < 0)
			return -1;
		if (res > 0)
			continue;
		if (val) {
			if (asprintf(&joined, "%s=%s", key, val) < 0)
				return -1;
		} else {
			joined = strdup(key);
		}
		if (!joined || fuse_opt_add_arg(args, "-o") ||
		    fuse_opt_add_arg(args, joined)) {
			free(joined);
			return -1;
		}
		free(joined);
	}
	return 0;
}

/*
 * Passthrough takes fusecore's own loop (it sees the raw INIT request) and
 * excludes what needs data in the daemon: the kernel refuses it with the
 * writeback cache, and splice has nothing to move.  Refused, with the
 * reason, before anything is mounted; so is a kernel older than 6.9.
 */
static int fc_check_passthrough(void)
{
	if (!fc_cfg.passthrough)
		return 0;
	if (fc_cfg.writeback_cache)
		return fc_bad("passthrough", "1", "the kernel does not combine "
			      "it with writeback_cache=1");
	if (fc_cfg.splice)
		return fc_bad("passthrough", "1", "no data reaches the daemon: "
			      "splice=1 does not apply");
	fc_cfg.own_loop = true;
	return fc_pt_check_kernel();
}

/* Unescape a /proc/self/mountinfo path field in place (\040 etc). */
static void fc_unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] &&
		    s[3]) {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

static bool fc_is_mountpoint(const char *path)
{
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!mi)
		return false;
	while (!found && getline(&line, &cap, mi) > 0) {
		char mnt[PATH_MAX];

		/* id parent major:minor root MOUNTPOINT ... */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		fc_unescape(mnt);
		found = !strcmp(mnt, path);
	}
	free(line);
	fclose(mi);
	return found;
}

/*
 * counters=PATH, requests=PATH: made absolute now (libfuse changes the
 * daemon's working directory to / before they are written) and proved
 * writable by creating and removing the dump's temporary file, so a daemon
 * that could not write them at unmount fails its set-up instead.  0 or -1.
 */
static int fc_check_output(const char *what, char **where)
{
	char cwd[PATH_MAX], path[PATH_MAX + 32];
	char *abs;
	int fd;

	if (!*where)
		return 0;
	if ((*where)[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)) ||
		    asprintf(&abs, "%s/%s", cwd, *where) < 0) {
			fprintf(stderr, "%s: %s path '%s': %s\n",
				fc_cfg.progname, what, *where,
				strerror(errno));
			return -1;
		}
		free(*where);
		*where = abs;
	}
	if (snprintf(path, sizeof(path), "%s.tmp.%d", *where,
		     (int)getpid()) >= (int)sizeof(path)) {
		fprintf(stderr, "%s: %s path '%s': %s\n", fc_cfg.progname,
			what, *where, strerror(ENAMETOOLONG));
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot write %s to '%s': %s\n",
			fc_cfg.progname, what, *where, strerror(errno));
		return -1;
	}
	close(fd);
	unlink(path);
	return 0;
}

/* Resolve and check SOURCE and MOUNTPOINT; messages on stderr. */
static int fc_check_paths(void)
{
	char real[PATH_MAX];
	struct stat st;

	if (fc_nnonopt < 2) {
		fprintf(stderr, "%s: need SOURCE and MOUNTPOINT (see --help)\n",
			fc_cfg.progname);
		return -1;
	}
	if (!realpath(fc_nonopt[0], real) || stat(real, &st) < 0) {
		fprintf(stderr, "%s: source directory '%s': %s\n",
			fc_cfg.progname, fc_nonopt[0], strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: source '%s': %s\n", fc_cfg.progname,
			fc_nonopt[0], strerror(ENOTDIR));
		return -1;
	}
	fc_cfg.source = strdup(real);
	if (!realpath(fc_nonopt[1], real) || stat(real, &st) < 0) {
		fprintf(stderr, "%s: mountpoint '%s': %s\n", fc_cfg.progname,
			fc_nonopt[1], strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s: mountpoint '%s': %s\n", fc_cfg.progname,
			fc_nonopt[1], strerror(ENOTDIR));
		return -1;
	}
	if (fc_is_mountpoint(real)) {
		fprintf(stderr, "%s: mountpoint '%s' is busy: something is "
			"already mounted there\n", fc_cfg.progname,
			fc_nonopt[1]);
		return -1;
	}
	if (!strcmp(real, fc_cfg.source) ||
	    (!strncmp(real, fc_cfg.source, strlen(fc_cfg.source)) &&
	     real[strlen(fc_cfg.source)] == '/')) {
		fprintf(stderr, "%s: mountpoint '%s' lies inside source '%s'\n",
			fc_cfg.progname, real, fc_cfg.source);
		return -1;
	}
	fc_cfg.mountpoint = strdup(real);
	if (fc_check_output("counters", &fc_cfg.counters_path))
		return -1;
	return fc_check_output("the request log", &fc_cfg.requests_path);
}

/*
 * Name the mount like mount(8) would: type fuse.<daemon>, source SOURCE
 * (/proc/mounts, df), unless the user gave subtype= or fsname= already.
 */
static int fc_add_mount_names(struct fuse_args *args)
{
	bool has_subtype = false, has_fsname = false;
	char *opt = NULL;
	size_t k;
	int res = 0;

	for (k = 0; k < fc_nopts; k++) {
		has_subtype |= !strcmp(fc_opts[k].key, "subtype");
		has_fsname |= !strcmp(fc_opts[k].key, "fsname");
	}
	if (!has_subtype) {
		if (asprintf(&opt, "subtype=%s", fc_pol->name) < 0)
			return -1;
		res |= fuse_opt_add_arg(args, "-o") | fuse_opt_add_arg(args, opt);
		free(opt);
	}
	/* a comma would split the option: such a source stays unnamed */
	if (!has_fsname && !strchr(fc_cfg.source, ',')) {
		if (asprintf(&opt, "fsname=%s", fc_cfg.source) < 0)
			return -1;
		res |= fuse_opt_add_arg(args, "-o") | fuse_opt_add_arg(args, opt);
		free(opt);
	}
	return res ? -1 : 0;
}

/*
 * Housekeeping thread: SIGUSR1 (blocked in every other thread) dumps the
 * counters; the policy's tick runs every tick_ms.
 */
static void *fc_house(void *arg)
{
	unsigned int tick_ms = fc_pol->tick ? fc_pol->tick_ms : 0;
	sigset_t set;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (!atomic_load(&fc_house_stop)) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 200000000 };
		int sig;

		if (tick_ms) {
			ts.tv_sec = tick_ms / 1000;
			ts.tv_nsec = (long)(tick_ms % 1000) * 1000000;
		}
		sig = sigtimedwait(&set, NULL, &ts);
		if (atomic_load(&fc_house_stop))
			break;
		if (sig == SIGUSR1) {
			fc_counters_dump(fc_cfg.counters_path);
			fc_rl_dump(fc_cfg.requests_path);
		}
		else if (tick_ms)
			fc_pol->tick();
	}
	return NULL;
}

static int fc_serve(struct fuse_session *se)
{
	struct fuse_loop_config *lc;
	int res;

	if (fc_cfg.own_loop && !fc_cfg.splice)
		return fc_loop_run(se, fc_cfg.threads ? fc_cfg.threads : 1);
	if (fc_cfg.threads <= 1)
		return fuse_session_loop(se);
	lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, fc_cfg.threads);
	fuse_loop_cfg_set_idle_threads(lc, fc_cfg.threads);
	res = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return res;
}

int fc_main(int argc, char *argv[], const struct fc_policy *policy)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_session *se = NULL;
	sigset_t usr1;
	int err, status = 1;

	/*
	 * SIGUSR1 is blocked from the start (it would kill the daemon if it
	 * came between the mount and the housekeeping thread); every thread
	 * inherits the mask and only the housekeeping thread takes it.
	 */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);

	fc_pol = policy;
	fc_cfg.progname = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 :
			  argv[0];
	fc_counters_init();
	fc_pt_counters_init();

	if (fuse_opt_parse(&args, NULL, NULL, fc_opt_proc) < 0 || fc_bad_args)
		goto out_args;
	if (fc_help) {
		fc_usage(fc_cfg.progname);
		status = 0;
		goto out_args;
	}
	if (fc_version) {
		printf("%s (mobiperf fusecore) libfuse %s\n", fc_pol->name,
		       fuse_pkgversion());
		status = 0;
		goto out_args;
	}
	if (fc_apply_options(&args) < 0 || fc_check_passthrough() < 0 ||
	    fc_check_paths() < 0)
		goto out_args;
	/* after the paths: validate may use cfg->source and cfg->mountpoint */
	if (fc_pol->validate && fc_pol->validate(&fc_cfg) < 0)
		goto out_args;
	if (fc_add_mount_names(&args) < 0)
		goto out_args;
	err = fc_table_init(fc_cfg.source);
	if (err) {
		fprintf(stderr, "%s: source directory '%s': %s\n",
			fc_cfg.progname, fc_cfg.source, strerror(-err));
		goto out_args;
	}

	se = fuse_session_new(&args, &fc_ll_ops, sizeof(fc_ll_ops), NULL);
	if (!se) {
		fprintf(stderr, "%s: libfuse refused the options (see above)\n",
			fc_cfg.progname);
		goto out_args;
	}
	if (fuse_set_signal_handlers(se))
		goto out_session;
	if (fuse_session_mount(se, fc_cfg.mountpoint)) {
		fprintf(stderr, "%s: cannot mount on '%s'\n", fc_cfg.progname,
			fc_cfg.mountpoint);
		goto out_signals;
	}
	if (fc_io_wanted() && fc_io_attach(se)) {
		fprintf(stderr, "%s: libfuse refused the custom io "
			"(passthrough, requests)\n", fc_cfg.progname);
		goto out_unmount;
	}
	if (fuse_daemonize(fc_cfg.foreground))
		goto out_unmount;

	err = fc_start_policy();
	if (err) {
		fc_log("cannot start: %s", strerror(-err));
		goto out_unmount;
	}
	if (pthread_create(&fc_house_thread, NULL, fc_house, NULL)) {
		fc_log("cannot start the housekeeping thread");
		fc_stop_policy();
		goto out_unmount;
	}

	status = fc_serve(se) ? 1 : 0;

	atomic_store(&fc_house_stop, true);
	pthread_kill(fc_house_thread, SIGUSR1);
	pthread_join(fc_house_thread, NULL);
	fc_stop_policy();
	if (fc_cfg.counters_path && fc_counters_dump(fc_cfg.counters_path))
		status = 1;
	if (fc_cfg.requests_path && fc_rl_dump(fc_cfg.requests_path))
		status = 1;
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_args:
	fuse_opt_free_args(&args);
	return status;
}
