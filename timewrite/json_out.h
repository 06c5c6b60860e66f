/*
 * json_out.h: the two JSON pieces timewrite, syscost and wvbench print.
 *
 * Each program prints one JSON object by hand (a library would be a larger
 * dependency than the object); what they share is escaping free text, which
 * is easy to get wrong, and arrays of samples.
 */
#ifndef JSON_OUT_H
#define JSON_OUT_H

/* A quoted JSON string; bytes that are not valid UTF-8 become U+FFFD. */
void json_string(const char *s);

/* "key":[v0,v1,...] with `digits` decimals, no trailing separator. */
void json_array(const char *key, const double *v, long n, int digits);

/*
 * Several json_array()s of n values each, comma-separated: the arguments
 * after digits are (const char *key, const double *v) pairs, ended by a
 * null key.
 */
void json_arrays(long n, int digits, ...);

/* "key":[i0,i1,...] of integers. */
void json_int_array(const char *key, const long long *v, long n);

/* "key":[true,false,...]: nonzero is true. */
void json_bool_array(const char *key, const unsigned char *v, long n);

#endif
