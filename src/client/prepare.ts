/**
 * What a client writes for an enqueue, a batch item, a flow's message or an update: the caller's options checked
 * and encoded into the store contract's form (NewMessage, MessageEdit).
 */
import { checkMessageFilters, filterClass } from '../model/filters.js';
import { newMessageId } from '../model/ids.js';
import { encodePayload } from '../model/payload.js';
import { checkPolicy, encodePolicy, withExpiry } from '../model/policy.js';
import {
  DEFAULT_PRIORITY,
  checkDebounce,
  checkGroup,
  checkPriority,
  checkRunAt,
  type Debounce,
} from '../model/scheduling.js';
import type { EnqueueOptions, Payload, QueueConfig } from '../model/types.js';
import type { MessageEdit, UpdateOptions } from '../model/update.js';
import { checkBoolean, checkMessageId, checkMs, checkPlainObject } from '../model/validate.js';
import type { NewMessage } from '../stores/contract/contract.js';

// A message's own options, as an enqueue or a batch item gives them.
const MESSAGE_KEYS = [
  'id',
  'filters',
  'metadata',
  'initialBackoffMs',
  'allowRequeue',
  'replacePayload',
  'attempts',
  'backoff',
  'timeoutMs',
  'priority',
  'lifo',
  'runAt',
  'group',
  'debounce',
  'expireAfterMs',
] as const;
export const ENQUEUE_KEYS = [...MESSAGE_KEYS, 'tx'] as const;
// What update changes of a waiting message.
export const UPDATE_KEYS = ['payload', 'priority', 'runAt', 'delayMs', 'filters'] as const;
export const BATCH_KEYS = ['payload', ...MESSAGE_KEYS] as const;

/**
 * The message of checked options (their keys already checked against ENQUEUE_KEYS or BATCH_KEYS); filters need
 * the queue's config.
 */
export function prepareMessage(
  queue: string,
  payload: Payload,
  item: EnqueueOptions,
  config: QueueConfig | null,
  maxPayloadBytes: number,
): NewMessage {
  const encoded = encodePayload(payload, maxPayloadBytes);
  const filters = item.filters === undefined || config === null ? {} : checkMessageFilters(queue, item.filters, config);
  const debounce = item.debounce === undefined ? null : checkDebounce(item.debounce);
  const delayMs = initialBackoff(item, debounce);
  const policy = encodePolicy(withExpiry(checkPolicy(item), item.expireAfterMs, delayMs));
  return {
    id: item.id === undefined ? newMessageId() : checkMessageId(item.id),
    payload: encoded.bytes,
    encoding: encoded.encoding,
    metadata: item.metadata === undefined ? {} : checkPlainObject('metadata', item.metadata),
    filters,
    filterClass: item.filters === undefined ? '' : filterClass(filters),
    initialBackoffMs: delayMs,
    allowRequeue: item.allowRequeue === undefined ? false : checkBoolean('allowRequeue', item.allowRequeue),
    replacePayload: item.replacePayload === undefined ? false : checkBoolean('replacePayload', item.replacePayload),
    policy,
    priority: item.priority === undefined ? DEFAULT_PRIORITY : checkPriority(item.priority),
    lifo: item.lifo === undefined ? false : checkLifo(item),
    group: item.group === undefined ? null : checkGroup(item.group),
    debounceId: debounce === null ? null : debounce.id,
  };
}

/** An update's checked changes (keys already checked against UPDATE_KEYS); filters need the queue's config. */
export function prepareEdit(
  queue: string,
  changes: UpdateOptions,
  config: QueueConfig | null,
  maxPayloadBytes: number,
): MessageEdit {
  const payload = changes.payload === undefined ? null : encodePayload(changes.payload, maxPayloadBytes);
  if (changes.runAt !== undefined && changes.delayMs !== undefined)
    throw new TypeError('give at most one of runAt and delayMs, not runAt and delayMs');
  const delayMs =
    changes.runAt !== undefined
      ? Math.max(0, checkRunAt(changes.runAt) - Date.now())
      : changes.delayMs === undefined
        ? null
        : checkMs('delayMs', changes.delayMs);
  const filters =
    changes.filters === undefined || config === null ? null : checkMessageFilters(queue, changes.filters, config);
  return {
    payload,
    priority: changes.priority === undefined ? null : checkPriority(changes.priority),
    delayMs,
    filters: filters === null ? null : { values: filters, filterClass: filterClass(filters) },
  };
}

/** The delay before a new message is ready: `initialBackoffMs`, `runAt` or `debounce.ms`, at most one of them. */
function initialBackoff(item: EnqueueOptions, debounce: Debounce | null): number {
  // Most messages give none of the three: no list of names to build.
  if (item.initialBackoffMs === undefined && item.runAt === undefined && debounce === null) return 0;
  const given = [
    item.initialBackoffMs === undefined ? null : 'initialBackoffMs',
    item.runAt === undefined ? null : 'runAt',
    debounce === null ? null : 'debounce',
  ].filter((name) => name !== null);
  if (given.length > 1)
    throw new TypeError(`give at most one of initialBackoffMs, runAt and debounce, not ${given.join(' and ')}`);
  if (item.runAt !== undefined) return Math.max(0, checkRunAt(item.runAt) - Date.now());
  if (debounce !== null) return debounce.ms;
  return item.initialBackoffMs === undefined ? 0 : checkMs('initialBackoffMs', item.initialBackoffMs);
}

/** `lifo` as given; true only for a message ready at once, since its place is taken as it is enqueued. */
function checkLifo(item: EnqueueOptions): boolean {
  const lifo = checkBoolean('lifo', item.lifo);
  if (!lifo) return false;
  const delayed = [
    item.initialBackoffMs === undefined || item.initialBackoffMs === 0 ? null : 'initialBackoffMs',
    item.runAt === undefined ? null : 'runAt',
    item.debounce === undefined ? null : 'debounce',
  ].find((name) => name !== null);
  if (delayed !== undefined) throw new TypeError(`lifo is for a message ready at once, not with ${delayed}`);
  return true;
}
