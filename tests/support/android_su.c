// SPDX-License-Identifier: MIT
/*
 * su for the Android-shaped test device (tests/support/android_device.py): what the
 * /system/xbin/su of a userdebug build does.  It is installed setuid root,
 * group shell, mode 4750: only root and the shell user (uid 2000) can run it.
 *
 *   su [0|root [COMMAND [ARG...]]]   run COMMAND (default /system/bin/sh) as root
 *
 * Like AOSP's su it takes a user and no options, so `su -c CMD` (Magisk,
 * SuperSU) is refused as an unknown user: a client must find out that this
 * device wants `su 0`.  Users other than root are not supported (not needed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define AID_SHELL 2000

int main(int argc, char **argv)
{
	static char *shell[] = { "/system/bin/sh", NULL };
	char **cmd = shell;
	uid_t caller = getuid();

	if (caller != 0 && caller != AID_SHELL) {
		fprintf(stderr, "su: uid %u not allowed to su\n", caller);
		return 1;
	}
	if (argc > 1) {
		if (strcmp(argv[1], "0") && strcmp(argv[1], "root")) {
			fprintf(stderr, "su: unknown user %s\n", argv[1]);
			return 1;
		}
		if (argc > 2)
			cmd = argv + 2;
	}
	if (setgroups(0, NULL) || setresgid(0, 0, 0) || setresuid(0, 0, 0)) {
		fprintf(stderr, "su: %s\n", strerror(errno));
		return 1;
	}
	execvp(cmd[0], cmd);
	fprintf(stderr, "su: %s: %s\n", cmd[0], strerror(errno));
	return 127;
}
