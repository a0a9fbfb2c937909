/**
 * Flows on etcd beyond the conformance suite: the parent's count in its record stays exact when a stale holder
 * ends a child a second time, the release of the parent is part of its last child's end (so a dispatcher killed
 * around it changes nothing), and a flow past one Txn is staged: seen whole once written, and nothing of it seen
 * (then deleted by GC) when its writer dies while staging; its dependsOn linked in the Txn that makes it visible.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { storeOf } from '../src/client/client-store.js';
import { FlowRefusedError, StoreLimitError } from '../src/model/errors.js';
import { QueueKeys } from '../src/stores/etcd/keys.js';
import { decodeRecord, type MessageRecord } from '../src/stores/etcd/record.js';
import { prefixEnd, type TxnRequest } from '../src/stores/etcd/kv.js';
import { clearQueue } from '../src/stores/etcd/clear.js';
import { interposed } from './support/interposed.js';
import { spawnChild } from './support/child.js';
import { JobLog, waitForStatus } from './support/jobs.js';
import { quietPeriod, waitFor } from './support/wait.js';
import { sleep } from '../src/model/time.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';
import { EtcdStore } from '../src/stores/etcd/store.js';
import { settleBeforeClear } from '../src/stores/etcd/flow-ends.js';
import type { Client, FlowTree } from '../src/index.js';

const TIMEOUT_MS = 60_000;
const opened = closedAfterAll();

/** The record of `queue`/`id` as etcd holds it. */
async function record(store: EtcdStore, queue: string, id: string): Promise<MessageRecord | null> {
  const item = (await store.kv.range({ key: new QueueKeys(store.root, queue).record(id) })).kvs[0];
  return item === undefined ? null : decodeRecord(item.value);
}

/** The keys under `prefix`. */
async function keysUnder(store: EtcdStore, prefix: string): Promise<string[]> {
  return (await store.kv.range({ key: prefix, end: prefixEnd(prefix), keysOnly: true })).kvs.map((item) => item.key);
}

/** The ids in `queue`'s owes index: its flow children not ended yet. */
async function owing(store: EtcdStore, queue: string): Promise<string[]> {
  const keys = new QueueKeys(store.root, queue);
  const res = await store.kv.range({ key: keys.owesIndex, end: prefixEnd(keys.owesIndex), keysOnly: true });
  return res.kvs.map((item) => item.key.slice(keys.owesIndex.length));
}

