/** status(), inspect(), queueStatus() and consumers(), each one read-only script call. */
import { StoreLayoutError } from '../../model/errors.js';
import {
  MESSAGE_STATES,
  type ConsumerInfo,
  type MessageState,
  type MessageStatus,
  type QueueStatus,
} from '../../model/types.js';
import { parseHistory } from '../../model/history.js';
import { DEFAULT_PRIORITY } from '../../model/scheduling.js';
import { decodeContent, decodeOutcome, list, num, storedContent, text } from './codec.js';
import { decodePayload } from '../../model/payload.js';
import { SCRIPTS } from './scripts.generated.js';
import { storedReport } from './reports.js';
import type { Scripts } from './scripts.js';
import type { StoredDetails } from '../contract/contract.js';

export async function messageStatus(scripts: Scripts, queue: string, id: string): Promise<MessageStatus | null> {
  const reply = await scripts.run(SCRIPTS.status, queue, [id]);
  if (reply === null) return null;
  const fields = list(reply);
  return withResult(statusFields(queue, id, fields), fields[STATUS_FIELDS], queue);
}

/** The status with its `result` when the script read one (encoding tag + bytes), as written by finish. */
export function withResult(status: MessageStatus, stored: unknown, where: string): MessageStatus {
  if (stored === null || stored === undefined || stored === false) return status;
  const { payload, encoding } = decodeContent(stored as Buffer, where);
  return { ...status, result: decodePayload(payload, encoding) };
}

/** Status, content, policy and history of one message, in one read-only script call. */
export async function inspectMessage(
  scripts: Scripts,
  queue: string,
  id: string,
  where: string,
): Promise<StoredDetails | null> {
  const reply = await scripts.run(SCRIPTS.inspect, queue, [id]);
  if (reply === null) return null;
  const fields = list(reply);
  const [content, metadata, filterClass, policy, history, priority, group, progress, log, result] =
    fields.slice(STATUS_FIELDS);
  return {
    status: withResult(statusFields(queue, id, fields), result, where),
    content: storedContent(content, metadata, filterClass, where),
    policy: text(policy),
    history: parseHistory(text(history)),
    priority: priority === null ? DEFAULT_PRIORITY : num(priority),
    group: text(group),
    report: storedReport(progress, log),
  };
}

/** The fields of the Lua `status_of` reply. */
export const STATUS_FIELDS = 7;

/** A message's status from the seven fields of a Lua `status_of` reply. */
export function statusFields(queue: string, id: string, fields: readonly unknown[]): MessageStatus {
  const [state, attempt, outcome, enqueuedAt, updatedAt, holder, until] = fields;
  return {
    queue,
    id,
    state: text(state) as MessageState,
    attempt: num(attempt),
    ...decodeOutcome(text(outcome)),
    enqueuedAt: num(enqueuedAt),
    updatedAt: num(updatedAt),
    consumer: text(holder),
    until: num(until) < 0 ? null : num(until),
  };
}

export async function queueStatus(scripts: Scripts, queue: string, where: string): Promise<QueueStatus> {
  const reply = list(await scripts.run(SCRIPTS.queueStatus, queue, []));
  // The script counts every state, in MESSAGE_STATES order.
  const counts = Object.fromEntries(MESSAGE_STATES.map((state, i) => [state, num(reply[3 + i])])) as Record<
    MessageState,
    number
  >;
  return {
    queue,
    counts,
    total: Object.values(counts).reduce((a, b) => a + b, 0),
    consumers: consumerInfos(num(reply[0]), reply.slice(3 + MESSAGE_STATES.length), where),
    dryRuns: num(reply[1]),
    paused: num(reply[2]) === 1,
  };
}

export async function consumers(scripts: Scripts, queue: string, where: string): Promise<ConsumerInfo[]> {
  const reply = list(await scripts.run(SCRIPTS.consumers, queue, []));
  return consumerInfos(num(reply[0]), reply.slice(1), where);
}

interface Registration {
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly lastSeenAt: number;
  readonly expiresAt: number;
}

/** Parses `registrations, (id, JSON)..., (message id, holder)...`: live consumers, oldest first. */
function consumerInfos(now: number, reply: readonly unknown[], where: string): ConsumerInfo[] {
  const registrations = num(reply[0]);
  const holding = new Map<string, string[]>();
  for (let i = 1 + registrations * 2; i + 1 < reply.length; i += 2) {
    const holder = text(reply[i + 1]) ?? '';
    const ids = holding.get(holder) ?? [];
    ids.push(text(reply[i]) ?? '');
    holding.set(holder, ids);
  }
  const live: ConsumerInfo[] = [];
  for (let i = 1; i < 1 + registrations * 2; i += 2) {
    const id = text(reply[i]) ?? '';
    let registration: Registration;
    try {
      registration = JSON.parse(text(reply[i + 1]) ?? '') as Registration;
    } catch {
      throw new StoreLayoutError(`Redis at ${where}: the registration of consumer ${id} is not kvmq's JSON`);
    }
    if (registration.expiresAt <= now) continue;
    live.push({
      id,
      host: registration.host,
      pid: registration.pid,
      startedAt: registration.startedAt,
      lastSeenAt: registration.lastSeenAt,
      holding: (holding.get(id) ?? []).sort(),
    });
  }
  return live.sort((a, b) => a.startedAt - b.startedAt || a.id.localeCompare(b.id));
}
