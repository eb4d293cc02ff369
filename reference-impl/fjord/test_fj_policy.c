/*
 * Unit tests of fj_policy: the six presets, the whitelist's normalisation,
 * its refusal of paths outside the mount, and file classification.
 */
#include "fj_policy.h"
#include "test_fj.h"

static void test_presets(void)
{
	struct fj_config c;

	fj_config_init(&c);
	CHECK_EQ(c.ram_buffer, 16u << 20);
	CHECK_EQ(c.log_size, 128u << 20);
	CHECK(!strcmp(c.preset, "native"));
	CHECK_EQ(fj_config_preset(&c, "native"), 0);
	CHECK(!c.rambuf && !c.log && !c.relax);
	CHECK_EQ(fj_config_preset(&c, "logging"), 0);
	CHECK(!c.rambuf && c.log && !c.relax);
	CHECK_EQ(fj_config_preset(&c, "rambuf"), 0);
	CHECK(c.rambuf && !c.log && !c.relax);
	CHECK_EQ(fj_config_preset(&c, "both"), 0);
	CHECK(c.rambuf && c.log && !c.relax);
	CHECK_EQ(fj_config_preset(&c, "fjord-ram"), 0);
	CHECK(c.rambuf && !c.log && c.relax);
	CHECK_EQ(fj_config_preset(&c, "fjord-both"), 0);
	CHECK(c.rambuf && c.log && c.relax);
	CHECK(!strcmp(c.preset, "fjord-both"));
	CHECK_EQ(fj_config_preset(&c, "fjord"), -1);
	CHECK_EQ(fj_config_preset(&c, "FJORD-RAM"), -1);
	fj_config_free(&c);
}

static void test_whitelist(void)
{
	struct fj_config c;
	char err[256];

	fj_config_init(&c);
	CHECK_EQ(fj_config_whitelist(&c, "cache:./a//b/:x/../y:/mnt/m/abs",
				     "/mnt/m", err, sizeof(err)), 0);
	CHECK_EQ(c.n_whitelist, 4);
	CHECK(!strcmp(c.whitelist[0], "cache"));
	CHECK(!strcmp(c.whitelist[1], "a/b"));
	CHECK(!strcmp(c.whitelist[2], "y"));
	CHECK(!strcmp(c.whitelist[3], "abs"));
	CHECK(fj_config_is_whitelisted(&c, "cache/f"));
	CHECK(fj_config_is_whitelisted(&c, "cache/d/e/f"));
	CHECK(fj_config_is_whitelisted(&c, "a/b/f"));
	CHECK(!fj_config_is_whitelisted(&c, "cache"));
	CHECK(!fj_config_is_whitelisted(&c, "cachex/f"));
	CHECK(!fj_config_is_whitelisted(&c, "a/f"));
	CHECK(!fj_config_is_whitelisted(&c, "db/cache/f"));
	CHECK(fj_config_dir_whitelisted(&c, "cache"));
	CHECK(fj_config_dir_whitelisted(&c, "cache/sub"));
	CHECK(fj_config_dir_whitelisted(&c, "a/b"));
	CHECK(!fj_config_dir_whitelisted(&c, "a"));
	CHECK(!fj_config_dir_whitelisted(&c, "cachex"));
	CHECK(!fj_config_dir_whitelisted(&c, ""));
	fj_config_free(&c);

	fj_config_init(&c);
	CHECK(fj_config_whitelist(&c, "../etc", "/mnt/m", err,
				  sizeof(err)) < 0);
	CHECK(strstr(err, "outside the mount") != NULL);
	CHECK(fj_config_whitelist(&c, "a/../../b", "/mnt/m", err,
				  sizeof(err)) < 0);
	CHECK(strstr(err, "outside the mount") != NULL);
	CHECK(fj_config_whitelist(&c, "/etc", "/mnt/m", err,
				  sizeof(err)) < 0);
	CHECK(strstr(err, "outside the mount") != NULL);
	CHECK(fj_config_whitelist(&c, "/mnt/mx/y", "/mnt/m", err,
				  sizeof(err)) < 0);
	CHECK(fj_config_whitelist(&c, ".", "/mnt/m", err, sizeof(err)) < 0);
	CHECK(strstr(err, "mount root") != NULL);
	fj_config_free(&c);
}

int main(void)
{
	test_presets();
	test_whitelist();
	TEST_DONE("test_fj_policy");
	return 0;
}
