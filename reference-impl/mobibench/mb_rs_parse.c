/*
 * mb_rs_parse.c - reading a mobiperf replay script (mb_rs.h) into memory:
 * one array of calls per thread, the dependencies, a pool of decoded paths.
 *
 * The whole file is read at once and split in place; numbers are parsed by
 * hand (a million lines take well under a second). Every path is checked
 * here, before anything is created: relative, no ".." component, no NUL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mb_rs.h"

const char *const mb_rs_op_names[MB_RS_NOPS] = {
	"open", "close", "read", "write", "readv", "writev", "pread", "pwrite",
	"preadv", "pwritev", "lseek", "fsync", "fdatasync", "ftruncate",
	"fallocate", "dup", "rename", "unlink", "mkdir", "rmdir",
};

/* the arguments each op takes after its name: h handle, f flags, p path,
 * n number */
static const char *const mb_rs_op_args[MB_RS_NOPS] = {
	"hfp", "h", "hn", "hn", "hn", "hn", "hnn", "hnn", "hnn", "hnn", "hn",
	"h", "h", "hn", "hnnn", "hh", "pp", "p", "p", "p",
};

struct mb_rs_flag {
	const char *name;
	int bits;
};

static const struct mb_rs_flag mb_rs_flag_names[] = {
	{ "rdonly", O_RDONLY }, { "wronly", O_WRONLY }, { "rdwr", O_RDWR },
	{ "creat", O_CREAT }, { "excl", O_EXCL }, { "trunc", O_TRUNC },
	{ "append", O_APPEND }, { "sync", O_SYNC }, { "dsync", O_DSYNC },
	{ "direct", O_DIRECT }, { "directory", O_DIRECTORY },
	{ "nofollow", O_NOFOLLOW }, { "noatime", O_NOATIME },
	{ "cloexec", O_CLOEXEC }, { "nonblock", O_NONBLOCK },
	{ "largefile", 0 }, { "noctty", O_NOCTTY },
};

/* one line being read: its text, split as it goes */
struct mb_rs_line {
	char *p;
	unsigned no;
};

