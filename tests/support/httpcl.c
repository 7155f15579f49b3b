/* httpcl.c: the mock tests' blocking HTTP client (see httpcl.h). */
#include "tests/support/httpcl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "tests/support/support.h"

static void
cat(char **s, size_t *len, const char *at, size_t n)
{
    size_t l = *s ? strlen(*s) : 0;

    if (len != NULL)
        l = *len;
    *s = xrealloc(*s, l + n + 1);
    memcpy(*s + l, at, n);
    (*s)[l + n] = '\0';
    if (len != NULL)
        *len = l + n;
}

static int
r_field(http_parser *p, const char *at, size_t n)
{
    struct reply *r = p->data;

    if (r->nh == 0 || r->in_value) {
        if (r->nh == MAXH)
            return 0;
        r->nh++;
        r->in_value = false;
    }
    cat(&r->hname[r->nh - 1], NULL, at, n);
    return 0;
}

static int
r_value(http_parser *p, const char *at, size_t n)
{
    struct reply *r = p->data;

    r->in_value = true;
    cat(&r->hval[r->nh - 1], NULL, at, n);
    return 0;
}

static int
r_headers(http_parser *p)
{
    ((struct reply *)p->data)->status = p->status_code;
    return 0;
}

static int
r_body(http_parser *p, const char *at, size_t n)
{
    struct reply *r = p->data;

    cat(&r->body, &r->body_len, at, n);
    return 0;
}

static int
r_complete(http_parser *p)
{
    ((struct reply *)p->data)->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings rsettings = {
    .on_header_field = r_field,
    .on_header_value = r_value,
    .on_headers_complete = r_headers,
    .on_body = r_body,
    .on_message_complete = r_complete,
};

void
reply_free(struct reply *r)
{
    for (int i = 0; i < r->nh; i++) {
        free(r->hname[i]);
        free(r->hval[i]);
    }
    free(r->body);
    memset(r, 0, sizeof(*r));
}

const char *
hdr(const struct reply *r, const char *name)
{
    for (int i = 0; i < r->nh; i++) {
        if (r->hname[i] != NULL && strcasecmp(r->hname[i], name) == 0)
            return r->hval[i] ? r->hval[i] : "";
    }
    return NULL;
}

int
cl_connect(int port)
{
    struct sockaddr_in sa = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
                  "connect: %s", strerror(errno));
    return fd;
}

void
cl_send(int fd, const char *method, const char *path, const char *headers,
        const char *body)
{
    char *req = NULL;
    size_t len = 0, off = 0;
    FILE *f = open_memstream(&req, &len);

    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
            "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
            method, path, headers ? headers : "", strlen(body), body);
    fclose(f);
    while (off < len) {
        ssize_t n = write(fd, req + off, len - off);
        ck_assert_msg(n > 0, "write: %s", strerror(errno));
        off += (size_t)n;
    }
    free(req);
}

/* cl_recv reads one response, stopping at its end, at EOF, or after
 * timeout_ms. */
void
cl_recv(int fd, int timeout_ms, struct reply *r)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    http_parser p;
    char buf[65536];

    memset(r, 0, sizeof(*r));
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = r;
    while (!r->complete) {
        struct pollfd pf = {fd, POLLIN, 0};
        int64_t left = deadline - clock_mono_ms();
        ssize_t n;
        if (left <= 0) {
            r->timed_out = true;
            break;
        }
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
            r->eof = true;
            http_parser_execute(&p, &rsettings, NULL, 0);
            break;
        }
        r->received += (size_t)n;
        http_parser_execute(&p, &rsettings, buf, (size_t)n);
        if (HTTP_PARSER_ERRNO(&p) != HPE_OK && !r->complete)
            break;
    }
}

void
req(int port, const char *method, const char *path, const char *headers,
    const char *body, struct reply *r)
{
    int fd = cl_connect(port);

    cl_send(fd, method, path, headers, body);
    cl_recv(fd, 10000, r);
    close(fd);
}

void
chat(int port, const char *path, struct reply *r)
{
    req(port, "POST", path, NULL, CHAT_BODY, r);
}

/* ---- JSON helpers ------------------------------------------------------- */

cJSON *
body_json(const struct reply *r)
{
    cJSON *j = r->body ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;

    ck_assert_msg(j != NULL, "body is not JSON: %s", r->body ? r->body : "");
    return j;
}

/* jget follows a dotted path of object keys. Borrowed. */
const cJSON *
jget(const cJSON *j, const char *path)
{
    char key[64];

    while (j != NULL && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof(key), "%.*s", (int)n, path);
        if (strcmp(key, "choices") == 0)
            j = cJSON_GetArrayItem(cJSON_GetObjectItem(j, key), 0);
        else
            j = cJSON_GetObjectItem(j, key);
        path += n + (path[n] == '.');
    }
    return j;
}

const char *
jstr(const cJSON *j, const char *path)
{
    const cJSON *v = jget(j, path);

    ck_assert_msg(cJSON_IsString(v), "%s is not a string", path);
    return v->valuestring;
}

double
jnum(const cJSON *j, const char *path)
{
    const cJSON *v = jget(j, path);

    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", path);
    return v->valuedouble;
}
