/* sql.h: the SQL texts both backends share, written once as macros that
 * each backend's sql.c, schema.c, stats.c and prune.c paste its
 * parameter marks into: the ledger's reports, the running totals of
 * schema 18 (their table, triggers and reads), a tier's row, and the
 * retention's statements. Private to queue/ (and its white-box tests);
 * included by queue/sqlite/internal.h and queue/pg/internal.h. */
#ifndef STEPQ_QUEUE_SQL_H
#define STEPQ_QUEUE_SQL_H

/* The ledger's latency as it stands (what the running totals keep; the
 * tests compare them) and the report of q_stats_workers, the same text on
 * every backend (each adds its ORDER BY): latency buckets as in
 * Q_LATENCY_BOUNDS_MS. */
#define Q__LATENCY_SELECT                                                      \
    "SELECT tier, count(*), coalesce(sum(latency_ms), 0)" Q__LE(100)           \
        Q__LE(250) Q__LE(500) Q__LE(1000) Q__LE(2500) Q__LE(5000) Q__LE(10000) \
            Q__LE(30000) Q__LE(60000)                                          \
                Q__LE(120000) " FROM attempts WHERE tier IS NOT NULL AND "     \
                              "finished_at IS NOT NULL"                        \
                              " AND finished_at > 0 AND latency_ms IS NOT "    \
                              "NULL GROUP BY tier"
#define Q__LE(ms) ", sum(CASE WHEN latency_ms <= " #ms " THEN 1 ELSE 0 END)"
#define Q__WORKERS_SELECT                                                      \
    "SELECT lease_owner, count(*), max(lease_until) FROM jobs"                 \
    " WHERE state = 1 AND lease_owner IS NOT NULL GROUP BY lease_owner"

/* The ledger's running totals (schema 18, table attempt_totals) of the
 * ENDED attempts (outcome IS NOT NULL): one row per shard, group (tier,
 * outcome, reason, decision; '' stands for NULL, as UNIQUE tells NULLs
 * apart) and latency bucket, kept by triggers on attempts: an insert of
 * an ended row adds its share, an update of the columns below takes the
 * old row's share away if it had ended and adds the new one's if it has,
 * and a delete does nothing, so a prune leaves them as they were. An
 * attempt in flight has no share: the worker's attempt, recorded in
 * flight and finished once, costs one upsert, at its end. A row's share: 1
 * attempt, its tokens as Q__REPORT_TIERS_SELECT counts them, whether it
 * has a cost and the cost, and its latency where Q__LATENCY_SELECT counts
 * it: bucket k (0-9) for the first bound of Q_LATENCY_BOUNDS_MS it is
 * within, 10 past the last, -1 not counted. r is the row ("NEW", "OLD",
 * or the table's name), s "" or "-" (taken away). The same text on every
 * backend; SQLite's shard is always 0, PostgreSQL's the attempt's id
 * modulo 16 (queue/pg/schema.c), and readers sum the shards. */
/* clang-format off */
#define Q__TOT_LAT(r)                                                          \
    r ".tier IS NOT NULL AND " r ".finished_at > 0 AND " r ".latency_ms"       \
    " IS NOT NULL"
#define Q__TOT_LE(r, k, ms) " WHEN " r ".latency_ms <= " #ms " THEN " #k
#define Q__TOT_BUCKET(r)                                                       \
    "CASE WHEN " Q__TOT_LAT(r) " THEN CASE" Q__TOT_LE(r, 0, 100)               \
    Q__TOT_LE(r, 1, 250) Q__TOT_LE(r, 2, 500) Q__TOT_LE(r, 3, 1000)            \
    Q__TOT_LE(r, 4, 2500) Q__TOT_LE(r, 5, 5000) Q__TOT_LE(r, 6, 10000)         \
    Q__TOT_LE(r, 7, 30000) Q__TOT_LE(r, 8, 60000) Q__TOT_LE(r, 9, 120000)      \
    " ELSE 10 END ELSE -1 END"