int mb_rs_flags(const char *names, int *flags)
{
	const char *p = names;
	size_t i, n;

	*flags = 0;
	while (*p) {
		n = strcspn(p, ",");
		for (i = 0; i < sizeof(mb_rs_flag_names) /
		     sizeof(mb_rs_flag_names[0]); i++)
			if (strlen(mb_rs_flag_names[i].name) == n &&
			    !strncmp(mb_rs_flag_names[i].name, p, n))
				break;
		if (i == sizeof(mb_rs_flag_names) / sizeof(mb_rs_flag_names[0]))
			return -1;
		*flags |= mb_rs_flag_names[i].bits;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

int mb_rs_path_ok(const char *path)
{
	const char *p = path;
	size_t n;

	if (!*path || *path == '/')
		return 0;
	while (*p) {
		n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 0;
		p += n;
		while (*p == '/')
			p++;
	}
	return 1;
}

static char *mb_rs_word(struct mb_rs_line *l)
{
	char *w;

	while (*l->p == ' ' || *l->p == '\t')
		l->p++;
	if (!*l->p)
		return NULL;
	w = l->p;
	while (*l->p && *l->p != ' ' && *l->p != '\t')
		l->p++;
	if (*l->p)
		*l->p++ = 0;
	return w;
}

static int mb_rs_num(struct mb_rs_line *l, int64_t *out)
{
	char *w = mb_rs_word(l);
	int neg = 0;
	int64_t v = 0;

	if (!w)
		return -1;
	if (*w == '-') {
		neg = 1;
		w++;
	}
	if (!*w)
		return -1;
	for (; *w; w++) {
		if (*w < '0' || *w > '9' || v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*w - '0');
	}
	*out = neg ? -v : v;
	return 0;
}

static int mb_rs_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* a %XX-encoded path word, decoded into the pool; -1 if bad or unsafe */
static int mb_rs_path(struct mb_rs *rs, struct mb_rs_line *l, uint32_t *out)
{
	char *w = mb_rs_word(l), *d;
	size_t need;
	int hi, lo;

	if (!w)
		return -1;
	need = strlen(w) + 1;
	if (rs->poolsize + need > rs->poolcap) {
		size_t cap = rs->poolcap ? rs->poolcap * 2 : 1 << 16;

		while (cap < rs->poolsize + need)
			cap *= 2;
		if (cap > UINT32_MAX || !(d = realloc(rs->pool, cap)))
			return -1;
		rs->pool = d;
		rs->poolcap = cap;
	}
	d = rs->pool + rs->poolsize;
	for (; *w; w++) {
		if (*w != '%') {
			*d++ = *w;
			continue;
		}
		hi = mb_rs_hex(w[1]);
		lo = hi < 0 ? -1 : mb_rs_hex(w[2]);
		if (lo < 0 || (hi == 0 && lo == 0))
			return -1;	/* bad escape, or a NUL byte */
		*d++ = (char)(hi << 4 | lo);
		w += 2;
	}
	*d = 0;
	if (!mb_rs_path_ok(rs->pool + rs->poolsize) &&
	    strcmp(rs->pool + rs->poolsize, MB_RS_DROP_CACHES))
		return -1;
	*out = (uint32_t)rs->poolsize;
	rs->poolsize = (size_t)(d - rs->pool) + 1;
	return 0;
}

static void *mb_rs_grow(void *arr, size_t n, size_t *cap, size_t size)
{
	void *p;

	if (n < *cap)
		return arr;
	*cap = *cap ? *cap * 2 : 64;
	p = realloc(arr, *cap * size);
	if (!p)
		free(arr);
	return p;
}

static int mb_rs_deps(struct mb_rs *rs, struct mb_rs_line *l,
		      struct mb_rs_call *c)
{
	char *w, *colon, *end;
	unsigned long u, k;

	c->dep = (uint32_t)rs->ndeps;
	while ((w = mb_rs_word(l))) {
		colon = strchr(w, ':');
		if (*w != '@' || !colon)
			return -1;
		u = strtoul(w + 1, &end, 10);
		if (end != colon || u >= (unsigned long)rs->nthreads)
			return -1;
		k = strtoul(colon + 1, &end, 10);
		if (*end || k == 0 || k > UINT32_MAX || c->ndeps == UINT16_MAX)
			return -1;
		rs->deps = mb_rs_grow(rs->deps, rs->ndeps, &rs->depcap,
				      sizeof(*rs->deps));
		if (!rs->deps)
			return -1;
		rs->deps[rs->ndeps].thread = (uint32_t)u;
		rs->deps[rs->ndeps].count = (uint32_t)k;
		rs->ndeps++;
		c->ndeps++;
	}
	return 0;
}

/* the arguments of one op, as mb_rs_op_args says */
static int mb_rs_args(struct mb_rs *rs, struct mb_rs_line *l,
		      struct mb_rs_call *c)
{
	const char *a;
	int64_t v, nums[3];
	int nn = 0, np = 0;
	char *w;

	for (a = mb_rs_op_args[c->op]; *a; a++) {
		if (*a == 'h') {
			if (mb_rs_num(l, &v) || v < 0 || v >= rs->nhandles)
				return -1;
			if (a != mb_rs_op_args[c->op])
				c->off = v;	/* dup's source */
			else
				c->handle = (int32_t)v;
		} else if (*a == 'f') {
			w = mb_rs_word(l);
			if (!w || mb_rs_flags(w, &c->flags))
				return -1;
		} else if (*a == 'p') {
			if (mb_rs_path(rs, l, np++ ? &c->path2 : &c->path))
				return -1;
		} else if (mb_rs_num(l, &nums[nn++]) || nums[nn - 1] < 0) {
			return -1;
		}
	}
	if (c->op == MB_RS_FALLOCATE) {
		c->flags = (int32_t)nums[0];
		c->off = nums[1];
		c->size = nums[2];
	} else if (nn == 2) {
		c->off = nums[0];
		c->size = nums[1];
	} else if (nn == 1 && (c->op == MB_RS_LSEEK ||
			       c->op == MB_RS_FTRUNCATE)) {
		c->off = nums[0];
	} else if (nn == 1) {
		c->size = nums[0];
	}
	return mb_rs_deps(rs, l, c);
}

/* only open may name the one absolute path (MB_RS_DROP_CACHES) */
static int mb_rs_absolute_ok(const struct mb_rs *rs, const struct mb_rs_call *c)
{
	int paths = c->op == MB_RS_RENAME ? 2 :
		    (c->op == MB_RS_OPEN || c->op > MB_RS_RENAME) ? 1 : 0;

	if (paths && c->op != MB_RS_OPEN && rs->pool[c->path] == '/')
		return 0;
	return paths < 2 || rs->pool[c->path2] != '/';
}

static int mb_rs_call_line(struct mb_rs *rs, struct mb_rs_line *l)
{
	struct mb_rs_call c;
	struct mb_rs_thread *t;
	int64_t thread;
	char *w;

	memset(&c, 0, sizeof(c));
	c.line = l->no;
	if (mb_rs_num(l, &thread) || thread < 0 || thread >= rs->nthreads ||
	    mb_rs_num(l, &c.think_ns) || c.think_ns < 0 ||
	    !(w = mb_rs_word(l)))
		return -1;
	for (c.op = 0; c.op < MB_RS_NOPS; c.op++)
		if (!strcmp(w, mb_rs_op_names[c.op]))
			break;
	if (c.op == MB_RS_NOPS || mb_rs_args(rs, l, &c))
		return -1;
	if (!mb_rs_absolute_ok(rs, &c))
		return -1;
	if (c.op == MB_RS_OPEN && rs->pool[c.path] == '/')
		rs->sysctl[c.handle] = 1;
	t = &rs->threads[thread];
	if (t->n == t->cap) {
		size_t cap = t->cap;

		t->calls = mb_rs_grow(t->calls, t->n, &cap, sizeof(c));
		if (!t->calls || cap > UINT32_MAX)
			return -1;
		t->cap = (uint32_t)cap;
	}
	if ((c.op >= MB_RS_READ && c.op <= MB_RS_PWRITEV) &&
	    (size_t)c.size > t->bufsize)
		t->bufsize = (size_t)c.size;
	t->calls[t->n++] = c;
	rs->ncalls++;
	return 0;
}

/* the header and initial-state lines; 1 when the line is not one of them */
static int mb_rs_state_line(struct mb_rs *rs, char *word,
			    struct mb_rs_line *l)
{
	int64_t v;
	uint32_t path;

	if (!strcmp(word, "threads") || !strcmp(word, "handles")) {
		if (mb_rs_num(l, &v) || v < 0 || v > (1 << 30) ||
		    (rs->threads && word[0] == 't'))
			return -1;
		if (word[0] == 'h') {
			free(rs->sysctl);
			rs->nhandles = (int)v;
			rs->sysctl = calloc((size_t)v + 1, 1);
			return rs->sysctl ? 0 : -1;
		}
		rs->nthreads = (int)v;
		rs->threads = calloc((size_t)v + 1, sizeof(*rs->threads));
		return rs->threads ? 0 : -1;
	}
	if (!strcmp(word, "need"))
		return mb_rs_num(l, &rs->need_bytes) || rs->need_bytes < 0;
	if (!strcmp(word, "dir")) {
		if (mb_rs_path(rs, l, &path))
			return -1;
		rs->dirs = mb_rs_grow(rs->dirs, rs->ndirs, &rs->dircap,
				      sizeof(*rs->dirs));
		if (!rs->dirs)
			return -1;
		rs->dirs[rs->ndirs++] = path;
		return 0;
	}
	if (!strcmp(word, "file")) {
		if (mb_rs_path(rs, l, &path) || mb_rs_num(l, &v) || v < 0)
			return -1;
		rs->files = mb_rs_grow(rs->files, rs->nfiles, &rs->filecap,
				       sizeof(*rs->files));
		if (!rs->files)
			return -1;
		rs->files[rs->nfiles].path = path;
		rs->files[rs->nfiles++].size = v;
		return 0;
	}
	return 1;
}

static char *mb_rs_read_all(const char *script, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	size_t got = 0;
	int fd = open(script, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) || !(buf = malloc((size_t)st.st_size + 1)))
		goto fail;
	while (got < (size_t)st.st_size) {
		n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0)
			goto fail;
		got += (size_t)n;
	}
	buf[got] = 0;
	*len = got;
	close(fd);
	return buf;
fail:
	fprintf(stderr, "mobibench: -g %s: %s\n", script, strerror(errno));
	free(buf);
	if (fd >= 0)
		close(fd);
	return NULL;
}

