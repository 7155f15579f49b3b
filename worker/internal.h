/* internal.h: declarations private to worker/ (not a public interface):
 * the worker and its runs, shared by the files of the loop (worker.c:
 * setup and shutdown; turn.c: loop turns; run.c: a job's life; send.c:
 * sending an attempt; answer.c: acting on its answer), and the pure step
 * helpers of step.c. */
#ifndef STEPQ_WORKER_INTERNAL_H
#define STEPQ_WORKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/config.h"
#include "http/http.h"
#include "http/tools.h"
#include "policy/policy.h"
#include "queue/park.h"
#include "queue/queue.h"
#include "spec/spec.h"
#include "worker/worker.h"

/* The store's clock offset (q_clock_sync) is measured again this often. */
#define WORKER_CLOCK_SYNC_MS 60000

/* An error text keeps at most this much of a response body. */
#define ERROR_BODY_MAX 2000

/* The reason of an attempt a worker cut short when it stopped: the next
 * holder retries it without counting it, the first WORKER_STOPS_FREE
 * times a step (done.c, run.c), so that a worker stopped every time
 * (a short --grace on a timer) cannot send a step without end. */
#define WORKER_STOPPED    "worker_stopped"
#define WORKER_STOPS_FREE 3

struct run;

/* Where a worker is in its life. RUNNING -> STOPPING (a signal, or a
 * drain that found the queue empty) -> CLOSING (worker__shutdown: the
 * loop's handles go); a drain's STOPPING goes back to RUNNING when the
 * last turn did not commit. worker__phase_to holds these. */
enum worker_phase {
    WORKER_RUNNING = 0,
    WORKER_STOPPING,
    WORKER_CLOSING,
};

/* The store as the worker sees it. UP -> DOWN (a turn could not begin or
 * commit: no turn runs until it is back; runs keep what they hold in
 * memory) -> RECOVERING (the turn that writes back what was kept is
 * opening) -> DOWN again, or UP once a turn commits (worker__store_to). */
enum worker_store {
    WORKER_STORE_UP = 0,
    WORKER_STORE_DOWN,
    WORKER_STORE_RECOVERING,
};

/* Where a run is in its life. ACTIVE: on its step (attempting, a request
 * or tool calls in flight, or a wait of its own: a backoff, a tier it
 * prefers). SLOT_WAIT: it waited for a tier and would send, but every
 * slot is taken (wake.c). GATHERING: in batch_ti's next batch, not yet
 * recorded; BATCHED: an item of r->batch, waiting for its result
 * (batch.c). RELOAD: what it did since the last commit was lost with a
 * turn, or its answer came while the store was away: entered again from
 * the store once it is back, acting on the answer it kept. Two ends, the
 * job gone from this worker and the run only freed: DONE (ended, failed,
 * parked or given back) and LOST (its lease was lost, or the turn that
 * claimed it did not commit: nothing of it is written). A DONE run is
 * not final until its turn commits: a lost turn makes it RELOAD (or LOST
 * when the turn claimed it). worker__run_to holds these (worker.c). */
enum worker_run_state {
    WORKER_RUN_ACTIVE = 0,
    WORKER_RUN_SLOT_WAIT,
    WORKER_RUN_GATHERING,
    WORKER_RUN_BATCHED,
    WORKER_RUN_RELOAD,
    WORKER_RUN_DONE,
    WORKER_RUN_LOST,
};

