/**
 * A flow too big for one etcd Txn, written in stages (docs/etcd.md, Flows). Its writer puts a staging key on its
 * session lease (`/kvmq/staging/{flow}` in the root's queue), then every message as a `staged` record (each
 * compared absent, the staging key compared present), its payload kept and a `/kvmq/staged/{flow}/{id}` entry, in
 * as many Txns as it takes: nothing reads a staged record as a message. One Txn then makes the flow live: the
 * staging key still there, it puts `/kvmq/flows/{flow}` (the messages in the flow's order) and deletes the staging
 * key; a flow with `dependsOn` also links its dependencies there, and moves in the nodes that take them and the
 * nodes above those, so that a dependency's end always finds its parent waiting. The writer then moves the rest in,
 * parents first, each Txn comparing the records it changes, and deletes the live key; a writer that dies after
 * making the flow live leaves that to GC, which moves in live flows older than a few seconds; one that dies before
 * leaves staged records whose staging key went with its lease, which GC deletes.
 */
import { randomBytes } from 'node:crypto';
import { FlowRefusedError, StoreLimitError, StoreUnavailableError } from '../../model/errors.js';
import { sleep } from '../../model/time.js';
import { newIdx, QueueKeys } from './keys.js';
import { encodeRecord, stateOf, type FlowLink, type MessageRecord } from './record.js';
import { indexOps } from './transitions.js';
import { readRecord } from './inspect.js';
import { fitsOneTxn, getMany, pack, runBatch, type Change } from './txn-batch.js';
import { countChange, type CountDelta } from './counts.js';
import { childrenLeft, flowRecords, queueOps, type FlowRecord } from './flow-records.js';
import { linkDependency, readDependencies, type Dependency } from './flow-dependencies.js';
import { prefixEnd, type Compare, type Kv, type Op } from './kv.js';
import type { FlowMessage } from '../contract/contract.js';

/** A live flow left this long by its writer is moved in by GC. */
const ADOPT_AFTER_MS = 5_000;
/** Tries of a batch of moves whose records changed under it. */
const MOVE_TRIES = 20;
/** Tries of the Txn that makes a flow visible when a dependency changed under it (its worker is at work on it). */
const LINK_TRIES = 50;

/** A live flow's key value: when it was made live, and its messages in the flow's order. */
interface LiveFlow {
  readonly at: number;
  readonly nodes: readonly FlowLink[];
}

/** Writes the flow in stages; `on` says which queues have events on, `deps` its `dependsOn` as read. */
export async function writeStaged(
  kv: Kv,
  root: string,
  messages: readonly FlowMessage[],
  on: ReadonlyMap<string, boolean>,
  deps: readonly Dependency[],
): Promise<void> {
  const now = Date.now();
  const records = flowRecords(root, messages, deps, now);
  const rootKeys = (records[0] as FlowRecord).keys;
  const flow = randomBytes(8).toString('hex');
  const staging = rootKeys.stagings + flow;
  const nodes = value(records);
  const payloads = new Map(records.map((r) => [`${r.keys.queue}\n${r.id}`, r.payload]));
  const linked = linkedNodes(messages, deps);
  const plan: LiveFlowPlan = { root, rootKeys, flow, messages, on, nodes, payloads, linked };
  // Nothing is staged before the Txn that makes the flow visible is known to fit.
  const planned = linked.map((node) => stagedRecord(records[node] as FlowRecord, [rootKeys.queue, flow]));
  if (!fitsOneTxn(liveChange(plan, planned, deps))) {
    throw new StoreLimitError(
      `a flow of ${messages.length} messages does not fit one etcd Txn, and its ${deps.length} dependsOn, with ` +
        'the messages above them, do not fit the one Txn that makes it visible; nothing was written: write the ' +
        'dependencies in a flow of their own size',
    );
  }
  const lease = await kv.session.leaseId();
  await kv.txn({
    compare: [{ key: staging, target: 'version', result: '=', operand: 0 }],
    success: [{ type: 'put', key: staging, value: Buffer.from(String(messages.length)), lease }],
  });
  const alive: Change = {
    compares: [{ key: staging, target: 'version', result: '>', operand: 0 }],
    ops: [],
    reads: [],
  };
  try {
    const changes = records.map((r) => stagedChange(r, [rootKeys.queue, flow]));
    for (const batch of pack(changes, alive)) {
      const { results } = await runBatch(kv, batch, alive);
      if (results[0]?.ok !== false) continue;
      batch.forEach((change, k) => {
        const item = results[k]?.ok === false ? results[k].reads[0]?.kvs[0] : undefined;
        if (item === undefined) return;
        const taken = readRecord(item);
        const state = taken.phase === 'staged' ? 'staged' : stateOf(taken, Date.now());
        throw new FlowRefusedError(change.queue, change.id, state);
      });
      throw stagingEnded();
    }
    await makeLive(kv, plan, deps);
  } catch (error) {
    await removeStaged(kv, root, flow, nodes).catch(() => undefined);
    await kv.txn({ compare: [], success: [{ type: 'delete', key: staging }] }).catch(() => undefined);
    throw error;
  }
  await moveIn(kv, root, rootKeys, flow, nodes, payloads);
}

