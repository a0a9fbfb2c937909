import { encodeContent, list, text } from './codec.js';
import { SCRIPTS } from './scripts.generated.js';
import type { ScriptArg, Scripts } from './scripts.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueAction, EnqueueResult, MessageState, Metadata } from '../../model/types.js';

// One script call carries at most this many bytes or messages: Redis buffers a
// whole command before running it, and a script blocks the server while it runs.
const MAX_CALL_BYTES = 16 * 1024 * 1024;
const MAX_CALL_MESSAGES = 5000;

/**
 * Single enqueues of one tick go in script calls of at most this many messages, each sent as soon as it is
 * full (StoreCapabilities.enqueueCallMessages): Redis runs one call while the client prepares the next, where
 * one call per tick would leave each side idle while the other works. Fewer messages a call would pay the
 * call's fixed cost (tens of µs of server CPU) too often.
 */
export const ENQUEUE_CALL_MESSAGES = 32;

const ACTIONS: ReadonlySet<string> = new Set<EnqueueAction>(['added', 'revived', 'requeued', 'debounced']);

/**
 * Adds messages, one script call for the whole batch. A batch larger than a call may carry goes in several,
 * each atomic, all sent at once in order (Redis runs the first while the rest are built), so a later call of
 * the queue is never applied between them.
 */
export function enqueueMessages(
  scripts: Scripts,
  queue: string,
  messages: readonly NewMessage[],
): Promise<EnqueueResult[]> {
  const calls: Promise<EnqueueResult[]>[] = [];
  // The first argument, the messages' shapes, is written once the call's messages are known.
  let args: ScriptArg[] = [''];
  let shapes = '';
  let ids: string[] = [];
  let bytes = 0;
  const send = (): void => {
    if (ids.length === 0) return;
    const sent = ids;
    args[0] = shapes;
    calls.push(
      scripts.run(SCRIPTS.enqueue, queue, args).then((reply) => {
        const replies = list(reply);
        return sent.map((id, i) => result(id, text(replies[i]) ?? ''));
      }),
    );
    args = [''];
    shapes = '';
    ids = [];
    bytes = 0;
  };
  for (const m of messages) {
    const metadata = encodeMetadata(m.metadata);
    const size = m.payload.byteLength + 1 + metadata.length + m.id.length + (m.policy?.length ?? 0);
    if (ids.length > 0 && (bytes + size > MAX_CALL_BYTES || ids.length >= MAX_CALL_MESSAGES)) send();
    shapes += pushMessageArgs(args, m, encodeContent(m.payload, m.encoding), metadata);
    ids.push(m.id);
    bytes += size;
  }
  send();
  if (calls.length === 1) return calls[0] as Promise<EnqueueResult[]>;
  return Promise.all(calls).then((parts) => parts.flat());
}

/** The stored metadata: '' for none (most messages), else compact JSON. */
export function encodeMetadata(metadata: Metadata): string {
  // A for-in over the keys rather than Object.keys: no array made for the common empty object.
  for (const key in metadata) if (Object.hasOwn(metadata, key)) return JSON.stringify(metadata);
  return '';
}

/**
 * Appends a message's script arguments (lib/enqueue.lua) to `args` and returns its shape: 'p', a plain
 * message, as id and content only (most messages: each argument costs the server and the client), else 'f'
 * and all eight. Pushed in place: a batch's arguments are one array, not one per message spread into it.
 */
export function pushMessageArgs(
  args: ScriptArg[],
  m: NewMessage,
  content: string | Buffer,
  metadata: string,
): 'p' | 'f' {
  const flags = (m.allowRequeue ? 1 : 0) + (m.replacePayload ? 2 : 0) + (m.lifo ? 4 : 0);
  const policy = m.policy ?? '';
  const scheduled = m.priority !== 0 || m.group !== null || m.debounceId !== null;
  if (
    metadata === '' &&
    m.filterClass === '' &&
    m.initialBackoffMs === 0 &&
    flags === 0 &&
    policy === '' &&
    !scheduled
  ) {
    args.push(m.id, content);
    return 'p';
  }
  args.push(
    m.id,
    content,
    metadata,
    m.filterClass,
    m.initialBackoffMs,
    flags,
    policy,
    scheduled ? `${m.priority === 0 ? '' : m.priority}\n${m.group ?? ''}\n${m.debounceId ?? ''}` : '',
  );
  return 'f';
}

export function result(id: string, reply: string): EnqueueResult {
  // 'debounced <id of the waiting message>'
  if (reply.startsWith('debounced ')) return { ok: true, id: reply.slice(10), action: 'debounced' };
  if (ACTIONS.has(reply)) return { ok: true, id, action: reply as EnqueueAction };
  return { ok: false, id, state: reply as MessageState };
}
