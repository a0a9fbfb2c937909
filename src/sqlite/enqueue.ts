import { stateOf } from './state.js';
import type { Statements } from './statements.js';
import type { NewMessage } from '../store/contract.js';
import type { EnqueueResult } from '../model/types.js';

export interface EnqueueOutcome {
  readonly results: EnqueueResult[];
  /** Some message is claimable now: wake the queue's workers. */
  readonly readyNow: boolean;
}

/**
 * Adds messages in one transaction (the caller's). An existing id is refused
 * with its state, except: `done-awaiting-gc` is revived with the new content;
 * with `allowRequeue`, `locked` is marked to run again after it finishes and
 * `done-with-backoff` to run again when its backoff ends.
 */
export function enqueueMessages(
  sql: Statements,
  knownClasses: Set<string>,
  queue: string,
  messages: readonly NewMessage[],
  now: number,
): EnqueueOutcome {
  const results: EnqueueResult[] = [];
  let sizeDelta = 0;
  let readyNow = false;
  for (const m of messages) {
    if (!knownClasses.has(m.filterClass)) {
      sql.addClass.run(queue, m.filterClass);
      knownClasses.add(m.filterClass);
    }
    const content = {
      payload: asBuffer(m.payload),
      encoding: m.encoding === 'json' ? 0 : 1,
      metadata: JSON.stringify(m.metadata),
      filters: m.filterClass,
      readyAt: now + m.initialBackoffMs,
      now,
    };
    if (sql.insert.run({ ...content, queue, id: m.id }).changes === 1) {
      results.push({ ok: true, id: m.id, action: 'added' });
      sizeDelta += 1;
      readyNow ||= m.initialBackoffMs === 0;
      continue;
    }
    const row = sql.existing.get(queue, m.id) as { seq: number } & Parameters<typeof stateOf>[0];
    const state = stateOf(row, now);
    const replacement = m.replacePayload ? { payload: content.payload, encoding: content.encoding } : null;
    if (state === 'done-awaiting-gc') {
      sql.revive.run({ ...content, seq: row.seq });
      results.push({ ok: true, id: m.id, action: 'revived' });
      sizeDelta += 1;
      readyNow ||= m.initialBackoffMs === 0;
    } else if (m.allowRequeue && state === 'done-with-backoff') {
      sql.requeueDone.run({ seq: row.seq, payload: null, encoding: null, ...replacement, now });
      results.push({ ok: true, id: m.id, action: 'requeued' });
      sizeDelta += 1;
    } else if (m.allowRequeue && state === 'locked') {
      sql.requeueLocked.run({ seq: row.seq, payload: null, encoding: null, ...replacement, now });
      results.push({ ok: true, id: m.id, action: 'requeued' });
    } else {
      results.push({ ok: false, id: m.id, state });
    }
  }
  if (sizeDelta !== 0) sql.addSize.run(sizeDelta, queue);
  return { results, readyNow };
}

export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
