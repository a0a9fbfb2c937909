/**
 * Writes a flow on etcd in one Txn, every message or none: each new message compared absent (`Version = 0`), each
 * `dependsOn` message compared at the mod revision read. A parent with children is written `waiting` (no ordered
 * key, so no dispatcher sees it; its payload at `/kvmq/payload/{id}`, its children and count in its record); a
 * leaf is written as an enqueue writes it, with its parent and its debt in its record (flow-ends.ts). A flow that
 * does not fit one Txn (etcd's --max-txn-ops, 128 by default) is refused before anything is written.
 */
import { FlowRefusedError, StoreLimitError, StoreUnavailableError } from '../../model/errors.js';
import { newIdx, QueueKeys } from './keys.js';
import { encodeRecord, stateOf, type FlowFields, type FlowLink, type MessageRecord } from './record.js';
import { freshRecord, indexOps } from './transitions.js';
import { readRecord } from './inspect.js';
import { eventOps } from './event-ops.js';
import { getMany, MAX_TXN_BYTES, MAX_TXN_OPS, runBatch, type Change } from './txn-batch.js';
import { countChange } from './counts.js';
import { registerOp } from './queue-registry.js';
import { newNonce } from './nonce.js';
import { asBuffer } from './enqueue.js';
import { sleep } from '../../model/time.js';
import type { Kv, Op } from './kv.js';
import type { FlowMessage } from '../contract/contract.js';

/** Tries when a dependency changed under the flow (its worker is at work on it). */
const TRIES = 50;

/** A dependency as read: its node's index, its link, its record and whether it still owes a count. */
interface Dependency {
  readonly node: number;
  readonly link: FlowLink;
  readonly policy: 'fail' | 'ignore' | 'remove';
  readonly record: MessageRecord;
  readonly rev: number;
  readonly waits: boolean;
}

/** Writes the flow; `events(queue)` says whether a queue has events on. */
export async function writeFlow(
  kv: Kv,
  root: string,
  messages: readonly FlowMessage[],
  events: (queue: string) => Promise<boolean>,
): Promise<void> {
  const on = new Map<string, boolean>();
  for (const m of messages) if (!on.has(m.queue)) on.set(m.queue, await events(m.queue));
  for (let tries = 0; tries < TRIES; tries++) {
    const deps = await readDependencies(kv, root, messages);
    const change = flowChange(root, messages, deps, on);
    checkSize(messages.length, change);
    const { results } = await runBatch(kv, [change]);
    const result = results[0];
    if (result?.ok !== false) return;
    // Which new id was taken: the flow is refused with its state. Else a dependency changed: read them again.
    messages.forEach((m, i) => {
      const item = result.reads[i]?.kvs[0];
      if (item !== undefined) throw new FlowRefusedError(m.queue, m.message.id, stateOf(readRecord(item), Date.now()));
    });
    await sleep(Math.random() * 10);
  }
  throw new StoreUnavailableError('flow: its dependencies kept changing while it was written; try again');
}

/** Refuses, before anything is sent, a flow whose Txn etcd would refuse (with its count slots, one per queue). */
function checkSize(nodes: number, change: Change): void {
  const slots = new Set((change.counts ?? []).map((c) => c.keys.prefix)).size;
  const ops = change.ops.length + slots;
  const compares = change.compares.length + slots;
  let bytes = 0;
  for (const op of change.ops) bytes += op.key.length + 24 + (op.type === 'put' ? op.value.length : 0);
  if (ops <= MAX_TXN_OPS && compares <= MAX_TXN_OPS && bytes <= MAX_TXN_BYTES) return;
  throw new StoreLimitError(
    `a flow of ${nodes} messages takes ${ops} writes, ${compares} compares and ${bytes} bytes, over the ` +
      `${MAX_TXN_OPS} ops or ${MAX_TXN_BYTES} bytes of one etcd Txn (--max-txn-ops, --max-request-bytes); ` +
      'nothing was written: write it as smaller flows',
  );
}

/**
 * Reads every dependency of the flow's nodes. One missing, with a parent, or failed under a policy other than
 * `ignore` throws FlowRefusedError; one that ended otherwise (done, or failed under `ignore`) owes nothing.
 */