/* X(column, share) for every sum but attempts (whose share is s "1"). */
#define Q__TOT_SUMS(X, r, s)                                                   \
    X(tokens, s "coalesce(" r ".tokens, " r ".est_tokens)")                    \
    X(priced, "CASE WHEN " r ".cost_nusd IS NOT NULL THEN " s "1 ELSE 0 END")  \
    X(cost_nusd, s "coalesce(" r ".cost_nusd, 0)")                             \
    X(lat_sum_ms, "CASE WHEN " Q__TOT_LAT(r) " THEN " s r ".latency_ms"        \
                  " ELSE 0 END")
#define Q__TOT_COL(c, e) ", " #c
#define Q__TOT_VAL(c, e) ", " e
#define Q__TOT_SUM(c, e) ", sum(" e ")"
#define Q__TOT_ADD(c, e) ", " #c " = attempt_totals." #c " + excluded." #c
#define Q__TOT_BIGINT(c, e) ", " #c " bigint NOT NULL DEFAULT 0"
#define Q__TOT_KEYS(r)                                                         \
    "coalesce(" r ".tier, ''), coalesce(" r ".outcome, ''),"                   \
    " coalesce(" r ".reason, ''), coalesce(" r ".decision, ''), "              \
    Q__TOT_BUCKET(r)
#define Q__TOT_COLS                                                            \
    "shard, tier, outcome, reason, decision, bucket, attempts"                 \
    Q__TOT_SUMS(Q__TOT_COL, "", "")
/* The table, without its ending (SQLite's INTEGER and PostgreSQL's
 * bigint both read "bigint"). */
#define Q__TOTALS_TABLE                                                        \
    "CREATE TABLE attempt_totals (shard bigint NOT NULL DEFAULT 0,"            \
    " tier text NOT NULL, outcome text NOT NULL, reason text NOT NULL,"        \
    " decision text NOT NULL, bucket bigint NOT NULL,"                         \
    " attempts bigint NOT NULL DEFAULT 0"                                      \
    Q__TOT_SUMS(Q__TOT_BIGINT, "", "") ", PRIMARY KEY (shard, tier, outcome,"  \
    " reason, decision, bucket))"
/* Whether row r has ended: only then has it a share. */
#define Q__TOTALS_ENDED(r) r ".outcome IS NOT NULL"
/* Row r's share added to shard sh (an SQL expression), s as above; none
 * if r has not ended (the WHERE also tells SQLite's parser that ON
 * CONFLICT is the upsert's). */
#define Q__TOTALS_UPSERT(sh, r, s)                                             \
    "INSERT INTO attempt_totals (" Q__TOT_COLS ") SELECT " sh ", "             \
    Q__TOT_KEYS(r) ", " s "1" Q__TOT_SUMS(Q__TOT_VAL, r, s) " WHERE "          \
    Q__TOTALS_ENDED(r) " ON CONFLICT"                                          \
    " (shard, tier, outcome, reason, decision, bucket) DO UPDATE SET"          \
    " attempts = attempt_totals.attempts + excluded.attempts"                  \
    Q__TOT_SUMS(Q__TOT_ADD, r, s)
/* The columns whose change moves an attempt's share, and the condition
 * that one did. */
#define Q__TOTALS_WATCHED                                                      \
    "tier, outcome, reason, decision, tokens, est_tokens, cost_nusd,"          \
    " finished_at, latency_ms"
#define Q__TOT_CHANGED(c) "OLD." #c " IS DISTINCT FROM NEW." #c
#define Q__TOTALS_CHANGED                                                      \
    Q__TOT_CHANGED(tier) " OR " Q__TOT_CHANGED(outcome) " OR "                 \
    Q__TOT_CHANGED(reason) " OR " Q__TOT_CHANGED(decision) " OR "              \
    Q__TOT_CHANGED(tokens) " OR " Q__TOT_CHANGED(est_tokens) " OR "            \
    Q__TOT_CHANGED(cost_nusd) " OR " Q__TOT_CHANGED(finished_at) " OR "        \
    Q__TOT_CHANGED(latency_ms)
/* When the insert trigger fires: the row is inserted ended (a copy's). */
#define Q__TOTALS_INSERT_WHEN Q__TOTALS_ENDED("NEW")
/* When the update trigger fires: the old or the new row has ended and a
 * watched column changed (an attempt in flight updated in flight has no
 * share to move). */
