/*
 * fj_policy: Fjord's configuration: the six presets of the paper, the
 * option values, and the whitelist (directories whose files are
 * non-critical). Pure functions over strings, unit-tested without FUSE.
 */
#ifndef FJ_POLICY_H
#define FJ_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FJ_WHITELIST_MAX 32

struct fj_config {
	const char *preset;	/* static name of the preset */
	bool rambuf;		/* small writes staged in RAM */
	bool log;		/* non-volatile log for critical data */
	bool relax;		/* whitelisted files: fsync relaxed */

	uint64_t ram_buffer;	/* bytes */
	uint64_t bypass;	/* writes >= this skip buffer and log */
	uint64_t flush_ms;	/* age bound of buffered data */
	uint64_t checkpoint_ms;	/* log checkpoint period, 0: when half full */
	char *log_path;		/* NULL: SOURCE/.fjord.log */
	uint64_t log_size;
	bool log_prealloc;	/* zero-fill the log when creating it */

	/* normalised, relative to the mount root, no trailing '/' */
	char *whitelist[FJ_WHITELIST_MAX];
	unsigned int n_whitelist;
};

/* Defaults (preset "native"). */
void fj_config_init(struct fj_config *c);

/* Applies a preset; -1 if the name is unknown. */
int fj_config_preset(struct fj_config *c, const char *name);

/* Names of the presets, NULL-terminated. */
extern const char *const fj_preset_names[];

/*
 * Parses a colon-separated whitelist. Each entry is a directory relative to
 * the mount root (or an absolute path under mountpoint); "a/./b//" is
 * normalised to "a/b". An entry that leaves the mount ("..", "/etc", the
 * root itself) is an error with a message in err.
 */
int fj_config_whitelist(struct fj_config *c, const char *list,
			const char *mountpoint, char *err, size_t errlen);

/*
 * Is the file at rel (path relative to the mount root, no leading '/')
 * inside a whitelisted directory?
 */
bool fj_config_is_whitelisted(const struct fj_config *c, const char *rel);

/* Is the directory at rel (relative to the mount root) whitelisted itself
 * or below a whitelisted directory? */
bool fj_config_dir_whitelisted(const struct fj_config *c, const char *rel);

void fj_config_free(struct fj_config *c);

#endif