void describe('etcd flows', () => {
  void test('a stale holder ending a child again leaves the parent count exact', { timeout: TIMEOUT_MS }, async () => {
    const client = await opened.client(isolatedUrl());
    const store = etcdStore(client);
    await client.flow({
      queue: 'parents',
      payload: 'p',
      id: 'p',
      children: [
        { queue: 'kids', payload: 'a', id: 'a' },
        { queue: 'kids', payload: 'b', id: 'b' },
        { queue: 'idle', payload: 'c', id: 'c' },
      ],
    });
    assert.equal((await record(store, 'parents', 'p'))?.flow?.left, 3);
    assert.deepEqual(await owing(store, 'kids'), ['a', 'b']);
    const claim = { consumerId: 'ghost', max: 1, lockMs: 300, accepts: null, eoqBackoffMs: () => 50 };
    const ghost = await store.claim('kids', claim);
    assert.deepEqual(
      ghost.messages.map((m) => m.id),
      ['a'],
    );
    const log = new JobLog();
    const kids = client.worker('kids', (job) => log.record(job));
    await log.handled('a', 2, { timeoutMs: 10_000 });
    await waitForStatus(client, 'kids', 'b', 'done-awaiting-gc');
    await waitForStatus(client, 'kids', 'a', 'done-awaiting-gc');
    await kids.stop();
    const late = await store.finish('kids', 'ghost', [
      { id: 'a', attempt: 1, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() },
    ]);
    assert.deepEqual(late, ['lost']);
    assert.equal((await record(store, 'parents', 'p'))?.flow?.left, 1, 'a and b counted once each');
    assert.deepEqual(await owing(store, 'kids'), []);
    assert.deepEqual(await owing(store, 'idle'), ['c']);
    const parents = new JobLog();
    client.worker('parents', (job) => parents.record(job));
    client.worker('idle', () => undefined);
    await waitForStatus(client, 'parents', 'p', 'done-awaiting-gc');
    await quietPeriod(300);
    assert.deepEqual(parents.ids(), ['p']);
    assert.deepEqual(await owing(store, 'idle'), []);
  });

  void test(
    "the parent's dispatcher killed while its children end: released with the last one, run once",
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl('?leaseTtlMs=2000');
      const client = await opened.client(url);
      // Another process dispatches both queues; it is killed halfway through the children.
      const dispatcher = spawnChild('etcd-dispatcher.ts', [url, 'parents', 'kids']);
      opened.add(() => dispatcher.kill('SIGKILL'));
      await dispatcher.line(/^dispatching parents$/);
      await dispatcher.line(/^dispatching kids$/);
      const children = Array.from({ length: 10 }, (_, i): FlowTree => ({ queue: 'kids', payload: i, id: `k${i}` }));
      await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
      const done = new JobLog();
      const killed = { at: -1 };
      client.worker(
        'kids',
        async (job) => {
          done.record(job);
          if (done.seen.length === 5 && killed.at < 0) {
            killed.at = done.seen.length;
            await dispatcher.kill('SIGKILL');
          }
        },
        { concurrency: 1 },
      );
      await waitFor(async () => (await client.status('parents', 'p'))?.state === 'queued', {
        what: 'the parent queued',
        timeoutMs: 30_000,
      });
      assert.equal(killed.at, 5);
      assert.equal((await record(etcdStore(client), 'parents', 'p'))?.flow?.left, undefined);
      const parents = new JobLog();
      client.worker('parents', (job) => parents.record(job));
      await waitForStatus(client, 'parents', 'p', 'done-awaiting-gc', { timeoutMs: 30_000 });
      await quietPeriod(500);
      assert.deepEqual(parents.ids(), ['p']);
      assert.equal((await client.status('parents', 'p'))?.attempt, 1);
    },
  );

  void test(
    "siblings ending at once count in shared writes of their parent's record",
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      const store = etcdStore(client);
      // 40 children (one Txn with their parent), half in each of two queues: ends of both queues share writes.
      const children = Array.from({ length: 40 }, (_, i): FlowTree => ({
        queue: i % 2 === 0 ? 'kids' : 'others',
        payload: i,
        id: `k${i}`,
      }));
      await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
      const done = new JobLog();
      client.worker('kids', (job) => done.record(job), { concurrency: 64 });
      client.worker('others', (job) => done.record(job), { concurrency: 64 });
      await waitForStatus(client, 'parents', 'p', 'queued', { timeoutMs: 30_000 });
      const parent = (await store.kv.range({ key: new QueueKeys(store.root, 'parents').record('p') })).kvs[0];
      // Its flow's write, then the counts: one write per child would be 40.
      const countWrites = (parent?.version ?? 0) - 1;
      assert.ok(countWrites >= 1 && countWrites <= 20, `the parent's record was written ${countWrites} times`);
      assert.equal(done.seen.length, 40);
      assert.deepEqual(await owing(store, 'kids'), []);
      assert.deepEqual(await owing(store, 'others'), []);
    },
  );

  void test(
    'siblings ending at once with results near the limit: their writes split by size, the parent runs once',
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      await client.configure('kids', { events: true });
      // 30 results of 60 KB (and their completed events) are about 3.6 MB: more than one Txn takes.
      const big = 'r'.repeat(60 * 1024);
      const children = Array.from({ length: 30 }, (_, i): FlowTree => ({ queue: 'kids', payload: i, id: `k${i}` }));
      await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
      client.worker('kids', () => ({ status: 'success', result: big }), { concurrency: 64 });
      const parents = new JobLog();
      const results: number[] = [];
      client.worker('parents', async (job) => {
        parents.record(job);
        for (const child of await job.children()) results.push(String(child.result).length);
      });
      await waitForStatus(client, 'parents', 'p', 'done-awaiting-gc', { timeoutMs: 30_000 });
      await quietPeriod(200);
      assert.deepEqual(parents.ids(), ['p']);
      assert.deepEqual(
        results,
        Array.from({ length: 30 }, () => big.length),
      );
    },
  );

  void test(
    'siblings ending in two connections at once, some failing under ignore: the parent runs once',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const first = await opened.client(url);
      const second = await opened.client(url);
      const children = Array.from({ length: 40 }, (_, i): FlowTree => ({
        queue: 'kids',
        payload: i,
        id: `k${i}`,
        ...(i % 5 === 0 ? { onChildFailure: 'ignore' as const, attempts: 1 } : {}),
      }));
      await first.flow({ queue: 'parents', payload: 'p', id: 'p', children });
      const done = new JobLog();
      const handler = (job: Parameters<typeof done.record>[0]): void => {
        done.record(job);
        if (Number(job.payload) % 5 === 0) throw new Error('fails, ignored');
      };
      // Each connection counts its own ends together; the two contend on the parent's record.
      first.worker('kids', handler, { concurrency: 64 });
      second.worker('kids', handler, { concurrency: 64 });
      const parents = new JobLog();
      first.worker('parents', (job) => parents.record(job));
      await waitForStatus(first, 'parents', 'p', 'done-awaiting-gc', { timeoutMs: 30_000 });
      await quietPeriod(300);
      assert.deepEqual(parents.ids(), ['p']);
      assert.equal(new Set(done.ids()).size, 40);
      assert.equal(done.seen.length, 40, 'each child handled once');
      const tree = await first.getFlow('parents', 'p');
      assert.ok(tree !== null);
      assert.equal(tree.children.length, 40);
      assert.equal(tree.children.filter((c) => c.state === 'failed').length, 8);
    },
  );

  void test(
    'a clear cut short after counting its children leaves no parent waiting, and counts none twice',
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      const store = etcdStore(client);
      await client.flow({
        queue: 'parents',
        payload: 'p1',
        id: 'p1',
        children: [{ queue: 'kids', payload: 'a', id: 'a' }],
      });
      await client.flow({
        queue: 'parents',
        payload: 'p2',
        id: 'p2',
        children: [
          { queue: 'kids', payload: 'b', id: 'b', onChildFailure: 'ignore' },
          { queue: 'idle', payload: 'c', id: 'c' },
        ],
      });
      // The clear's first step alone, as if its process died right after it: the children still there, counted.
      await settleBeforeClear(store.kv, new QueueKeys(store.root, 'kids'));
      assert.deepEqual(await owing(store, 'kids'), []);
      assert.equal((await client.status('kids', 'a'))?.state, 'queued');
      const p1 = await client.status('parents', 'p1');
      assert.equal(p1?.state, 'failed');
      assert.equal(p1.lastError, 'child kids/a failed: removed');
      assert.equal((await record(store, 'parents', 'p2'))?.flow?.left, 1);
      // The clear done again, whole: nothing counted twice.
      await client.clear('kids');
      assert.equal((await record(store, 'parents', 'p2'))?.flow?.left, 1);
      assert.equal((await client.status('parents', 'p2'))?.state, 'waiting-children');
      client.worker('idle', () => undefined);
      await waitForStatus(client, 'parents', 'p2', 'queued');
    },
  );

  void test(
    'a flow written into a queue while it is cleared has its child counted as removed, not deleted uncounted',
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      const store = etcdStore(client);
      const keys = new QueueKeys(store.root, 'kids');
      await client.enqueue('kids', 'old');
      let written = false;
      // The flow lands between the clear's count of the queue's children and its deletes, as another producer's can.
      const kv = interposed(store.kv, {
        async txn(request: TxnRequest) {
          const deletesRecords = request.success.some((op) => op.type === 'delete' && op.key === keys.records);
          if (!written && deletesRecords) {
            written = true;
            const children = [{ queue: 'kids', payload: 'a', id: 'a' }];
            await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
          }
          return store.kv.txn(request);
        },
      });
      await clearQueue(kv, keys);
      assert.equal(written, true);
      assert.equal(await client.status('kids', 'a'), null);
      assert.equal((await client.queueStatus('kids')).counts.queued, 0);
      const parent = await client.status('parents', 'p');
      assert.equal(parent?.state, 'failed');
      assert.equal(parent.lastError, 'child kids/a failed: removed');
    },
  );

  void test('a flow of 1,000 messages is staged, then seen whole', { timeout: TIMEOUT_MS }, async () => {
    const client = await opened.client(isolatedUrl());
    const store = etcdStore(client);
    const leaves = Array.from({ length: 999 }, (_, i): FlowTree => ({ queue: 'kids', payload: i, id: `k${i}` }));
    await client.flow({ queue: 'parents', payload: 'p', id: 'p', children: leaves });
    assert.equal((await client.queueStatus('kids')).counts.queued, 999);
    assert.equal((await client.queueStatus('parents')).counts['waiting-children'], 1);
    assert.equal((await record(store, 'parents', 'p'))?.flow?.left, 999);
    assert.deepEqual(await keysUnder(store, new QueueKeys(store.root, 'kids').stagedIndex), []);
    assert.deepEqual(await keysUnder(store, new QueueKeys(store.root, 'parents').liveFlows), []);
    const tree = await client.getFlow('kids', 'k500');
    assert.equal(tree?.children.length, 999);
  });

  void test(
    'a staged flow links its dependsOn as it becomes visible: each dependency counts for its node',
    { timeout: TIMEOUT_MS },
    async () => {
      const { client, store } = await withDependency();
      await client.enqueue('deps', 'e', { id: 'e' });
      await client.enqueue('finished', 'x', { id: 'x' });
      const early = client.worker('finished', () => undefined);
      await waitForStatus(client, 'finished', 'x', 'done-awaiting-gc');
      await early.stop();
      const leaves = Array.from({ length: 60 }, (_, i): FlowTree => ({ queue: 'kids', payload: i, id: `k${i}` }));
      const mid: FlowTree = { queue: 'mids', payload: 'm', id: 'm', dependsOn: [{ queue: 'deps', id: 'e' }] };
      await client.flow({
        queue: 'parents',
        payload: 'p',
        id: 'p',
        children: [...leaves, mid],
        dependsOn: [
          { queue: 'deps', id: 'd' },
          { queue: 'finished', id: 'x' },
        ],
      });
      // 60 leaves, the node m, and d, which has not ended; x has.
      assert.equal((await record(store, 'parents', 'p'))?.flow?.left, 62);
      assert.equal((await record(store, 'mids', 'm'))?.flow?.left, 1);
      assert.deepEqual((await record(store, 'deps', 'd'))?.flow, { parent: ['parents', 'p'], owes: true });
      assert.deepEqual((await record(store, 'finished', 'x'))?.flow, { parent: ['parents', 'p'] });
      assert.deepEqual((await record(store, 'deps', 'e'))?.flow, { parent: ['mids', 'm'], owes: true });
      assert.equal((await client.status('mids', 'm'))?.state, 'waiting-children');
      assert.equal((await client.queueStatus('kids')).counts.queued, 60);
      assert.deepEqual(await keysUnder(store, new QueueKeys(store.root, 'kids').stagedIndex), []);
      assert.deepEqual(await keysUnder(store, new QueueKeys(store.root, 'parents').liveFlows), []);
      const log = new JobLog();
      for (const queue of ['kids', 'mids', 'parents']) client.worker(queue, (job) => log.record(job));
      await log.handled('k59', 1, { timeoutMs: 10_000 });
      await log.handled('k0', 1, { timeoutMs: 10_000 });
      await quietPeriod(300);
      assert.deepEqual(
        log.ids().filter((id) => !id.startsWith('k')),
        [],
        'm waits for e, p for d and m',
      );
      client.worker('deps', (job) => log.record(job));
      await log.handled('p', 1, { timeoutMs: 10_000 });
      const order = log.ids();
      for (const id of ['d', 'e', 'm']) assert.ok(order.indexOf(id) < order.indexOf('p'), `${id} before p`);
      assert.ok(order.indexOf('e') < order.indexOf('m'), 'e before m');
    },
  );

  void test(
    'a dependency that ends while its staged flow is made visible: the flow is linked again, counting it ended',
    { timeout: TIMEOUT_MS },
    async () => {
      const { client, store } = await withDependency();
      // The dependency's worker finishes it between its read and the Txn that makes the flow visible.
      const tries = beforeMadeLive(store, async () => {
        const claim = { consumerId: 'w', max: 1, lockMs: 5_000, accepts: null, eoqBackoffMs: () => 50 };
        const [held] = (await store.claim('deps', claim)).messages;
        assert.equal(held?.id, 'd');
        const success = { id: 'd', attempt: 1, outcome: 'success' as const, backoffMs: 0, error: null };
        assert.deepEqual(await store.finish('deps', 'w', [{ ...success, startedAt: Date.now() }]), ['ok']);
      });
      await client.flow({ ...stagedTree(), dependsOn: [{ queue: 'deps', id: 'd' }] });
      assert.equal(tries(), 2, 'made visible at the second try');
      assert.equal((await record(store, 'parents', 'p'))?.flow?.left, 60, 'd ended before it was linked');
      assert.deepEqual((await record(store, 'deps', 'd'))?.flow, { parent: ['parents', 'p'] });
      assert.equal((await client.queueStatus('kids')).counts.queued, 60);
    },
  );

  void test(
    'a dependency removed while its staged flow is made visible: the flow is refused, what it staged deleted',
    { timeout: TIMEOUT_MS },
    async () => {
      const { client, store } = await withDependency();
      const tries = beforeMadeLive(store, async () => assert.equal((await client.remove('deps', 'd')).ok, true));
      const flow = client.flow({ ...stagedTree(), dependsOn: [{ queue: 'deps', id: 'd' }] });
      await assert.rejects(flow, (error: unknown) => {
        assert.ok(error instanceof FlowRefusedError, String(error));
        assert.deepEqual([error.queue, error.id, error.reason], ['deps', 'd', 'missing']);
        return true;
      });
      assert.equal(tries(), 1);
      assert.equal(await client.status('parents', 'p'), null);
      assert.equal((await client.queueStatus('kids')).total, 0);
      for (const queue of ['parents', 'kids']) {
        const keys = new QueueKeys(store.root, queue);
        for (const prefix of [keys.stagedIndex, keys.records, keys.payloads, keys.stagings, keys.liveFlows]) {
          assert.deepEqual(await keysUnder(store, prefix), [], prefix);
        }
      }
    },
  );

  void test(
    'a staged flow whose dependsOn do not fit the Txn that makes it visible is refused, nothing written',
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      const ids = Array.from({ length: 70 }, (_, i) => `d${i}`);
      await client.enqueueBatch(
        'deps',
        ids.map((id) => ({ payload: id, id })),
      );
      const dependsOn = ids.map((id) => ({ queue: 'deps', id }));
      await assert.rejects(client.flow({ ...stagedTree(), dependsOn }), (error: unknown) => {
        assert.ok(error instanceof StoreLimitError);
        assert.match(error.message, /a flow of 61 messages does not fit one etcd Txn, and its 70 dependsOn/);
        return true;
      });
      assert.equal(await client.status('parents', 'p'), null);
      assert.equal((await client.queueStatus('kids')).total, 0);
      assert.equal((await client.status('deps', 'd0'))?.state, 'queued');
      assert.equal((await record(etcdStore(client), 'deps', 'd0'))?.flow, undefined, 'd0 not linked');
    },
  );

  void test(
    'a writer killed while staging leaves nothing visible, and GC removes what it staged',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl('?leaseTtlMs=2000');
      const client = await opened.client(url);
      const store = etcdStore(client);
      const staged = new QueueKeys(store.root, 'kids').stagedIndex;
      const writer = spawnChild('flow-writer-process.ts', [url, 'parents', 'kids', '110', '20000']);
      opened.add(() => writer.kill('SIGKILL'));
      await writer.line(/^ready$/);
      await waitFor(async () => (await keysUnder(store, staged)).length > 0, {
        what: 'staged messages',
        timeoutMs: 20_000,
      });
      await writer.kill('SIGKILL');
      assert.ok((await keysUnder(store, staged)).length > 0, 'killed while staging');
      for (const queue of ['parents', 'kids']) {
        assert.equal((await client.queueStatus(queue)).total, 0, queue);
        assert.deepEqual((await client.list(queue)).messages, [], queue);
      }
      assert.equal(await client.status('parents', 'root'), null);
      assert.equal(await client.status('kids', 'leaf-0-0'), null);
      assert.equal(await client.getFlow('kids', 'leaf-0-0'), null);
      // Once the writer's lease has ended, GC deletes what it staged; an id it staged is free again.
      await sleep(3_000);
      for (const queue of ['parents', 'kids']) await client.gc(queue);
      for (const queue of ['parents', 'kids']) {
        const keys = new QueueKeys(store.root, queue);
        for (const prefix of [keys.stagedIndex, keys.records, keys.payloads, keys.stagings]) {
          assert.deepEqual(await keysUnder(store, prefix), [], prefix);
        }
      }
      assert.equal((await client.enqueue('kids', 'again', { id: 'leaf-0-0' })).ok, true);
    },
  );

  void test(
    "a writer killed after making its flow live: the root queue's GC moves the rest in",
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl('?leaseTtlMs=2000');
      const client = await opened.client(url);
      const store = etcdStore(client);
      const live = new QueueKeys(store.root, 'parents').liveFlows;
      const writer = spawnChild('flow-writer-process.ts', [url, 'parents', 'kids', '110', '20000']);
      opened.add(() => writer.kill('SIGKILL'));
      await writer.line(/^ready$/);
      // Killed as soon as the flow is live, while it moves the messages in.
      const seen = await store.kv.range({ key: live, limit: 1 });
      const killed = new Promise<void>((resolve) => {
        const watch = store.kv.watch(
          { key: live, end: prefixEnd(live), startRevision: seen.revision + 1 },
          {
            events: (events) => {
              if (!events.some((e) => e.type === 'put')) return;
              void writer.kill('SIGKILL').then(() => watch.cancel().then(resolve));
            },
            broken: () => undefined,
          },
        );
      });
      await killed;
      assert.equal((await keysUnder(store, live)).length, 1, 'killed before its moves were done');
      assert.ok((await client.queueStatus('kids')).counts.queued < 990, 'some leaves not moved in yet');
      await sleep(5_500);
      await client.gc('parents');
      assert.deepEqual(await keysUnder(store, live), []);
      assert.deepEqual(await keysUnder(store, new QueueKeys(store.root, 'kids').stagedIndex), []);
      assert.equal((await client.queueStatus('kids')).counts.queued, 990);
      assert.equal((await client.queueStatus('parents')).counts['waiting-children'], 10);
      assert.equal((await record(store, 'parents', 'mid-4'))?.flow?.left, 110);
      const tree = await client.getFlow('kids', 'leaf-8-109');
      assert.equal(tree?.children.length, 9);
    },
  );

  void test(
    "a child failed by the dispatcher at maxDeliveries counts for its parent at the child queue's next GC",
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      const store = etcdStore(client);
      await client.configure('kids', { maxDeliveries: 1 });
      await flowHeldByVanished(client, store, [
        { queue: 'kids', payload: 'a', id: 'a' },
        { queue: 'idle', payload: 'b', id: 'b' },
      ]);
      // A worker there gives the dispatcher someone to hand the lost message to: it fails it instead.
      const log = new JobLog();
      client.worker('kids', (job) => log.record(job));
      const failed = await waitForStatus(client, 'kids', 'a', 'failed', { timeoutMs: 10_000 });
      assert.match(failed.lastError ?? '', /lost its lock 1 time/);
      assert.equal((await record(store, 'kids', 'a'))?.flow?.owes, true, 'not counted in the dispatcher Txn');
      await client.gc('kids');
      const parent = await waitForStatus(client, 'parents', 'p', 'failed');
      assert.match(parent.lastError ?? '', /^child kids\/a failed: .*lost its lock 1 time/);
      assert.equal((await record(store, 'kids', 'a'))?.flow?.owes, undefined);
      assert.deepEqual(log.ids(), []);
    },
  );

  void test(
    'a child the dispatcher moves to the dead-letter queue at maxDeliveries counts at the next GC',
    { timeout: TIMEOUT_MS },
    async () => {
      const client = await opened.client(isolatedUrl());
      const store = etcdStore(client);
      await client.configure('kids', { maxDeliveries: 1, deadLetterQueue: 'kids-dead' });
      await flowHeldByVanished(client, store, [
        { queue: 'kids', payload: 'a', id: 'a' },
        { queue: 'kids', payload: 'b', id: 'b', onChildFailure: 'ignore' },
      ]);
      // A worker there gives the dispatcher someone to hand the lost messages to: it moves them instead.
      client.worker('kids', () => undefined);
      await waitForStatus(client, 'kids-dead', 'a', 'queued', { timeoutMs: 10_000 });
      await waitForStatus(client, 'kids-dead', 'b', 'queued', { timeoutMs: 10_000 });
      assert.equal(await client.status('kids', 'a'), null);
      assert.equal((await client.status('parents', 'p'))?.state, 'waiting-children', 'not counted by the dispatcher');
      await client.gc('kids');
      // b (ignore) counted as an end, a (fail) failed the parent.
      const parent = await waitForStatus(client, 'parents', 'p', 'failed');
      assert.match(parent.lastError ?? '', /^child kids\/a failed: .*lost its lock 1 time/);
      const left = await client.list('kids', { state: 'failed' });
      assert.equal(left.messages.length, 0);
      // Counted once: a second GC finds nothing left to count.
      await client.gc('kids');
      assert.equal((await client.status('parents', 'p'))?.state, 'failed');
    },
  );
});

