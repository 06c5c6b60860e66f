/*
 * tw_cli.c: one number parser and one usage-error style for the C programs.
 *
 * The parsers check the syntax themselves before strtoll/strtod convert:
 * those functions skip leading white space, take a '+' or '-', read hex
 * ("0x10", and "0x1p4" or "inf" for strtod) and stop quietly at the first
 * character they do not like, and each caller once had to remember which of
 * those to undo.  Here a number is a string of ASCII digits (the ctype
 * functions would depend on the locale), and anything else is "invalid".
 * No program calls setlocale, so strtod's decimal point is always '.'.
 */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tw_cli.h"

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Past a run of digits; *n counts them. */
static const char *
digits(const char *p, int *n)
{
	*n = 0;
	while (is_digit(*p)) {
		p++;
		(*n)++;
	}
	return p;
}

long long
tw_strtonum(const char *s, long long min, long long max, const char **errstr)
{
	const char *p = s;
	long long v;
	int n;

	*errstr = "invalid";
	if (min > max)
		return 0;
	/* A sign only where the range has room for it, and only '-'. */
	if (*p == '-' && min < 0)
		p++;
	p = digits(p, &n);
	if (n == 0 || *p != '\0')
		return 0;
	errno = 0;
	v = strtoll(s, NULL, 10);
	if (errno == ERANGE) {
		*errstr = v == LLONG_MIN ? "too small" : "too large";
		return 0;
	}
	if (v < min) {
		*errstr = "too small";
		return 0;
	}
	if (v > max) {
		*errstr = "too large";
		return 0;
	}
	*errstr = NULL;
	return v;
}

double
tw_strtod(const char *s, double min, double max, const char **errstr)
{
	const char *p = s;
	double v;
	int n, frac;

	*errstr = "invalid";
	if (!(min <= max))
		return 0;
	if (*p == '-' && min < 0)
		p++;
	p = digits(p, &n);
	if (*p == '.')
		p = digits(p + 1, &frac);
	else
		frac = 0;
	if (n + frac == 0)
		return 0;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		p = digits(p, &n);
		if (n == 0)
			return 0;
	}
	if (*p != '\0')
		return 0;
	v = strtod(s, NULL);
	/*
	 * Overflow gives an infinity, which is out of every finite range and
	 * must not get through an infinite one.  Underflow gives the nearest
	 * representable value, judged like any other.
	 */
	if (v < min || (isinf(v) && v < 0)) {
		*errstr = "too small";
		return 0;
	}
	if (v > max || isinf(v)) {
		*errstr = "too large";
		return 0;
	}
	*errstr = NULL;
	return v;
}

const char *
tw_quote(const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p;
	char *q, *out;

	/* Each byte takes at most four characters (\xNN), plus the quotes. */
	if ((out = malloc(4 * strlen(s) + 3)) == NULL)
		return s;
	q = out;
	*q++ = '\'';
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '\n' || *p == '\t') {
			*q++ = '\\';
			*q++ = *p == '\n' ? 'n' : 't';
		} else if (*p == '\'' || *p == '\\') {
			*q++ = '\\';
			*q++ = (char)*p;
		} else if (*p < 0x20 || *p > 0x7e) {
			*q++ = '\\';
			*q++ = 'x';
			*q++ = hex[*p >> 4];
			*q++ = hex[*p & 0xf];
		} else
			*q++ = (char)*p;
	}
	*q++ = '\'';
	*q = '\0';
	return out;
}

/*
 * The usage error of an option whose argument s is not a number it takes:
 * errstr is the parser's word for what is wrong, and the rest (a format and
 * its arguments) says what the number must be.  One sentence for integers
 * and fractions alike.
 */
static void __attribute__((noreturn, format(printf, 4, 5)))
number_err(const char *opt, const char *s, const char *errstr,
    const char *want, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, want);
	vsnprintf(what, sizeof(what), want, ap);
	va_end(ap);
	tw_usage_err("%s: %s is %s (want %s)", opt, tw_quote(s), errstr, what);
}

long long
tw_int_arg(const char *opt, const char *s, long long min, long long max)
{
	const char *errstr;
	long long v = tw_strtonum(s, min, max, &errstr);

	if (errstr != NULL)
		number_err(opt, s, errstr, "an integer from %lld to %lld", min, max);
	return v;
}

double
tw_real_arg(const char *opt, const char *s, double min, double max)
{
	const char *errstr;
	double v = tw_strtod(s, min, max, &errstr);

	if (errstr != NULL)
		number_err(opt, s, errstr, "a number from %g to %g", min, max);
	return v;
}

