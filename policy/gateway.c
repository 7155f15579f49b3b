/* gateway.c: policy__gateway, the answers a gateway gives of its own
 * (docs/reference.md "Outcomes and decisions", reasons gateway_config and
 * gateway_error).
 *
 * A gateway in front of a provider passes the provider's status and body
 * on, so the provider's cases apply through it. But it also fails by
 * itself, in shapes no provider uses, and those must not be read as the
 * provider's. The shapes are the open-source Portkey gateway's
 * (@portkey-ai/gateway, captured in tests/cases/gateway-errors.json):
 *
 * - {"status": "failure", "message": "..."}: the gateway refused the
 *   request before any provider saw it ("Invalid config passed", "Either
 *   x-portkey-config or x-portkey-provider header is required"). On a 400
 *   it is the tier's configuration that is wrong: gateway_config. Other
 *   statuses of that shape keep what the status says (401 is auth, 429 a
 *   throttle), except a 5xx, which is the gateway's failure.
 * - {"html-message": "..."}: the gateway wraps any answer that is not
 *   JSON in this object, keeping the status. When the text inside is the
 *   gateway's own exception ("Message: fetch failed Cause: ... Name:
 *   TypeError", also what a 429 retried by the gateway itself becomes),
 *   the failure is the gateway's: gateway_error. When it is an HTML page,
 *   it is the provider's (or its proxy's) error page, as on the direct
 *   path: html_error. Other text is the provider's, read by its status.
 */
#include "policy/policy.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "policy/internal.h"

/* is_exception tells whether s is the text the Portkey gateway makes of an
 * exception it caught: "Message: <what> Cause: <cause> Name: <class>". */
static bool
is_exception(const char *s)
{
    const char *cause;

    if (strncmp(s, "Message: ", 9) != 0)
        return false;
    cause = strstr(s, " Cause: ");
    return cause != NULL && strstr(cause, " Name: ") != NULL;
}

/* starts_html tells whether s begins (after blanks) as an HTML page. */
static bool
starts_html(const char *s)
{
    struct policy__text t;
    char head[16];
    size_t n = 0;

    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
        s++;
    for (; n < sizeof(head) - 1 && s[n] != '\0'; n++)
        head[n] = (char)(s[n] >= 'A' && s[n] <= 'Z' ? s[n] + 32 : s[n]);
    head[n] = '\0';
    t.s = head;
    t.len = n;
    return policy__is_html(&t);
}

/* shape reads a parsed error body. */
static bool
shape(int status, const cJSON *root, struct policy_class *out)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(root, "message");
    const cJSON *html = cJSON_GetObjectItemCaseSensitive(root, "html-message");
    bool server = status >= 500 && status <= 599;

    if (cJSON_IsString(st) && strcmp(st->valuestring, "failure") == 0 &&
        cJSON_IsString(msg)) {
        if (status == 400)
            policy__set(out, POLICY_UNKNOWN, POLICY_REASON_GATEWAY_CONFIG);
        else if (server)
            policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_GATEWAY_ERROR);
        else
            return false;
        return true;
    }
    if (cJSON_IsString(html) && server) {
        if (is_exception(html->valuestring))
            policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_GATEWAY_ERROR);
        else if (starts_html(html->valuestring))
            policy__set(out, POLICY_SERVER_ERROR, POLICY_REASON_HTML_ERROR);
        else
            return false;
        return true;
    }
    return false;
}

bool
policy__gateway(const struct policy_input *in, int status,
                const struct policy__text *t, struct policy_class *out)
{
    const char *p = t->s;
    cJSON *own = NULL;
    const cJSON *root;
    bool hit;

    /* Cheap tests first: most error bodies are not one of these. */
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    if (*p != '{' || in->body_len > POLICY__RULE_BYTES ||
        (strstr(p, "\"html-message\"") == NULL &&
         strstr(p, "\"failure\"") == NULL))
        return false;
    root = in->json != NULL
               ? in->json
               : (own = cJSON_ParseWithLength(in->body, in->body_len));
    hit = cJSON_IsObject(root) && shape(status, root, out);
    cJSON_Delete(own);
    return hit;
}