#define Q__TOTALS_UPDATE_WHEN                                                  \
    "(" Q__TOTALS_ENDED("OLD") " OR " Q__TOTALS_ENDED("NEW") ") AND ("         \
    Q__TOTALS_CHANGED ")"
/* The migration's backfill: the ended attempts already there, by group. */
#define Q__TOTALS_BACKFILL                                                     \
    "INSERT INTO attempt_totals (" Q__TOT_COLS ") SELECT 0, "                  \
    Q__TOT_KEYS("attempts") ", count(*)"                                       \
    Q__TOT_SUMS(Q__TOT_SUM, "attempts", "") " FROM attempts WHERE "            \
    Q__TOTALS_ENDED("attempts") " GROUP BY " Q__TOT_KEYS("attempts") ";"
/* What q_stats_attempts and q_stats_latency read (each backend adds its
 * ORDER BY): shards and buckets summed, '' read back as NULL, groups
 * that hold no attempt now (one whose attempts an update moved to
 * another) left out, as the ledger's GROUP BY leaves them out; latency
 * from the buckets, cumulative. */
#define Q__TOTALS_GROUPS_SELECT                                                \
    "SELECT nullif(tier, ''), nullif(outcome, ''), nullif(reason, ''),"        \
    " nullif(decision, ''), sum(attempts), sum(tokens), sum(priced),"          \
    " sum(cost_nusd) FROM attempt_totals GROUP BY tier, outcome, reason,"      \
    " decision HAVING sum(attempts) <> 0"
#define Q__TOT_UPTO(k)                                                         \
    ", sum(CASE WHEN bucket BETWEEN 0 AND " #k " THEN attempts ELSE 0 END)"
#define Q__TOT_TIMED "sum(CASE WHEN bucket >= 0 THEN attempts ELSE 0 END)"
#define Q__TOTALS_LATENCY_SELECT                                               \
    "SELECT tier, " Q__TOT_TIMED ", sum(lat_sum_ms)" Q__TOT_UPTO(0)            \
    Q__TOT_UPTO(1) Q__TOT_UPTO(2) Q__TOT_UPTO(3) Q__TOT_UPTO(4) Q__TOT_UPTO(5) \
    Q__TOT_UPTO(6) Q__TOT_UPTO(7) Q__TOT_UPTO(8) Q__TOT_UPTO(9)                \
    " FROM attempt_totals WHERE tier <> '' GROUP BY tier"                      \
    " HAVING " Q__TOT_TIMED " > 0"
/* clang-format on */

/* The reports of q_report_tiers and q_report_failures, the same text on
 * every backend (each adds its ORDER BY, and LIMIT), with p1 the
 * backend's mark for the since parameter. Tiers: per tier, the attempts
 * started at or after since, their tokens (as reported, else estimated)
 * and a count per outcome in the order of struct q_report_tier, in_flight
 * (no outcome), then the breaker openings at or after since (tier_events):
 * the two groupings, one row per tier each, are summed by tier, so a tier
 * with openings and no attempt is listed too (requests 0). Failures: per
 * outcome other than ok and reason (a NULL reason is one group), the
 * finished attempts started at or after since (f.n) and the one of them
 * with the largest id (f.last) as the example, joined back for its
 * columns. */