struct worker {
    worker_report_fn report; /* on_report's (worker_opts), or NULL */
    worker_job_fn job;       /* on_done's and on_fail's, or NULL */
    uv_loop_t loop;
    uv_timer_t tick;
    uv_timer_t hooks_stop; /* kills hooks when the grace ends */
    bool hooks_stop_on;
    uv_timer_t sched;      /* fires the config's schedules (schedules.c) */
    struct wsched *scheds; /* owned, one per config schedule (schedules.c) */
    /* -1, or this worker prunes, a step a second, and the next step's
     * bodies_from_job is this (retention.c) */
    int64_t prune_from;
    uv_signal_t sigint;
    uv_signal_t sigterm;
    uv_idle_t idle;    /* active while a turn is open: poll must not block */
    uv_check_t check;  /* ends the turn: commit, then send */
    uv_poll_t wake;    /* the store's wake channel (q_wake_fd), if any */
    bool wake_on;      /* wake is polled */
    bool wake_closing; /* wake's uv_close has not called back yet */
    int64_t wake_retry_at; /* monotonic ms: ask q_wake_fd again; 0: never */
    int64_t wake_retry_ms; /* backoff of that */
    bool tx_open;
    q_db *db;
    http_client *http;
    const struct config *cfg;
    policy_rules *rules;
    struct policy_config pcfg;
    struct policy_streak *streaks; /* one per config tier */
    char id[128];
    int concurrency;
    bool drain;
    /* a drain waits for the schedules' slots up to this time (ms, the
     * store's clock): those within a minute of its start */
    int64_t drain_slots_until;
    enum worker_phase phase;
    bool progress;
    bool in_tick;           /* on_tick is running: it re-arms itself (rearm) */
    bool tick_after_commit; /* tick again soon after the turn commits */
    bool turn_claimed;      /* the open turn has claimed (worker__turn_claim) */
    int64_t turn_started;   /* monotonic ms: the turn's BEGIN */
    int64_t grace_ms;
    int64_t stop_deadline;
    int64_t lease_ms;
    int64_t next_heartbeat;
    int64_t next_claim;
    int64_t idle_poll_ms; /* an idle worker claims again after this */
    int64_t next_sync;    /* monotonic ms: q_clock_sync again */
    enum worker_store store;
    int64_t down_since; /* monotonic ms */
    int64_t retry_ms;   /* backoff: 100 ms doubling to 5 s */
    int64_t retry_at;   /* monotonic ms */
    struct run *runs;
    int nruns;
    int slot_waiters; /* runs in WORKER_RUN_SLOT_WAIT (worker__run_to) */
    /* Admission within one pass over the waiting runs: a tier that said
     * no to one run says no to the runs behind it (FIFO), without asking
     * the database again. */
    uint64_t pass;
    struct tier_no *refused; /* one per config tier */
    /* one per config tier: the latency of its recent answers (a moving
     * average, ms), 0 before the first: what the rest of a job is expected
     * to take when a step weighs waiting for a preferred tier */
    int64_t *latency_ms;
    struct wbatch *batches; /* owned: the batches in hand (batch.c) */
    int64_t *gather_since;  /* one per config tier: when its gathering
                               began (0: none) */
    uint64_t batch_seq;     /* names this worker's batches apart */
    int64_t *hooks;         /* owned: park items parked this turn, told to the
                               on_park hook once the turn has committed */
    size_t nhooks, caphooks;
    /* owned: jobs the turn ended, told to the config's on_done or on_fail
     * and to the job's own hook once the turn has committed */
    struct worker_ended *ended;
    size_t nended, capended;
    uint64_t rng;
    int failed; /* a fatal error: stop */
};

struct tier_no {
    uint64_t pass; /* the pass it said no in */
    const char *reason;
    int64_t retry_at;
};

/* An answer kept until the turn that wrote it has committed: when that
 * turn is lost (the store went away), the run is entered again from the
 * store and the answer is acted on once more. */
struct held {
    struct http_response res; /* owned: moved out (http_response_move) */
    int64_t attempt_id;       /* the attempt it answers */
    int64_t send_id, send_est;
    int64_t sent_at;
    int64_t input_tokens;
    char *body; /* owned: the request as sent */
    size_t body_len;
    char sha[65];
};

/* The runs a worker keeps in hand, at most, as a multiple of its
 * concurrency: runs waiting for a paced tier hold no slot (turn.c). */
#define WORKER_RUNS_IN_HAND 4

/* A budget the send in flight reserved its worst case on (budget.c). */
struct budget_hold {
    int budget;       /* index into the config's budgets */
    char window[128]; /* the window reserved in */
    int64_t amount;   /* nano-dollars */
};

