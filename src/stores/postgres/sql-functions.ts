/**
 * The functions the migration installs in kvmq's schema. `enqueue_messages` is the store's whole enqueue in
 * one statement (one round trip): the plain messages go in with one multi-row insert from arrays, an existing
 * id is revived, requeued or refused by its state, a debounce id replaces the message still waiting, and the
 * counters, events and one NOTIFY per call are written in the same transaction (the NOTIFY fires at its
 * commit); it answers no rows when every message was added, the common case, else one row per message.
 * `enqueue(queue, payload, options)` is the same for a single JSON message, for SQL callers
 * (triggers, psql, another application's transaction). `add_counts`, `add_events` and `state_of` are what
 * both and the store's other operations share; `pick_ready` is what every claim of ready messages takes.
 */
import { COUNT_SLOTS_SQL, GENERIC_PLANS, quoteIdent, quoteLiteral } from './sql-text.js';
import { eventsPayload, wakeChannel } from './channel.js';

export function functionsDdl(schema: string): string {
  const s = quoteIdent(schema);
  return `${sharedDdl(s, schema)}
${enqueueMessagesDdl(s, quoteLiteral(wakeChannel(schema)))}
${enqueueDdl(s)}`;
}

/** state_of, add_counts, pick_ready and add_events: what the enqueue and the store's other statements share. */
function sharedDdl(s: string, schema: string): string {
  const channel = quoteLiteral(wakeChannel(schema));
  const eventsPrefix = quoteLiteral(eventsPayload(''));
  return `
-- A message's state from its phase and times, as src/stores/sqlite/state.ts derives it.
CREATE OR REPLACE FUNCTION ${s}.state_of(phase smallint, ready_at bigint, lock_until bigint, backoff_until bigint,
    requeue smallint, now bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE phase
    WHEN 0 THEN CASE WHEN ready_at <= now THEN 'queued' WHEN requeue = 1 THEN 'done-with-requeue'
                     ELSE 'queued-with-backoff' END
    WHEN 1 THEN CASE WHEN lock_until <= now THEN 'queued' WHEN requeue = 1 THEN 'locked-with-requeue'
                     ELSE 'locked' END
    WHEN 2 THEN CASE WHEN backoff_until > now THEN 'done-with-backoff' ELSE 'done-awaiting-gc' END
    WHEN 4 THEN 'waiting-children'
    ELSE 'failed' END
$fn$;

-- Adds to a queue's counters in this connection's slot.
CREATE OR REPLACE FUNCTION ${s}.add_counts(p_queue text, p_size bigint, p_done bigint, p_failed bigint)
    RETURNS void LANGUAGE sql AS $fn$
  INSERT INTO ${s}.counts AS c (queue, slot, size, done, failed)
    VALUES (p_queue, ${COUNT_SLOTS_SQL}, p_size, p_done, p_failed)
    ON CONFLICT (queue, slot) DO UPDATE
    SET size = c.size + excluded.size, done = c.done + excluded.done, failed = c.failed + excluded.failed
$fn$;

-- The ready messages a claim takes, in claim order and locked (SKIP LOCKED): up to p_max pending messages of
-- the classes p_classes ready at p_now. It reads the pending index one priority at a time, lowest first, and
-- stops once it has p_max: a priority's ready messages are one index range (queue, class, priority,
-- ready_at <= now), so the delayed ones after them are never read. A claim that read every class's messages in
-- claim order, filtering on ready_at, stepped over each delayed message of a priority before finding the next
-- priority's or running out: a claim short of p_max read the whole delayed backlog. No SET clause: called from
-- finish_and_claim it plans as that function does, and the clause would cost each call a settings change.
CREATE OR REPLACE FUNCTION ${s}.pick_ready(p_queue text, p_classes text[], p_now bigint, p_max integer)
    RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
  picked bigint[] := '{}';
  prio integer := -1;
BEGIN
  WHILE cardinality(picked) < p_max LOOP
    SELECT min(n.priority) INTO prio FROM unnest(p_classes) AS f(filters) CROSS JOIN LATERAL (
      SELECT y.priority FROM ${s}.messages y
      WHERE y.queue = p_queue AND y.filters = f.filters AND y.phase = 0 AND y.priority > prio
      ORDER BY y.priority LIMIT 1) n;
    EXIT WHEN prio IS NULL;
    picked := picked || ARRAY(
      SELECT k.seq FROM unnest(p_classes) AS f(filters) CROSS JOIN LATERAL (
        SELECT y.seq, y.ready_at FROM ${s}.messages y
        WHERE y.queue = p_queue AND y.filters = f.filters AND y.phase = 0 AND y.priority = prio
          AND y.ready_at <= p_now
        ORDER BY y.ready_at, y.seq LIMIT p_max - cardinality(picked)
        FOR UPDATE SKIP LOCKED) k
      ORDER BY k.ready_at, k.seq LIMIT p_max - cardinality(picked));
  END LOOP;
  RETURN picked;
END
$fn$;

-- Appends events to a queue (numbered from its row's events_seq) and tells its readers at commit.
CREATE OR REPLACE FUNCTION ${s}.add_events(p_queue text, p_now bigint, p_types smallint[], p_ids text[], p_attempts integer[],
    p_errors text[]) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  n integer := coalesce(array_length(p_ids, 1), 0);
  last bigint;
BEGIN
  IF n = 0 THEN RETURN; END IF;
  UPDATE ${s}.queues SET events_seq = events_seq + n WHERE queue = p_queue RETURNING events_seq INTO last;
  INSERT INTO ${s}.events (queue, seq, at, type, id, attempt, error)
    SELECT p_queue, last - n + u.ord, p_now, u.t, u.i, u.a, u.e
    FROM unnest(p_types, p_ids, p_attempts, p_errors) WITH ORDINALITY AS u(t, i, a, e, ord);
  PERFORM pg_notify(${channel}, ${eventsPrefix} || p_queue);
END
$fn$;
`;
}

