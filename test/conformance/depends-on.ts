/**
 * A flow node's `dependsOn`: messages already enqueued become its children in the flow's atomic write, each
 * counted once for it when it ends (or at once, when it had ended); a dependency the flow cannot take refuses
 * it, nothing written. Stores without flows refuse any flow that names one.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';
import { FlowRefusedError, type FlowRefusal } from '../../src/model/errors.js';
import { shape } from './flows.js';
import type { FlowDependency, FlowTree, MessageStatus } from '../../src/index.js';

/** Records each run of `queue`'s message `id` and what job.children() said then; the rest succeed. */
function parentWorker(h: Harness, queue: string, id = 'p'): { log: JobLog; children: MessageStatus[][] } {
  const log = new JobLog();
  const children: MessageStatus[][] = [];
  h.worker(queue, async (job) => {
    if (job.id !== id) return { status: 'success', result: `r${String(job.payload)}` };
    log.record(job);
    children.push(await job.children());
  });
  return { log, children };
}

/** Enqueues `ids` in `queue`, each its id as payload. */
async function enqueueAll(h: Harness, queue: string, ids: readonly string[]): Promise<void> {
  for (const id of ids) await h.client.enqueue(queue, id, { id });
}

/** Expects `tree` refused for `reason` on `queue`/`id`, with neither the parent `p` nor anything else written. */
async function refused(h: Harness, tree: FlowTree, queue: string, id: string, reason: FlowRefusal): Promise<void> {
  await assert.rejects(
    h.client.flow(tree),
    (error: unknown) =>
      error instanceof FlowRefusedError && error.reason === reason && error.queue === queue && error.id === id,
  );
  assert.equal(await h.client.status(tree.queue, 'p'), null);
}

