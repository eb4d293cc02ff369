/*
 * fj_policy: presets, defaults and whitelist handling (see fj_policy.h).
 */
#include "fj_policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const fj_preset_names[] = {
	"native", "logging", "rambuf", "both", "fjord-ram", "fjord-both", NULL
};

/* rambuf, log, relax for each preset, in fj_preset_names order. */
static const bool fj_preset_bits[][3] = {
	{ false, false, false },	/* native: plain passthrough */
	{ false, true, false },		/* logging */
	{ true, false, false },		/* rambuf */
	{ true, true, false },		/* both */
	{ true, false, true },		/* fjord-ram */
	{ true, true, true },		/* fjord-both */
};

void fj_config_init(struct fj_config *c)
{
	memset(c, 0, sizeof(*c));
	c->preset = fj_preset_names[0];
	c->ram_buffer = 16ull << 20;
	c->bypass = 64ull << 10;
	c->flush_ms = 5000;
	c->checkpoint_ms = 5000;
	c->log_size = 128ull << 20;
	c->log_prealloc = true;
}

int fj_config_preset(struct fj_config *c, const char *name)
{
	for (unsigned int i = 0; fj_preset_names[i]; i++) {
		if (strcmp(name, fj_preset_names[i]))
			continue;
		c->preset = fj_preset_names[i];
		c->rambuf = fj_preset_bits[i][0];
		c->log = fj_preset_bits[i][1];
		c->relax = fj_preset_bits[i][2];
		return 0;
	}
	return -1;
}

/*
 * Normalises a relative path in place: drops "." and empty components,
 * resolves ".."; returns -1 if ".." climbs above the root.
 */
static int fj_normalise(char *path)
{
	char *out = path, *p = path;
	size_t depth = 0;

	while (*p) {
		char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.')) {
			/* skip */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (!depth)
				return -1;
			depth--;
			while (out > path && out[-1] != '/')
				out--;
			if (out > path)
				out--;	/* the '/' before the component */
		} else {
			if (out > path)
				*out++ = '/';
			memmove(out, p, n);
			out += n;
			depth++;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	*out = '\0';
	return 0;
}

int fj_config_whitelist(struct fj_config *c, const char *list,
			const char *mountpoint, char *err, size_t errlen)
{
	char *copy = strdup(list ? list : ""), *save = NULL, *tok;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ":", &save); tok;
	     tok = strtok_r(NULL, ":", &save)) {
		char *rel = tok, *entry;

		if (tok[0] == '/') {
			size_t m = mountpoint ? strlen(mountpoint) : 0;

			if (!m || strncmp(tok, mountpoint, m) ||
			    (tok[m] != '/' && tok[m] != '\0')) {
				snprintf(err, errlen,
					 "whitelist entry '%s' is outside the mount '%s'",
					 tok, mountpoint ? mountpoint : "?");
				r = -EINVAL;
				break;
			}
			rel = tok + m;
		}
		entry = strdup(rel);
		if (!entry) {
			r = -ENOMEM;
			break;
		}
		if (fj_normalise(entry) || !entry[0]) {
			snprintf(err, errlen, entry[0] || strstr(rel, "..") ?
				 "whitelist entry '%s' is outside the mount" :
				 "whitelist entry '%s' is the mount root itself; name directories below it",
				 tok);
			free(entry);
			r = -EINVAL;
			break;
		}
		if (c->n_whitelist == FJ_WHITELIST_MAX) {
			snprintf(err, errlen, "more than %d whitelist entries",
				 FJ_WHITELIST_MAX);
			free(entry);
			r = -EINVAL;
			break;
		}
		c->whitelist[c->n_whitelist++] = entry;
	}
	free(copy);
	return r;
}

bool fj_config_is_whitelisted(const struct fj_config *c, const char *rel)
{
	while (*rel == '/')
		rel++;
	for (unsigned int i = 0; i < c->n_whitelist; i++) {
		size_t n = strlen(c->whitelist[i]);

		if (!strncmp(rel, c->whitelist[i], n) && rel[n] == '/')
			return true;
	}
	return false;
}

bool fj_config_dir_whitelisted(const struct fj_config *c, const char *rel)
{
	while (*rel == '/')
		rel++;
	for (unsigned int i = 0; i < c->n_whitelist; i++) {
		size_t n = strlen(c->whitelist[i]);

		if (!strncmp(rel, c->whitelist[i], n) &&
		    (rel[n] == '/' || rel[n] == '\0'))
			return true;
	}
	return false;
}

void fj_config_free(struct fj_config *c)
{
	for (unsigned int i = 0; i < c->n_whitelist; i++)
		free(c->whitelist[i]);
	c->n_whitelist = 0;
	free(c->log_path);
	c->log_path = NULL;
}