function stagingEnded(): StoreUnavailableError {
  return new StoreUnavailableError('flow: its staging ended (its session was lost) before it was visible; try again');
}

/**
 * Makes the staged flow visible in one Txn, linking its dependencies there: a dependency that ends from then on
 * finds its node already waiting. A dependency that changed since it was read fails the Txn, and it is read and
 * tried again.
 */
async function makeLive(kv: Kv, plan: LiveFlowPlan, deps: readonly Dependency[]): Promise<void> {
  const { root, flow, nodes, linked, messages } = plan;
  let current = deps;
  for (let tries = 1; ; tries++) {
    const staged =
      linked.length === 0
        ? []
        : await readStaged(
            kv,
            root,
            flow,
            linked.map((n) => nodes[n] as FlowLink),
          );
    if (staged.length < linked.length) throw stagingEnded();
    const { results } = await runBatch(kv, [liveChange(plan, staged, current)]);
    const result = results[0];
    if (result?.ok !== false) return;
    if ((result.reads[0]?.count ?? 0) === 0) throw stagingEnded();
    if (tries >= LINK_TRIES) {
      throw new StoreUnavailableError('flow: its dependencies kept changing while it was made visible; try again');
    }
    await sleep(Math.random() * 10);
    current = await readDependencies(kv, root, messages);
  }
}

/** The nodes that take a dependency, and every node above them, in the flow's order (parents first). */
function linkedNodes(messages: readonly FlowMessage[], deps: readonly Dependency[]): number[] {
  const nodes = new Set<number>();
  for (const d of deps) {
    for (let node: number | null = d.node; node !== null && !nodes.has(node); node = messages[node]?.parent ?? null) {
      nodes.add(node);
    }
  }
  return [...nodes].sort((a, b) => a - b);
}

/** What the Txn that makes a staged flow visible needs of it. */
interface LiveFlowPlan {
  readonly root: string;
  readonly rootKeys: QueueKeys;
  readonly flow: string;
  readonly messages: readonly FlowMessage[];
  readonly on: ReadonlyMap<string, boolean>;
  readonly nodes: readonly FlowLink[];
  readonly payloads: ReadonlyMap<string, Buffer>;
  /** The nodes moved in by that Txn (linkedNodes). */
  readonly linked: readonly number[];
}

/**
 * The Txn that makes the flow visible: its staging key still held, the live key put and the staging key deleted,
 * each queue registered (with its events); with dependencies, each linked node and the nodes above it moved in
 * there (their counts of children left as the dependencies are now), each dependency linked at the revision read.
 * Its one read tells, when it fails, whether the staging key is still held.
 */
