/**
 * Queue events on Redis: the scripts write them into the queue's `events` stream (src/stores/redis/lua/lib/events.lua);
 * here they are read back a page at a time, and trimmed exactly at GC. A cursor is an event's number, in
 * decimal: events are numbered densely by `events-seq`, so a gap before a page is a trim the reader missed.
 * A page that was told of a gap and read nothing ends at the head, so reading on is not told again.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../../model/events.js';
import { list, num, text } from './codec.js';
import { queueKey } from './keys.js';
import { SCRIPTS } from './scripts.generated.js';
import type { Scripts } from './scripts.js';
import type { EventPage } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';

const TYPES: ReadonlySet<string> = new Set(QUEUE_EVENT_TYPES);
const CURSOR = /^(0|[1-9][0-9]{0,15})$/;

/** The event number a cursor names; a TypeError for anything this store did not make. */
function eventNumber(cursor: string): number {
  const number = CURSOR.test(cursor) ? Number(cursor) : NaN;
  if (!Number.isSafeInteger(number)) {
    throw new TypeError(
      `events cursor ${JSON.stringify(cursor)} is not one the Redis store made: its cursors are event numbers ` +
        '(decimal digits) from readEvents or eventsHead',
    );
  }
  return number;
}

export async function readEvents(
  scripts: Scripts,
  queue: string,
  after: string | null,
  limit: number,
  where: string,
): Promise<EventPage> {
  const from = after === null ? '' : eventNumber(after);
  const reply = list(await scripts.run(SCRIPTS.readEvents, queue, [from, limit]));
  const events: StoredEvent[] = [];
  for (let i = 2; i + 3 <= reply.length; i += 3) {
    events.push(storedEvent(reply.slice(i, i + 3), `${where} ${queue}`));
  }
  const missed = num(reply[0]) === 1;
  // With none read: `after` stays the place to read on from, unless what followed it was trimmed (then the head).
  const cursor = events.at(-1)?.cursor ?? (after !== null && !missed ? after : String(num(reply[1])));
  return { events, missed, cursor };
}

const LINE = /^([a-z]+) (0|[1-9][0-9]*) ([^ ]+)(?: (.*))?$/s;
const UNESCAPES: Record<string, string> = { '\\\\': '\\', '\\n': '\n' };

/** One event as read-events replies it: number, at, then '<type> <attempt> <id>' and ' <error>' if any. */
function storedEvent([number, at, line]: unknown[], where: string): StoredEvent {
  const match = LINE.exec(text(line) ?? '');
  const [, type = '', attempt, id = '', error] = match ?? [];
  if (match === null || !TYPES.has(type)) {
    throw new StoreLayoutError(`${where}: an entry of the events stream was not written by kvmq`);
  }
  const event = {
    type: type as QueueEventType,
    id,
    at: num(at),
    attempt: Number(attempt),
    cursor: String(num(number)),
  };
  // The script escaped backslashes and newlines, so an event stays on its line.
  return error === undefined
    ? event
    : { ...event, error: error.replace(/\\[\\n]/g, (pair) => UNESCAPES[pair] ?? pair) };
}

/** The newest event's number ('0' before the first). */
export async function eventsHead(scripts: Scripts, prefix: string, queue: string): Promise<string> {
  const head = await scripts.call((redis) => redis.get(queueKey(prefix, queue, 'events-seq')));
  if (head !== null && !CURSOR.test(head)) {
    throw new StoreLayoutError(`${queueKey(prefix, queue, 'events-seq')} is not kvmq's event count`);
  }
  return head ?? '0';
}

/** GC's trim: exactly the queue's bounds, by count and by age. */
export async function trimEvents(scripts: Scripts, queue: string, config: QueueConfig): Promise<void> {
  await scripts.run(SCRIPTS.eventsTrim, queue, [config.eventsMaxCount, config.eventsMaxAgeMs]);
}
