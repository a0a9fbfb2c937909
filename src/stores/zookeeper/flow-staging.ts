/**
 * A flow too big for one multi is written in stages: its messages' task nodes (filters, metadata, payload) go
 * ahead in multis of their own, without their `state` node, and one last multi creates every state with the
 * index entries, counts and links (flow-write.ts). Every reader of a message starts from its `state`, so a task
 * without one is absent to all of them (status, listings, counts, claims, getFlow), and the last multi makes the
 * whole flow live at once.
 *
 * The staged nodes are tied to a record, `/<queue>/staging/<key>` under the flow's root queue: its children are
 * `writer`, an EPHEMERAL node of the writer's session, and `c<n>`, one per staged multi, naming that multi's
 * messages (written in that multi, so the record always names every staged node). Every staged multi checks
 * `writer`, and the last one removes the record, so a writer whose session ended writes nothing more, and GC
 * (sweepStagedFlows) removes the staged nodes of any record whose `writer` is gone: ZooKeeper's own session timeout
 * is the timeout, and no clock is compared.
 */
import { randomUUID } from 'node:crypto';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import { taskNodes } from './layout.js';
import { mapLimit, removeQuietly, subtree } from './tree.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

/** Staged tasks removed per multi (each a handful of removes); one at a time after a conflict. */
const TASKS_PER_REMOVAL = 50;

/** A (queue, id) a staged multi wrote. */
export type StagedLink = readonly [string, string];

export class StagedFlow {
  /** Chunk records written so far, and the tasks they name. */
  private readonly chunks: string[] = [];
  private readonly written: StagedLink[] = [];

  private constructor(
    private readonly ctx: StoreContext,
    /** The record, `/<queue>/staging/<key>`. */
    readonly record: string,
  ) {}

  /** Creates the record and its writer node, in one multi: no record is ever without its writer at first. */
  static async begin(ctx: StoreContext, root: QueueContext, nodes: number): Promise<StagedFlow> {
    const staging = stagingDir(root);
    await ctx.zk.create(staging).catch((error: unknown) => {
      if (!isZkError(error, ZkCode.NodeExists)) throw error;
    });
    const record = `${staging}/${randomUUID()}`;
    const data = Buffer.from(JSON.stringify({ startedAt: Date.now(), nodes }));
    await ctx.zk.multi([
      { op: 'create', path: record, data },
      { op: 'create', path: `${record}/writer`, data: Buffer.from(ctx.zk.sessionId), kind: 'ephemeral' },
    ]);
    return new StagedFlow(ctx, record);
  }

  /** The `writer` node: every staged multi checks it, so a writer whose session ended writes nothing more. */
  get writer(): string {
    return `${this.record}/writer`;
  }

  /** Ops that open a staged multi writing `links`' tasks: the writer's check and the chunk's record. */
  chunkOps(links: readonly StagedLink[]): ZkOp[] {
    const path = `${this.record}/c${String(this.chunks.length).padStart(5, '0')}`;
    return [
      { op: 'check', path: this.writer, version: 0 },
      { op: 'create', path, data: Buffer.from(JSON.stringify(links)) },
    ];
  }

  /** A staged multi committed. */
  noteChunk(ops: readonly ZkOp[], links: readonly StagedLink[]): void {
    const record = ops[1];
    if (record !== undefined) this.chunks.push(record.path);
    this.written.push(...links);
  }

  /** Ops that end the staging in the last multi: the record goes, so GC never touches what it made live. */
  finishOps(): ZkOp[] {
    return [
      ...this.chunks.map((path): ZkOp => ({ op: 'remove', path, version: -1 })),
      // A writer node gone (the session ended, GC may be at the staged nodes) fails the last multi.
      { op: 'remove', path: this.writer, version: 0 },
      { op: 'remove', path: this.record, version: -1 },
    ];
  }

  /** Removes what was staged, the writer node first so that GC takes over if this stops half way. */
  async abort(): Promise<void> {
    await removeQuietly(this.ctx.zk, this.writer);
    await removeStagedTasks(this.ctx, this.written);
    await removeQuietly(this.ctx.zk, this.record);
  }
}

function stagingDir(q: QueueContext): string {
  return `${q.paths.dir}/staging`;
}

/**
 * GC's part: the staged nodes of every record of queue `q` whose writer's session is gone, then the record. A
 * live writer's record is left alone, however old.
 */
export async function sweepStagedFlows(ctx: StoreContext, q: QueueContext): Promise<number> {
  const zk = ctx.zk;
  let keys: string[];
  try {
    keys = (await zk.children(stagingDir(q))).children;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return 0;
    throw error;
  }
  const records = keys.map((key) => `${stagingDir(q)}/${key}`);
  const writers = await zk.getMany(records.map((record) => `${record}/writer`));
  let swept = 0;
  for (const [k, record] of records.entries()) {
    if (writers[k] != null) continue;
    const links = await recordLinks(zk, record);
    if (links === null) continue;
    await removeStagedTasks(ctx, links);
    await removeQuietly(zk, record);
    swept += 1;
  }
  return swept;
}

/** The tasks a record's chunks name, or null when the record went meanwhile. */
async function recordLinks(zk: ZkSession, record: string): Promise<StagedLink[] | null> {
  let chunks: string[];
  try {
    chunks = (await zk.children(record)).children.filter((name) => name.startsWith('c'));
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return null;
    throw error;
  }
  const reads = await zk.getMany(chunks.map((chunk) => `${record}/${chunk}`));
  return reads.flatMap((read) => (read == null ? [] : (JSON.parse(read.data.toString('utf8')) as StagedLink[])));
}

/**
 * Removes staged tasks, each only while it has no `state`: a create and a remove of `state` open its ops, so a
 * task made live (or an id taken again by a new message) fails the multi instead of being removed.
 */
async function removeStagedTasks(ctx: StoreContext, links: readonly StagedLink[]): Promise<void> {
  const tasks = links.map(([queue, id]) => ctx.queue(queue).paths.task(id));
  const plans = await mapLimit(tasks, 32, async (task) => {
    const nodes = await subtree(ctx.zk, task, false);
    const state = taskNodes(task).state;
    return nodes.length === 0 || nodes.includes(state) ? [] : removalOps(state, nodes);
  });
  for (let i = 0; i < plans.length; i += TASKS_PER_REMOVAL) {
    const batch = plans.slice(i, i + TASKS_PER_REMOVAL).filter((ops) => ops.length > 0);
    if (batch.length === 0) continue;
    try {
      await ctx.zk.multi(batch.flat());
    } catch (error) {
      if (!isZkError(error) || error.opIndex < 0) throw error;
      for (const ops of batch) await ctx.zk.multi(ops).catch(ignoreZkReply);
    }
  }
}

/** A staged task's removal, guarded by its `state` being absent. */
function removalOps(state: string, nodes: readonly string[]): ZkOp[] {
  return [
    { op: 'create', path: state },
    { op: 'remove', path: state, version: -1 },
    ...nodes.map((path): ZkOp => ({ op: 'remove', path, version: -1 })),
  ];
}

/** A task removed or made live since it was read: left as it is. */
function ignoreZkReply(error: unknown): void {
  if (!isZkError(error) || error.opIndex < 0) throw error;
}
