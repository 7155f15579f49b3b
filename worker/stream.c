/* stream.c: a streamed answer read as the one it stands for. A tier with
 * "stream": true, or a step's, gets its answers as server-sent events; before
 * anything reads the answer (classify, the usage and cost, the output, the
 * ledger's body), its events are assembled into the unstreamed answer of
 * the tier's protocol (http_stream_assemble). A stream cut or stalled
 * mid-way keeps what had come: the partial text is the attempt's body in
 * the ledger, and the transport error (reset, timeout) is what classify
 * reads. Sent, a streamed attempt is in doubt exactly as a plain one.
 */
#include "worker/internal.h"

#include <stdlib.h>
#include <string.h>

void
worker__unstream(const struct config_tier *t, struct http_response *res)
{
    const char *ct = http_response_header(res, "content-type");
    char *body = NULL, *raw = NULL;

    if (t == NULL || !res->stream || res->body_len == 0 || res->status < 200 ||
        res->status > 299 || ct == NULL ||
        strstr(ct, "text/event-stream") == NULL)
        return;
    if (http_stream_assemble(t->api, res->body, res->body_len, &body) != 0)
        return;
    /* The body as it came (before masking) is assembled alike. */
    if (res->raw != NULL &&
        http_stream_assemble(t->api, res->raw, res->raw_len, &raw) != 0) {
        free(body);
        return;
    }
    free(res->body);
    res->body = body;
    res->body_len = strlen(body);
    if (res->raw != NULL) {
        memset(res->raw, 0, res->raw_len);
        free(res->raw);
        res->raw = raw;
        res->raw_len = strlen(raw);
    }
}
