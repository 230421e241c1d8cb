/*
 * err: messages on stderr in err(3) style, and the exit codes of every tool.
 *
 * Messages read "ovl-mix: cannot open 'web-3.jsonl': No such file or directory":
 * the program name, lower case, the subject quoted, no full stop.
 */
#ifndef OVL_ERR_H
#define OVL_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* Exit codes, defined once for the whole toolkit (see ovl(7)). */
enum {
	OVL_EXIT_OK = 0,	/* success */
	OVL_EXIT_DATA = 1,	/* runtime failure or bad data */
	OVL_EXIT_USAGE = 2,	/* usage or configuration error */
	OVL_EXIT_FRAME = 3	/* framing or integrity: magic, CRC, truncation */
};

/* Verbosity: -1 quiet, 0 normal, 1 and up for each -v. */
extern int ovl_verbose;

/* Set the program name used as the prefix of every message. */
void	ovl_err_setprog(const char *name);
/* The program name set above, or "ovl" before it is set. */
const char *ovl_err_prog(void);

/* Print "prog: message: strerror(errno)" and exit with status eval. */
void	ovl_err(int eval, const char *fmt, ...)
	    __attribute__((noreturn, format(printf, 2, 3)));
/* Print "prog: message" and exit with status eval. */
void	ovl_errx(int eval, const char *fmt, ...)
	    __attribute__((noreturn, format(printf, 2, 3)));
/* As ovl_err and ovl_errx without exiting; silent under -q only for ovl_info. */
void	ovl_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	ovl_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	ovl_vwarnx(const char *fmt, va_list ap);
/* Print "prog: message" when ovl_verbose >= level (level 0: unless -q). */
void	ovl_info(int level, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/*
 * Format a message into err[0..errlen) for a caller that reports it, and
 * return -1: `return ovl_errbuf(err, errlen, "bad %s", x);`.
 */
int	ovl_errbuf(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

#endif