export function dependsOn(fixture: StoreFixture): void {
  void describe('flow dependsOn', () => {
    storeTest(fixture, 'a store without flows refuses a flow naming dependsOn, writing nothing', async (h) => {
      const q = h.queue('dep-none');
      if (storeOf(h.client).capabilities.flows) return;
      await h.client.enqueue(q, 'a', { id: 'a' });
      await assert.rejects(
        h.client.flow({ queue: q, payload: 'p', id: 'p', dependsOn: [{ queue: q, id: 'a' }] }),
        (error: unknown) => error instanceof TypeError && /flows are not available/.test(error.message),
      );
      assert.equal(await h.client.status(q, 'p'), null);
      assert.equal((await h.client.status(q, 'a'))?.state, 'queued');
    });

    storeTest(
      fixture,
      'a parent with only dependsOn waits for them, then runs once, reading their outcomes',
      async (h) => {
        const q = h.queue('dep');
        const dq = h.queue('dep-d');
        await enqueueAll(h, dq, ['a', 'b']);
        const ids = await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          dependsOn: [
            { queue: dq, id: 'a' },
            { queue: dq, id: 'b', onChildFailure: 'ignore' },
          ],
        });
        assert.deepEqual(ids, { queue: q, id: 'p', children: [] });
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        assert.equal((await h.client.queueStatus(q)).counts['waiting-children'], 1);
        const tree = await h.client.getFlow(dq, 'b');
        assert.ok(tree !== null);
        assert.deepEqual(shape(tree), [`${q}/p:waiting-children`, `${dq}/a:queued`, `${dq}/b:queued`]);

        const { log, children } = parentWorker(h, q);
        await quietPeriod(300);
        assert.deepEqual(log.ids(), []);
        h.worker(dq, (job) =>
          job.id === 'b' ? { status: 'error', error: 'bad b' } : { status: 'success', result: 'ra' },
        );
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
        assert.deepEqual(
          children[0]?.map((c) => [c.queue, c.id, c.state, c.outcome, c.result]),
          [
            [dq, 'a', 'done-awaiting-gc', 'success', 'ra'],
            [dq, 'b', 'failed', 'error', undefined],
          ],
        );
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a flow of 200 with dependsOn (staged on etcd): its nodes wait for their dependencies and their children',
      async (h) => {
        const q = h.queue('dep-big');
        const kids = h.queue('dep-big-k');
        const dq = h.queue('dep-big-d');
        await enqueueAll(h, dq, ['a', 'b']);
        const leaves = Array.from({ length: 197 }, (_, i): FlowTree => ({ queue: kids, payload: i, id: `k${i}` }));
        const mid: FlowTree = { queue: q, payload: 'm', id: 'm', dependsOn: [{ queue: dq, id: 'b' }] };
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [mid, ...leaves],
          dependsOn: [{ queue: dq, id: 'a' }],
        });
        assert.equal((await h.client.queueStatus(q)).counts['waiting-children'], 2);
        assert.equal((await h.client.queueStatus(kids)).counts.queued, 197);
        const tree = await h.client.getFlow(dq, 'b');
        assert.deepEqual(shape(tree ?? assert.fail('no flow')).slice(0, 4), [
          `${q}/p:waiting-children`,
          `${dq}/a:queued`,
          `${q}/m:waiting-children`,
          `${dq}/b:queued`,
        ]);
        const { log } = parentWorker(h, q);
        h.worker(kids, () => undefined);
        await waitFor(async () => (await h.client.queueStatus(kids)).counts['done-awaiting-gc'] === 197, {
          what: 'the leaves done',
        });
        await quietPeriod(300);
        assert.deepEqual(log.ids(), [], 'p waits for a and m, m for b');
        h.worker(dq, () => undefined);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        assert.equal((await h.client.status(q, 'm'))?.state, 'done-awaiting-gc');
        assert.deepEqual(log.ids(), ['p']);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'new children and dependencies, in two queues, all counted',
      async (h) => {
        const q = h.queue('dep-mixed');
        const other = h.queue('dep-mixed-o');
        await enqueueAll(h, q, ['d1']);
        await enqueueAll(h, other, ['d2']);
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [
            { queue: other, payload: 'm', id: 'm', dependsOn: [{ queue: other, id: 'd2' }] },
            { queue: q, payload: 'c', id: 'c' },
          ],
          dependsOn: [{ queue: q, id: 'd1' }],
        });
        const tree = await h.client.getFlow(q, 'p');
        assert.ok(tree !== null);
        assert.deepEqual(
          shape(tree).sort(),
          [
            `${other}/d2:queued`,
            `${other}/m:waiting-children`,
            `${q}/c:queued`,
            `${q}/d1:queued`,
            `${q}/p:waiting-children`,
          ].sort(),
        );
        const { log, children } = parentWorker(h, q);
        await waitForStatus(h.client, q, 'd1', 'done-awaiting-gc');
        await quietPeriod(300);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        h.worker(other, () => undefined);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
        assert.deepEqual(children[0]?.map((c) => c.id).sort(), ['c', 'd1', 'm']);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a dependency held by a running worker when the flow is written counts once when it finishes',
      async (h) => {
        const q = h.queue('dep-held');
        const dq = h.queue('dep-held-d');
        await enqueueAll(h, dq, ['a']);
        const release = gate();
        const started = new JobLog();
        h.worker(dq, async (job) => {
          started.record(job);
          await release.opened;
        });
        await started.handled('a');
        await h.client.flow({ queue: q, payload: 'p', id: 'p', dependsOn: [{ queue: dq, id: 'a' }] });
        const { log } = parentWorker(h, q);
        await quietPeriod(300);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        release.open();
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        await quietPeriod(200);
        assert.deepEqual(log.ids(), ['p']);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a race: dependencies finishing while the flow is written; the parent runs once, after all ended',
      async (h) => {
        for (let round = 0; round < 3; round++) {
          const q = h.queue(`dep-race-${round}`);
          const dq = h.queue(`dep-race-d-${round}`);
          const ids = Array.from({ length: 50 }, (_, i) => `d${i}`);
          await h.client.enqueueBatch(
            dq,
            ids.map((id) => ({ id, payload: id })),
          );
          const runs: boolean[] = [];
          h.worker(q, async (job) => {
            const children = await job.children();
            runs.push(children.length === 50 && children.every((c) => c.state.startsWith('done')));
          });
          h.worker(dq, () => new Promise<void>((resolve) => setTimeout(resolve, Math.random() * 20)), {
            concurrency: 8,
          });
          await new Promise((resolve) => setTimeout(resolve, 20 + round * 30));
          await h.client.flow({ queue: q, payload: 'p', id: 'p', dependsOn: ids.map((id) => ({ queue: dq, id })) });
          await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
          await quietPeriod(200);
          assert.deepEqual(runs, [true], `round ${round}`);
        }
      },
      { capability: 'flows', timeoutMs: 60_000 },
    );

    storeTest(
      fixture,
      'dependencies that ended already: a success counts at once, a failure under ignore too',
      async (h) => {
        const q = h.queue('dep-ended');
        const dq = h.queue('dep-ended-d');
        await enqueueAll(h, dq, ['ok', 'bad']);
        const dw = h.worker(dq, (job) => (job.id === 'bad' ? { status: 'error', error: 'no' } : undefined));
        await waitForStatus(h.client, dq, 'ok', 'done-awaiting-gc');
        await waitForStatus(h.client, dq, 'bad', 'failed');
        await dw.stop();
        // Only ended dependencies: nothing to wait for, the parent is queued at once.
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          dependsOn: [
            { queue: dq, id: 'ok' },
            { queue: dq, id: 'bad', onChildFailure: 'ignore' },
          ],
        });
        assert.equal((await h.client.status(q, 'p'))?.state, 'queued');
        assert.equal((await h.client.queueStatus(q)).counts['waiting-children'], 0);
        const { log, children } = parentWorker(h, q);
        await waitForStatus(h.client, q, 'p', 'done-awaiting-gc');
        assert.deepEqual(log.ids(), ['p']);
        assert.deepEqual(
          children[0]?.map((c) => [c.id, c.state]),
          [
            ['ok', 'done-awaiting-gc'],
            ['bad', 'failed'],
          ],
        );
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'refusals: missing, failed under fail or remove, with a parent; nothing written, the message untouched',
      async (h) => {
        const q = h.queue('dep-refused');
        const dq = h.queue('dep-refused-d');
        const fq = h.queue('dep-refused-f');
        await enqueueAll(h, dq, ['free']);
        await enqueueAll(h, fq, ['bad']);
        await h.client.flow({ queue: dq, payload: 'o', id: 'owner', children: [{ queue: dq, payload: 'c', id: 'c' }] });
        const fw = h.worker(fq, () => ({ status: 'error', error: 'no' }));
        await waitForStatus(h.client, fq, 'bad', 'failed');
        await fw.stop();
        const before = await h.client.status(dq, 'free');
        const tree = (dependsOn: FlowDependency[]): FlowTree => ({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [{ queue: q, payload: 'n', id: 'n' }],
          dependsOn,
        });
        const cases: [FlowDependency[], string, string, FlowRefusal][] = [
          [
            [
              { queue: dq, id: 'free' },
              { queue: dq, id: 'nope' },
            ],
            dq,
            'nope',
            'missing',
          ],
          [
            [
              { queue: dq, id: 'free' },
              { queue: fq, id: 'bad' },
            ],
            fq,
            'bad',
            'failed',
          ],
          [[{ queue: fq, id: 'bad', onChildFailure: 'remove' }], fq, 'bad', 'failed'],
          [
            [
              { queue: dq, id: 'free' },
              { queue: dq, id: 'c' },
            ],
            dq,
            'c',
            'has-parent',
          ],
        ];
        for (const [deps, queue, id, reason] of cases) await refused(h, tree(deps), queue, id, reason);
        assert.equal(await h.client.status(q, 'n'), null);
        assert.deepEqual(await h.client.status(dq, 'free'), before);
        const alone = await h.client.getFlow(dq, 'free');
        assert.ok(alone !== null);
        assert.deepEqual(shape(alone), [`${dq}/free:queued`]);
        const owner = await h.client.getFlow(dq, 'c');
        assert.ok(owner !== null);
        assert.deepEqual(shape(owner), [`${dq}/owner:waiting-children`, `${dq}/c:queued`]);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'a dependency named twice, or also a node of the flow, is a TypeError; nothing written',
      async (h) => {
        const q = h.queue('dep-twice');
        await enqueueAll(h, q, ['a']);
        const twice: FlowTree = {
          queue: q,
          payload: 'p',
          id: 'p',
          dependsOn: [{ queue: q, id: 'a' }],
          children: [{ queue: q, payload: 'c', id: 'c', dependsOn: [{ queue: q, id: 'a' }] }],
        };
        await assert.rejects(h.client.flow(twice), (e: unknown) => e instanceof TypeError && /twice/.test(e.message));
        const node: FlowTree = { queue: q, payload: 'p', id: 'p', children: [{ queue: q, payload: 'c', id: 'c' }] };
        await assert.rejects(
          h.client.flow({ ...node, dependsOn: [{ queue: q, id: 'c' }] }),
          (e: unknown) => e instanceof TypeError && /twice/.test(e.message),
        );
        await assert.rejects(
          h.client.flow({ ...node, dependsOn: [{ queue: q, id: 'a', extra: 1 } as never] }),
          TypeError,
        );
        await assert.rejects(h.client.flow({ ...node, dependsOn: 'a' as never }), TypeError);
        const many = Array.from({ length: 10_000 }, (_, i) => ({ queue: q, id: `d${i}` }));
        await assert.rejects(
          h.client.flow({ ...node, dependsOn: many }),
          (e: unknown) =>
            e instanceof TypeError && /at most 10000 nodes, its dependsOn messages included/.test(e.message),
        );
        for (const id of ['p', 'c']) assert.equal(await h.client.status(q, id), null);
        const tree = await h.client.getFlow(q, 'a');
        assert.ok(tree !== null);
        assert.deepEqual(shape(tree), [`${q}/a:queued`]);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      "a child failing under 'remove' removes the dependencies not yet started, and the parent fails",
      async (h) => {
        const q = h.queue('dep-remove');
        const dq = h.queue('dep-remove-d');
        await enqueueAll(h, dq, ['d']);
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          children: [{ queue: q, payload: 'bad', id: 'bad', attempts: 1, onChildFailure: 'remove' }],
          dependsOn: [{ queue: dq, id: 'd' }],
        });
        h.worker(q, () => ({ status: 'error', error: 'broken' }));
        const parent = await waitForStatus(h.client, q, 'p', 'failed');
        assert.equal(parent.lastError, `child ${q}/bad failed: broken`);
        assert.equal(await h.client.status(dq, 'd'), null);
        assert.equal((await h.client.queueStatus(dq)).counts.queued, 0);
      },
      { capability: 'flows' },
    );

    storeTest(
      fixture,
      'cancel of the waiting parent cancels its dependencies not yet started, not those running',
      async (h) => {
        const q = h.queue('dep-cancel');
        const dq = h.queue('dep-cancel-d');
        const held = h.queue('dep-cancel-h');
        await enqueueAll(h, dq, ['a']);
        await enqueueAll(h, held, ['r']);
        const started = new JobLog();
        h.worker(held, (job) => started.recordUntilAborted(job));
        await started.handled('r');
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          dependsOn: [
            { queue: dq, id: 'a' },
            { queue: held, id: 'r' },
          ],
        });
        assert.deepEqual(await h.client.cancel(q, 'p', 'stop'), { ok: true, id: 'p', state: 'failed' });
        const a = await h.client.status(dq, 'a');
        assert.equal(a?.state, 'failed');
        assert.equal(a.lastError, 'canceled: stop');
        assert.equal((await h.client.status(held, 'r'))?.state, 'locked');
        await waitFor(async () => (await h.client.status(q, 'p'))?.lastError === 'canceled: stop');
      },
      { capability: 'flows' },
    );
  });
}
