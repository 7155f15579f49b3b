/* json.h: cJSON helpers: validating input with the JSON path of the first
 * problem ("steps[1].request: missing"), UTF-8 checks, and output (compact
 * printing, times).
 *
 * Every json_get_* returns 0 on success (also when an optional key is absent:
 * *out is then untouched), or -EINVAL after writing "PATH.KEY: problem" into
 * err (len bytes, always terminated).  Borrowed results point into the cJSON
 * tree and live as long as it does.
 */
#ifndef STEPQ_COMMON_JSON_H
#define STEPQ_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/defs.h"

/* json_fail writes "path: message" into err and returns -EINVAL. */
int json_fail(char *err, size_t len, const char *path, const char *fmt, ...)
    STEPQ_PRINTF(4, 5);
/* json_path_key writes "path.key" (or "key" for an empty path) into buf. */
const char *json_path_key(char *buf, size_t len, const char *path,
                          const char *key);
/* json_path_index writes "path[i]" into buf. */
const char *json_path_index(char *buf, size_t len, const char *path, int i);
/* json_check_object fails unless obj is an object whose keys are all in the
 * NULL-terminated list allowed ("path.key: unknown field"). Duplicate keys
 * are refused too. */
STEPQ_MUST_CHECK int json_check_object(const cJSON *obj, const char *path,
                                       const char *const *allowed, char *err,
                                       size_t len);
/* json_get_string: a string member; required fails when absent. Borrowed. */
STEPQ_MUST_CHECK int json_get_string(const cJSON *obj, const char *key,
                                     bool required, const char *path,
                                     const char **out, char *err, size_t len);
/* json_get_bool: a true/false member. */
STEPQ_MUST_CHECK int json_get_bool(const cJSON *obj, const char *key,
                                   const char *path, bool *out, char *err,
                                   size_t len);
/* json_get_int: a whole number member within [min, max]. */
STEPQ_MUST_CHECK int json_get_int(const cJSON *obj, const char *key,
                                  int64_t min, int64_t max, const char *path,
                                  int64_t *out, char *err, size_t len);
/* json_get_number: a finite number member within [min, max]. */
STEPQ_MUST_CHECK int json_get_number(const cJSON *obj, const char *key,
                                     double min, double max, const char *path,
                                     double *out, char *err, size_t len);
/* json_utf8_valid reports whether buf[0..len) is well-formed UTF-8 (no
 * overlongs, surrogates or code points above U+10FFFF). */
bool json_utf8_valid(const char *buf, size_t len);
/* json_plain_text reports whether s is UTF-8 text a terminal shows as it
 * is: no control character (below 0x20, or 0x7f) but, where lines is set,
 * newline and tab. Names and notes people type (by, note, a key). */
bool json_plain_text(const char *s, bool lines);
/* json_parse_whole parses len bytes of text (UTF-8, checked by
 * json_text_check first) as one JSON value with nothing but white space
 * after it. Returns 0 with *out (caller cJSON_Deletes it), or -EINVAL with
 * err saying "<what>not valid JSON (near byte N)" or "... (extra text at
 * byte N)"; what is "" or a subject such as "config is ". */
STEPQ_MUST_CHECK int json_parse_whole(const char *text, size_t len,
                                      const char *what, cJSON **out, char *err,
                                      size_t errlen);
/* json_first_duplicate returns a member name that object o holds more than
 * once (borrowed from o), or NULL. A large object's names are sorted (a
 * copy): O(n log n). */
const char *json_first_duplicate(const cJSON *o);
/* json_parse_exact parses len bytes of text as one JSON value with
 * nothing but white space after it; NULL when they are not one (an answer
 * of "{...}garbage" is not JSON). Caller cJSON_Deletes the result. */
cJSON *json_parse_exact(const char *text, size_t len);
/* json_text_check refuses JSON text that C strings cannot carry, before
 * it is parsed: a NUL byte, a raw control character (below 0x20 but tab,
 * newline and carriage return), or an escaped NUL (\u0000; cJSON would
 * decode it and every C string made from the value would end there:
 * "k\u0000x" would read as "k"). Returns 0, or -EINVAL with the problem
 * and its byte offset in err (len bytes). The grammar, nesting included,
 * is the parser's to check. */
STEPQ_MUST_CHECK int json_text_check(const char *text, size_t n, char *err,
                                     size_t len);
/* json_utf8_scrub replaces every byte that does not start a well-formed
 * UTF-8 sequence with '?', in place, so the text can go into JSON. */
void json_utf8_scrub(char *buf, size_t len);
/* json_print compacts item into a string. Caller owns it; free with free(). */
char *json_print(const cJSON *item);
/* json_add_string adds name to object o: a copy of v, or null when v is
 * NULL. o and v are borrowed; the new member belongs to o. */
void json_add_string(cJSON *o, const char *name, const char *v);
/* json_add_cost adds "cost_usd" to object o: nusd nano-dollars in dollars,
 * or null when priced is false (nothing had a price). */
void json_add_cost(cJSON *o, bool priced, int64_t nusd);

/* json_add_time adds name to object o: ms since the epoch as an RFC 3339 UTC
 * string ("2026-11-30T03:40:00Z"), or null when ms is 0, the store's "not
 * set", or past 9999 (no RFC 3339 form: a wall without end). The one rule for
 * every time stepq prints as JSON. o is borrowed; the new member belongs to o.
 */
void json_add_time(cJSON *o, const char *name, int64_t ms);

#endif
