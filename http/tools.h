/* tools.h: the tool calls of a chat on the wire (tools.c, toolcall.c,
 * native_tools.c): what is sent and what comes back.
 *
 * The three wire shapes of function calling: OpenAI's chat completions
 * (and every OpenAI-compatible layer: Anthropic's, Gemini's, Groq,
 * Mistral, DeepSeek, Ollama, llama.cpp, vLLM), Anthropic's Messages and
 * Gemini's generateContent. Pure functions over cJSON; nothing is sent. */
#ifndef STEPQ_HTTP_TOOLS_H
#define STEPQ_HTTP_TOOLS_H

#include "http/http.h"

enum http_tool_format {
    HTTP_TOOLS_OPENAI = 0, /* chat completions, and the compatible layers */
    HTTP_TOOLS_ANTHROPIC,  /* Messages: tool_use / tool_result blocks */
    HTTP_TOOLS_GEMINI,     /* generateContent: functionCall parts */
    HTTP_TOOLS_OLLAMA,     /* Ollama's own /api/chat (read only) */
};

/* One tool as a model is told of it. Borrowed strings and schema. */
struct http_tool {
    const char *name;
    const char *description;
    const cJSON *parameters; /* a JSON Schema object */
};

/* http_tools_json returns the request's "tools" value for n tools in
 * format f: OpenAI [{"type": "function", "function": {name, description,
 * parameters}}]; Anthropic [{name, description, input_schema}]; Gemini
 * [{"functionDeclarations": [{name, description, parameters}]}], the
 * schema said in the OpenAPI subset Gemini takes (a type array becomes
 * one type with nullable, or anyOf; additionalProperties, const, title,
 * default and examples are dropped).
 * Caller owns the result (cJSON_Delete). */
cJSON *http_tools_json(const struct http_tool *tools, size_t n,
                       enum http_tool_format f);

/* What was wrong with one call, the first problem found in this order.
 * A call with a problem is not run: the model gets an error result. */
enum http_call_problem {
    HTTP_CALL_OK = 0,
    HTTP_CALL_EMPTY_NAME,      /* no name, or "" */
    HTTP_CALL_UNKNOWN_TOOL,    /* a name the step does not offer */
    HTTP_CALL_ARGS_NOT_JSON,   /* arguments text that does not parse */
    HTTP_CALL_ARGS_NOT_OBJECT, /* arguments JSON but not an object */
    HTTP_CALL_DUPLICATE_ID,    /* an id an earlier call of the answer has */
};

/* One tool call, normalized. Strings and args are owned. */
struct http_tool_call {
    char *id;        /* as given, or made ("call_<i>_<hash>", stable: the
                        same answer gives the same id) when absent or "" */
    char *name;      /* "" when absent */
    cJSON *args;     /* the arguments parsed; NULL unless they parse */
    char *args_text; /* the arguments as text, as the model wrote them */
    enum http_call_problem problem;
    bool id_made;     /* id was absent or empty */
    bool args_object; /* an OpenAI-shaped answer sent the arguments as an
                         object, not a string (read as is: some layers
                         do) */
    char *signature;  /* Gemini's thoughtSignature of the call's part, or
                         NULL: sent back with the call (Gemini 3 refuses a
                         turn without it) */
};

/* The tool calls of one answer. */
struct http_tool_calls {
    enum http_tool_format format; /* the shape that was read */
    struct http_tool_call *v;     /* owned array of n */
    size_t n;
    char *text;   /* owned: text beside the calls, or NULL */
    char *finish; /* owned: finish_reason / stop_reason / finishReason */
    /* Anthropic's thinking and redacted_thinking blocks, as they came
     * (owned array, or NULL): with extended thinking the next turn must
     * send them back before the tool_use blocks. */
    cJSON *thinking;
    /* The answer says it stopped ("stop", "end_turn", "STOP") yet holds
     * calls: read as calls all the same (Gemini's layer and older OpenAI
     * models do this). */
    bool stop_with_calls;
};

/* http_toolcalls_read reads the tool calls of an answer (root, borrowed)
 * in any of the shapes above, found by what the answer holds: choices[0]
 * (message.tool_calls, else the legacy message.function_call), content[]
 * blocks of type tool_use, candidates[0].content.parts[].functionCall, or
 * Ollama's message.tool_calls. known (n names, NULL: not checked) are the
 * tools the step offers. Returns 0 with *out filled (n may be 0: an
 * answer without calls; caller frees with http_toolcalls_cleanup), or
 * -EINVAL when root is none of these shapes (*out untouched). */
STEPQ_MUST_CHECK int http_toolcalls_read(const cJSON *root,
                                         const char *const *known,
                                         size_t nknown,
                                         struct http_tool_calls *out);
/* http_toolcalls_cleanup frees what c owns and zeroes it. */
void http_toolcalls_cleanup(struct http_tool_calls *c);
/* http_call_problem_name: "ok", "empty_name", "unknown_tool",
 * "args_not_json", "args_not_object", "duplicate_id". Static. */
const char *http_call_problem_name(enum http_call_problem p);

/* http_tool_call_extra adds to tc (an OpenAI-shaped tool call, borrowed)
 * what the shape cannot say of c: its Gemini thought signature, as
 * Gemini's OpenAI layer carries it ({"extra_content": {"google":
 * {"thought_signature"}}}), read back by http_toolcalls_read. An openai
 * tier does not send it (http_tier_request drops extra_content). */
void http_tool_call_extra(cJSON *tc, const struct http_tool_call *c);

/* One tool result to send back to the model. Borrowed. */
struct http_tool_result {
    const struct http_tool_call *call;
    const char *content; /* the result as text */
    bool is_error;       /* the call failed or was refused */
};

/* http_tool_turn_messages appends to messages (an array, borrowed) what a
 * tool turn adds to the conversation in format f: the assistant's message
 * with its calls (and text, if any), then the n results:
 *  - OpenAI: {"role": "assistant", "content", "tool_calls": [{id, "type":
 *    "function", "function": {name, arguments}}]} and one {"role": "tool",
 *    "tool_call_id", "content"} per result (arguments as the model wrote
 *    them when they were text, so the model sees its own call again);
 *  - Anthropic: {"role": "assistant", "content": [thinking..., text?,
 *    {"type": "tool_use", id, name, input}]} and one user message of
 *    {"type": "tool_result", "tool_use_id", "content", "is_error"} blocks;
 *  - Gemini: {"role": "model", "parts": [{"functionCall": {name, args},
 *    "thoughtSignature"?}]} and {"role": "user", "parts":
 *    [{"functionResponse": {name, "response": {"content"} or {"error"}}}]}
 *    (ids only where Gemini gave them).
 * A call whose arguments did not parse is sent back with {} as its input
 * where the shape needs an object. Returns 0, or -EINVAL for
 * HTTP_TOOLS_OLLAMA or a result naming no call. */
STEPQ_MUST_CHECK int http_tool_turn_messages(cJSON *messages,
                                             enum http_tool_format f,
                                             const struct http_tool_calls *c,
                                             const struct http_tool_result *r,
                                             size_t n);

#endif
