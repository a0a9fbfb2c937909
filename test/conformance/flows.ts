/**
 * Flows (client.flow): a tree written at once, each parent `waiting-children` until its children have ended,
 * then run once with its children's outcomes (job.children()); a child's final failure applies its
 * onChildFailure. Stores without flows refuse them, writing nothing.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { quietPeriod, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';
import { FlowRefusedError } from '../../src/model/errors.js';
import type { FlowNode, FlowTree, Handler, MessageStatus } from '../../src/index.js';

/** A node's (queue, id, state), its children's after it, depth first. */
export function shape(node: FlowNode): string[] {
  return [`${node.queue}/${node.id}:${node.state}`, ...node.children.flatMap(shape)];
}

/**
 * A worker that records each run of the parent `p` and what job.children() said then; `other` handles the rest
 * (default: success with the result `r<payload>`).
 */
function parentWorker(
  h: Harness,
  queue: string,
  other: Handler = (job) => ({ status: 'success', result: `r${String(job.payload)}` }),
): { log: JobLog; children: MessageStatus[][] } {
  const log = new JobLog();
  const children: MessageStatus[][] = [];
  h.worker(queue, async (job) => {
    if (job.id !== 'p') return other(job);
    log.record(job);
    children.push(await job.children());
  });
  return { log, children };
}