struct run {
    struct worker *w;
    struct run *next;
    struct q_job job;      /* owned */
    struct spec_job *spec; /* owned */
    char **outputs;        /* owned, one per step */
    bool *skipped;         /* owned, one per step: skipped by its "when" */
    int step;
    /* The step's context, derived from the ledger on entry. */
    int cur_tier;   /* config tier index, or -1 */
    bool *switched; /* per config tier: switched away from */
    bool degraded;
    bool schema_retried;
    int throttle_waits;
    int *sends;      /* per config tier, and one for http steps: sends of the
                        step that count as attempts (a throttle wait does not) */
    int reset_after; /* ledger attempts up to this predate a park retry */
    int pin_tier;    /* a park retry's tier, or -1 */
    int wait_tier;   /* a throttled retry waits for this tier, or -1 */
    int64_t last_latency;
    /* The attempt in flight. */
    http_call *call;
    int64_t attempt_id;
    int64_t logged_attempt; /* the attempt whose line was written: an
                               answer kept while the store was away is
                               acted on again, but logged once */
    int attempt_no;
    int64_t attempt_est; /* the tokens its record charged, or -1: unknown */
    int64_t send_id;     /* tier send, 0 for http steps */
    int64_t send_est;    /* the tokens the send was charged when admitted */
    int64_t input_tokens;
    char sha[65];
    char *body;                  /* owned: the request body as sent */
    struct http_request pending; /* owned: recorded, sent after commit */
    bool has_pending;
    size_t body_len;
    int64_t wake_at;     /* > 0: waiting until then */
    int64_t admit_since; /* > 0: waiting for a tier since then (FIFO) */
    /* why the tier chosen last was chosen over the step's earlier ones
     * ("" when it is the first that admits), kept in the attempt */
    char route[256];
    /* owned: what the send in flight reserved of the budgets, settled by
     * its answer (worker__budget_settle) */
    struct budget_hold *holds;
    size_t nholds;
    bool budget_refused; /* the last choice of a tier met a budget */
    int64_t sent_at;     /* when the attempt in flight was admitted */
    struct {
        cJSON *body; /* owned: the chat body built while waiting, or NULL */
        int step;
        bool degraded;
        int64_t est, input;
    } ready;
    /* The step's body with its templates filled, once, on entry
     * (worker__step_gate); each attempt sends a copy (worker__fill). */
    struct {
        cJSON *body; /* owned, or NULL */
        int step;    /* the step it is of */
    } filled;
    /* A tier in batch mode (batch.c): the run gathers for batch_ti's
     * next batch (GATHERING), or waits in batch for its item's result
     * (BATCHED); either way it holds no slot. */
    int batch_ti;
    struct wbatch *batch; /* borrowed from w->batches */
    bool from_batch;      /* the answer acted on is a batch item's */
    struct held *held;    /* owned: the answer being written, or NULL */
    struct agent *agent;  /* owned: a step with tools' loop (agent.c) */
    char *turn_body;      /* borrowed: a turn's calls as recorded, or NULL */
    /* Where the run is in its life: moved by worker__run_to only. */
    enum worker_run_state state;
    /* Claimed in the turn not committed yet: if that turn is lost, the
     * run is LOST whatever state it reached. Not a state of its own: it
     * says whether the claim is written, the state what the run does, and
     * a fresh run may be in any of them (waiting, gathering, done). */
    bool fresh;
};

/* Whether r's job has left this worker (DONE or LOST): it holds no slot,
 * and is freed once no turn is open and nothing of it is in flight. */
static inline bool
run_has_left(const struct run *r)
{
    return r->state == WORKER_RUN_DONE || r->state == WORKER_RUN_LOST;
}

/* The step the run is on. */
static inline const struct spec_step *
cur_spec(const struct run *r)
{
    return &r->spec->steps[r->step];
}

/* The step's counted sends on tier ti (-1: an http step, no tier). */
static inline int *
sends_on(struct run *r, int ti)
{
    return &r->sends[ti >= 0 ? ti : (int)r->w->cfg->ntiers];
}

/* The config tier the step is on, or NULL. */
static inline const struct config_tier *
cur_tier(const struct run *r)
{
    return r->cur_tier >= 0 ? &r->w->cfg->tiers[r->cur_tier] : NULL;
}

/* ---- the worker (worker.c) ------------------------------------------ */

/* worker__now is the store's time in ms since the epoch: this host's
 * clock plus the store's offset (q_clock_offset). Every time the worker
 * passes to q_* is measured with it. */
int64_t worker__now(const struct worker *w);

