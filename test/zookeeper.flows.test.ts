/**
 * Flows on ZooKeeper as a plain client sees them, and their one limit: a flow is one multi, so it must fit
 * ZooKeeper's packet limit (jute.maxbuffer, 1 MiB), which a bigger one would pass, closing the connection. Such a
 * flow is refused before it is sent, nothing written, and the session goes on.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StoreLimitError, type FlowTree } from '../src/index.js';
import { waitFor } from './support/wait.js';
import { freshStoreUrl, serverUrl } from './fixtures/zookeeper-env.js';
import { dirOf, fileClients } from './fixtures/zookeeper-clients.js';

const server = serverUrl();
const { open, plain } = fileClients(server);

/** A root, 9 parents and `leaves` leaves under each, in the queues `q` (parents) and `leafQueue`. */
function tree(q: string, leafQueue: string, leaves: number): FlowTree {
  return {
    queue: q,
    payload: 'root',
    id: 'root',
    children: Array.from({ length: 9 }, (_, i) => ({
      queue: q,
      payload: i,
      id: `mid-${i}`,
      children: Array.from({ length: leaves }, (__, j) => ({ queue: leafQueue, payload: j, id: `leaf-${i}-${j}` })),
    })),
  };
}

describe('zookeeper: flows', () => {
  test('a flow past the packet limit is refused with StoreLimitError before it is sent: nothing written', async () => {
    const client = await open(await freshStoreUrl(server));
    await assert.rejects(client.flow(tree('big', 'big-leaves', 110)), (error: unknown) => {
      assert.ok(error instanceof StoreLimitError, String(error));
      assert.match(error.message, /a flow of 1000 messages needs one ZooKeeper write of about \d+ bytes/);
      return true;
    });
    assert.equal(await client.status('big', 'root'), null);
    assert.equal(await client.status('big-leaves', 'leaf-0-0'), null);
    assert.equal((await client.queueStatus('big')).total, 0);
    assert.equal((await client.queueStatus('big-leaves')).total, 0);
    // The session is whole: the same tree, smaller, is written at once.
    const ids = await client.flow(tree('big', 'big-leaves', 70));
    assert.equal(ids.children[8]?.children[69]?.id, 'leaf-8-69');
    assert.equal((await client.queueStatus('big')).counts['waiting-children'], 10);
    assert.equal((await client.queueStatus('big-leaves')).counts.queued, 630);
  });

  test("the layout: the parent's count and its /parents entry, the child's link, paid by its finish", async () => {
    const url = await freshStoreUrl(server);
    const client = await open(url);
    const zk = await plain();
    const dir = dirOf(url);
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
