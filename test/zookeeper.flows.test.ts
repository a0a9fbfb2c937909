/**
 * Flows on ZooKeeper as a plain client sees them, and how a big one is written: a flow that fits ZooKeeper's packet
 * limit (jute.maxbuffer, 1 MiB) is one multi; a bigger one is staged (its task nodes and payloads in multis of
 * their own, without their `state`) and made visible by one last multi. Readers see all of it or none, a writer
 * killed half way leaves nothing visible and GC removes what it staged, and a flow whose last multi would pass the
 * limit is refused before anything is written.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FlowRefusedError, StoreLimitError, StoreUnavailableError, type Client, type FlowTree } from '../src/index.js';
import { waitFor } from './support/wait.js';
import { storeOf } from '../src/client/client-store.js';
import type { StoreContext } from '../src/stores/zookeeper/context.js';
import { clearQueue } from '../src/stores/zookeeper/gc.js';
import { interposed } from './support/interposed.js';
import { spawnChild, type Child } from './support/child.js';
import { freshStoreUrl, serverUrl, type PlainClient } from './fixtures/zookeeper-env.js';
import { dirOf, fileClients } from './fixtures/zookeeper-clients.js';

const server = serverUrl();
const { open, plain } = fileClients(server);

/** A root, 9 parents and `leaves` leaves under each, in the queues `q` (parents) and `leafQueue`. */
function tree(q: string, leafQueue: string, leaves: number, bytes = 0, clash?: string): FlowTree {
  const pad = 'x'.repeat(bytes);
  return {
    queue: q,
    payload: `root${pad}`,
    id: 'root',
    children: Array.from({ length: 9 }, (_, i) => ({
      queue: q,
      payload: `${i}${pad}`,
      id: `mid-${i}`,
      children: Array.from({ length: leaves }, (__, j) => ({
        queue: leafQueue,
        payload: `${j}${pad}`,
        id: clash !== undefined && i === 8 && j === leaves - 1 ? clash : `leaf-${i}-${j}`,
      })),
    })),
  };
}

/** The task ids under a queue's `/tasks` buckets, as a plain client lists them. */
async function taskIds(zk: PlainClient, dir: string, queue: string): Promise<string[]> {
  const tasks = `${dir}/${queue}/tasks`;
  if ((await zk.exists(tasks)) === null) return [];
  const ids: string[] = [];
  for (const bucket of await zk.children(tasks)) ids.push(...(await zk.children(`${tasks}/${bucket}`)));
  return ids;
}

/** The staging records of a queue (a big flow being written). */
async function stagingRecords(zk: PlainClient, dir: string, queue: string): Promise<string[]> {
  const path = `${dir}/${queue}/staging`;
  return (await zk.exists(path)) === null ? [] : zk.children(path);
}

/**
 * A writer process (test/fixtures/flow-writer-process.ts) of a big flow in `queue` and `<queue>-leaves`, 1,000
 * payloads of `bytes`, on a session of `sessionMs`; resolves once its first staged multi is written, with the
 * staging record's key.
 */
async function stagingWriter(
  zk: PlainClient,
  url: string,
  queue: string,
  bytes: number,
  sessionMs: number,
): Promise<{ writer: Child; record: string }> {
  const dir = dirOf(url);
  const writer = spawnChild('flow-writer-process.ts', [
    `${url}?sessionTimeoutMs=${sessionMs}`,
    queue,
    `${queue}-leaves`,
    '110',
    String(bytes),
  ]);
  await writer.line(/^ready$/);
  const record = await waitFor(
    async () => {
      const [key] = await stagingRecords(zk, dir, queue);
      if (key === undefined) return null;
      const chunks = await zk.children(`${dir}/${queue}/staging/${key}`);
      return chunks.some((name) => name.startsWith('c')) ? key : null;
    },
    { what: 'a staged multi', timeoutMs: 30_000 },
  );
  return { writer, record };
}

/** A fresh chroot, a kvmq client of it and a plain client of the server. */
async function freshStore(): Promise<{ url: string; client: Client; zk: PlainClient; dir: string }> {
  const url = await freshStoreUrl(server);
  return { url, client: await open(url), zk: await plain(), dir: dirOf(url) };
}