/**
 * A delay of -1 is a LIFO message (enqueue.ts): ready now, at a ready_at below every ready time, lower for each
 * later one (a number of the seq column's sequence, negated), so the pending index gives it first.
 */
function readyAtSql(s: string, delay: string): string {
  const seqSequence = `pg_get_serial_sequence(${quoteLiteral(`${s}.messages`)}, 'seq')`;
  return `CASE WHEN ${delay} < 0 THEN -nextval(${seqSequence}) ELSE p_now + ${delay} END`;
}

/** enqueue_messages: every id new goes in with one insert; the others are handled one by one (enqueueEachSql). */
function enqueueMessagesDdl(s: string, channel: string): string {
  const readyAt = (delay: string): string => readyAtSql(s, delay);
  return `
CREATE OR REPLACE FUNCTION ${s}.enqueue_messages(p_queue text, p_now bigint, p_ids text[], p_payloads bytea[],
    p_encodings smallint[], p_metadata text[], p_filters text[], p_delays bigint[], p_policies text[],
    p_priorities integer[], p_groups text[], p_debounce text[], p_requeue boolean[], p_replace boolean[])
    RETURNS TABLE (r_id text, r_ok boolean, r_action text, r_state text) LANGUAGE plpgsql ${GENERIC_PLANS} AS $fn$
DECLARE
  n integer := coalesce(array_length(p_ids, 1), 0);
  events_on boolean;
  inserted text[] := '{}';
  pos integer;
  m record;
  existing boolean;
  all_new boolean;
  st text;
  size_delta bigint := 0;
  done_delta bigint := 0;
  wake boolean := false;
  e_ids text[] := '{}';
  e_attempts integer[] := '{}';
BEGIN
  -- The queue's row is inserted only when missing: an insert that meets it waits for any transaction updating it
  -- (a claim's dry run, an event's number) to end, and an enqueue need not.
  SELECT coalesce((q.config::jsonb ->> 'events')::boolean, false) INTO events_on FROM ${s}.queues q
    WHERE q.queue = p_queue;
  IF NOT FOUND THEN
    INSERT INTO ${s}.queues (queue) VALUES (p_queue) ON CONFLICT DO NOTHING;
    SELECT coalesce((q.config::jsonb ->> 'events')::boolean, false) INTO events_on FROM ${s}.queues q
      WHERE q.queue = p_queue;
  END IF;
  INSERT INTO ${s}.classes (queue, filters) SELECT DISTINCT p_queue, f FROM unnest(p_filters) AS f
    ON CONFLICT DO NOTHING;
  -- Without debounce ids, the new ids go in with one insert; the ids that existed (or came twice) are handled
  -- one by one.
  IF NOT EXISTS (SELECT 1 FROM unnest(p_debounce) AS d WHERE d IS NOT NULL) THEN
    -- Every id new, the common case: a plain insert (cheaper than one that handles conflicts) and no rows
    -- back; an id that exists undoes it, and the insert below sorts them out.
    BEGIN
      INSERT INTO ${s}.messages (queue, id, payload, encoding, metadata, filters, phase, ready_at, enqueued_at,
          updated_at, policy, priority, group_name)
        SELECT p_queue, u.i, u.p, u.e, u.m, u.f, 0, ${readyAt('u.d')}, p_now, p_now, u.po, u.pr, u.g
        FROM unnest(p_ids, p_payloads, p_encodings, p_metadata, p_filters, p_delays, p_policies, p_priorities,
          p_groups) WITH ORDINALITY AS u(i, p, e, m, f, d, po, pr, g, ord)
        ORDER BY u.ord;
      all_new := true;
    EXCEPTION WHEN unique_violation THEN
      all_new := false;
    END;
    IF all_new THEN
      IF events_on THEN
        PERFORM ${s}.add_events(p_queue, p_now, array_fill(0::smallint, ARRAY[n]), p_ids,
          array_fill(0, ARRAY[n]), array_fill(NULL::text, ARRAY[n]));
      END IF;
      PERFORM ${s}.add_counts(p_queue, n, 0, 0);
      IF 0 >= ANY(p_delays) THEN
        PERFORM pg_notify(${channel}, p_queue);
      END IF;
      RETURN;
    END IF;
    WITH ins AS (
      INSERT INTO ${s}.messages (queue, id, payload, encoding, metadata, filters, phase, ready_at, enqueued_at,
          updated_at, policy, priority, group_name)
        SELECT p_queue, u.i, u.p, u.e, u.m, u.f, 0, ${readyAt('u.d')}, p_now, p_now, u.po, u.pr, u.g
        FROM unnest(p_ids, p_payloads, p_encodings, p_metadata, p_filters, p_delays, p_policies, p_priorities,
          p_groups) WITH ORDINALITY AS u(i, p, e, m, f, d, po, pr, g, ord)
        ORDER BY u.ord
        ON CONFLICT (queue, id) DO NOTHING
        RETURNING id)
    SELECT coalesce(array_agg(ins.id), '{}') INTO inserted FROM ins;
  END IF;
${enqueueEachSql(s, channel)}`;
}

