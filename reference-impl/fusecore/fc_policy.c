// SPDX-License-Identifier: MIT
/*
 * fusecore's running daemon: the configuration (fc_cfg) and the policy
 * (fc_pol) every other part of the core reads, and the policy's lifetime
 * (start once after the mount, stop exactly once at unmount, whoever sees
 * the unmount first: the main thread after the loop, or a worker serving
 * FUSE_DESTROY).
 *
 * This file is the bottom of the core: it calls nothing else in it, so the
 * entry point (fc_main.c), the operations (fc_ops.c), the receive loop,
 * passthrough and the counters all depend on it and never on each other's
 * callers.
 *
 * Writes: fc_cfg and fc_pol are written by fc_main() while single threaded
 * (option parsing, before the mount) and only read afterwards.
 */
#include "fc_internal.h"

struct fc_config fc_cfg = {
	.threads = 4,
	.timeout = 1.0,
};
const struct fc_policy *fc_pol;

static pthread_once_t fc_stop_once = PTHREAD_ONCE_INIT;
static bool fc_started;		/* policy->start succeeded; set before serving */

int fc_start_policy(void)
{
	int err;

	if (fc_pol->start) {
		err = fc_pol->start(&fc_cfg);
		if (err)
			return err;
	}
	fc_started = true;
	return 0;
}

static void fc_stop_once_fn(void)
{
	if (fc_started && fc_pol->stop)
		fc_pol->stop();
}

void fc_stop_policy(void)
{
	pthread_once(&fc_stop_once, fc_stop_once_fn);
}
