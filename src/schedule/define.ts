/**
 * What `client.schedule()` and `client.schedules()` do on this side of the store: check and encode a schedule
 * into the record a store keeps, and read such a record back for people.
 */
import { PayloadTooLargeError } from '../model/errors.js';
import { checkMessageFilters } from '../model/filters.js';
import { decodePayload, encodePayload } from '../model/payload.js';
import { checkPolicy, decodePolicy, encodePolicy } from '../model/policy.js';
import { DEFAULT_PRIORITY, checkGroup, checkPriority, checkScheduleName } from '../model/scheduling.js';
import { checkCount, checkKnownKeys, checkPlainObject } from '../model/validate.js';
import { CATCH_UP_MAX, DEFAULT_CATCH_UP, decodeBody, encodeBody } from './body.js';
import { checkTiming, slotClock, type ScheduleTiming } from './timing.js';
import type { StoredSchedule } from '../stores/contract/contract.js';
import type { BackoffPolicy, FilterValues, Metadata, Payload, QueueConfig } from '../model/types.js';

/** How each slot's message is enqueued, and how many missed slots a downtime is caught up with. */
export interface ScheduleOptions {
  readonly metadata?: Metadata;
  /** Values for the queue's configured filter enums. */
  readonly filters?: FilterValues;
  /** 0 (the default, runs first) to 1000. */
  readonly priority?: number;
  readonly group?: string;
  readonly attempts?: number;
  readonly backoff?: BackoffPolicy;
  readonly timeoutMs?: number;
  /**
   * After a time when no worker of the queue ran, at most this many of the missed slots (the latest) are
   * enqueued, then the schedule goes on from its next slot. 1 to 1000. @defaultValue 1
   */
  readonly catchUp?: number;
}

export const SCHEDULE_OPTION_KEYS = [
  'metadata',
  'filters',
  'priority',
  'group',
  'attempts',
  'backoff',
  'timeoutMs',
  'catchUp',
] as const;

/** A schedule as `client.schedules()` lists it. */
export interface ScheduleInfo {
  readonly name: string;
  readonly cron?: string;
  readonly tz?: string;
  readonly everyMs?: number;
  readonly catchUp: number;
  /** The next slot not yet enqueued, ms since the epoch. */
  readonly nextAt: number;
  readonly payload: Payload;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  readonly priority: number;
  readonly group: string | null;
  readonly attempts?: number;
  readonly backoff?: BackoffPolicy;
  readonly timeoutMs?: number;
}

export interface ScheduleInput {
  readonly queue: string;
  readonly name: unknown;
  readonly timing: unknown;
  readonly payload: Payload;
  readonly options: ScheduleOptions;
  /** The queue's configuration, needed only to check filters. */
  readonly config: () => Promise<QueueConfig>;
  readonly maxPayloadBytes: number;
}

/**
 * Checks everything and returns the record to store, its first slot the first after `now`. The body (payload,
 * bytes as base64, and options) must fit the store's payload limit, or it is a PayloadTooLargeError.
 */
export async function defineSchedule(input: ScheduleInput, now: () => number): Promise<StoredSchedule> {
  const { queue, options } = input;
  const name = checkScheduleName(input.name);
  checkKnownKeys('schedule', checkPlainObject('schedule options', options), SCHEDULE_OPTION_KEYS);
  const timing = await checkTiming(input.timing);
  const encoded = encodePayload(input.payload, input.maxPayloadBytes);
  const filters =
    options.filters === undefined ? {} : checkMessageFilters(queue, options.filters, await input.config());
  const body = encodeBody({
    timing,
    catchUp: options.catchUp === undefined ? DEFAULT_CATCH_UP : checkCount('catchUp', options.catchUp, 1, CATCH_UP_MAX),
    payload: encoded.bytes,
    encoding: encoded.encoding,
    metadata: options.metadata === undefined ? {} : checkPlainObject('metadata', options.metadata),
    filters,
    priority: options.priority === undefined ? DEFAULT_PRIORITY : checkPriority(options.priority),
    group: options.group === undefined ? null : checkGroup(options.group),
    policy: encodePolicy(checkPolicy(options)),
  });
  // The store keeps the body where it keeps a payload: it must fit the same limit.
  const bodyBytes = Buffer.byteLength(body, 'utf8');
  if (bodyBytes > input.maxPayloadBytes) throw new PayloadTooLargeError(bodyBytes, input.maxPayloadBytes);
  return { name, body, nextAt: (await slotClock(timing)).after(now()) };
}

export function describeSchedule(stored: StoredSchedule): ScheduleInfo {
  const body = decodeBody(stored.name, stored.body);
  const timing: ScheduleTiming = body.timing;
  return {
    name: stored.name,
    ...timing,
    catchUp: body.catchUp,
    nextAt: stored.nextAt,
    payload: decodePayload(body.payload, body.encoding),
    metadata: body.metadata,
    filters: body.filters,
    priority: body.priority,
    group: body.group,
    ...decodePolicy(body.policy),
  };
}