/**
 * enqueue_messages' loop over its messages: an id inserted is added, a debounce id replaces the message still
 * waiting, an existing id is revived, requeued or refused by its state (existingIdSql); then the counters,
 * events and one NOTIFY.
 */
function enqueueEachSql(s: string, channel: string): string {
  return `
  FOR i IN 1 .. n LOOP
    r_id := p_ids[i];
    r_ok := true;
    r_state := NULL;
    r_action := NULL;
    pos := array_position(inserted, p_ids[i]);
    IF pos IS NOT NULL THEN
      inserted[pos] := NULL;
      r_action := 'added';
    ELSIF p_debounce[i] IS NOT NULL THEN
      SELECT w.seq, w.id INTO m FROM ${s}.messages w
        WHERE w.queue = p_queue AND w.debounce_id = p_debounce[i] AND w.phase = 0
          AND (w.ready_at <= p_now OR w.requeue = 0)
        ORDER BY w.seq LIMIT 1 FOR UPDATE;
      IF FOUND THEN
        UPDATE ${s}.messages SET payload = p_payloads[i], encoding = p_encodings[i], metadata = p_metadata[i],
            ready_at = p_now + p_delays[i], requeue = 0, updated_at = p_now
          WHERE seq = m.seq;
        r_id := m.id;
        r_action := 'debounced';
        size_delta := size_delta - 1; -- counted as added below, but it replaced one
      END IF;
    END IF;
${existingIdSql(s)}
    -- Added, revived or debounced: waiting from now, ready after its delay.
    size_delta := size_delta + 1;
    wake := wake OR p_delays[i] <= 0;
    e_ids := e_ids || r_id;
    e_attempts := e_attempts || 0;
    RETURN NEXT;
  END LOOP;
  -- The queue row (events) before the counter slot: the order every transaction takes them in.
  IF events_on AND cardinality(e_ids) > 0 THEN
    PERFORM ${s}.add_events(p_queue, p_now, array_fill(0::smallint, ARRAY[cardinality(e_ids)]), e_ids, e_attempts,
      array_fill(NULL::text, ARRAY[cardinality(e_ids)]));
  END IF;
  IF size_delta <> 0 OR done_delta <> 0 THEN
    PERFORM ${s}.add_counts(p_queue, size_delta, done_delta, 0);
  END IF;
  IF wake THEN
    PERFORM pg_notify(${channel}, p_queue);
  END IF;
END
$fn$;`;
}

