/* batchcl.c: a client of the mock's batch APIs for tests (batchcl.h). */
#include "tests/support/batchcl.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "common/clock.h"
#include "tests/support/httpcl.h"

char *
bc_jsonl(int n, const char *prefix, const char *url)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    ck_assert_ptr_nonnull(f);
    for (int i = 1; i <= n; i++)
        fprintf(f,
                "{\"custom_id\":\"%s%d\",\"method\":\"POST\",\"url\":\"%s\","
                "\"body\":{\"model\":\"m-batch\",\"messages\":[{\"role\":"
                "\"user\",\"content\":\"item %d\"}]}}\n",
                prefix, i, url, i);
    fclose(f);
    return out;
}

cJSON *
bc_upload(int port, const char *filename, const char *purpose,
          const char *content, int *status)
{
    static const char hdr[] =
        "Content-Type: multipart/form-data; boundary=stepq-bnd\r\n";
    struct reply r;
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    cJSON *j;

    ck_assert_ptr_nonnull(f);
    if (purpose != NULL)
        fprintf(f,
                "--stepq-bnd\r\nContent-Disposition: form-data; "
                "name=\"purpose\"\r\n\r\n%s\r\n",
                purpose);
    fprintf(f,
            "--stepq-bnd\r\nContent-Disposition: form-data; name=\"file\"; "
            "filename=\"%s\"\r\nContent-Type: application/jsonl\r\n\r\n%s"
            "\r\n--stepq-bnd--\r\n",
            filename, content);
    fclose(f);
    req(port, "POST", "/v1/files", hdr, body, &r);
    *status = r.status;
    j = body_json(&r);
    reply_free(&r);
    free(body);
    return j;
}

cJSON *
bc_call(int port, const char *method, const char *path, const char *body,
        int want)
{
    struct reply r;
    cJSON *j;

    req(port, method, path, NULL, body ? body : "", &r);
    ck_assert_msg(r.status == want, "%s %s: %d, not %d: %s", method, path,
                  r.status, want, r.body ? r.body : "");
    j = body_json(&r);
    reply_free(&r);
    return j;
}

cJSON *
bc_lines(int port, const char *path)
{
    struct reply r;
    cJSON *a = cJSON_CreateArray();
    char *p, *nl;

    req(port, "GET", path, NULL, "", &r);
    ck_assert_msg(r.status == 200, "GET %s: %d", path, r.status);
    for (p = r.body; p != NULL && *p != '\0'; p = nl + 1) {
        cJSON *line;
        nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "JSONL without a final newline");
        *nl = '\0';
        line = cJSON_Parse(p);
        ck_assert_msg(line != NULL, "line is not JSON: %s", p);
        cJSON_AddItemToArray(a, line);
    }
    reply_free(&r);
    return a;
}

cJSON *
bc_poll(int port, const char *path, const char *field, const char *want,
        char *seen, size_t len)
{
    int64_t deadline = clock_mono_ms() + 5000;
    char last[64] = "";

    for (;;) {
        cJSON *j = bc_call(port, "GET", path, NULL, 200);
        const char *v = jstr(j, field);
        if (seen != NULL && strcmp(v, last) != 0) {
            size_t n = strlen(seen);
            snprintf(seen + n, len - n, "%s%s", n ? "," : "", v);
            snprintf(last, sizeof(last), "%s", v);
        }
        if (strcmp(v, want) == 0)
            return j;
        cJSON_Delete(j);
        ck_assert_msg(clock_mono_ms() < deadline, "%s never became %s", field,
                      want);
        poll(NULL, 0, 10);
    }
}

const cJSON *
bc_find(const cJSON *a, const char *id)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, a)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "custom_id");
        if (cJSON_IsString(c) && strcmp(c->valuestring, id) == 0)
            return it;
    }
    ck_abort_msg("no line for custom_id %s", id);
    return NULL;
}

cJSON *
bc_openai_batch(int port, int n, const char *prefix, const char *metadata)
{
    char *lines = bc_jsonl(n, prefix, "/v1/chat/completions");
    char body[512];
    int status;
    cJSON *file = bc_upload(port, "in.jsonl", "batch", lines, &status);

    ck_assert_int_eq(status, 200);
    snprintf(body, sizeof(body),
             "{\"input_file_id\":\"%s\",\"endpoint\":\"/v1/chat/completions\","
             "\"completion_window\":\"24h\"%s%s}",
             jstr(file, "id"), metadata ? ",\"metadata\":" : "",
             metadata ? metadata : "");
    free(lines);
    cJSON_Delete(file);
    return bc_call(port, "POST", "/v1/batches", body, 200);
}

int
bc_prompt_tokens(const cJSON *body)
{
    char *s = cJSON_PrintUnformatted(body);
    int n = (int)strlen(s) / 4;

    cJSON_free(s);
    return n;
}