function liveChange(plan: LiveFlowPlan, staged: readonly StagedMessage[], deps: readonly Dependency[]): Change {
  const { root, rootKeys, flow, messages, on, nodes, payloads, linked } = plan;
  const staging = rootKeys.stagings + flow;
  const value: LiveFlow = { at: Date.now(), nodes };
  const compares: Compare[] = [{ key: staging, target: 'version', result: '>', operand: 0 }];
  const ops: Op[] = [
    { type: 'put', key: rootKeys.liveFlows + flow, value: Buffer.from(JSON.stringify(value)) },
    { type: 'delete', key: staging },
    ...queueOps(root, messages, on, Date.now()),
  ];
  const counts: CountDelta[] = [];
  staged.forEach((f, k) => {
    const left = childrenLeft(messages, deps, linked[k] as number);
    const links = { ...f.record.flow };
    delete links.left;
    const record: MessageRecord = { ...f.record, flow: left === 0 ? links : { ...links, left } };
    const moved = movedChange({ ...f, record }, payloads.get(`${f.keys.queue}\n${f.id}`) ?? Buffer.alloc(0));
    compares.push(...moved.compares);
    ops.push(...moved.ops);
    counts.push(...(moved.counts ?? []));
  });
  for (const d of deps) {
    const link = linkDependency(root, messages, d);
    compares.push(link.compare);
    ops.push(...link.ops);
  }
  return { compares, ops, reads: [{ type: 'range', key: staging, countOnly: true }], counts };
}

function value(records: readonly FlowRecord[]): FlowLink[] {
  return records.map((r) => [r.keys.queue, r.id]);
}

/** A message as it is staged: its record in phase `staged`, its flow's root queue and id kept in it. */
function stagedRecord(r: FlowRecord, staged: FlowLink): StagedMessage {
  const record: MessageRecord = { ...r.record, phase: 'staged', idx: null, flow: { ...r.record.flow, staged } };
  return { keys: r.keys, id: r.id, record, rev: 0 };
}

/** One message staged: its record (compared absent), its payload and its staged entry. */
function stagedChange(r: FlowRecord, staged: FlowLink): Change & { queue: string; id: string } {
  const { record } = stagedRecord(r, staged);
  const key = r.keys.record(r.id);
  return {
    queue: r.keys.queue,
    id: r.id,
    compares: [{ key, target: 'version', result: '=', operand: 0 }],
    ops: [
      { type: 'put', key, value: encodeRecord(record) },
      { type: 'put', key: r.keys.payload(r.id), value: r.payload },
      ...indexOps(r.keys, r.id, null, record),
    ],
    reads: [{ type: 'range', key }],
  };
}

/** A staged message as read, with its mod revision. */
interface StagedMessage {
  readonly keys: QueueKeys;
  readonly id: string;
  readonly record: MessageRecord;
  readonly rev: number;
}

/** The staged records of `flow` among `nodes`, as read now, in their order. */
async function readStaged(kv: Kv, root: string, flow: string, nodes: readonly FlowLink[]): Promise<StagedMessage[]> {
  const keys = nodes.map(([queue]) => new QueueKeys(root, queue));
  const items = await getMany(
    kv,
    nodes.map(([, id], k) => (keys[k] as QueueKeys).record(id)),
  );
  return nodes.flatMap(([, id], k) => {
    const item = items[k];
    if (item == null) return [];
    const record = readRecord(item);
    if (record.phase !== 'staged' || record.flow?.staged?.[1] !== flow) return [];
    return [{ keys: keys[k] as QueueKeys, id, record, rev: item.modRevision }];
  });
}

/** Deletes what `flow` staged among `nodes` (a flow refused, or whose writer died before it was live). */
async function removeStaged(kv: Kv, root: string, flow: string, nodes: readonly FlowLink[]): Promise<void> {
  const found = await readStaged(kv, root, flow, nodes);
  const changes = found.map(({ keys, id, record, rev }): Change => ({
    compares: [{ key: keys.record(id), target: 'mod', result: '=', operand: rev }],
    ops: [
      { type: 'delete', key: keys.record(id) },
      { type: 'delete', key: keys.payload(id) },
      ...indexOps(keys, id, record, null),
    ],
    reads: [],
  }));
  for (const batch of pack(changes)) await runBatch(kv, batch);
}

/**
 * Moves a live flow's staged messages in, in its order (parents first, so a child that runs and ends finds its
 * parent waiting), each Txn comparing its records; then deletes the live key. Messages already moved are skipped,
 * so a writer and GC may both do it. `payloads`: the writer's own; else read from their kept keys.
 */
