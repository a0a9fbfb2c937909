/**
 * The records a flow's messages are written with on etcd (flow-write.ts, flow-staging.ts): a node with children
 * `waiting` (no idx) with its children's links and count, a leaf pending as an enqueue writes it, each child with
 * its parent and its debt (flow-ends.ts); and the ops each queue of a flow gets once (registry, events).
 */
import { newIdx, QueueKeys } from './keys.js';
import { freshRecord } from './transitions.js';
import { eventOps } from './event-ops.js';
import { registerOp } from './queue-registry.js';
import { newNonce } from './nonce.js';
import { asBuffer } from './enqueue.js';
import type { FlowFields, FlowLink, MessageRecord } from './record.js';
import type { Op } from './kv.js';
import type { FlowMessage } from '../contract/contract.js';

/** A message already enqueued that a node depends on: its node's index, its link, whether it still owes. */
export interface LinkedDependency {
  readonly node: number;
  readonly link: FlowLink;
  readonly waits: boolean;
}

/** A flow message as it is written. */
export interface FlowRecord {
  readonly keys: QueueKeys;
  readonly id: string;
  readonly record: MessageRecord;
  readonly payload: Buffer;
}

/** Each message's record, in the flow's order (parents first). */
export function flowRecords(
  root: string,
  messages: readonly FlowMessage[],
  deps: readonly LinkedDependency[],
  now: number,
): FlowRecord[] {
  const children = messages.map((_, i): FlowLink[] => deps.filter((d) => d.node === i).map((d) => d.link));
  for (const m of messages) if (m.parent !== null) children[m.parent]?.push([m.queue, m.message.id]);
  return messages.map((m, i) => {
    const left = childrenLeft(messages, deps, i);
    const parent = m.parent === null ? undefined : messages[m.parent];
    const flow: FlowFields = {
      ...(parent === undefined ? {} : { parent: [parent.queue, parent.message.id] as const, owes: true as const }),
      ...(parent === undefined || m.onChildFailure === 'fail' ? {} : { policy: m.onChildFailure }),
      ...((children[i]?.length ?? 0) === 0 ? {} : { children: children[i] }),
      ...(left === 0 ? {} : { left }),
    };
    return {
      keys: new QueueKeys(root, m.queue),
      id: m.message.id,
      record: newRecord(m, left > 0, flow, now),
      payload: asBuffer(m.message.payload),
    };
  });
}

/** A node's count of children not ended: its own in the flow, and its dependencies that still owe. */
export function childrenLeft(
  messages: readonly FlowMessage[],
  deps: readonly LinkedDependency[],
  node: number,
): number {
  let left = (messages[node] as FlowMessage).children;
  for (const d of deps) if (d.node === node && d.waits) left++;
  return left;
}

/** Each queue's registry entry and `enqueued` events (one key per queue, when its events are on). */
export function queueOps(
  root: string,
  messages: readonly FlowMessage[],
  on: ReadonlyMap<string, boolean>,
  now: number,
): Op[] {
  const ids = new Map<string, string[]>();
  for (const m of messages) ids.set(m.queue, [...(ids.get(m.queue) ?? []), m.message.id]);
  const ops: Op[] = [];
  for (const [queue, list] of ids) {
    const keys = new QueueKeys(root, queue);
    ops.push(registerOp(keys));
    const enqueued = list.map((id) => ({ type: 'enqueued' as const, id, attempt: 0 }));
    ops.push(...eventOps(keys, on.get(queue) === true, now, ...enqueued));
  }
  return ops;
}

/** A flow message's record: `waiting` (no idx) when it waits for children, else pending as an enqueue writes it. */
function newRecord(m: FlowMessage, waits: boolean, flow: FlowFields, now: number): MessageRecord {
  const message = m.message;
  const fresh = freshRecord(
    {
      idx: newIdx(message.priority),
      encoding: message.encoding,
      metadata: message.metadata,
      filterClass: message.filterClass,
      readyAt: now + message.initialBackoffMs,
      source: 'kvmq',
      nonce: newNonce(),
      policy: message.policy,
      priority: message.priority,
      group: message.group,
      debounceId: null,
    },
    now,
  );
  const linked = Object.keys(flow).length === 0 ? fresh : { ...fresh, flow };
  return waits ? { ...linked, phase: 'waiting', idx: null } : linked;
}
