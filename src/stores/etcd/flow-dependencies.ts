/**
 * A flow's `dependsOn` on etcd: the messages already enqueued that its nodes depend on, read for one try of the
 * Txn that links them (flow-write.ts, or the one that makes a staged flow visible, flow-staging.ts), and the
 * writes that link each: the dependency compared at the mod revision read, its record given the node as parent
 * (owed while it has not ended).
 */
import { FlowRefusedError } from '../../model/errors.js';
import { QueueKeys } from './keys.js';
import { encodeRecord, stateOf, type FlowFields, type FlowLink, type MessageRecord } from './record.js';
import { indexOps } from './transitions.js';
import { readRecord } from './inspect.js';
import { getMany } from './txn-batch.js';
import type { Compare, Kv, Op } from './kv.js';
import type { FlowMessage } from '../contract/contract.js';

/** A dependency as read: its node's index, its link, its record and whether it still owes a count. */
export interface Dependency {
  readonly node: number;
  readonly link: FlowLink;
  readonly policy: 'fail' | 'ignore' | 'remove';
  readonly record: MessageRecord;
  readonly rev: number;
  readonly waits: boolean;
}

/**
 * Reads every dependency of the flow's nodes. One missing, with a parent, or failed under a policy other than
 * `ignore` throws FlowRefusedError; one that ended otherwise (done, or failed under `ignore`) owes nothing.
 */
export async function readDependencies(kv: Kv, root: string, messages: readonly FlowMessage[]): Promise<Dependency[]> {
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

/** The compare and writes that make the dependency `d` a child of its node, as read. */
export function linkDependency(
  root: string,
  messages: readonly FlowMessage[],
  d: Dependency,
): { compare: Compare; ops: Op[] } {
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
  return {
    compare: { key, target: 'mod', result: '=', operand: d.rev },
    ops: [{ type: 'put', key, value: encodeRecord(next) }, ...indexOps(keys, d.link[1], d.record, next)],
  };
}
