/* web.c: the web park view's files (serve/web/, built into the binary).
 * They hold no data and need no token: the page asks for the token and
 * sends it with every API call it makes, as any other client does. */
#include "serve/internal.h"

#include <string.h>

/* The page runs only its own script and style, talks only to this
 * server, and cannot be framed (clickjacking a resolve button). */
#define CSP                                                                    \
    "default-src 'none'; script-src 'self'; style-src 'self'; "                \
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "              \
    "form-action 'none'; frame-ancestors 'none'"

const struct serve_asset *
serve_asset_find(const char *url)
{
    for (const struct serve_asset *a = serve_assets; a->url != NULL; a++)
        if (strcmp(a->url, url) == 0)
            return a;
    return NULL;
}

enum MHD_Result
serve_reply_asset(struct MHD_Connection *c, const struct serve_asset *a)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ok;

    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", CSP);
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}
