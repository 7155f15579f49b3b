/* httptext.h: the few rules of HTTP's text that the config, the HTTP
 * client and the mock all check: header names (RFC 9110 tokens), field
 * values that cannot smuggle a header (no CR, LF, NUL or other control
 * characters), and percent-encoding a query component.
 *
 * Pure functions over NUL-terminated strings; no I/O.
 */
#ifndef STEPQ_COMMON_HTTPTEXT_H
#define STEPQ_COMMON_HTTPTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/xalloc.h"

/* httptext_is_token reports whether s is a non-empty RFC 9110 token (a
 * method or a header name). NULL is not a token. */
bool httptext_is_token(const char *s);

/* httptext_is_field_value reports whether s holds no control character
 * but tab (so no CR, LF or NUL can split a header). */
bool httptext_is_field_value(const char *s);

/* httptext_framing_header returns the canonical spelling of name when it
 * is a header curl writes from the body it sends (Content-Length,
 * Transfer-Encoding, Connection, any case), which neither a tier nor a
 * job may set; else NULL. */
const char *httptext_framing_header(const char *name);

/* httptext_is_env_name reports whether s (what follows "env:" in a header
 * value) names an environment variable: letters, digits and '_', not
 * empty and not starting with a digit. */
bool httptext_is_env_name(const char *s);

/* httptext_is_credential_name reports whether the first n bytes of name
 * (a header or query parameter name) name a credential by their whole
 * segments (split at every byte that is not a letter or digit, and where
 * an upper-case letter follows a lower-case one): a segment
 * "authorization", "auth", "token", "secret", "password", "passwd",
 * "apikey", "signature", "sig", "cookie", "credential(s)", "accesstoken"
 * or "privatekey", in any case; "key" alone; or "key" after "api",
 * "access", "secret", "private", "subscription", "auth", "client",
 * "account", "master", "virtual", "session" or "signing". So
 * "x-api-key", "x-portkey-api-key", "apiKey" and "access_token" are, and
 * "x-portkey-provider", "monkey", "keyword" and "idempotency-key" are not.
 * Such values are masked wherever stepq shows what it sent, and in what
 * comes back. */
bool httptext_is_credential_name(const char *name, size_t n);

/* httptext_url_masked returns a copy of url for showing: the password of
 * its userinfo ("user:***@") and the value of every query parameter whose
 * name is a credential (httptext_is_credential_name) replaced by "***".
 * Templates and the rest are kept as written. Caller frees; aborts on
 * OOM. */
char *httptext_url_masked(const char *url);

/* httptext_authority_problem checks the authority of an http(s) URL: the
 * bytes from rest (just after "://") to end (the path or the query). It
 * returns NULL when it names a host, and a port of 1 to 65535 if any
 * (RFC 3986: an optional userinfo, a name, IPv4 or [IPv6] host), else what
 * is wrong with it (a static string). */
const char *httptext_authority_problem(const char *rest, const char *end);

/* httptext_query_escape appends s to b percent-encoded as a query
 * component: unreserved characters (RFC 3986: letters, digits, "-._~") as
 * they are, every other byte as %XX. Aborts on OOM. */
void httptext_query_escape(struct xbuf *b, const char *s);

#endif