int mb_rs_parse(struct mb_rs *rs, const char *script)
{
	struct mb_rs_line l = { NULL, 0 };
	size_t len;
	char *buf = mb_rs_read_all(script, &len), *next, *word;
	int rc;

	if (!buf)
		return -1;
	for (l.p = buf; l.p && *l.p; l.p = next) {
		next = strchr(l.p, '\n');
		if (next)
			*next++ = 0;
		l.no++;
		if (l.no == 1) {
			if (strcmp(l.p, MB_RS_MAGIC))
				goto bad;
			continue;
		}
		word = mb_rs_word(&l);
		if (!word || *word == '#')
			continue;
		if (!strcmp(word, "c") && rs->threads)
			rc = mb_rs_call_line(rs, &l);
		else
			rc = mb_rs_state_line(rs, word, &l);
		if (rc)
			goto bad;
	}
	free(buf);
	if (!rs->threads || rs->ncalls == 0) {
		fprintf(stderr, "mobibench: -g %s: no calls to replay\n",
			script);
		return -1;
	}
	return 0;
bad:
	fprintf(stderr, "mobibench: %s:%u: not a replay line (an unknown call,"
		" a bad number, or a path that is absolute, has a '..'"
		" component or a NUL byte)\n", script, l.no);
	free(buf);
	return -1;
}

void mb_rs_free(struct mb_rs *rs)
{
	int i;

	for (i = 0; rs->threads && i < rs->nthreads; i++)
		free(rs->threads[i].calls);
	free(rs->threads);
	free(rs->deps);
	free(rs->pool);
	free(rs->dirs);
	free(rs->files);
	free(rs->progress);
	free(rs->sleepers);
	free(rs->fds);
	free(rs->sysctl);
}
