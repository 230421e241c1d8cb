/*
 * cli: the options every tool shares, handled once.
 *
 * -h/--help prints the help on stdout and exits 0; -V/--version prints
 * "ovl-<tool> X.Y.Z" and exits 0; -v/--verbose and -q/--quiet set ovl_verbose.
 * A usage error prints "usage:" and the synopsis on stderr and exits 2.
 * OVL_VERBOSE in the environment gives the default verbosity; flags win.
 */
#ifndef OVL_CLI_H
#define OVL_CLI_H

#include <getopt.h>
#include <stddef.h>

struct ovl_cli {
	const char	*prog;		/* "ovl-source" */
	const char	*synopsis;	/* one or more lines, each "ovl-x [options] ..." */
	const char	*help;		/* the option list printed after the synopsis */
};

#define OVL_CLI_SHORTOPTS "hVvq"
#define OVL_CLI_LONGOPTS \
	{ "help", no_argument, NULL, 'h' }, \
	{ "version", no_argument, NULL, 'V' }, \
	{ "verbose", no_argument, NULL, 'v' }, \
	{ "quiet", no_argument, NULL, 'q' }

/*
 * Set the program name for messages, read OVL_VERBOSE and take the
 * supervisor's lifeline (ovl_cli_lifeline). Call first in main.
 */
void	ovl_cli_init(const struct ovl_cli *cli);
/*
 * Memory for the stages a run has one of (ovl-mix, ovl-construct,
 * ovl-ckpt), whose stream buffers grow and shrink around outlier
 * documents: keep up to 4 MiB of freed heap at its top instead of giving
 * it back at once (M_TRIM_THRESHOLD; glibc's default is 128 KiB), and
 * make blocks of 1 MiB and more of huge pages (ovl_buf_huge), so the next
 * outlier reuses pages or faults them in 2 MiB at a time. A few MB more
 * at the peak, a constant: memory stays bounded by the plan. Not for
 * ovl-source: a run has many, whose summed peak is the plan's memory
 * bound, and huge pages would raise each one's (make bench
 * BENCH_ARGS=memory). Call after ovl_cli_init.
 */
void	ovl_cli_stage_memory(void);
/*
 * When OVL_SUPERVISOR holds a pid (ovl-run sets it for the stages it
 * starts), this process gets SIGTERM when that parent dies, however it dies
 * (PR_SET_PDEATHSIG); if the parent is already gone, SIGTERM at once. A
 * stage never outlives its supervisor. Without the variable: nothing.
 */
void	ovl_cli_lifeline(void);
/*
 * Handle one of the shared options returned by getopt_long: 'h', 'V', 'v',
 * 'q' and '?'. Returns 1 when the option was one of them (and it did not
 * exit), 0 when the caller must handle it.
 */
int	ovl_cli_common(const struct ovl_cli *cli, int opt);
/*
 * Choices (an option's, a plan key's) are a NULL-terminated list of
 * names, in the order of the values they stand for.
 */
/* Index of name in names, or -1. */
int	ovl_cli_choice(const char *const *names, const char *name);
/* names[i], or "?" when i is out of range. */
const char *ovl_cli_choice_name(const char *const *names, int i);
/* The names joined: sep between them, last before the last ("a, b or c");
 * allocated. */
char	*ovl_cli_choices(const char *const *names, const char *sep,
	    const char *last);
/*
 * The index of arg in names, an option's choices; else print "unknown
 * OPT 'ARG' (a, b, c)" and the usage lines, and exit 2.
 */
int	ovl_cli_choice_opt(const struct ovl_cli *cli, const char *opt,
	    const char *const *names, const char *arg);
/*
 * A help text whose option lines name choices: text with each "%s"
 * replaced, in order, by the next string of with (NULL-terminated, as
 * many as text has "%s"; no other conversion, so "%d" stays). Allocated.
 * ovl_cli_choices(names, ", ", " or ") makes a list's string.
 */
char	*ovl_cli_help_fill(const char *text, const char *const *with);
/* Print "usage:" and the synopsis on stderr and exit 2. */
void	ovl_cli_usage(const struct ovl_cli *cli) __attribute__((noreturn));
/* Print "prog: message", then the usage lines, and exit 2. */
void	ovl_cli_usagex(const struct ovl_cli *cli, const char *fmt, ...)
	    __attribute__((noreturn, format(printf, 2, 3)));

#endif
