#include "cli.h"

#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "num.h"

#ifndef OVL_VERSION
#define OVL_VERSION "0.0.0"
#endif

void
ovl_cli_init(const struct ovl_cli *cli)
{
	const char *env;
	int64_t v;

	ovl_err_setprog(cli->prog);
#ifdef M_MMAP_THRESHOLD
	/*
	 * Memory bounded by the plan: blocks of 1 MiB and more
	 * (buffers grown for an outlier document) are mapped and unmapped
	 * on their own. glibc's threshold otherwise rises to the largest
	 * block freed (up to 32 MiB), and the next such buffers stay in the
	 * heap when freed. Two arenas: a helper thread (read-ahead,
	 * committer) never makes a heap of its own per thread.
	 */
	(void)mallopt(M_MMAP_THRESHOLD, OVL_BUF_LARGE);
	(void)mallopt(M_ARENA_MAX, 2);
#endif
	env = getenv("OVL_VERBOSE");
	if (env != NULL && *env != '\0' && ovl_num_i64(env, &v) == 0 &&
	    v >= -1 && v <= 9)
		ovl_verbose = (int)v;
	ovl_cli_lifeline();
}

void
ovl_cli_stage_memory(void)
{
#ifdef M_TRIM_THRESHOLD
	(void)mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
	ovl_buf_huge(1);
}

void
ovl_cli_lifeline(void)
{
	const char *env = getenv("OVL_SUPERVISOR");
	int64_t pid;

	if (env == NULL || *env == '\0' || ovl_num_i64(env, &pid) != 0 ||
	    pid <= 1)
		return;
	/* Die with the supervisor, even when it dies by SIGKILL. */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* It may have died before prctl: then our parent is someone else. */
	if ((int64_t)getppid() != pid)
		raise(SIGTERM);
}

static void
print_synopsis(FILE *fp, const struct ovl_cli *cli)
{
	const char *p = cli->synopsis, *nl;
	int first = 1;

	while (*p != '\0') {
		nl = strchr(p, '\n');
		if (nl == NULL)
			nl = p + strlen(p);
		fprintf(fp, "%s%.*s\n", first ? "usage: " : "       ",
		    (int)(nl - p), p);
		first = 0;
		p = *nl != '\0' ? nl + 1 : nl;
	}
}

int
ovl_cli_choice(const char *const *names, const char *name)
{
	int i;

	for (i = 0; names[i] != NULL; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *
ovl_cli_choice_name(const char *const *names, int i)
{
	int k;

	for (k = 0; k < i && names[k] != NULL; k++)
		;
	return i < 0 || names[k] == NULL ? "?" : names[i];
}

char *
ovl_cli_choices(const char *const *names, const char *sep, const char *last)
{
	struct ovl_buf b = { 0 };
	size_t i;

	for (i = 0; names[i] != NULL; i++) {
		if (i > 0) {
			const char *s = names[i + 1] == NULL ? last : sep;

			ovl_buf_append(&b, s, strlen(s));
		}
		ovl_buf_append(&b, names[i], strlen(names[i]));
	}
	ovl_buf_append(&b, "", 1);
	return (char *)b.p;
}

int
ovl_cli_choice_opt(const struct ovl_cli *cli, const char *opt,
    const char *const *names, const char *arg)
{
	int i = ovl_cli_choice(names, arg);

	if (i < 0)
		ovl_cli_usagex(cli, "unknown %s '%s' (%s)", opt, arg,
		    ovl_cli_choices(names, ", ", ", "));
	return i;
}

char *
ovl_cli_help_fill(const char *text, const char *const *with)
{
	struct ovl_buf b = { 0 };
	const char *at;

	while ((at = strstr(text, "%s")) != NULL && *with != NULL) {
		ovl_buf_append(&b, text, (size_t)(at - text));
		ovl_buf_append(&b, *with, strlen(*with));
		text = at + 2;
		with++;
	}
	ovl_buf_append(&b, text, strlen(text) + 1);
	return (char *)b.p;
}

void
ovl_cli_usage(const struct ovl_cli *cli)
{
	print_synopsis(stderr, cli);
	exit(OVL_EXIT_USAGE);
}

void
ovl_cli_usagex(const struct ovl_cli *cli, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ovl_vwarnx(fmt, ap);
	va_end(ap);
	ovl_cli_usage(cli);
}

int
ovl_cli_common(const struct ovl_cli *cli, int opt)
{
	switch (opt) {
	case 'h':
		print_synopsis(stdout, cli);
		if (cli->help != NULL)
			fputs(cli->help, stdout);
		if (fflush(stdout) != 0 || ferror(stdout))
			ovl_err(OVL_EXIT_DATA, "write error on standard output");
		exit(OVL_EXIT_OK);
	case 'V':
		printf("%s %s\n", cli->prog, OVL_VERSION);
		if (fflush(stdout) != 0 || ferror(stdout))
			ovl_err(OVL_EXIT_DATA, "write error on standard output");
		exit(OVL_EXIT_OK);
	case 'v':
		if (ovl_verbose < 0)
			ovl_verbose = 0;
		ovl_verbose++;
		return 1;
	case 'q':
		ovl_verbose = -1;
		return 1;
	case '?':
	case ':':
		ovl_cli_usage(cli);
	default:
		return 0;
	}
}