int
tw_word_arg(const char *opt, const char *s, const char *const *words, int n)
{
	char list[256];
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(s, words[i]) == 0)
			return i;
	list[0] = '\0';
	for (i = 0; i < n; i++) {
		if (i > 0)
			strncat(list, i == n - 1 ? " or " : ", ",
			    sizeof(list) - strlen(list) - 1);
		strncat(list, words[i], sizeof(list) - strlen(list) - 1);
	}
	tw_usage_err("%s: %s is not %s", opt, tw_quote(s), list);
}

void
tw_usage_err(const char *fmt, ...)
{
	va_list ap;

	/* vwarnx prints "prog: message\n", the program named as err(3) does. */
	va_start(ap, fmt);
	vwarnx(fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", tw_usage);
	exit(TW_EXIT_USAGE);
}

void
tw_flush_stdout(void)
{
	if (fflush(stdout) == EOF || ferror(stdout))
		err(1, "stdout");
}

void
tw_help_exit(void)
{
	tw_flush_stdout();
	exit(0);
}

void *
tw_xcalloc(long n, size_t size)
{
	void *p = calloc((size_t)n, size);

	if (p == NULL)
		err(1, "calloc");
	return p;
}

int
tw_getopt(int argc, char *argv[], const char *shortopts,
    const struct option *opts, int help_val, void (*help)(void))
{
	int ch;

	opterr = 0;
	ch = getopt_long(argc, argv, shortopts, opts, NULL);
	if (ch == 'h' || (help_val != 0 && ch == help_val))
		help();
	if (ch == ':' || ch == '?')
		tw_usage_getopt(ch, argv);
	if (ch == -1 && optind < argc)
		tw_usage_err("unexpected argument %s", tw_quote(argv[optind]));
	return ch;
}

void
tw_options(int argc, char *argv[], const struct tw_opt *opts,
    void (*help)(void))
{
	struct option longopts[TW_MAX_OPTS + 2];
	const struct tw_opt *o;
	char name[64];
	int n, ch;

	for (n = 0; opts[n].name != NULL; n++) {
		if (n == TW_MAX_OPTS)
			errx(1, "tw_options: more than %d options", TW_MAX_OPTS);
		longopts[n] = (struct option){ opts[n].name, opts[n].kind ==
		    TW_OPT_FLAG ? no_argument : required_argument, NULL,
		    TW_LONGOPT + n };
	}
	longopts[n] = (struct option){ "help", no_argument, NULL, TW_LONGOPT + n };
	longopts[n + 1] = (struct option){ NULL, 0, NULL, 0 };
	while ((ch = tw_getopt(argc, argv, ":h", longopts, TW_LONGOPT + n,
	    help)) != -1) {
		o = &opts[ch - TW_LONGOPT];
		snprintf(name, sizeof(name), "--%s", o->name);
		switch (o->kind) {
		case TW_OPT_FLAG:
			*(int *)o->to = 1;
			break;
		case TW_OPT_LONG:
			*(long *)o->to = (long)tw_int_arg(name, optarg,
			    (long long)o->min, (long long)o->max);
			break;
		case TW_OPT_REAL:
			*(double *)o->to = tw_real_arg(name, optarg, o->min, o->max);
			break;
		case TW_OPT_WORD:
			*(int *)o->to = tw_word_arg(name, optarg, o->words, o->nwords);
			break;
		case TW_OPT_TAKE:
			o->take(name, optarg, o->to);
			break;
		}
	}
}

void
tw_usage_getopt(int ch, char *const argv[])
{
	char opt[3] = { '-', (char)optopt, '\0' };

	/*
	 * A short option is named by optopt.  A long one is quoted as typed:
	 * getopt_long has just moved optind past it, and it leaves optopt 0
	 * for an unknown or ambiguous long option and sets it to the option's
	 * val otherwise.  Short options cannot be quoted that way, because
	 * optind stays put while getopt is inside a cluster such as -xq.
	 */
	if (optopt == 0 || optopt >= TW_LONGOPT) {
		if (ch == ':')
			tw_usage_err("option requires an argument: %s",
			    tw_quote(argv[optind - 1]));
		if (optopt == 0)
			tw_usage_err("unknown or ambiguous option: %s",
			    tw_quote(argv[optind - 1]));
		tw_usage_err("option takes no argument: %s",
		    tw_quote(argv[optind - 1]));
	}
	if (ch == ':')
		tw_usage_err("option requires an argument: %s", tw_quote(opt));
	tw_usage_err("unknown option: %s", tw_quote(opt));
}