/** Writes parent `p` of queue `parents` with `children`, and has a consumer that then vanishes take those in `kids`. */
async function flowHeldByVanished(client: Client, store: EtcdStore, children: readonly FlowTree[]): Promise<void> {
  await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
  const kids = children.filter((c) => c.queue === 'kids').map((c) => c.id);
  const claim = { consumerId: 'vanished', max: kids.length, lockMs: 300, accepts: null, eoqBackoffMs: () => 50 };
  const taken = (await store.claim('kids', claim)).messages.map((m) => m.id);
  assert.deepEqual(taken.sort(), kids.sort());
}

/** A client on a root of its own, its store, and the message `deps`/`d` enqueued there. */
async function withDependency(): Promise<{ client: Client; store: EtcdStore }> {
  const client = await opened.client(isolatedUrl());
  await client.enqueue('deps', 'd', { id: 'd' });
  return { client, store: etcdStore(client) };
}

/** A flow of a parent `parents`/`p` and 60 leaves in `kids`: staged, past one Txn. */
function stagedTree(): FlowTree {
  const leaves = Array.from({ length: 60 }, (_, i): FlowTree => ({ queue: 'kids', payload: i, id: `k${i}` }));
  return { queue: 'parents', payload: 'p', id: 'p', children: leaves };
}

/**
 * Runs `action` once, just before the first Txn that makes a flow rooted in `parents` visible (it puts the live
 * key); returns a count of those Txns so far.
 */
function beforeMadeLive(store: EtcdStore, action: () => Promise<void>): () => number {
  const own = store.kv;
  const live = new QueueKeys(store.root, 'parents').liveFlows;
  let tries = 0;
  Object.defineProperty(store, 'kv', {
    value: interposed(own, {
      async txn(request: TxnRequest) {
        const makesLive = request.success.some((op) => op.type === 'put' && op.key.startsWith(live));
        if (makesLive && tries++ === 0) await action();
        return own.txn(request);
      },
    }),
  });
  return () => tries;
}

function etcdStore(client: Parameters<typeof storeOf>[0]): EtcdStore {
  const store = storeOf(client);
  assert.ok(store instanceof EtcdStore);
  return store;
}