/* worker__shutdown ends the turn and closes the loop's handles and the
 * HTTP client; uv_run then returns. A second call does nothing. Unless
 * force, a turn that does not commit stops it (false: the store went
 * away, and the runs it entered again go on). */
bool worker__shutdown(struct worker *w, bool force);
/* worker__phase_to moves w to phase to, a move enum worker_phase allows
 * (asserted). */
void worker__phase_to(struct worker *w, enum worker_phase to);
/* worker__run_to moves r to state to, a move the table beside it allows
 * (asserted), and keeps w->slot_waiters the count of runs in SLOT_WAIT. */
void worker__run_to(struct run *r, enum worker_run_state to);

/* ---- schedules (schedules.c) ---------------------------------------- */

/* worker__sched_start parses the config's schedules' crons (checked by
 * setup) once, for worker__sched_next, and starts firing them, now and
 * every second. Nothing when there are none. */
void worker__sched_start(struct worker *w);
/* worker__sched_next is the first slot of an unpaused schedule after a
 * few seconds before now (ms; one that came may not have fired yet), 0
 * when none: a drain waits for one that is near. */
int64_t worker__sched_next(struct worker *w, int64_t now);
/* worker__sched_close closes the schedules' timer and frees what
 * worker__sched_start parsed (shutdown). */
void worker__sched_close(struct worker *w);
/* worker__retention applies the config's retention at now, from the
 * schedules' timer (retention.c). */
void worker__retention(struct worker *w, int64_t now);

/* ---- loop turns (turn.c) -------------------------------------------- */

/* worker__turn_begin opens the turn's transaction unless one is open.
 * Returns false when none is: the worker is closing (each change then
 * commits on its own), or the store is unreachable (the worker waits for
 * it: see worker__store_lost). */
bool worker__turn_begin(struct worker *w);
/* worker__turn_end commits the turn's transaction (on failure nothing of
 * the turn is sent and its runs are entered again once the store is
 * back), then tells the on_park hooks and sends what the turn recorded. */
void worker__turn_end(struct worker *w);
/* worker__turn_claim, in the check phase before the commit: a turn whose
 * runs freed slots claims the next jobs and starts them in itself. */
void worker__turn_claim(struct worker *w);
/* worker__poll_no_block keeps the loop's poll from blocking until the
 * turn has ended (the check phase comes at once). */
void worker__poll_no_block(struct worker *w);
/* worker__tick_in asks for a tick in ms (at least 1) unless closing. */
void worker__tick_in(struct worker *w, int64_t ms);
/* worker__kick asks for a tick soon (see turn.c); does nothing while
 * closing or inside the tick. */
void worker__kick(struct worker *w);
/* ---- runs that wait (wake.c) ---------------------------------------- */

/* worker__free_slots is how many jobs a claim may take now: the slots
 * not held (a run waiting for a tier holds none), within the runs a
 * worker keeps in hand. */
int worker__free_slots(const struct worker *w);
/* worker__run_waits: r has no request out and a wake time set;
 * worker__run_due: and that wait is over (or the worker is stopping). */
bool worker__run_waits(const struct run *r);
bool worker__run_due(const struct worker *w, const struct run *r, int64_t now);
/* worker__wake_due attempts the runs whose wait is over, in the order
 * tiers should take them (waiting for a tier longest first); returns the
 * earliest wake time left (at most next). */
int64_t worker__wake_due(struct worker *w, int64_t now, int64_t next);
/* worker__slot_freed wakes the runs postponed because every slot was
 * taken: a request ended. */
void worker__slot_freed(struct worker *w, int64_t now);
/* worker__wake_waiting lets the runs waiting for a tier look again now
 * (wake.c). */
void worker__wake_waiting(struct worker *w, int64_t now);
/* worker__sweep frees the runs that finished and have no call in flight,
 * once no turn is open (a finish is final when its turn committed). */
void worker__sweep(struct worker *w);

/* ---- losing the store (store.c) ------------------------------------- */

/* worker__store_lost notes that the store could not be reached (rc: the
 * q_* error): logs it once, and sets the next try on the backoff. */
void worker__store_lost(struct worker *w, int rc);
/* worker__store_to moves w's view of the store to to, a move enum
 * worker_store allows (asserted). */