export function flows(fixture: StoreFixture): void {
  void describe('flows', () => {
    storeTest(fixture, 'a store without flows refuses client.flow and getFlow, writing nothing', async (h) => {
      const q = h.queue('flow-refused');
      if (storeOf(h.client).capabilities.flows) return;
      await assert.rejects(
        h.client.flow({ queue: q, payload: 'p', id: 'p', children: [{ queue: q, payload: 'c', id: 'c' }] }),
        (error: unknown) => error instanceof TypeError && /flows are not available/.test(error.message),
      );
      await assert.rejects(h.client.getFlow(q, 'p'), /flows are not available/);
      assert.equal(await h.client.status(q, 'p'), null);
      assert.equal(await h.client.status(q, 'c'), null);
      // Listing every state (waiting-children among them) works there, and asking for it alone lists nothing.
      assert.deepEqual((await h.client.list(q, { state: 'waiting-children' })).messages, []);
      assert.equal((await h.client.queueStatus(q)).counts['waiting-children'], 0);
    });

    storeTest(
      fixture,
      "a child's success on a queue that keeps none (keepDone 0) stays for its parent to read",
      async (h) => {
        const q = h.queue('flow-keep');
        const other = h.queue('flow-keep-none');
        await h.client.configure(other, { keepDone: 0, gcIntervalMs: 3_600_000 });
        // A GC now: the worker's own first one, due at once otherwise, would remove the children it finds done.
        await h.client.gc(other);
        await h.client.flow({
          queue: q,
          payload: 'parent',
          id: 'p',
          children: [
            { queue: other, payload: 1, id: 'c1' },
            { queue: other, payload: 2, id: 'c2' },
          ],
        });
        const { children } = parentWorker(h, q);
        h.worker(other, () => undefined);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        assert.deepEqual(
          children[0]?.map((c) => [c.id, c.outcome]),
          [
            ['c1', 'success'],
            ['c2', 'success'],
          ],
        );
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a parent waits for its children, in its queue and another, then runs once with their results',
      async (h) => {
        const q = h.queue('flow');
        const other = h.queue('flow-other');
        const ids = await h.client.flow({
          queue: q,
          payload: 'parent',
          id: 'p',
          children: [
            { queue: q, payload: 1, id: 'c1' },
            { queue: other, payload: 2, id: 'c2' },
          ],
        });
        assert.deepEqual(ids, {
          queue: q,
          id: 'p',
          children: [
            { queue: q, id: 'c1', children: [] },
            { queue: other, id: 'c2', children: [] },
          ],
        });
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        assert.equal((await h.client.queueStatus(q)).counts['waiting-children'], 1);
        assert.equal((await h.client.queueStatus(q)).counts.queued, 1);
        const waiting = await h.client.list(q, { state: 'waiting-children' });
        assert.deepEqual(
          waiting.messages.map((m) => m.id),
          ['p'],
        );
        const tree = await h.client.getFlow(other, 'c2');
        assert.ok(tree !== null);
        assert.deepEqual(shape(tree), [`${q}/p:waiting-children`, `${q}/c1:queued`, `${other}/c2:queued`]);

        const { log, children } = parentWorker(h, q);
        // One child done, the other's queue without a worker: the parent still waits.
        await waitForStatus(h.client, q, 'c1', 'done-awaiting-gc');
        await quietPeriod(300);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        h.worker(other, (job) => ({ status: 'success', result: `r${String(job.payload)}` }));
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
        const [seen] = children;
        assert.ok(seen !== undefined);
        assert.deepEqual(
          seen.map((c) => [c.queue, c.id, c.state, c.outcome, c.result]),
          [
            [q, 'c1', 'done-awaiting-gc', 'success', 'r1'],
            [other, 'c2', 'done-awaiting-gc', 'success', 'r2'],
          ],
        );
        assert.equal((await h.client.queueStatus(q)).counts['waiting-children'], 0);
        const after = await h.client.getFlow(q, 'p');
        assert.ok(after !== null);
        assert.deepEqual(shape(after), [
          `${q}/p:done-awaiting-gc`,
          `${q}/c1:done-awaiting-gc`,
          `${other}/c2:done-awaiting-gc`,
        ]);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a child retried and then successful counts once',
      async (h) => {
        const q = h.queue('flow-retry');
        const cq = h.queue('flow-retry-children');
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [
            { queue: cq, payload: 'a', id: 'a', attempts: 3, backoff: 0 },
            { queue: cq, payload: 'b', id: 'b' },
          ],
        });
        const { log, children } = parentWorker(h, q);
        h.worker(cq, (job) => {
          if (job.id === 'a' && job.attempt < 3) throw new Error(`try ${job.attempt}`);
        });
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
        assert.deepEqual(
          children[0]?.map((c) => [c.id, c.state, c.attempt]),
          [
            ['a', 'done-awaiting-gc', 3],
            ['b', 'done-awaiting-gc', 1],
          ],
        );
      },
      { capability: 'flows' },
    );

    /** A parent with a child that fails for good and one whose queue has no worker, under `policy`. */
    async function failingChild(
      h: Harness,
      policy: 'fail' | 'ignore' | 'remove',
    ): Promise<{ q: string; idle: string; parent: ReturnType<typeof parentWorker> }> {
      const q = h.queue(`flow-${policy}`);
      const idle = h.queue(`flow-${policy}-idle`);
      await h.client.flow({
        queue: q,
        payload: 'p',
        id: 'p',
        children: [
          { queue: q, payload: 'bad', id: 'bad', attempts: 1, onChildFailure: policy },
          { queue: idle, payload: 'later', id: 'later' },
        ],
      });
      const parent = parentWorker(h, q, () => ({ status: 'error', error: 'broken' }));
      await waitForStatus(h.client, q, 'bad', 'failed');
      return { q, idle, parent };
    }

    storeTest(
      fixture,
      "onChildFailure 'fail' (the default) fails the parent, naming the child; the others go on",
      async (h) => {
        const { q, idle } = await failingChild(h, 'fail');
        const parent = await waitForStatus(h.client, q, 'p', 'failed');
        assert.equal(parent.lastError, `child ${q}/bad failed: broken`);
        assert.equal(parent.attempt, 0);
        assert.equal((await h.client.status(idle, 'later'))?.state, 'queued');
        const counts = (await h.client.queueStatus(q)).counts;
        assert.equal(counts['waiting-children'], 0);
        assert.equal(counts.failed, 2);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      "onChildFailure 'ignore' runs the parent once the rest have ended",
      async (h) => {
        const { q, idle, parent } = await failingChild(h, 'ignore');
        const { log, children } = parent;
        await quietPeriod(300);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        h.worker(idle, () => undefined);
        await waitFor(() => log.seen.length > 0, { what: 'the parent to run' });
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        assert.deepEqual(
          children[0]?.map((c) => [c.id, c.state, c.lastError]),
          [
            ['bad', 'failed', 'broken'],
            ['later', 'done-awaiting-gc', null],
          ],
        );
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      "onChildFailure 'remove' removes the parent's waiting children and fails it",
      async (h) => {
        const { q, idle } = await failingChild(h, 'remove');
        const parent = await waitForStatus(h.client, q, 'p', 'failed');
        assert.equal(parent.lastError, `child ${q}/bad failed: broken`);
        assert.equal(await h.client.status(idle, 'later'), null);
        assert.equal((await h.client.queueStatus(idle)).total, 0);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      "a child's final failure tells of its parent's failure and of the children it removed, in their queues",
      async (h) => {
        const q = h.queue('flow-events');
        const idle = h.queue('flow-events-idle');
        await h.client.configure(q, { events: true });
        await h.client.configure(idle, { events: true });
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [
            { queue: q, payload: 'bad', id: 'bad', attempts: 1, onChildFailure: 'remove' },
            { queue: idle, payload: 'later', id: 'later' },
          ],
        });
        h.worker(q, () => ({ status: 'error', error: 'broken' }));
        await waitForStatus(h.client, q, 'p', 'failed');
        // Both in the Txn of the child's end: in either order.
        const failed = (await h.client.readEvents(q)).events.filter((e) => e.type === 'failed');
        assert.deepEqual(failed.map((e) => [e.id, e.attempt, 'error' in e ? e.error : undefined]).sort(), [
          ['bad', 1, 'broken'],
          ['p', 0, `child ${q}/bad failed: broken`],
        ]);
        assert.deepEqual(
          (await h.client.readEvents(idle)).events.map((e) => [e.type, e.id]),
          [
            ['enqueued', 'later'],
            ['removed', 'later'],
          ],
        );
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a child reclaimed after its lock ran out counts once: the late finish is lost',
      async (h) => {
        const q = h.queue('flow-lost');
        const cq = h.queue('flow-lost-children');
        const idle = h.queue('flow-lost-idle');
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [
            { queue: cq, payload: 'a', id: 'a' },
            { queue: idle, payload: 'b', id: 'b' },
          ],
        });
        const store = storeOf(h.client);
        const ghost = await store.claim(cq, {
          consumerId: 'ghost',
          max: 1,
          lockMs: 300,
          accepts: null,
          eoqBackoffMs: () => 50,
        });
        assert.deepEqual(
          ghost.messages.map((m) => m.id),
          ['a'],
        );
        const log = new JobLog();
        h.worker(cq, (job) => log.record(job));
        await log.handled('a', 2, { timeoutMs: 10_000 });
        await waitForStatus(h.client, cq, 'a', 'done-awaiting-gc');
        const late = await store.finish(cq, 'ghost', [
          { id: 'a', attempt: 1, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() },
        ]);
        assert.deepEqual(late, ['lost']);
        // Counted once: b still holds the parent back.
        await quietPeriod(300);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        const { log: parents } = parentWorker(h, q);
        h.worker(idle, () => undefined);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(parents.ids(), ['p']);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      "a worker killed (SIGKILL) right after its child's finish: the parent runs exactly once",
      async (h) => {
        const q = h.queue('flow-killed');
        const cq = h.queue('flow-killed-children');
        await h.client.flow({ queue: q, payload: 'p', id: 'p', children: [{ queue: cq, payload: 'c', id: 'c' }] });
        const child = h.spawn('flow-child-process.ts', [h.url, cq]);
        await child.line(/^ready$/);
        assert.equal((await child.exited).signal, 'SIGKILL');
        const done = await waitForStatus(h.client, cq, 'c', 'done-awaiting-gc');
        assert.equal(done.result, 'from the killed worker');
        assert.equal((await h.client.status(q, 'p'))?.state, 'queued');
        const { log, children } = parentWorker(h, q);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(300);
        assert.deepEqual(log.ids(), ['p']);
        assert.equal(children[0]?.[0]?.result, 'from the killed worker');
      },
      { capability: 'flows', timeoutMs: 60_000 },
    );

    storeTest(
      fixture,
      'children finished by concurrent workers and clients count once each: the parent runs once, after the last',
      async (h) => {
        const q = h.queue('flow-many');
        const cq = h.queue('flow-many-children');
        const n = 200;
        const kids = Array.from({ length: n }, (_, i): FlowTree => ({ queue: cq, payload: i, id: `c${i}` }));
        await h.client.flow({ queue: q, payload: 'p', id: 'p', children: kids });
        const { log, children } = parentWorker(h, q);
        const other = await h.connect();
        for (const on of [h.client, h.client, other]) h.worker(cq, () => undefined, { concurrency: 16 }, on);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc', { timeoutMs: 30_000 });
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
        const [seen] = children;
        assert.ok(seen !== undefined);
        assert.equal(seen.length, n);
        assert.deepEqual(
          seen.filter((c) => c.state !== 'done-awaiting-gc'),
          [],
        );
      },
      { capability: 'flows', timeoutMs: 60_000 },
    );

    // 1,000 nodes (110 leaves under each of 9 parents), or as many as the store's one atomic write holds.
    const perParent = Math.floor((fixture.flowNodes ?? 1000) / 9) - 1;
    storeTest(
      fixture,
      `a ${10 + 9 * perParent}-node tree is written at once, and one with an existing id writes nothing`,
      async (h) => {
        const q = h.queue('flow-big');
        const leaves = h.queue('flow-big-leaves');
        const last = perParent - 1;
        const tree = (prefix: string, clash?: string): FlowTree => ({
          queue: q,
          payload: 'root',
          id: `${prefix}root`,
          children: Array.from({ length: 9 }, (_, i) => ({
            queue: q,
            payload: i,
            id: `${prefix}mid-${i}`,
            children: Array.from({ length: perParent }, (__, j) => ({
              queue: leaves,
              payload: j,
              id: clash !== undefined && i === 8 && j === last ? clash : `${prefix}leaf-${i}-${j}`,
            })),
          })),
        });
        const ids = await h.client.flow(tree('a-'));
        assert.equal(ids.children.length, 9);
        assert.equal(ids.children[8]?.children[last]?.id, `a-leaf-8-${last}`);
        const counts = async (): Promise<[number, number]> => [
          (await h.client.queueStatus(q)).counts['waiting-children'],
          (await h.client.queueStatus(leaves)).counts.queued,
        ];
        assert.deepEqual(await counts(), [10, 9 * perParent]);
        const flow = await h.client.getFlow(leaves, 'a-leaf-3-7');
        assert.ok(flow !== null);
        assert.equal(shape(flow).length, 10 + 9 * perParent);

        await assert.rejects(h.client.flow(tree('b-', 'a-leaf-0-0')), (error: unknown) => {
          assert.ok(error instanceof FlowRefusedError);
          assert.equal(error.queue, leaves);
          assert.equal(error.id, 'a-leaf-0-0');
          assert.equal(error.state, 'queued');
          return true;
        });
        assert.deepEqual(await counts(), [10, 9 * perParent]);
        assert.equal(await h.client.status(q, 'b-root'), null);
        assert.equal(await h.client.status(leaves, 'b-leaf-0-0'), null);
      },
      { capability: 'flows', timeoutMs: 60_000 },
    );

    storeTest(
      fixture,
      'a redriven child (retryFailed) whose parent still waits owes it one count again, never two',
      async (h) => {
        const q = h.queue('flow-redrive');
        const cq = h.queue('flow-redrive-children');
        const idle = h.queue('flow-redrive-idle');
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [
            { queue: cq, payload: 'bad', id: 'bad', attempts: 1, onChildFailure: 'ignore' },
            { queue: idle, payload: 'later', id: 'later' },
          ],
        });
        const failing = h.worker(cq, () => ({ status: 'error', error: 'broken' }));
        await waitForStatus(h.client, cq, 'bad', 'failed');
        await failing.stop();
        assert.deepEqual(await h.client.retryFailed(cq), { retried: 1 });
        // 'later' ends: the parent still waits for the redriven child's new end.
        h.worker(idle, () => undefined);
        await waitForStatus(h.client, idle, 'later', 'done-awaiting-gc');
        await quietPeriod(300);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        const { log, children } = parentWorker(h, q);
        h.worker(cq, () => ({ status: 'success', result: 'fixed' }));
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
        assert.deepEqual(
          children[0]?.map((c) => [c.id, c.state, c.result]),
          [
            ['bad', 'done-awaiting-gc', 'fixed'],
            ['later', 'done-awaiting-gc', undefined],
          ],
        );
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      "clear of a child's queue ends its children for their parents as removals, under onChildFailure",
      async (h) => {
        const q = h.queue('flow-clear');
        const cq = h.queue('flow-clear-children');
        await h.client.flow({ queue: q, payload: 'p1', id: 'p1', children: [{ queue: cq, payload: 'a', id: 'a' }] });
        await h.client.flow({
          queue: q,
          payload: 'p2',
          id: 'p2',
          children: [{ queue: cq, payload: 'b', id: 'b', onChildFailure: 'ignore' }],
        });
        await h.client.clear(cq);
        assert.equal((await h.client.queueStatus(cq)).total, 0);
        const failed = await h.client.status(q, 'p1');
        assert.equal(failed?.state, 'failed');
        assert.equal(failed.lastError, `child ${cq}/a failed: removed`);
        assert.equal((await h.client.status(q, 'p2'))?.state, 'queued');
        const counts = (await h.client.queueStatus(q)).counts;
        assert.deepEqual([counts['waiting-children'], counts.queued, counts.failed], [0, 1, 1]);
        const log = new JobLog();
        h.worker(q, (job) => log.record(job));
        await waitForStatus(h.client, q, 'p2', 'done-awaiting-gc');
        assert.deepEqual(log.ids(), ['p2']);
        const tree = await h.client.getFlow(q, 'p2');
        assert.ok(tree !== null);
        assert.deepEqual(shape(tree), [`${q}/p2:done-awaiting-gc`]);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'cancel of a waiting parent cancels its waiting children',
      async (h) => {
        const q = h.queue('flow-cancel');
        await h.client.configure(q, { events: true });
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [
            { queue: q, payload: 'm', id: 'm', children: [{ queue: q, payload: 'leaf', id: 'leaf' }] },
            { queue: q, payload: 'c', id: 'c' },
          ],
        });
        assert.deepEqual(await h.client.cancel(q, 'p', 'stop'), { ok: true, id: 'p', state: 'failed' });
        for (const id of ['p', 'm', 'leaf', 'c']) {
          const status = await h.client.status(q, id);
          assert.equal(status?.state, 'failed', id);
          assert.equal(status.lastError, 'canceled: stop', id);
        }
        const counts = (await h.client.queueStatus(q)).counts;
        assert.equal(counts.failed, 4);
        assert.equal(counts['waiting-children'], 0);
        assert.equal(counts.queued, 0);
        // Each told once, in any order (one write).
        const failed = (await h.client.readEvents(q)).events.filter((e) => e.type === 'failed');
        assert.deepEqual(failed.map((e) => e.id).sort(), ['c', 'leaf', 'm', 'p']);
      },
      { capability: 'flows' },
    );
  });
}
