/* httpcl.h: a tiny blocking HTTP/1.1 client for the mock's tests.
 *
 * Responses are parsed with http_parser; every helper fails the test (Check
 * assertions) on a socket error. Used by the test_mock*.c suites.
 */
#ifndef STEPQ_TESTS_HTTPCL_H
#define STEPQ_TESTS_HTTPCL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define CHAT_BODY                                                              \
    "{\"model\":\"m-test\",\"messages\":[{\"role\":\"user\","                  \
    "\"content\":\"Summarize: hello world\"}]}"
#define CHAT "/v1/chat/completions"
#define MAXH 32

/* One response. reply_free releases it. */
struct reply {
    int status;
    int nh;
    char *hname[MAXH], *hval[MAXH];
    bool in_value;
    char *body;
    size_t body_len;
    size_t received; /* raw bytes read */
    bool complete, eof, timed_out;
};

/* reply_free frees the reply's strings and zeroes it. */
void reply_free(struct reply *r);
/* hdr returns the value of header name (any case), or NULL. Borrowed. */
const char *hdr(const struct reply *r, const char *name);
/* cl_connect connects to 127.0.0.1:port. Caller closes the fd. */
int cl_connect(int port);
/* cl_send writes one request with body (Content-Length set). */
void cl_send(int fd, const char *method, const char *path, const char *headers,
             const char *body);
/* cl_recv reads one response, stopping at its end, at EOF, or after
 * timeout_ms. */
void cl_recv(int fd, int timeout_ms, struct reply *r);
/* req sends one request on a new connection and reads the answer. */
void req(int port, const char *method, const char *path, const char *headers,
         const char *body, struct reply *r);
/* chat POSTs CHAT_BODY to path. */
void chat(int port, const char *path, struct reply *r);
/* body_json parses the body (fails the test unless JSON). Caller deletes. */
cJSON *body_json(const struct reply *r);
/* jget follows a dotted path of object keys ("choices" takes element 0).
 * Borrowed. */
const cJSON *jget(const cJSON *j, const char *path);
/* jstr and jnum fail the test unless the value has the type. Borrowed. */
const char *jstr(const cJSON *j, const char *path);
double jnum(const cJSON *j, const char *path);

#endif
