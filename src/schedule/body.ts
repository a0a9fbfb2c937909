/**
 * A schedule's body, the JSON a store keeps as an opaque string: its timing, its catch-up, and the message
 * every slot enqueues (payload and enqueue options, already checked and encoded).
 */
import type { PayloadEncoding } from '../model/payload.js';
import type { FilterValues, Metadata } from '../model/types.js';
import type { ScheduleTiming } from './timing.js';

/** The body's layout version: a kvmq that finds a newer one leaves that schedule alone. */
const BODY_VERSION = 1;

/** Missed slots enqueued after a downtime, by default, and at most. */
export const DEFAULT_CATCH_UP = 1;
export const CATCH_UP_MAX = 1000;

export interface ScheduleBody {
  readonly timing: ScheduleTiming;
  /** After a downtime, at most this many missed slots (the latest) are enqueued. */
  readonly catchUp: number;
  readonly payload: Uint8Array;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  readonly priority: number;
  readonly group: string | null;
  /** The messages' retry policy, encoded (model/policy.ts); null for none. */
  readonly policy: string | null;
}

/** The stored JSON. A JSON payload is kept as the value itself (no escaping to grow it), bytes as base64. */
interface BodyJson {
  v: number;
  cron?: string;
  tz?: string;
  everyMs?: number;
  catchUp: number;
  encoding: PayloadEncoding;
  payload: unknown;
  metadata: Metadata;
  filters: FilterValues;
  priority: number;
  group: string | null;
  policy: string | null;
}

export function encodeBody(body: ScheduleBody): string {
  const bytes = Buffer.from(body.payload.buffer, body.payload.byteOffset, body.payload.byteLength);
  const json: BodyJson = {
    v: BODY_VERSION,
    ...body.timing,
    catchUp: body.catchUp,
    encoding: body.encoding,
    payload: body.encoding === 'json' ? (JSON.parse(bytes.toString('utf8')) as unknown) : bytes.toString('base64'),
    metadata: body.metadata,
    filters: body.filters,
    priority: body.priority,
    group: body.group,
    policy: body.policy,
  };
  return JSON.stringify(json);
}

/** Reads a stored body; throws when it is not one this kvmq wrote (unreadable, or a newer layout). */
export function decodeBody(name: string, text: string): ScheduleBody {
  let json: BodyJson;
  try {
    json = JSON.parse(text) as BodyJson;
  } catch {
    throw new Error(`schedule ${name}: its stored body is not JSON`);
  }
  if (json.v !== BODY_VERSION) {
    throw new Error(`schedule ${name}: stored by another kvmq version (body version ${String(json.v)}); left alone`);
  }
  const timing: ScheduleTiming =
    json.everyMs !== undefined
      ? { everyMs: json.everyMs }
      : json.tz !== undefined
        ? { cron: String(json.cron), tz: json.tz }
        : { cron: String(json.cron) };
  return {
    timing,
    catchUp: json.catchUp,
    // JSON.stringify gives back the very text the payload was encoded as (model/payload.ts).
    payload:
      json.encoding === 'json'
        ? Buffer.from(JSON.stringify(json.payload), 'utf8')
        : Buffer.from(String(json.payload), 'base64'),
    encoding: json.encoding,
    metadata: json.metadata,
    filters: json.filters,
    priority: json.priority,
    group: json.group,
    policy: json.policy,
  };
}
