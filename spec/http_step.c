/* http_step.c: the checks of an http step's url and headers at enqueue,
 * so that a request curl would send malformed (a second Content-Length, a
 * CR in the URL) or a step that could only fail when it runs is refused
 * with its JSON path. The header rules are the config's for a tier's
 * headers (common/httptext.h holds both sides' shared rules). */
#include "spec/internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "common/httptext.h"
#include "common/json.h"

#define MAX_HEADER_VALUE 8192 /* bytes, as for a tier's headers */

/* template_end: when s starts a template ("{{steps." or "{{input" ...
 * "}}"), returns
 * the byte after it, else NULL. Its name is checked with the other
 * templates once every step is known; here it is only stepped over, since
 * a step's name may hold bytes that a URL may not. */
static const char *
template_end(const char *s)
{
    const char *end;

    if ((strncmp(s, "{{steps.", 8) != 0 && strncmp(s, "{{input", 7) != 0) ||
        (end = strstr(s + 7, "}}")) == NULL)
        return NULL;
    return end + 2;
}

static bool
is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
           (c >= 'A' && c <= 'F');
}

/* url_byte: a byte a URL carries as it is (RFC 3986: unreserved, reserved
 * and the '%' of an escape); anything else must be percent-encoded. */
static bool
url_byte(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("-._~:/?[]@!$&'()*+,;=%", ch) != NULL);
}

/* check_url: an http step's URL must be one curl sends as it is: http or
 * https, a host, a port of 1 to 65535 when one is given, and no byte that
 * would split the request line or need escaping. Templates are filled at
 * send time (worker/step.c) with the output as it is, so they are allowed
 * only in the path and query: the scheme, host and port are checked here
 * and cannot change. The byte rules are those the config applies to a
 * tier's base_url (common/config_tier.c), which a space, control
 * character or '#' fails with the same words; the rest follows RFC 3986.
 * http/build.c's http__is_http_url is not reachable from spec/ (the
 * arrows run worker -> spec), so the rules are written here once. */
int
spec__check_http_url(const char *url, const char *path, char *err, size_t len)
{
    const char *rest, *end, *s, *t, *why;
    char p[PATH_LEN];

    json_path_key(p, sizeof(p), path, "url");
    if (strncmp(url, "http://", 7) == 0)
        rest = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        rest = url + 8;
    else
        return json_fail(err, len, p, "must start with http:// or https://");
    for (s = url; *s != '\0';) {
        unsigned char ch = (unsigned char)*s;
        if ((t = template_end(s)) != NULL) {
            s = t;
            continue;
        }
        if (ch <= 0x20 || ch == 0x7f || ch == '#')
            return json_fail(err, len, p,
                             "must not hold spaces, control characters or "
                             "'#'");
        if (ch >= 0x80)
            return json_fail(err, len, p,
                             "byte 0x%02X must be percent-encoded (%%%02X)", ch,
                             ch);
        if (!url_byte(ch))
            return json_fail(err, len, p,
                             "'%c' must be percent-encoded (%%%02X)", ch, ch);
        if (ch == '%' && !(is_hex(s[1]) && is_hex(s[2])))
            return json_fail(err, len, p,
                             "'%%' must start an escape such as %%20");
        s++;
    }
    /* The authority ends at the path or the query; a userinfo ends at its
     * last '@'. */
    end = rest + strcspn(rest, "/?");
    for (s = rest; s + 1 < end; s++) {
        if (s[0] == '{' && s[1] == '{')
            return json_fail(err, len, p,
                             "a template may fill the path or the query, "
                             "not the host or port");
    }
    if ((why = httptext_authority_problem(rest, end)) != NULL)
        return json_fail(err, len, p, "%s", why);
    return 0;
}

/* check_headers: names are HTTP tokens, one of each in any case, none of
 * them a framing header; values are field values (no CR, LF or other
 * control character) and an "env:" value names a variable. A template in
 * a value is filled at send time and checked again then. */
int
spec__check_http_headers(const cJSON *headers, const char *path, char *err,
                         size_t len)
{
    char p[PATH_LEN], q[PATH_LEN];

    json_path_key(p, sizeof(p), path, "headers");
    if (!cJSON_IsObject(headers))
        return json_fail(err, len, p, "must be an object");
    for (const cJSON *c = headers->child; c != NULL; c = c->next) {
        json_path_key(q, sizeof(q), p, c->string);
        if (!httptext_is_token(c->string))
            return json_fail(err, len, q, "not a valid header name");
        if (!cJSON_IsString(c))
            return json_fail(err, len, q, "must be a string");
        if (httptext_framing_header(c->string) != NULL)
            return json_fail(err, len, q, "%s is set by stepq",
                             httptext_framing_header(c->string));
        if (!httptext_is_field_value(c->valuestring))
            return json_fail(err, len, q,
                             "must not hold CR, LF or other control "
                             "characters");
        if (strlen(c->valuestring) > MAX_HEADER_VALUE)
            return json_fail(err, len, q, "longer than %d bytes",
                             MAX_HEADER_VALUE);
        if (strncmp(c->valuestring, "env:", 4) == 0 &&
            !httptext_is_env_name(c->valuestring + 4))
            return json_fail(err, len, q,
                             "env: must be followed by a variable name");
        for (const cJSON *o = headers->child; o != c; o = o->next) {
            if (strcasecmp(o->string, c->string) == 0)
                return json_fail(err, len, q, "same header as %s", o->string);
        }
    }
    return 0;
}
