/* batchcl.h: a client of the mock's batch APIs for the test_mock_batch*
 * suites, on top of httpcl.h. Every helper fails the test (Check
 * assertions) when the mock does not answer as asked.
 */
#ifndef STEPQ_TESTS_BATCHCL_H
#define STEPQ_TESTS_BATCHCL_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* bc_jsonl returns n OpenAI batch input lines, custom_ids PREFIX1..PREFIXn,
 * each a chat request for "item I" to url. Caller frees. */
char *bc_jsonl(int n, const char *prefix, const char *url);

/* bc_upload POSTs a multipart/form-data upload of content as filename with
 * purpose to /v1/files and returns the parsed answer; *status gets its
 * status. Caller deletes. */
cJSON *bc_upload(int port, const char *filename, const char *purpose,
                 const char *content, int *status);

/* bc_call sends method path with body (NULL: none) and returns the parsed
 * answer, failing the test unless its status is want. Caller deletes. */
cJSON *bc_call(int port, const char *method, const char *path, const char *body,
               int want);

/* bc_lines GETs path (want 200) and returns its JSONL lines as a cJSON
 * array. Caller deletes. */
cJSON *bc_lines(int port, const char *path);

/* bc_poll GETs path every 10 ms until field (dotted, see jget) is the
 * string want or 5 s pass (then fails). Returns the last answer; caller
 * deletes. When seen is not NULL, each new value of field is appended to
 * it, comma-separated (len bytes). */
cJSON *bc_poll(int port, const char *path, const char *field, const char *want,
               char *seen, size_t len);

/* bc_find returns the element of array a whose "custom_id" is id, or
 * fails. Borrowed. */
const cJSON *bc_find(const cJSON *a, const char *id);

/* bc_openai_batch uploads n lines (custom_ids PREFIXi) and creates a batch
 * with metadata (JSON text, may be NULL); returns the batch object. Caller
 * deletes. */
cJSON *bc_openai_batch(int port, int n, const char *prefix,
                       const char *metadata);

/* bc_prompt_tokens is what the mock reports for a request body: its
 * compact JSON's bytes / 4. */
int bc_prompt_tokens(const cJSON *body);

#endif