async function moveIn(
  kv: Kv,
  root: string,
  rootKeys: QueueKeys,
  flow: string,
  nodes: readonly FlowLink[],
  payloads: ReadonlyMap<string, Buffer> | null,
): Promise<void> {
  let todo = nodes;
  for (let tries = 0; todo.length > 0 && tries < MOVE_TRIES; tries++) {
    const found = await readStaged(kv, root, flow, todo);
    const kept =
      payloads ??
      new Map(
        (
          await getMany(
            kv,
            found.map((f) => f.keys.payload(f.id)),
          )
        ).map((item, k) => [`${found[k]?.keys.queue ?? ''}\n${found[k]?.id ?? ''}`, item?.value ?? Buffer.alloc(0)]),
      );
    const changes = found.map((f) => movedChange(f, kept.get(`${f.keys.queue}\n${f.id}`) ?? Buffer.alloc(0)));
    const batches = pack(changes);
    todo = [];
    // One batch at a time: a later batch's children go only after their parents; a failed one is read again.
    for (const [b, batch] of batches.entries()) {
      const { results } = await runBatch(kv, batch);
      if (results[0]?.ok !== false) continue;
      todo = batches.slice(b).flatMap((rest) => rest.map((c) => c.link));
      break;
    }
  }
  await kv.txn({ compare: [], success: [{ type: 'delete', key: rootKeys.liveFlows + flow }] });
}

/** A staged message moved in: waiting (a parent) or pending with its ordered key, counted from now. */
function movedChange(f: StagedMessage, payload: Buffer): Change & { link: FlowLink } {
  const { keys, id, record } = f;
  const links = { ...record.flow };
  delete links.staged;
  const waits = (links.left ?? 0) > 0;
  const next: MessageRecord = waits
    ? { ...record, phase: 'waiting', flow: links }
    : { ...record, phase: 'pending', idx: newIdx(record.priority), flow: links };
  const compares: Compare[] = [{ key: keys.record(id), target: 'mod', result: '=', operand: f.rev }];
  const ops: Op[] = [{ type: 'put', key: keys.record(id), value: encodeRecord(next) }];
  if (next.idx !== null) {
    ops.push({ type: 'put', key: keys.ordered(next.idx, id), value: payload });
    ops.push({ type: 'delete', key: keys.payload(id) });
  }
  ops.push(...indexOps(keys, id, record, next));
  return { link: [keys.queue, id], compares, ops, reads: [], counts: countChange(keys, record, next) };
}

/**
 * GC's part (under the queue's GC lock): live flows rooted in this queue that their writer left for a few seconds
 * are moved in; staged messages of a flow neither staging nor live (its writer died while staging) are deleted.
 */
export async function tidyStagedFlows(kv: Kv, keys: QueueKeys): Promise<void> {
  const live = await kv.range({ key: keys.liveFlows, end: prefixEnd(keys.liveFlows) });
  for (const item of live.kvs) {
    const flow = JSON.parse(item.value.toString('utf8')) as LiveFlow;
    if (flow.at > Date.now() - ADOPT_AFTER_MS) continue;
    await moveIn(kv, keys.root, keys, item.key.slice(keys.liveFlows.length), flow.nodes, null);
  }
  const staged = await kv.range({ key: keys.stagedIndex, end: prefixEnd(keys.stagedIndex) });
  const byFlow = new Map<string, { root: string; ids: string[] }>();
  for (const item of staged.kvs) {
    const [flow, id] = item.key.slice(keys.stagedIndex.length).split('/') as [string, string];
    const entry = byFlow.get(flow) ?? { root: item.value.toString('utf8'), ids: [] };
    entry.ids.push(id);
    byFlow.set(flow, entry);
  }
  for (const [flow, { root, ids }] of byFlow) {
    const rootKeys = new QueueKeys(keys.root, root);
    const res = await kv.txn({
      compare: [],
      success: [
        { type: 'range', key: rootKeys.stagings + flow, countOnly: true },
        { type: 'range', key: rootKeys.liveFlows + flow, countOnly: true },
      ],
    });
    const held = res.responses.some((r) => r.type === 'range' && r.count > 0);
    if (!held) {
      await removeStaged(
        kv,
        keys.root,
        flow,
        ids.map((id) => [keys.queue, id]),
      );
    }
  }
}