/** An id not inserted (it exists): revived when done, requeued when asked and it may be, else refused. */
function existingIdSql(s: string): string {
  const readyAt = (delay: string): string => readyAtSql(s, delay);
  return `
    IF r_action IS NULL THEN
      existing := false;
      LOOP
        INSERT INTO ${s}.messages (queue, id, payload, encoding, metadata, filters, phase, ready_at, enqueued_at,
            updated_at, policy, priority, group_name, debounce_id)
          VALUES (p_queue, p_ids[i], p_payloads[i], p_encodings[i], p_metadata[i], p_filters[i], 0,
            ${readyAt('p_delays[i]')}, p_now, p_now, p_policies[i], p_priorities[i], p_groups[i], p_debounce[i])
          ON CONFLICT (queue, id) DO NOTHING;
        EXIT WHEN FOUND;
        SELECT x.seq, x.phase, x.ready_at, x.lock_until, x.backoff_until, x.requeue, x.attempt INTO m
          FROM ${s}.messages x WHERE x.queue = p_queue AND x.id = p_ids[i] FOR UPDATE;
        existing := FOUND;
        EXIT WHEN existing; -- else it was removed meanwhile: insert again
      END LOOP;
      IF NOT existing THEN
        r_action := 'added';
      ELSE
        st := ${s}.state_of(m.phase, m.ready_at, m.lock_until, m.backoff_until, m.requeue, p_now);
        IF st = 'done-awaiting-gc' THEN
          UPDATE ${s}.messages SET payload = p_payloads[i], encoding = p_encodings[i], metadata = p_metadata[i],
              filters = p_filters[i], phase = 0, ready_at = ${readyAt('p_delays[i]')}, lock_until = 0, consumer = NULL,
              backoff_until = 0, requeue = 0, next_payload = NULL, next_encoding = NULL, attempt = 0,
              outcome = NULL, last_error = NULL, result = NULL, result_encoding = NULL, enqueued_at = p_now, updated_at = p_now, policy = p_policies[i],
              losses = 0, priority = p_priorities[i], group_name = p_groups[i], debounce_id = p_debounce[i]
            WHERE seq = m.seq;
          r_action := 'revived';
          done_delta := done_delta - 1;
        ELSIF p_requeue[i] AND st = 'done-with-backoff' THEN
          UPDATE ${s}.messages SET phase = 0, ready_at = backoff_until, requeue = 1, attempt = 0, losses = 0,
              result = NULL, result_encoding = NULL, payload = CASE WHEN p_replace[i] THEN p_payloads[i] ELSE payload END,
              encoding = CASE WHEN p_replace[i] THEN p_encodings[i] ELSE encoding END, updated_at = p_now
            WHERE seq = m.seq;
          r_action := 'requeued';
          done_delta := done_delta - 1;
          size_delta := size_delta + 1;
          e_ids := e_ids || p_ids[i];
          e_attempts := e_attempts || 0;
          RETURN NEXT;
          CONTINUE;
        ELSIF p_requeue[i] AND st = 'locked' THEN
          UPDATE ${s}.messages SET requeue = 1,
              next_payload = CASE WHEN p_replace[i] THEN p_payloads[i] END,
              next_encoding = CASE WHEN p_replace[i] THEN p_encodings[i] END, updated_at = p_now
            WHERE seq = m.seq;
          r_action := 'requeued';
          e_ids := e_ids || p_ids[i];
          e_attempts := e_attempts || m.attempt;
          RETURN NEXT;
          CONTINUE;
        ELSE
          -- A failed id stays refused, whatever allowRequeue says, until retried or removed.
          r_ok := false;
          r_state := st;
          RETURN NEXT;
          CONTINUE;
        END IF;
      END IF;
    END IF;`;
}

