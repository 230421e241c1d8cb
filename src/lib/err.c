#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ovl_verbose = 0;
static const char *progname = "ovl";

void
ovl_err_setprog(const char *name)
{
	const char *slash;

	if (name == NULL)
		return;
	slash = strrchr(name, '/');
	progname = slash != NULL ? slash + 1 : name;
}

const char *
ovl_err_prog(void)
{
	return progname;
}

static void
vmsg(const char *fmt, va_list ap, int errnum)
{
	/* One fprintf-sized write keeps concurrent stages' lines whole. */
	char line[4096];
	int n;

	n = snprintf(line, sizeof(line), "%s: ", progname);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = 0;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (errnum != 0) {
		size_t len = strlen(line);
		snprintf(line + len, sizeof(line) - len, ": %s", strerror(errnum));
	}
	fflush(stdout);
	fprintf(stderr, "%s\n", line);
	fflush(stderr);
}

void
ovl_err(int eval, const char *fmt, ...)
{
	int errnum = errno;
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, errnum);
	va_end(ap);
	exit(eval);
}

void
ovl_errx(int eval, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, 0);
	va_end(ap);
	exit(eval);
}

void
ovl_warn(const char *fmt, ...)
{
	int errnum = errno;
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, errnum);
	va_end(ap);
}

void
ovl_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(fmt, ap, 0);
	va_end(ap);
}

void
ovl_vwarnx(const char *fmt, va_list ap)
{
	vmsg(fmt, ap, 0);
}

void
ovl_info(int level, const char *fmt, ...)
{
	va_list ap;

	if (ovl_verbose < level)
		return;
	va_start(ap, fmt);
	vmsg(fmt, ap, 0);
	va_end(ap);
}

int
ovl_errbuf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}