void worker__store_to(struct worker *w, enum worker_store to);
/* worker__store_back notes that a turn committed after the store was
 * unreachable (logged once). */
void worker__store_back(struct worker *w);
/* worker__turn_lost undoes in memory what a turn that did not commit
 * did: nothing it recorded is sent, the jobs it claimed are dropped, and
 * every other run without a call in flight is entered again from the
 * store when it is back, acting on the answer it kept. */
void worker__turn_lost(struct worker *w);
/* worker__recover runs the turn that writes back what the runs kept:
 * each held job's lease is renewed (a lost one is left to its new
 * holder) and the run is entered again from the store. */
void worker__recover(struct worker *w, int64_t now);
/* worker__hold keeps the answer res (its body and headers are moved out)
 * and the attempt it answers in r->held, replacing any. */
void worker__hold(struct run *r, struct http_response *res);
/* worker__held_free frees h. NULL is a no-op. */
void worker__held_free(struct held *h);
/* worker__wake_open polls the store's wake channel (q_wake_fd) when it
 * has one and it is not polled yet; a run's turn follows each wake-up. */
void worker__wake_open(struct worker *w);
/* worker__wake_close stops polling the wake channel (uv_close). */
void worker__wake_close(struct worker *w);

/* ---- a job's life (run.c) ------------------------------------------- */

/* worker__run_start takes over *job (left zeroed), adds a run for it to w
 * and enters its current step. Failures fail or give back the job. */
void worker__run_start(struct worker *w, struct q_job *job);
/* worker__run_resume enters the run again from the store (after a turn
 * that did not commit): its current step and outputs are read back, and
 * an answer it kept for the step's last attempt is acted on again instead
 * of settling that attempt as in doubt. */
void worker__run_resume(struct run *r);
/* worker__run_free frees r and all it owns. NULL is a no-op. */
void worker__run_free(struct run *r);
/* worker__derive_context rebuilds the step's tier context (tier, sends,
 * switches, degrade) from its attempts a (n of them). */
void worker__derive_context(struct run *r, const struct q_attempt *a, size_t n);
/* ---- the tool loop of a step with tools (agent.c, agent_call.c) ------ */

/* worker__agent_enter enters a step with tools from its attempts: the
 * conversation is read back from them, an in-doubt turn or call is
 * settled, and the loop goes on where it stood. */
void worker__agent_enter(struct run *r, const struct q_attempt *a, size_t n);
/* worker__agent_body adds the tools and the conversation so far to req
 * (the step's chat body, changed in place) and returns it. */
cJSON *worker__agent_body(const struct run *r, cJSON *req);
/* worker__agent_over_turns fails the job and returns true when the model
 * had max_turns turns with calls already. */
bool worker__agent_over_turns(struct run *r);
/* worker__agent_turn_body reads the calls of a model's answer (root,
 * borrowed) into the open turn; returns the text the turn is recorded
 * with (caller frees), or NULL when the answer has no calls. */
char *worker__agent_turn_body(struct run *r, const cJSON *root);
/* worker__agent_turn runs the calls of the turn just read. */
void worker__agent_turn(struct run *r);
/* worker__agent_flush sends the tool calls r's committed turn recorded. */
void worker__agent_flush(struct run *r);
/* worker__agent_unqueue drops the tool calls r's turn recorded and
 * queued to send after its commit: the commit failed (or the flush a
 * durable one asked for), so they are not sent; reloaded from the ledger,
 * a call whose record stands is one in doubt. */
void worker__agent_unqueue(struct run *r);
/* worker__agent_cancel cancels r's tool calls in flight. */
void worker__agent_cancel(struct run *r);
/* worker__agent_busy: r has tool calls in flight. */
bool worker__agent_busy(const struct run *r);
/* worker__agent_free_calls forgets the open turn of ag. */
void worker__agent_free_calls(struct agent *ag);
/* worker__agent_leave frees r's loop when it is another step's. */
void worker__agent_leave(struct run *r);
/* worker__agent_overflow turns the decision d on a model turn of r's
 * tool loop answered with a context overflow (class c) into a retry with
 * the oldest tool results trimmed, the first time, else into a failure
 * (trim.c). Any other answer, or a step without tools: d is untouched. */
