import { content } from './content.js';
import { debounceInto } from './debounce.js';
import { stateOf, type StateRow } from './state.js';
import type { MessageInserts } from './chunked.js';
import type { WriteContext } from './failures.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

export interface EnqueueOutcome {
  readonly results: EnqueueResult[];
  /** Some message is claimable now: wake the queue's workers. */
  readonly readyNow: boolean;
}

/**
 * Adds messages in one transaction (the caller's). An existing id is refused
 * with its state, except: `done-awaiting-gc` is revived with the new content;
 * with `allowRequeue`, `locked` is marked to run again after it finishes and
 * `done-with-backoff` to run again when its backoff ends. A message with a
 * debounce id replaces the one still waiting with that id, if any (debounce.ts).
 */
export function enqueueMessages(
  tx: WriteContext,
  inserts: MessageInserts,
  knownClasses: Set<string>,
  messages: readonly NewMessage[],
): EnqueueOutcome {
  const { sql, queue } = tx;
  for (const m of messages) {
    if (!knownClasses.has(m.filterClass)) {
      sql.addClass.run(queue, m.filterClass);
      knownClasses.add(m.filterClass);
    }
  }
  if (messages.every((m) => m.debounceId === null)) return addMessages(tx, inserts, messages);
  // Debounced messages one by one, in order: each may replace one an earlier message of the batch added.
  const results: EnqueueResult[] = [];
  let readyNow = false;
  let plain: NewMessage[] = [];
  const flush = (): void => {
    if (plain.length === 0) return;
    const added = addMessages(tx, inserts, plain);
    results.push(...added.results);
    readyNow ||= added.readyNow;
    plain = [];
  };
  for (const m of messages) {
    if (m.debounceId === null) {
      plain.push(m);
      continue;
    }
    flush();
    const debounced = debounceInto(tx, m.debounceId, m);
    if (debounced === null) plain.push(m);
    else {
      results.push(debounced);
      readyNow ||= m.initialBackoffMs === 0;
    }
    flush();
  }
  flush();
  return { results, readyNow };
}

/** Adds messages with multi-row inserts, or revives or requeues those whose id exists. */
function addMessages(tx: WriteContext, inserts: MessageInserts, messages: readonly NewMessage[]): EnqueueOutcome {
  const { sql, queue, now } = tx;
  // New ids go in with multi-row inserts; the ids that already existed come back missing.
  const plain = messages.every((m) => m.priority === 0 && m.group === null && m.debounceId === null);
  const readyAt = readyTimes(tx, messages);
  const rows = messages.map((m, i) => {
    const row = [queue, m.id, ...content(m, now, readyAt[i]), now, m.policy];
    return plain ? row : [...row, m.priority, m.group, m.debounceId];
  });
  const inserted = new Set((plain ? inserts.plain : inserts.scheduled)([], rows) as string[]);

  const results: EnqueueResult[] = [];
  let sizeDelta = 0;
  let doneDelta = 0;
  let readyNow = false;
  for (const [i, m] of messages.entries()) {
    if (inserted.delete(m.id)) {
      results.push({ ok: true, id: m.id, action: 'added' });
      tx.event('enqueued', m.id, 0);
      sizeDelta += 1;
      readyNow ||= m.initialBackoffMs === 0;
      continue;
    }
    const row = sql.existing.get(queue, m.id) as { seq: number; attempt: number } & StateRow;
    const state = stateOf(row, now);
    const [payload, encoding, metadata, filters] = content(m, now);
    const replacement = m.replacePayload ? { payload, encoding } : { payload: null, encoding: null };
    if (state === 'done-awaiting-gc') {
      sql.revive.run({
        seq: row.seq,
        payload,
        encoding,
        metadata,
        filters,
        readyAt: readyAt[i],
        now,
        policy: m.policy,
        priority: m.priority,
        group: m.group,
        debounceId: m.debounceId,
      });
      results.push({ ok: true, id: m.id, action: 'revived' });
      tx.event('enqueued', m.id, 0);
      sizeDelta += 1;
      doneDelta -= 1;
      readyNow ||= m.initialBackoffMs === 0;
    } else if (m.allowRequeue && state === 'done-with-backoff') {
      sql.requeueDone.run({ seq: row.seq, ...replacement, now });
      results.push({ ok: true, id: m.id, action: 'requeued' });
      tx.event('enqueued', m.id, 0);
      sizeDelta += 1;
      doneDelta -= 1;
    } else if (m.allowRequeue && state === 'locked') {
      sql.requeueLocked.run({ seq: row.seq, ...replacement, now });
      results.push({ ok: true, id: m.id, action: 'requeued' });
      tx.event('enqueued', m.id, row.attempt);
    } else {
      // A failed id stays refused, whatever allowRequeue says, until retried or removed.
      results.push({ ok: false, id: m.id, state });
    }
  }
  if (sizeDelta !== 0) tx.count(sizeDelta, doneDelta);
  return { results, readyNow };
}

/**
 * Each message's ready_at: now plus its delay, or for a LIFO message the negation of a number above every seq
 * so far, so it sorts before the ready times of its priority's other messages and after none enqueued before
 * it (the pending index orders by ready_at). Only a batch with a LIFO message reads the last seq.
 */
function readyTimes(tx: WriteContext, messages: readonly NewMessage[]): number[] {
  const { sql, now } = tx;
  let next = messages.some((m) => m.lifo) ? (sql.lastSeq.get() as number) + 1 : 0;
  return messages.map((m) => (m.lifo ? -next++ : now + m.initialBackoffMs));
}