#define Q__REPORT_TIERS_SELECT(p1)                                             \
    "SELECT tier, sum(n), sum(tok), sum(ok), sum(st), sum(hq), sum(tr),"       \
    " sum(si), sum(rf), sum(se), sum(tm), sum(un), sum(fl), sum(bo),"          \
    " sum(pc), sum(co) FROM ("                                                 \
    "SELECT tier, count(*) AS n,"                                              \
    " coalesce(sum(coalesce(tokens, est_tokens)), 0) AS tok,"                  \
    " count(CASE WHEN outcome = 'ok' THEN 1 END) AS ok,"                       \
    " count(CASE WHEN outcome = 'soft_throttle' THEN 1 END) AS st,"            \
    " count(CASE WHEN outcome = 'hard_quota' THEN 1 END) AS hq,"               \
    " count(CASE WHEN outcome = 'truncated' THEN 1 END) AS tr,"                \
    " count(CASE WHEN outcome = 'schema_invalid' THEN 1 END) AS si,"           \
    " count(CASE WHEN outcome = 'refused' THEN 1 END) AS rf,"                  \
    " count(CASE WHEN outcome = 'server_error' THEN 1 END) AS se,"             \
    " count(CASE WHEN outcome = 'timeout' THEN 1 END) AS tm,"                  \
    " count(CASE WHEN outcome = 'unknown' THEN 1 END) AS un,"                  \
    " count(CASE WHEN outcome IS NULL THEN 1 END) AS fl, 0 AS bo,"             \
    " count(cost_nusd) AS pc, coalesce(sum(cost_nusd), 0) AS co"               \
    " FROM attempts WHERE started_at >= " p1 " GROUP BY tier"                  \
    " UNION ALL SELECT tier, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, count(*), 0," \
    " 0"                                                                       \
    " FROM tier_events WHERE event = 'breaker_open' AND at >= " p1             \
    " GROUP BY tier) AS r GROUP BY tier"
#define Q__REPORT_FAILURES_SELECT(p1)                                          \
    "SELECT f.outcome, f.reason, f.n, a.job_id, a.step, a.attempt,"            \
    " coalesce(a.status, 0), a.tier, a.body FROM (SELECT outcome, reason,"     \
    " count(*) AS n, max(id) AS last FROM attempts WHERE started_at >= " p1    \
    " AND outcome IS NOT NULL AND outcome <> 'ok' GROUP BY outcome, reason)"   \
    " AS f JOIN attempts AS a ON a.id = f.last"
/* The jobs with a cost since p1, for q_report_costliest (ordered and
 * limited by the backend). */
#define Q__REPORT_COSTLIEST_SELECT(p1)                                         \
    "SELECT j.id, j.name, j.key, c.tok, c.co FROM (SELECT job_id,"             \
    " coalesce(sum(coalesce(tokens, est_tokens)), 0) AS tok,"                  \
    " sum(cost_nusd) AS co FROM attempts WHERE started_at >= " p1              \
    " GROUP BY job_id HAVING count(cost_nusd) > 0) AS c"                       \
    " JOIN jobs AS j ON j.id = c.job_id"

/* A tier's row written whole (ST_TIER_PUT): its columns in the order
 * both backends bind them, and the update of a row that is there. */
#define Q__TIER_PUT_INTO                                                       \
    "INSERT INTO tiers (name, breaker, failures, open_until,"                  \
    " exhausted_until, exhausted_reason, limited_until, allowance_used,"       \
    " allowance_since, config_hash, req_tat, tok_tat, pace, pace_down_at,"     \
    " pace_up_at, learned_rpm, learned_tpm, doubt, usage, flight)"
#define Q__TIER_PUT_SET                                                        \
    " ON CONFLICT (name) DO UPDATE SET"                                        \
    " breaker = excluded.breaker, failures = excluded.failures,"               \
    " open_until = excluded.open_until,"                                       \
    " exhausted_until = excluded.exhausted_until,"                             \
    " exhausted_reason = excluded.exhausted_reason,"                           \
    " limited_until = excluded.limited_until,"                                 \
    " allowance_used = excluded.allowance_used,"                               \
    " allowance_since = excluded.allowance_since,"                             \
    " config_hash = excluded.config_hash, req_tat = excluded.req_tat,"         \
    " tok_tat = excluded.tok_tat, pace = excluded.pace,"                       \
    " pace_down_at = excluded.pace_down_at,"                                   \
    " pace_up_at = excluded.pace_up_at, learned_rpm = excluded.learned_rpm,"   \
    " learned_tpm = excluded.learned_tpm, doubt = excluded.doubt,"             \
    " usage = excluded.usage, flight = excluded.flight"

/* q_prune's statements, the same text on every backend, with p1..p5 the
 * backend's marks for jobs_before, bodies_before, budgets_before, the
 * limit and bodies_from_job. Q__PRUNE_COUNT returns the eight counts of
 * struct q_prune_counts, in its order, of what the four writes after it
 * remove in the same transaction. A finished job: succeeded (2), failed
 * (3) or cancelled (5), with no open park item. A kind whose time is 0
 * is skipped by a constant term, before any row is read. */
