/**
 * Writes a flow on etcd in one Txn, every message or none: each new message compared absent (`Version = 0`), each
 * `dependsOn` message compared at the mod revision read. A parent with children is written `waiting` (no ordered
 * key, so no dispatcher sees it; its payload at `/kvmq/payload/{id}`, its children and count in its record); a
 * leaf is written as an enqueue writes it, with its parent and its debt in its record (flow-ends.ts). A flow that
 * does not fit one Txn (etcd's --max-txn-ops, 128 by default) is written in stages (flow-staging.ts).
 */
import { FlowRefusedError, StoreUnavailableError } from '../../model/errors.js';
import { encodeRecord, stateOf } from './record.js';
import { indexOps } from './transitions.js';
import { readRecord } from './inspect.js';
import { fitsOneTxn, runBatch, type Change } from './txn-batch.js';
import { linkDependency, readDependencies, type Dependency } from './flow-dependencies.js';
import { countChange } from './counts.js';
import { flowRecords, queueOps } from './flow-records.js';
import { writeStaged } from './flow-staging.js';
import { sleep } from '../../model/time.js';
import type { Kv, Op } from './kv.js';
import type { FlowMessage } from '../contract/contract.js';

/** Tries when a dependency changed under the flow (its worker is at work on it). */
const TRIES = 50;

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
    if (!fitsOneTxn(change)) return writeStaged(kv, root, messages, on, deps);
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
    const link = linkDependency(root, messages, d);
    change.compares.push(link.compare);
    change.ops.push(...link.ops);
  }
  change.ops.push(...queueOps(root, messages, on, now));
  return { ...change, counts };
}
