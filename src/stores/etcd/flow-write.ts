/**
 * Writes a flow on etcd in one Txn, every message or none: each new message compared absent (`Version = 0`), each
 * `dependsOn` message compared at the mod revision read. A parent with children is written `waiting` (no ordered
 * key, so no dispatcher sees it; its payload at `/kvmq/payload/{id}`, its children and count in its record); a
 * leaf is written as an enqueue writes it, with its parent and its debt in its record (flow-ends.ts). A flow that
 * does not fit one Txn (etcd's --max-txn-ops, 128 by default) is written in stages (flow-staging.ts).
 */
import { FlowRefusedError, StoreUnavailableError } from '../../model/errors.js';
import { QueueKeys } from './keys.js';
import { encodeRecord, stateOf, type FlowFields, type FlowLink, type MessageRecord } from './record.js';
import { indexOps } from './transitions.js';
import { readRecord } from './inspect.js';
import { getMany, MAX_TXN_BYTES, MAX_TXN_OPS, runBatch, type Change } from './txn-batch.js';
import { countChange } from './counts.js';
import { flowRecords, queueOps } from './flow-records.js';
import { writeStaged } from './flow-staging.js';
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
    // Too big for one Txn: written in stages (flow-staging.ts).
    if (!fits(change)) return writeStaged(kv, root, messages, on);
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

/** Whether the flow's Txn is one etcd takes (with its count slots, one per queue). */
function fits(change: Change): boolean {
  const slots = new Set((change.counts ?? []).map((c) => c.keys.prefix)).size;
  let bytes = 0;
  for (const op of change.ops) bytes += op.key.length + 24 + (op.type === 'put' ? op.value.length : 0);
  return (
    change.ops.length + slots <= MAX_TXN_OPS && change.compares.length + slots <= MAX_TXN_OPS && bytes <= MAX_TXN_BYTES
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
  const change = {
    compares: [] as Change['compares'][number][],
    ops: [] as Op[],
    reads: [] as Change['reads'][number][],
  };
  const counts: NonNullable<Change['counts']>[number][] = [];
  for (const { keys, id, record, payload } of flowRecords(root, messages, deps, now)) {
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
  change.ops.push(...queueOps(root, messages, on, now));
  return { ...change, counts };
}
