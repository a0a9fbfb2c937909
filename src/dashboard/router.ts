/** Turns a path below the mount point into a route, decoding and checking the queue name and message id. */
import { checkMessageId, checkQueueName } from '../model/validate.js';
import { HttpError } from './http.js';

export type Route =
  | { readonly page: 'queues' }
  | { readonly page: 'live' }
  | { readonly page: 'asset'; readonly name: string }
  | { readonly page: 'queue'; readonly queue: string; readonly sub: QueueSub }
  | { readonly page: 'message'; readonly queue: string; readonly id: string; readonly sub: MessageSub };

export const QUEUE_ACTIONS = ['pause', 'resume', 'retry-failed', 'clear', 'events'] as const;
export const MESSAGE_ACTIONS = ['retry', 'remove', 'promote', 'cancel'] as const;
export type QueueAction = (typeof QUEUE_ACTIONS)[number];
export type MessageAction = (typeof MESSAGE_ACTIONS)[number];

type QueueSub = '' | 'live' | 'chart.json' | QueueAction;
type MessageSub = '' | MessageAction;

const QUEUE_SUBS: readonly string[] = ['', 'live', 'chart.json', ...QUEUE_ACTIONS];
const MESSAGE_SUBS: readonly string[] = ['', ...MESSAGE_ACTIONS];

/** `path` is what follows the mount point, starting with '/'; throws a 404 for anything else. */
export function route(path: string): Route {
  const parts = path.split('/').slice(1);
  const [first, queuePart, second, idPart, third, extra] = parts;
  if (path === '/' || path === '') return { page: 'queues' };
  if (path === '/live') return { page: 'live' };
  if (first === 'assets' && parts.length === 2 && queuePart !== undefined) return { page: 'asset', name: queuePart };
  if (first !== 'queues' || queuePart === undefined || extra !== undefined) throw notFound(path);
  const queue = decodeName(queuePart, checkQueueName, 'queue', path);
  if (second !== 'messages') {
    const sub = second ?? '';
    if (idPart !== undefined || !QUEUE_SUBS.includes(sub)) throw notFound(path);
    return { page: 'queue', queue, sub: sub as QueueSub };
  }
  if (idPart === undefined) throw notFound(path);
  const id = decodeName(idPart, checkMessageId, 'message', path);
  const sub = third ?? '';
  if (!MESSAGE_SUBS.includes(sub)) throw notFound(path);
  return { page: 'message', queue, id, sub: sub as MessageSub };
}

/** A name that could never exist is reported like one that does not. */
function decodeName(part: string, check: (value: unknown) => string, what: string, path: string): string {
  try {
    return check(decodeURIComponent(part));
  } catch {
    throw new HttpError(404, `There is no such ${what}: the address ${path} names none that could exist.`);
  }
}

function notFound(path: string): HttpError {
  return new HttpError(404, `The dashboard has no page at ${path}.`);
}