void worker__agent_overflow(struct run *r, const struct policy_class *c,
                            struct policy_decision *d);
/* worker__agent_overflow_text returns the failure text err (owned, taken)
 * of such a failure said plainly, or err itself for any other. Caller
 * frees the result. */
char *worker__agent_overflow_text(const struct run *r,
                                  const struct policy_class *c, char *err);
/* worker__agent_free frees ag. NULL is a no-op. */
void worker__agent_free(struct agent *ag);

/* worker__step_enter enters the run's current step: derives its context
 * from the ledger, settles an attempt left in doubt, and attempts it (or
 * completes the job after its last step). */
void worker__step_enter(struct run *r);
/* worker__progress prints the progress line of r (what happened to it)
 * when the worker shows progress (leave.c). */
void worker__progress(const struct run *r, const char *what);
/* worker__finish marks the job gone from this worker, DONE (state: the
 * progress line, or NULL); a run that has left already stays as it is. */
void worker__finish(struct run *r, const char *state);
/* worker__lose marks the job gone from this worker because its lease was
 * lost (LOST: nothing more of it is written), with the progress line
 * "lease lost" unless it had left already. */
void worker__lose(struct run *r);
/* worker__give_back gives the job back to the queue, due at run_at. */
void worker__give_back(struct run *r, int64_t run_at);
/* A job the turn ended, for its hooks after the commit; own: the command
 * of the config hook its on_done or on_fail names (borrowed), or NULL. */
struct worker_ended {
    int64_t id;
    bool failed;
    const char *own;
};
/* worker__ended queues r's job, which the turn ended, for the config's
 * on_done or on_fail and its own (r->spec NULL: none) after the commit. */
void worker__ended(struct run *r, bool failed);
/* worker__fail_job fails the step and the job with error (borrowed). */
void worker__fail_job(struct run *r, const char *error);
/* worker__wait_then_attempt attempts again after wait_ms, holding the
 * slot for a short wait and giving the job back for a long one. */
void worker__wait_then_attempt(struct run *r, int64_t wait_ms);
/* worker__park parks the step (park_step) with reason and error (both
 * borrowed) and queues the item for the on_park hook after the commit;
 * when the park cannot be written the job is given back (logged). */
void worker__park(struct run *r, const char *reason, const char *error);
/* worker__forget_send takes the send of a, an attempt whose worker died
 * before its answer, off its tier: it no longer holds the tier for every
 * worker until it would have timed out (run.c). */
void worker__forget_send(struct run *r, const struct q_attempt *a, int64_t now);
/* worker__tier_index is the config index of tier name, or -1. */
int worker__tier_index(const struct worker *w, const char *name);

/* ---- sending an attempt (send.c) ------------------------------------ */

/* worker__attempt admits, builds and records the step's next attempt, to
 * be sent after the turn's commit; or waits, fails or gives back. */
void worker__attempt(struct run *r);
/* worker__unrecorded: the attempt of r was not recorded (rc -EBUSY: the
 * lease was lost, when recording or at the commit of a store that
 * defers the record; else the store failed), so it is not sent: its tier
 * send is settled as unsent, and the run is dropped (-EBUSY) or its job
 * given back for a second later. Needs an open turn. */
void worker__unrecorded(struct run *r, int rc);
/* worker__switch_tier leaves the step's tier for good (switch_tier_replay)
 * and attempts the step on another. */
void worker__switch_tier(struct run *r);
/* worker__chat_body is the step's chat request before a tier's model is
 * set. Caller owns it (cJSON_Delete). */
cJSON *worker__chat_body(const struct run *r);
/* worker__unstream replaces a streamed answer of tier t (one whose
 * request asked for events, res->stream, and got them, its content type
 * says) by the unstreamed answer it stands for, whole or as far as it
 * came (stream.c). Anything else is left as is. */
void worker__unstream(const struct config_tier *t, struct http_response *res);

/* worker__over_max_total: true, with the job's error in err, when sending
 * est more tokens would pass the step's max_total_tokens or its spend
 * cannot be read (send.c). */
bool worker__over_max_total(struct run *r, int64_t est, char *err, size_t len);
/* worker__estimate_tokens estimates the tokens req spends (input plus
 * max_tokens); *input gets the input part. */
