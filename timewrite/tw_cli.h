/*
 * tw_cli.h: the command-line pieces timewrite, syscost and wvbench share.
 *
 * Three programs once parsed numbers three ways and disagreed: strtol skips
 * leading blanks and takes a sign, so syscost accepted --batches " 2" that
 * timewrite refused as --sizes " 256".  They also reported bad usage three
 * ways.  Here is one number parser, modelled on OpenBSD's strtonum(3), and
 * one usage-error style, modelled on errx(3): one line naming the program
 * and the problem, then the program's usage line, exit 2.
 */
#ifndef TW_CLI_H
#define TW_CLI_H

#include <stddef.h>

/*
 * The program's synopsis, exactly as its README section gives it: one or
 * more lines, no trailing newline.  Every program linking tw_cli.c defines
 * it, so a program that forgot cannot link rather than crash on its first
 * usage error.
 */
extern const char tw_usage[];

/* The exit status of every usage error. */
#define TW_EXIT_USAGE	2

/*
 * A decimal integer in [min, max] that is the whole of s: digits only, with
 * a leading '-' allowed only when min is negative.  No blanks, no '+', no
 * base prefix, no trailing text.  On failure returns 0 and sets *errstr to
 * "invalid", "too small" or "too large" (strtonum's words); on success sets
 * it to NULL.
 */
long long tw_strtonum(const char *s, long long min, long long max,
    const char **errstr);

/*
 * The same rules for a decimal fraction: [-]digits[.digits][e[+-]digits],
 * at least one digit before the exponent.  No "inf", "nan" or hex floats,
 * so the result is always finite.
 */
double tw_strtod(const char *s, double min, double max, const char **errstr);

/*
 * An option's argument as an integer or fraction in [min, max], or a usage
 * error that names the option, quotes the argument and gives the range.
 */
long long tw_int_arg(const char *opt, const char *s, long long min,
    long long max);
double tw_real_arg(const char *opt, const char *s, double min, double max);

/*
 * s in single quotes with tabs, newlines, other control bytes, quotes,
 * backslashes and non-ASCII bytes written as C escapes, for quoting what the
 * user typed: the usage error stays one line, and a no-break space or a
 * trailing newline shows instead of passing for a plain "2".  The string
 * is allocated and never freed; it is meant for a message printed on the
 * way out.
 */
const char *tw_quote(const char *s);

/*
 * The index in words[0..n-1] of the word s is, for an option that takes one
 * of a few words; any other s is a usage error naming them all: "--clock:
 * 'x' is not auto, tsc or monotonic".
 */
int tw_word_arg(const char *opt, const char *s, const char *const *words,
    int n);

/* "prog: <message>", then tw_usage, on stderr; exit TW_EXIT_USAGE. */
void tw_usage_err(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));

/*
 * The usage error for what getopt_long returned as ':' (an option without
 * its argument) or '?' (an unknown option, or an argument to a long option
 * that takes none), for programs that call it with opterr = 0 and an
 * optstring starting with ':'.  Every long option's val must be TW_LONGOPT
 * or more, even one that has a short twin: optopt is then enough to tell
 * which kind the user typed.
 */
#define TW_LONGOPT	256
void tw_usage_getopt(int ch, char *const argv[]) __attribute__((noreturn));

/*
 * The next option of argv from getopt_long (opterr 0; shortopts starts with
 * ':'), or -1 at the end, with every program's common answers done here: -h,
 * and the long option whose val is help_val, call help (which exits); a
 * missing argument or an unknown option is tw_usage_getopt's usage error;
 * and at the end an operand left over is "unexpected argument".  The caller's
 * switch then holds only its own options.
 */
struct option;
int tw_getopt(int argc, char *argv[], const char *shortopts,
    const struct option *opts, int help_val, void (*help)(void));

/*
 * A program's options, each declared once: its long name (without the
 * dashes), what its argument is and where its value goes.  tw_options()
 * reads argv by such a table, ended by TW_OPTS_END, for a program that takes
 * no operands: it builds getopt_long's table from it (and --help), answers
 * -h, --help and every usage error as tw_getopt does, and stores each value:
 * a flag sets the int at `to` to 1; a number is tw_int_arg's (into a long)
 * or tw_real_arg's (into a double), in [min, max]; a word is tw_word_arg's
 * index among `words` (into an int); an option of any other kind calls
 * take(opt, arg, to), opt its name with the dashes, for its messages.  The
 * switch over getopt's answers, and each option's name written twice (table
 * and message), are no program's own any more.
 */
enum tw_opt_kind { TW_OPT_FLAG, TW_OPT_LONG, TW_OPT_REAL, TW_OPT_WORD, TW_OPT_TAKE };
struct tw_opt {
	const char *name;
	enum tw_opt_kind kind;
	void *to;
	double min, max;
	const char *const *words;
	int nwords;
	void (*take)(const char *opt, const char *arg, void *to);
};
#define TW_FLAG(name, to)		{ name, TW_OPT_FLAG, to, 0, 0, NULL, 0, NULL }
#define TW_LONG(name, to, min, max)	{ name, TW_OPT_LONG, to, min, max, NULL, 0, NULL }
#define TW_REAL(name, to, min, max)	{ name, TW_OPT_REAL, to, min, max, NULL, 0, NULL }
#define TW_WORD(name, to, words, n)	{ name, TW_OPT_WORD, to, 0, 0, words, n, NULL }
#define TW_TAKE(name, take, to)		{ name, TW_OPT_TAKE, to, 0, 0, NULL, 0, take }
#define TW_OPTS_END			{ NULL, TW_OPT_FLAG, NULL, 0, 0, NULL, 0, NULL }
/* The most options one table may hold. */
#define TW_MAX_OPTS	30
void tw_options(int argc, char *argv[], const struct tw_opt *opts,
    void (*help)(void));

/*
 * Everything printed on stdout written out, or the program ends, err(3)'s
 * way ("prog: stdout: ...", exit 1): a full disk or a closed pipe is not a
 * success.  tw_help_exit: that, then exit 0, the end of every -h.
 */
void tw_flush_stdout(void);
void tw_help_exit(void) __attribute__((noreturn));

/*
 * n zeroed elements of size bytes each, for the sample arrays a program sizes
 * from its options; out of memory ends the program, err(3)'s way ("prog:
 * calloc: ...", exit 1).
 */
void *tw_xcalloc(long n, size_t size);

#endif
