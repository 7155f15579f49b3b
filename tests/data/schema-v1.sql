-- schema-v1.sql: turns a database of today's schema into one of version 1
-- (before the park and tier tables), undoing every migration since: what
-- tests/test_cli_db.c and scripts/package.sh migrate back up with
-- `stepq init`. A new schema version adds the undoing of what it adds.
DROP TRIGGER attempts_total_insert;
DROP TRIGGER attempts_total_update;
DROP TABLE attempt_totals;
DROP INDEX jobs_finished;
DROP INDEX attempts_body;
DROP TABLE park;
DROP TABLE tiers;
DROP TABLE schedules;
DROP TABLE tier_events;
ALTER TABLE attempts DROP COLUMN masked;
ALTER TABLE attempts DROP COLUMN route;
ALTER TABLE attempts DROP COLUMN kind;
ALTER TABLE attempts DROP COLUMN call_id;
ALTER TABLE attempts DROP COLUMN tool;
ALTER TABLE attempts DROP COLUMN args;
ALTER TABLE attempts DROP COLUMN cost_nusd;
ALTER TABLE attempts DROP COLUMN cost_estimated;
DROP TABLE budgets;
DROP TABLE job_retries;
DROP TABLE batch_items;
DROP TABLE batches;
DROP TABLE operators;
DROP TABLE audit;
ALTER TABLE jobs DROP COLUMN input;
PRAGMA user_version = 1;