async function readDependencies(kv: Kv, root: string, messages: readonly FlowMessage[]): Promise<Dependency[]> {
  const named = messages.flatMap((m, node) => m.dependsOn.map((link) => ({ node, link })));
  if (named.length === 0) return [];
  const items = await getMany(
    kv,
    named.map(({ link }) => new QueueKeys(root, link.queue).record(link.id)),
  );
  const now = Date.now();
  return named.map(({ node, link }, k) => {
    const item = items[k];
    if (item == null) throw new FlowRefusedError(link.queue, link.id, 'none', 'missing');
    const record = readRecord(item);
    const state = stateOf(record, now);
    if (record.flow?.parent !== undefined) throw new FlowRefusedError(link.queue, link.id, state, 'has-parent');
    if (record.phase === 'failed' && link.onChildFailure !== 'ignore') {
      throw new FlowRefusedError(link.queue, link.id, state, 'failed');
    }
    const waits = record.phase !== 'done' && record.phase !== 'failed';
    return {
      node,
      link: [link.queue, link.id],
      policy: link.onChildFailure,
      record,
      rev: item.modRevision,
      waits,
    };
  });
}

/** The flow's one change: its messages first (their reads tell a taken id), then the dependencies' links. */
function flowChange(
  root: string,
  messages: readonly FlowMessage[],
  deps: readonly Dependency[],
  on: ReadonlyMap<string, boolean>,
): Change {
  const now = Date.now();
  const children = messages.map((_, i): FlowLink[] => deps.filter((d) => d.node === i).map((d) => d.link));
  for (const m of messages) if (m.parent !== null) children[m.parent]?.push([m.queue, m.message.id]);
  const change = {
    compares: [] as Change['compares'][number][],
    ops: [] as Op[],
    reads: [] as Change['reads'][number][],
  };
  const counts: NonNullable<Change['counts']>[number][] = [];
  const notes = new Map<string, { keys: QueueKeys; ids: string[] }>();
  for (const [i, m] of messages.entries()) {
    const keys = new QueueKeys(root, m.queue);
    const left = m.children + deps.filter((d) => d.node === i && d.waits).length;
    const parent = m.parent === null ? undefined : messages[m.parent];
    const flow: FlowFields = {
      ...(parent === undefined ? {} : { parent: [parent.queue, parent.message.id] as const, owes: true as const }),
      ...(parent === undefined || m.onChildFailure === 'fail' ? {} : { policy: m.onChildFailure }),
      ...((children[i]?.length ?? 0) === 0 ? {} : { children: children[i] }),
      ...(left === 0 ? {} : { left }),
    };
    const record = newRecord(m, left > 0, flow, now);
    const id = m.message.id;
    const payload = asBuffer(m.message.payload);
    const recordKey = keys.record(id);
    change.compares.push({ key: recordKey, target: 'version', result: '=', operand: 0 });
    change.reads.push({ type: 'range', key: recordKey });
    change.ops.push(
      record.idx === null
        ? { type: 'put', key: keys.payload(id), value: payload }
        : { type: 'put', key: keys.ordered(record.idx, id), value: payload },
      { type: 'put', key: recordKey, value: encodeRecord(record) },
      ...indexOps(keys, id, null, record),
    );
    counts.push(...countChange(keys, null, record));
    const noted = notes.get(m.queue) ?? { keys, ids: [] };
    noted.ids.push(id);
    notes.set(m.queue, noted);
  }
  for (const d of deps) {
    const keys = new QueueKeys(root, d.link[0]);
    const parent = messages[d.node] as FlowMessage;
    const flow: FlowFields = {
      ...d.record.flow,
      parent: [parent.queue, parent.message.id],
      ...(d.waits ? { owes: true as const } : {}),
      ...(d.policy === 'fail' ? {} : { policy: d.policy }),
    };
    const next: MessageRecord = { ...d.record, flow };
    const key = keys.record(d.link[1]);
    change.compares.push({ key, target: 'mod', result: '=', operand: d.rev });
    change.ops.push({ type: 'put', key, value: encodeRecord(next) }, ...indexOps(keys, d.link[1], d.record, next));
  }
  for (const [queue, { keys, ids }] of notes) {
    change.ops.push(registerOp(keys));
    const enqueued = ids.map((id) => ({ type: 'enqueued' as const, id, attempt: 0 }));
    change.ops.push(...eventOps(keys, on.get(queue) === true, now, ...enqueued));
  }
  return { ...change, counts };
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
