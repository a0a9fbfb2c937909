/**
 * The one LISTEN/NOTIFY channel of a schema: a payload of a queue's name says messages may be ready there,
 * `events:` and the name that the queue has new events (queue names cannot hold a ':'), `cancel:` and the
 * name, attempt and id that a held message of the queue was canceled.
 */
import type { CanceledMessage } from '../contract/contract.js';

export function wakeChannel(schema: string): string {
  return `${schema}.wake`;
}

export function eventsPayload(queue: string): string {
  return `events:${queue}`;
}

/** What subscribers of a queue's cancels subscribe to (Session.subscribe). */
export function cancelsPayload(queue: string): string {
  return `cancel:${queue}`;
}

/** The NOTIFY payload of a canceled held message. */
export function cancelPayload(queue: string, message: CanceledMessage): string {
  return `${cancelsPayload(queue)}:${message.attempt}:${message.id}`;
}

/** A cancel payload's subscription and message, or null for any other payload. */
export function parseCancelPayload(payload: string): { key: string; message: CanceledMessage } | null {
  if (!payload.startsWith('cancel:')) return null;
  const queueEnd = payload.indexOf(':', 7);
  const attemptEnd = queueEnd === -1 ? -1 : payload.indexOf(':', queueEnd + 1);
  if (attemptEnd === -1) return null;
  const attempt = Number(payload.slice(queueEnd + 1, attemptEnd));
  return { key: payload.slice(0, queueEnd), message: { id: payload.slice(attemptEnd + 1), attempt } };
}