describe('zookeeper: flows', () => {
  test('a flow written while a queue is cleared has its child counted as removed, not removed uncounted', async () => {
    const { client } = await freshStore();
    await client.enqueue('kids', 'old');
    const ctx = (storeOf(client) as unknown as { ctx: StoreContext }).ctx;
    const queuePath = ctx.queue('kids').paths.queue;
    let written = false;
    // The flow lands as the clear lists the queue's nodes, as another producer's can.
    const zk = interposed(ctx.zk, {
      async children(path: string, watch?: () => void) {
        if (!written && path === queuePath) {
          written = true;
          const children = [{ queue: 'kids', payload: 'a', id: 'a' }];
          await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
        }
        return ctx.zk.children(path, watch);
      },
    });
    const hooked = interposed(ctx, { zk });
    await clearQueue(hooked, ctx.queue('kids'));
    assert.equal(written, true);
    assert.equal(await client.status('kids', 'a'), null);
    assert.equal(await client.status('kids', 'old'), null);
    const parent = await client.status('parents', 'p');
    assert.equal(parent?.state, 'failed');
    assert.equal(parent.lastError, 'child kids/a failed: removed');
  });

  test('a 1,000-node flow past one multi is staged, then runs to its root once', async () => {
    const url = await freshStoreUrl(server);
    const client = await open(url);
    const zk = await plain();
    // 1,000 payloads of 3 KB: about 3 MB, three times the packet limit.
    const ids = await client.flow(tree('big', 'big-leaves', 110, 3000));
    assert.equal(ids.children[8]?.children[109]?.id, 'leaf-8-109');
    assert.equal((await client.queueStatus('big')).counts['waiting-children'], 10);
    assert.equal((await client.queueStatus('big-leaves')).counts.queued, 990);
    assert.deepEqual(await stagingRecords(zk, dirOf(url), 'big'), []);
    const flow = await client.getFlow('big-leaves', 'leaf-4-7');
    assert.equal(flow?.children.flatMap((mid) => mid.children).length, 990);
    const runs: string[] = [];
    client.worker('big-leaves', () => undefined, { concurrency: 64 });
    client.worker('big', (job) => {
      runs.push(job.id);
    });
    await waitFor(async () => (await client.status('big', 'root'))?.state === 'done-awaiting-gc', {
      what: 'the root to run',
      timeoutMs: 60_000,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(runs.toSorted(), [
      'mid-0',
      'mid-1',
      'mid-2',
      'mid-3',
      'mid-4',
      'mid-5',
      'mid-6',
      'mid-7',
      'mid-8',
      'root',
    ]);
    assert.equal(runs.at(-1), 'root');
    assert.equal((await client.queueStatus('big-leaves')).counts['done-awaiting-gc'], 990);
  });

  test('while a big flow is staged, a worker, counts, status and getFlow see none of it; then all of it', async () => {
    const { url, zk, dir } = await freshStore();
    const reader = await open(url);
    // A worker of the leaves runs from the start: a leaf it is handed while the staging record is still there
    // was visible before the last multi.
    const early: string[] = [];
    let handled = 0;
    reader.worker(
      'seen-leaves',
      async (job) => {
        if ((await stagingRecords(zk, dir, 'seen')).length > 0) early.push(job.id);
        handled += 1;
      },
      { concurrency: 16, eoqBackoffMs: 5 },
    );
    const reads = async (): Promise<string> => {
      const leaves = (await reader.queueStatus('seen-leaves')).total;
      const parents = (await reader.queueStatus('seen')).total;
      const first = (await reader.status('seen-leaves', 'leaf-0-0')) !== null;
      const flow = await reader.getFlow('seen', 'root');
      return `${leaves}/${parents}/${first}/${flow === null ? 0 : 1}`;
    };
    // 1,000 payloads of 20 KB, about 20 staged multis, from a writer frozen (SIGSTOP) once one is written: the
    // reads below are all made while the flow is staged. Its session outlives the pause.
    const { writer } = await stagingWriter(zk, url, 'seen', 20_000, 20_000);
    try {
      process.kill(writer.pid, 'SIGSTOP');
      const seen = new Set<string>();
      for (let i = 0; i < 5; i++) seen.add(await reads());
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual([...seen], ['0/0/false/0']);
      assert.equal(handled, 0);
      assert.ok((await taskIds(zk, dir, 'seen-leaves')).length > 0, 'staged task nodes');
    } finally {
      process.kill(writer.pid, 'SIGCONT');
    }
    await writer.line(/^written$/, 30_000);
    assert.equal((await writer.exited).code, 0, writer.stderr);
    // At once, all of it: the flow's nodes and the parents' queue. The leaves' total is not read here: the worker
    // moves leaves between states meanwhile, and ZooKeeper's counts are not one snapshot (inspect.ts).
    const [leaves, ...rest] = (await reads()).split('/');
    assert.ok(Number(leaves) > 0, `leaves counted: ${leaves}`);
    assert.deepEqual(rest, ['10', 'true', '1']);
    await waitFor(() => handled === 990, { what: 'the leaves to run', timeoutMs: 60_000 });
    // Once the last finishes land, every leaf is counted, once.
    await waitFor(async () => (await reads()) === '990/10/true/1', { what: 'the totals', timeoutMs: 10_000 });
    assert.deepEqual(early, []);
  });

  test('a writer killed while staging leaves nothing visible, and GC removes what it staged', async () => {
    const { url, client, zk, dir } = await freshStore();
    // 1,000 payloads of 30 KB: about 30 staged multis, killed after the first.
    const { writer, record } = await stagingWriter(zk, url, 'gone', 30_000, 4000);
    assert.equal((await writer.kill('SIGKILL')).signal, 'SIGKILL');
    const staged = await taskIds(zk, dir, 'gone');
    assert.ok(staged.length > 0, 'staged task nodes');
    assert.equal(await client.status('gone', 'root'), null);
    assert.equal(await client.status('gone', staged[0] ?? ''), null);
    assert.equal((await client.queueStatus('gone')).total, 0);
    assert.equal((await client.queueStatus('gone-leaves')).total, 0);
    // An enqueue of a staged id waits for the flow, then says what holds it: busy, try again.
    await assert.rejects(client.enqueue('gone-leaves', 'mine', { id: 'leaf-0-0' }), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError && error.transient, String(error));
      assert.match(error.message, /a flow being written holds this id/);
      return true;
    });
    // A GC while the writer's session lives leaves its record alone.
    await client.gc('gone');
    assert.ok((await stagingRecords(zk, dir, 'gone')).includes(record));
    await waitFor(async () => (await zk.exists(`${dir}/gone/staging/${record}/writer`)) === null, {
      what: "the writer's session to end",
      timeoutMs: 30_000,
    });
    await client.gc('gone');
    assert.deepEqual(await stagingRecords(zk, dir, 'gone'), []);
    assert.deepEqual(await taskIds(zk, dir, 'gone'), []);
    assert.deepEqual(await taskIds(zk, dir, 'gone-leaves'), []);
    // The ids are free again.
    await client.flow(tree('gone', 'gone-leaves', 110, 3000));
    assert.equal((await client.queueStatus('gone-leaves')).counts.queued, 990);
  });

  test('an id found taken by a later staged multi refuses the flow, and what was staged goes', async () => {
    const { client, zk, dir } = await freshStore();
    await client.enqueue('clash-leaves', 'first', { id: 'taken' });
    // The taken id is the flow's last node: its staged multi is the last of about 25.
    await assert.rejects(client.flow(tree('clash', 'clash-leaves', 110, 25000, 'taken')), (error: unknown) => {
      assert.ok(error instanceof FlowRefusedError, String(error));
      assert.deepEqual([error.queue, error.id, error.state], ['clash-leaves', 'taken', 'queued']);
      return true;
    });
    assert.equal(await client.status('clash', 'root'), null);
    assert.equal(await client.status('clash-leaves', 'leaf-0-0'), null);
    assert.equal((await client.queueStatus('clash-leaves')).total, 1);
    assert.deepEqual(await stagingRecords(zk, dir, 'clash'), []);
    assert.deepEqual(await taskIds(zk, dir, 'clash'), []);
    assert.deepEqual(await taskIds(zk, dir, 'clash-leaves'), ['taken']);
  });

  test('a flow whose last multi would pass the packet limit is refused before anything is written', async () => {
    const client = await open(await freshStoreUrl(server));
    await assert.rejects(client.flow(tree('huge', 'huge-leaves', 1110)), (error: unknown) => {
      assert.ok(error instanceof StoreLimitError, String(error));
      assert.match(error.message, /a flow of 10000 messages needs a last ZooKeeper write of about \d+ bytes/);
      return true;
    });
    assert.equal(await client.status('huge', 'root'), null);
    assert.equal((await client.queueStatus('huge')).total, 0);
    assert.equal((await client.queueStatus('huge-leaves')).total, 0);
    // The session is whole: a smaller tree is written at once.
    const ids = await client.flow(tree('huge', 'huge-leaves', 70));
    assert.equal(ids.children[8]?.children[69]?.id, 'leaf-8-69');
    assert.equal((await client.queueStatus('huge')).counts['waiting-children'], 10);
    assert.equal((await client.queueStatus('huge-leaves')).counts.queued, 630);
  });

  test("the layout: the parent's count and its /parents entry, the child's link, paid by its finish", async () => {
    const { client, zk, dir } = await freshStore();
    await client.flow({
      queue: 'p',
      payload: 'p',
      id: 'p',
      children: [
        { queue: 'c', payload: 1, id: 'c1', onChildFailure: 'ignore' },
        { queue: 'c', payload: 2, id: 'c2' },
      ],
    });
    const stateOf = async (queue: string, id: string): Promise<Record<string, unknown>> => {
      const buckets = await zk.children(`${dir}/${queue}/tasks`);
      for (const bucket of buckets) {
        if ((await zk.children(`${dir}/${queue}/tasks/${bucket}`)).includes(id)) {
          return JSON.parse((await zk.get(`${dir}/${queue}/tasks/${bucket}/${id}/state`)).toString()) as never;
        }
      }
      throw new Error(`${queue}/${id} not found`);
    };
    const parent = await stateOf('p', 'p');
    assert.equal(parent.state, 'waiting-children');
    assert.equal(parent.childrenLeft, 2);
    assert.deepEqual(parent.children, [
      ['c', 'c1'],
      ['c', 'c2'],
    ]);
    const [bucket] = await zk.children(`${dir}/p/parents`);
    assert.equal((await zk.children(`${dir}/p/parents/${bucket}`)).length, 1);
    const child = await stateOf('c', 'c1');
    assert.deepEqual([child.parent, child.owes, child.onChildFailure], [['p', 'p'], true, 'ignore']);

    const worker = client.worker('c', () => undefined);
    await waitFor(async () => (await client.status('p', 'p'))?.state === 'queued', { what: 'the parent to be queued' });
    await worker.stop();
    const released = await stateOf('p', 'p');
    assert.deepEqual([released.state, released.phase, released.childrenLeft], ['queued', 'pending', undefined]);
    assert.equal((await zk.children(`${dir}/p/parents/${bucket}`)).length, 0);
    const paid = await stateOf('c', 'c1');
    assert.deepEqual([paid.state, paid.owes, paid.parent], ['done-awaiting-gc', undefined, ['p', 'p']]);
  });

  test('children ending at once in four sessions and in one batch: each counted once, the parent runs once', async () => {
    const url = await freshStoreUrl(server);
    const clients = await Promise.all([open(url), open(url), open(url), open(url)]);
    const [first] = clients;
    const children = Array.from({ length: 40 }, (_, i) => ({ queue: 'kids', payload: i, id: `k${i}` }));
    await first.flow({ queue: 'top', payload: 'p', id: 'p', children });
    const runs: string[] = [];
    first.worker('top', (job) => {
      runs.push(job.id);
    });
    // Sibling finishes race across sessions, and chain the parent's version inside one batch's multi.
    for (const client of clients) client.worker('kids', () => undefined, { concurrency: 8 });
    await waitFor(async () => (await first.status('top', 'p'))?.state === 'done-awaiting-gc', {
      what: 'the parent to run',
      timeoutMs: 20_000,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(runs, ['p']);
    assert.equal((await first.queueStatus('kids')).counts['done-awaiting-gc'], 40);
    const seen = await first.getFlow('top', 'p');
    assert.equal(seen?.children.length, 40);
  });

  test("a big flow's children finished 64 at a time: the parent's state is set once per multi, and it runs", async () => {
    // The parent's state names its 500 children (about 30 KB): set once per sibling, 64 finishes in one multi
    // would pass the server's 1 MiB packet limit, and the server would drop the session each time.
    const client = await open(await freshStoreUrl(server));
    const children = Array.from({ length: 500 }, (_, i) => ({ queue: 'many', payload: i }));
    await client.flow({ queue: 'one', payload: 'p', id: 'p', children });
    const errors: unknown[] = [];
    client.worker('many', () => undefined, { concurrency: 64 }).on('error', (error) => errors.push(error));
    client.worker('one', () => undefined);
    await waitFor(async () => (await client.status('one', 'p'))?.state === 'done-awaiting-gc', {
      what: 'the parent to run',
      timeoutMs: 30_000,
    });
    assert.equal((await client.queueStatus('many')).counts['done-awaiting-gc'], 500);
    assert.deepEqual(errors, []);
  });
});
