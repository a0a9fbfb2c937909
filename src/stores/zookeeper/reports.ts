/**
 * Handlers' reports on ZooKeeper: a `report` node under the task, made on its first report, its data the latest
 * progress and the bounded log as JSON (store/report-codec.ts). Written in a multi that checks the task's state
 * version as the holder last saw it, so a holder that lost the message writes nothing; the message's removals
 * take the node with the task (removalOps).
 */
import { applyReport, decodeReport, encodeReport } from '../contract/report-codec.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import { heldFor } from './held.js';
import { taskNodes } from './layout.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { FinishResult, Report, StoredPage } from '../contract/contract.js';

const MAX_TRIES = 3;

export async function writeReports(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  reports: readonly Report[],
): Promise<FinishResult[]> {
  const config = await q.eventsConfig();
  return Promise.all(reports.map((report) => writeReport(ctx, q, consumer, report, config)));
}

async function writeReport(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  report: Report,
  config: Awaited<ReturnType<QueueContext['eventsConfig']>>,
): Promise<FinishResult> {
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const held = await heldFor(ctx, q, consumer, report.id, report.attempt, tries > 0);
    if (held === null) return 'lost';
    const path = taskNodes(held.taskPath).report;
    const [stored] = await ctx.zk.getMany([path]);
    const data = encodeReport(applyReport(decodeReport(stored?.data), report));
    const ops: ZkOp[] = [
      { op: 'check', path: `${held.taskPath}/state`, version: held.stateVersion },
      stored == null ? { op: 'create', path, data } : { op: 'set', path, data, version: stored.version },
    ];
    if (report.progress !== null) {
      const event = { type: 'progress' as const, id: report.id, attempt: report.attempt, at: Date.now() };
      ops.push(...q.events.ops(config, [{ ...event, error: report.progress }]));
    }
    try {
      await ctx.zk.multi(ops);
      return 'ok';
    } catch (error) {
      // The state moved (a renewal: read again), or the report node came or went meanwhile: try again.
      if (!isZkError(error, ZkCode.BadVersion) && !isZkError(error, ZkCode.NodeExists)) {
        if (isZkError(error, ZkCode.NoNode)) return 'lost';
        throw error;
      }
    }
  }
  return 'lost';
}

/** The removal of tasks' report nodes, for those that have one: to go first in the multi that removes the tasks. */
export async function reportRemovals(zk: ZkSession, taskPaths: readonly string[]): Promise<ZkOp[]> {
  const paths = taskPaths.map((taskPath) => taskNodes(taskPath).report);
  const found = await zk.getMany(paths);
  return paths.flatMap((path, i): ZkOp[] => (found[i] == null ? [] : [{ op: 'remove', path, version: -1 }]));
}

/** The progress of a page's messages that have one: id → JSON text (one read per message, sent together). */
export async function progressOf(zk: ZkSession, q: QueueContext, page: StoredPage): Promise<Map<string, string>> {
  const ids = page.messages.map((m) => m.status.id);
  const found = await zk.getMany(ids.map((id) => taskNodes(q.paths.task(id)).report));
  const progress = new Map<string, string>();
  ids.forEach((id, i) => {
    const value = decodeReport(found[i]?.data).progress;
    if (value !== null) progress.set(id, value);
  });
  return progress;
}