/** enqueue(queue, payload, options): one JSON message from SQL, in the caller's transaction. */
function enqueueDdl(s: string): string {
  return `

-- Enqueues one JSON message from SQL, in the caller's transaction; answers as the API's enqueue does:
-- {"ok": true, "id": ..., "action": "added"} or {"ok": false, "id": ..., "state": ...}. Options (JSON): id,
-- metadata, filters (an object of name: value), priority, group, initialBackoffMs or runAt (ms since the
-- epoch), allowRequeue, replacePayload. Times are the server's clock.
CREATE OR REPLACE FUNCTION ${s}.enqueue(queue text, payload jsonb, options jsonb DEFAULT '{}') RETURNS jsonb
    LANGUAGE plpgsql AS $fn$
DECLARE
  o jsonb := coalesce(options, '{}');
  now bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  delay bigint := coalesce((o ->> 'initialBackoffMs')::bigint, 0);
  priority integer := coalesce((o ->> 'priority')::integer, 0);
  filters text;
  new_id text := coalesce(o ->> 'id', gen_random_uuid()::text);
  r record;
BEGIN
  IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$' THEN
    RAISE EXCEPTION 'kvmq: queue name % is invalid: use 1-128 letters, digits, _, . or -', quote_nullable(queue);
  END IF;
  IF payload IS NULL THEN
    RAISE EXCEPTION 'kvmq: payload must be a JSON value, not NULL';
  END IF;
  IF priority < 0 OR priority > 1000 THEN
    RAISE EXCEPTION 'kvmq: priority must be 0 to 1000, not %', priority;
  END IF;
  IF o ? 'runAt' THEN
    delay := greatest(0, (o ->> 'runAt')::bigint - now);
  END IF;
  IF delay < 0 THEN
    RAISE EXCEPTION 'kvmq: initialBackoffMs must not be negative';
  END IF;
  SELECT coalesce(string_agg(f.key || '=' || f.value, '&' ORDER BY f.key COLLATE "C"), '') INTO filters
    FROM jsonb_each_text(coalesce(o -> 'filters', '{}')) AS f;
  SELECT * INTO r FROM ${s}.enqueue_messages(queue, now, ARRAY[new_id],
    ARRAY[convert_to(payload::text, 'UTF8')], ARRAY[0::smallint], ARRAY[coalesce(o -> 'metadata', '{}')::text],
    ARRAY[filters], ARRAY[delay], ARRAY[NULL::text], ARRAY[priority], ARRAY[o ->> 'group'], ARRAY[NULL::text],
    ARRAY[coalesce((o ->> 'allowRequeue')::boolean, false)], ARRAY[coalesce((o ->> 'replacePayload')::boolean, false)]);
  IF NOT FOUND THEN
    RETURN jsonb_build_object('ok', true, 'id', new_id, 'action', 'added'); -- no rows: it was added
  END IF;
  RETURN jsonb_strip_nulls(jsonb_build_object('ok', r.r_ok, 'id', r.r_id, 'action', r.r_action, 'state', r.r_state));
END
$fn$;
`;
}
