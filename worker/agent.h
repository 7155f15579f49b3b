/* agent.h: declarations private to worker/'s agent loop, shared by
 * agent.c (the conversation read back from the ledger, the model turn's
 * body and its answer) and agent_call.c (checking, approving and running
 * the calls of a turn). The rest of worker/ sees only the worker__agent_*
 * functions of worker/internal.h. */
#ifndef STEPQ_WORKER_AGENT_H
#define STEPQ_WORKER_AGENT_H

#include "worker/internal.h"

/* Where one call of the open turn stands. */
enum agent_call_state {
    AC_TODO = 0, /* not run yet */
    AC_SENT,     /* recorded and sent (or queued to be): in flight */
    AC_DONE,     /* has its result */
    AC_DOUBT,    /* recorded by a holder that died: no result */
    AC_PARKED,   /* parked for a human (approval, question, in doubt) */
    AC_HOLD,     /* in doubt, not to be resent: parks once the rest end */
};

struct agent;

/* One call of the open turn. */
struct agent_call {
    struct run *r;
    struct http_tool_call *c; /* borrowed from the agent's open calls */
    enum agent_call_state state;
    char *result; /* owned: the result the model gets */
    bool is_error;
    char *args;    /* owned: arguments an operator approved, or NULL */
    bool approved; /* an operator approved it (or an earlier check did) */
    int64_t attempt_id;
    int attempt_no;          /* its number in the step (written with the id) */
    struct http_request req; /* owned while queued */
    bool queued;
    http_call *call;
};

struct agent {
    int step;               /* the step whose loop it is */
    struct spec_toolset ts; /* the step's tools, resolved */
    bool ts_built;
    cJSON *convo; /* owned: the messages the loop added, OpenAI's shape */
    int turns;    /* model turns that answered with calls */
    int errors;   /* calls answered with an error (max_tool_errors) */
    struct http_tool_calls open; /* the calls of the open turn (n 0: none) */
    struct agent_call *calls;    /* owned, open.n */
    int inflight;                /* calls sent, not answered */
    int overflows; /* model turns answered with a context overflow */
    int trimmed;   /* tool results the first overflow trimmed (trim.c) */
};

/* agent__call_work runs what the open turn still needs: checks each call
 * not run, sends up to tool_parallelism at once, parks the first that
 * needs a human once the others ended, and when every call has its
 * result appends the turn and asks the model again (agent_call.c). */
void agent__call_work(struct run *r);
/* agent__close_turn appends the open turn and its results to the
 * conversation and forgets it. */
void agent__close_turn(struct agent *ag);
/* agent__find_resolution finds the last resolved park item of r's step
 * for call_id: its resolution, note and answer (owned by *out; free with
 * q_park_item_cleanup). Returns 0, -ENOENT when there is none. */
int agent__find_resolution(struct run *r, const char *call_id,
                           struct q_park_item *out);

/* agent__trim replaces the content of the oldest tool results of convo
 * (OpenAI's shape) with a short marker, until at least half the bytes of
 * all tool results are cut; roles and tool_call_ids stay (trim.c).
 * Returns how many it trimmed, 0 when convo holds none. */
int agent__trim(cJSON *convo);
/* agent__overflowed counts a model turn of ag answered with a context
 * overflow; the first trims ag's conversation (agent__trim). */
void agent__overflowed(struct agent *ag);

#endif