int64_t worker__estimate_tokens(const cJSON *req, int64_t *input);
/* worker__choose_tier admits the request (est tokens) on the first of
 * the step's tiers, in order of preference, that takes it now, waiting
 * for an earlier one only paced (docs/reference.md "Order is preference").
 * Returns the tier index; or -1 with *retry_at (INT64_MAX: no tier left)
 * and why (whylen bytes) describing the refusals. r->route says what the
 * chosen tier was preferred over; r->budget_refused whether a budget
 * stood in the way (choose.c). */
int worker__choose_tier(struct run *r, int64_t est, int64_t now,
                        int64_t *retry_at, char *why, size_t whylen);
/* worker__unknown_tiers writes into why the step's tiers that this
 * worker's config lacks, or nothing (choose.c). */
void worker__unknown_tiers(const struct run *r, char *why, size_t len);
/* worker__tiers_left counts the step's other tiers that admit est tokens
 * now or within slack ms. */
int worker__tiers_left(const struct run *r, int64_t est, int64_t now,
                       int64_t slack);

/* ---- an answer (answer.c) ------------------------------------------- */

/* worker__on_done is the HTTP callback of an attempt (arg: its run):
 * keeps the answer (worker__hold) and acts on it (worker__answer), or,
 * while the store is unreachable, only keeps it. */
void worker__on_done(http_call *call, struct http_response *res, void *arg);
/* worker__answer acts on the answer r->held keeps: classifies it,
 * settles the tier, decides and acts, in the open turn. */
void worker__answer(struct run *r);
/* worker__transport_of is classify's name for a transport error
 * (answer.c). */
enum policy_transport worker__transport_of(enum http_error e);
/* worker__step_context fills ps with the step's context for decide, at
 * now. wrote: the endpoint may have acted on the request. */
void worker__step_context(struct run *r, int64_t now, bool wrote,
                          struct policy_step *ps);

/* ---- step helpers (step.c) ------------------------------------------ */

/* What worker__step_gate made of the step being entered. */
enum worker_gate {
    WORKER_GATE_GO,      /* on to be sent */
    WORKER_GATE_SKIPPED, /* skipped: r->step is the next one, to enter */
    WORKER_GATE_ENDED    /* the job failed, or was given back */
};
/* worker__step_gate is where the current step is entered: a step whose
 * "when" does not hold is skipped (its row keeps why); a step whose
 * templates cannot be filled (a path missing from an output) fails the
 * job, naming the template, with nothing sent. */
enum worker_gate worker__step_gate(struct run *r);
/* worker__fill returns a deep copy of the current step's body (a chat
 * step's request, an http step's http object) with its templates filled
 * from the job's input and the outputs so far (spec_step_fill): the body
 * worker__step_gate filled when the step was entered. Caller owns the
 * copy (cJSON_Delete). */
cJSON *worker__fill(const struct run *r);
/* worker__fill_http fills a tool's http action (http, in place) from the
 * job's input and the outputs so far, as worker__fill fills a step's
 * body. Returns 0, or -ENOENT with the template and why in err. */
int worker__fill_http(const struct run *r, cJSON *http, char *err, size_t len);

/* worker__degrade applies a step's "degrade" settings to a chat request
 * object in place: max_tokens (and max_completion_tokens) lowered,
 * tools and tool_choice dropped, only the last N messages kept (leading
 * system messages stay). degrade may be NULL (then it lowers nothing). */
void worker__degrade(cJSON *request, const cJSON *degrade);

/* worker__sha256_hex writes the SHA-256 of data as 64 hex digits + NUL. */
void worker__sha256_hex(const void *data, size_t len, char out[65]);

/* worker__has_keys reports whether text parses as a JSON object holding
 * every string of keys (a cJSON array). Text need not be NUL-terminated. */
bool worker__has_keys(const char *text, size_t len, const cJSON *keys);

/* ---- fault injection (turn.c) --------------------------------------- */

/* The worker commits each loop turn through this pointer (q_tx_commit
 * unless a test replaces it, as beanstalkd's falloc), so tests can fail
 * it. (The savepoint of a park is park/internal.h's park__tx_begin.) */
extern int (*worker__turn_commit)(q_db *db);

#endif