/* clang-format off */
#define Q__PRUNE_KEEPS(j)                                                      \
    " NOT EXISTS (SELECT 1 FROM park AS k WHERE k.job_id = " j                 \
    " AND k.state = 'open')"
/* The oldest finished jobs first, through index jobs_finished (its WHERE
 * is this one's state term, word for word, so SQLite can use it): the
 * scan stops at the limit or at the first job changed after p1, and
 * never reads a job that is not finished (one with an open park item is
 * read, and kept by Q__PRUNE_KEEPS). */
#define Q__PRUNE_JOBS(p1, p4)                                                  \
    "SELECT id FROM jobs WHERE " p1 " > 0 AND state IN (2, 3, 5)"              \
    " AND updated_at < " p1 " AND" Q__PRUNE_KEEPS("jobs.id")                   \
    " ORDER BY updated_at, id LIMIT " p4
/* The attempts that still keep a body, in job order from bodies_from_job,
 * through index attempts_body (its WHERE is this one's body term): a step
 * reads only bodies kept, never the jobs whose bodies went before nor
 * the rows' bodies themselves (CROSS JOIN keeps SQLite's order;
 * PostgreSQL plans it as a join). */
#define Q__PRUNE_BODIES(p1, p2, p4, p5)                                        \
    "SELECT a.id AS id, j.id AS job FROM attempts AS a CROSS JOIN jobs AS j"   \
    " WHERE " p2 " > 0 AND a.job_id >= " p5 " AND a.body IS NOT NULL"          \
    " AND j.id = a.job_id AND j.state IN (2, 3, 5)"                            \
    " AND j.updated_at < " p2 " AND j.updated_at >= " p1                       \
    " AND" Q__PRUNE_KEEPS("j.id") " ORDER BY a.job_id LIMIT " p4
#define Q__PRUNE_BUDGETS(p3)                                                   \
    " FROM budgets WHERE updated_at < " p3 " AND NOT EXISTS (SELECT 1 FROM"    \
    " jobs AS s WHERE s.key = 'schedule:' || budgets.win"                      \
    " AND s.state NOT IN (2, 3, 5))"
#define Q__PRUNE_COUNT(p1, p2, p3, p4, p5)                                     \
    "SELECT (SELECT count(*) FROM (" Q__PRUNE_JOBS(p1, p4) ") AS x),"          \
    " (SELECT count(*) FROM steps WHERE job_id IN ("                           \
    Q__PRUNE_JOBS(p1, p4) ")),"                                                \
    " (SELECT count(*) FROM attempts WHERE job_id IN ("                        \
    Q__PRUNE_JOBS(p1, p4) ")),"                                                \
    " (SELECT count(*) FROM park WHERE job_id IN ("                            \
    Q__PRUNE_JOBS(p1, p4) ")),"                                                \
    " (SELECT count(*) FROM (" Q__PRUNE_BODIES(p1, p2, p4, p5) ") AS y),"      \
    " (SELECT coalesce(max(job), 0) FROM ("                                    \
    Q__PRUNE_BODIES(p1, p2, p4, p5) ") AS z),"                                 \
    " (SELECT count(*) FROM tier_events WHERE " p1 " > 0 AND at < " p1 "),"    \
    " (SELECT count(*)" Q__PRUNE_BUDGETS(p3) ")"
#define Q__PRUNE_DELETE_JOBS(p1, p4)                                           \
    "DELETE FROM jobs WHERE id IN (" Q__PRUNE_JOBS(p1, p4) ")"
#define Q__PRUNE_DROP_BODIES(p1, p2, p4, p5)                                   \
    "UPDATE attempts SET body = NULL WHERE id IN (SELECT id FROM ("            \
    Q__PRUNE_BODIES(p1, p2, p4, p5) ") AS w)"
#define Q__PRUNE_DELETE_EVENTS(p1) "DELETE FROM tier_events WHERE at < " p1
#define Q__PRUNE_DELETE_BUDGETS(p3) "DELETE" Q__PRUNE_BUDGETS(p3)
/* clang-format on */

#endif
