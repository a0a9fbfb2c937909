/**
 * ZooKeeper-only tests: the zkmq tree as a plain client (kazoo) sees it, a session that expires
 * mid-handler, bad URLs and foreign data. Restarts and ensembles are in zookeeper.cluster.test.ts.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';
import type * as Zk from 'node-zookeeper-client';
import {
  connect,
  KvmqError,
  PayloadTooLargeError,
  StoreLayoutError,
  StoreUrlError,
  type Client,
} from '../src/index.js';
import { gate, quietPeriod, waitFor } from './support/wait.js';
import { JobLog, waitForStatus } from './support/jobs.js';
import { freshStoreUrl, hostsOf, PlainClient, serverUrl, uniqueDir } from './fixtures/zookeeper-env.js';
import { isZkError, ZkCode, ZkSession } from '../src/stores/zookeeper/client.js';
import { storeOf } from '../src/client/client-store.js';
import { slowLink, type SlowLink } from './support/slow-link.js';
import { listAll } from './support/list-pages.js';

const run = promisify(execFile);
const server = serverUrl();
const hosts = hostsOf(server);
const TREE_SCRIPT = fileURLToPath(new URL('./fixtures/zookeeper-tree.py', import.meta.url));
const clients: Client[] = [];
const plains: PlainClient[] = [];
const links: SlowLink[] = [];

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const p of plains) p.close();
  await Promise.all(links.map((l) => l.close()));
});

async function open(url: string): Promise<Client> {
  const client = await connect(url, { maintenance: false });
  clients.push(client);
  return client;
}

async function plain(auth?: string): Promise<PlainClient> {
  const p = await PlainClient.connect(hosts, auth);
  plains.push(p);
  return p;
}

async function getText(p: PlainClient, path: string): Promise<string> {
  return (await p.get(path)).toString('utf8');
}

interface TreeNode {
  readonly data: string;
  readonly ephemeral: boolean;
  readonly children: string[];
}

/** The tree under `path`, read by kazoo in a separate Python process. */
async function kazooTree(path: string, auth?: string): Promise<Record<string, TreeNode>> {
  try {
    const { stdout } = await run('/usr/bin/python3', [TREE_SCRIPT, hosts, path, ...(auth ? [auth] : [])]);
    return JSON.parse(stdout) as Record<string, TreeNode>;
  } catch (error) {
    if (/No module named 'kazoo'/.test(String(error))) {
      throw new Error('the layout test reads the tree with kazoo: apt-get install python3-kazoo', { cause: error });
    }
    throw error;
  }
}

function sessionOf(client: Client): ZkSession {
  return (storeOf(client) as unknown as { zk: ZkSession }).zk;
}

/**
 * Ends a client's ZooKeeper session from outside, as the server does when it times out: the client's link is cut
 * (so it cannot take the session back, as it would by reconnecting), a twin client resumes the session directly
 * and closes it, and the link is mended. Resolves once the client runs on a new session.
 */
async function expireSession(client: Client, link: SlowLink): Promise<void> {
  const session = sessionOf(client);
  const epoch = session.epoch;
  const credentials = session.credentials();
  assert.ok(credentials !== null, 'the client has a live session to end');
  link.cut();
  let twin = 'no answer';
  try {
    twin = await closeSession(credentials);
  } finally {
    link.mend();
  }
  await waitFor(() => session.epoch !== epoch, {
    what: `the client to run on a new session (the twin closing the old one: ${twin})`,
    timeoutMs: 30_000,
  });
}

/**
 * Resumes a session by its id and password and closes it: ZooKeeper ends it, its ephemeral nodes with it.
 * Returns what the twin saw: 'connected' then 'disconnected' on close, or 'expired' (the session was gone).
 */
async function closeSession(credentials: { id: Buffer; password: Buffer }): Promise<string> {
  const zk = createRequire(import.meta.url)('node-zookeeper-client') as typeof Zk;
  const twin = zk.createClient(hosts, {
    sessionTimeout: 6000,
    sessionId: credentials.id,
    sessionPassword: credentials.password,
  } as never);
  const outcome = (events: string[], timeoutMs: number): Promise<string> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), timeoutMs);
      for (const event of events) {
        twin.once(event, () => {
          clearTimeout(timer);
          resolve(event);
        });
      }
    });
  const resumed = outcome(['connected', 'expired'], 10_000);
  twin.connect();
  const result = await resumed;
  const closed = outcome(['disconnected'], 5000);
  twin.close();
  const end = await closed;
  // Expired: the session was gone already, which is what the caller wants.
  assert.notEqual(result, 'timeout', 'a twin client resumed the session in order to close it');
  return `${result}, then ${end}`;
}

describe('zookeeper: the zkmq layout, as a plain client reads it', () => {
  test('queue, tasks, consumers, conf and lock, with an ephemeral claim and consumer', async () => {
    const url = await freshStoreUrl(server);
    const dir = new URL(url.replace(/^zookeeper:/, 'http:')).pathname;
    const client = await open(url);
    const q = 'layout';
    await client.configure(q, { gcLifetimeMs: 120_000, gcIntervalMs: 15_000, filterEnums: { size: ['s', 'm'] } });
    await client.enqueue(q, { hello: 'world' }, { id: 'waiting', metadata: { a: 1 }, filters: { size: 'm' } });
    const release = gate();
    const log = new JobLog();
    const worker = client.worker(
      q,
      async (job) => {
        log.record(job);
        await release.opened;
      },
      { filters: { size: 's' }, eoqBackoffMs: 50 },
    );
    await client.enqueue(q, 'held', { id: 'held' });
    await log.handled('held');
    await waitFor(async () => (await client.queueStatus(q)).consumers.some((c) => c.holding.includes('held')));

    const tree = await kazooTree(dir);
    const node = (path: string): TreeNode => {
      const found = tree[`${dir}${path}`];
      assert.ok(found, `${dir}${path} exists (tree: ${Object.keys(tree).join(', ')})`);
      return found;
    };
    assert.deepEqual(node('').children.sort(), ['_kvmq', q]);
    assert.deepEqual(node(`/${q}`).children.sort(), [
      'conf',
      'consumers',
      'debounce',
      'done',
      'events',
      'expiry',
      'failed',
      'group-rates',
      'groups',
      'lock',
      'parents',
      'queue',
      'rate',
      'schedules',
      'tasks',
      'turns',
      'waiting',
    ]);
    assert.equal(node(`/${q}/conf/task_gc_lifetime`).data, '120000');
    assert.equal(node(`/${q}/conf/paused`).data, 'false');
    assert.equal(node(`/${q}/conf/max_deliveries`).data, '10');
    assert.equal(node(`/${q}/conf/failed_lifetime`).data, '604800000');
    assert.equal(node(`/${q}/conf/dead_letter_queue`).data, '');
    assert.equal(node(`/${q}/conf/task_gc_interval`).data, '15000');
    assert.deepEqual(JSON.parse(node(`/${q}/conf/filters`).data), { size: ['s', 'm'] });
    assert.equal(node(`/${q}/conf/events`).data, 'false');
    assert.equal(node(`/${q}/conf/events_max_count`).data, '10000');
    assert.equal(node(`/${q}/conf/events_max_age`).data, '86400000');
    // Events off: the log stays empty.
    assert.deepEqual(node(`/${q}/events`).children, []);

    // Pending entries: one sub-queue per filter class, in numbered buckets.
    const classes = node(`/${q}/queue`).children.sort();
    assert.deepEqual(classes, ['none', 'size=m']);
    const [bucket] = node(`/${q}/queue/size=m`).children;
    assert.match(bucket ?? '', /^\d{10}$/);
    const [entry] = node(`/${q}/queue/size=m/${bucket}`).children;
    assert.match(entry ?? '', /^\d{13}-waiting-\d{10}$/);
    // The held message keeps its entry while locked.
    const noneBucket = node(`/${q}/queue/none`).children[0];
    assert.match(node(`/${q}/queue/none/${noneBucket}`).children[0] ?? '', /^\d{13}-held-\d{10}$/);

    const taskOf = (id: string): string => {
      const path = Object.keys(tree).find((p) => p.endsWith(`/tasks/${p.split('/').at(-2) ?? ''}/${id}`));
      assert.ok(path, `task ${id}`);
      return path.slice(dir.length);
    };
    const waiting = taskOf('waiting');
    assert.match(waiting, new RegExp(`^/${q}/tasks/[0-9a-f]{3}/waiting$`));
    assert.deepEqual(node(waiting).children.sort(), ['data', 'filters', 'metadata', 'state']);
    assert.deepEqual(JSON.parse(node(`${waiting}/data`).data), { hello: 'world' });
    assert.deepEqual(JSON.parse(node(`${waiting}/metadata`).data), { a: 1 });
    assert.equal(node(`${waiting}/filters/size`).data, 'm');
    assert.equal((JSON.parse(node(`${waiting}/state`).data) as { state: string }).state, 'queued');

    const held = taskOf('held');
    assert.deepEqual(node(held).children.sort(), ['claim', 'data', 'filters', 'metadata', 'state']);
    assert.equal(node(`${held}/claim`).data, worker.id);
    assert.equal(node(`${held}/claim`).ephemeral, true);
    assert.equal((JSON.parse(node(`${held}/state`).data) as { state: string }).state, 'locked');

    const consumer = node(`/${q}/consumers`).children[0] ?? '';
    assert.equal(consumer, worker.id);
    assert.equal(node(`/${q}/consumers/${consumer}`).ephemeral, false);
    assert.equal(node(`/${q}/consumers/${consumer}/current`).ephemeral, true);
    assert.deepEqual((JSON.parse(node(`/${q}/consumers/${consumer}/current`).data) as { holding: string[] }).holding, [
      'held',
    ]);
    assert.ok(tree[`${dir}/${q}/lock`]);

    release.open();
    await waitForStatus(client, q, 'held', 'done-awaiting-gc');
    const done = await kazooTree(`${dir}/${q}/done`);
    assert.ok(
      Object.keys(done).some((p) => /\/\d{13}-held-\d{10}$/.test(p)),
      'a done entry for GC',
    );
    await worker.stop();
  });
});

describe('zookeeper: claim on finish', () => {
  const consumer = { id: 'ahead-consumer', host: 'h', pid: 1, ttlMs: 30_000 };
  const request = (lockMs: number) => ({
    consumerId: consumer.id,
    max: 1,
    lockMs,
    accepts: null,
    eoqBackoffMs: () => 1000,
  });
  const success = (id: string) => ({
    id,
    attempt: 1,
    outcome: 'success' as const,
    backoffMs: 0,
    error: null,
    startedAt: null,
  });

  /** Claims `id` for the consumer, then waits until the reads that claim sent ahead are in. */
  async function claimOne(client: Client, q: string, id: string, lockMs: number): Promise<void> {
    const claimed = await storeOf(client).claim(q, request(lockMs));
    assert.deepEqual(
      claimed.messages.map((m) => [m.id, m.attempt]),
      [[id, 1]],
    );
    // Asked after them on the same session, so answered after them.
    await client.status(q, id);
  }

  test('a finish claims the next message for its consumer; its next claim takes it; unregistering puts one back', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'ahead';
    await client.enqueueBatch(
      q,
      ['a', 'b', 'c'].map((id) => ({ payload: id, id })),
    );
    await storeOf(client).registerConsumer(q, consumer);
    await claimOne(client, q, 'a', 30_000);

    // One multi finished `a` and claimed `b`, for the consumer that will ask next.
    assert.deepEqual(await storeOf(client).finish(q, consumer.id, [success('a')]), ['ok']);
    const ahead = await client.status(q, 'b');
    assert.equal(ahead?.state, 'locked');
    assert.equal(ahead.consumer, consumer.id);
    assert.equal(ahead.attempt, 1);
    assert.equal((await client.status(q, 'c'))?.state, 'queued');
    await claimOne(client, q, 'b', 30_000);

    assert.deepEqual(await storeOf(client).finish(q, consumer.id, [success('b')]), ['ok']);
    assert.equal((await client.status(q, 'c'))?.state, 'locked');
    // The consumer goes away without asking: `c` is as it was before, attempt 0, and another takes it.
    await storeOf(client).unregisterConsumer(q, consumer.id);
    const back = await client.status(q, 'c');
    assert.equal(back?.state, 'queued');
    assert.equal(back.attempt, 0);
    assert.equal(back.consumer, null);
    const log = new JobLog();
    const worker = client.worker(q, (job) => log.record(job));
    assert.equal((await log.handled('c')).attempt, 1);
    await worker.stop();
    assert.deepEqual(log.ids(), ['c']);
  });

  test('a message claimed on finish that its consumer does not collect goes back by itself', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'uncollected';
    await client.enqueueBatch(
      q,
      ['a', 'b'].map((id) => ({ payload: id, id })),
    );
    await storeOf(client).registerConsumer(q, consumer);
    await claimOne(client, q, 'a', 6000);
    assert.deepEqual(await storeOf(client).finish(q, consumer.id, [success('a')]), ['ok']);
    assert.equal((await client.status(q, 'b'))?.attempt, 1);
    // Put back after a third of the lock (attempt 0 again), not left to the lock's end (which keeps attempt 1).
    await waitFor(async () => (await client.status(q, 'b'))?.attempt === 0, {
      what: 'the uncollected message to go back',
      timeoutMs: 20_000,
    });
    assert.equal((await client.status(q, 'b'))?.state, 'queued');
    await storeOf(client).unregisterConsumer(q, consumer.id);
  });
});

describe('zookeeper: counts from the index sub-trees', () => {
  test('counts stay exact through a revive, a requeue, a promote and a failure; GC prunes ended backoffs', async () => {
    const url = await freshStoreUrl(server);
    const dir = new URL(url.replace(/^zookeeper:/, 'http:')).pathname;
    const client = await open(url);
    const p = await plain();
    const q = 'counts';
    const consumer = 'counter';
    const finish = (id: string, attempt: number, outcome: 'success' | 'error', backoffMs = 0) =>
      storeOf(client).finish(q, consumer, [{ id, attempt, outcome, backoffMs, error: null, startedAt: Date.now() }]);
    const claimAll = async (): Promise<string[]> => {
      const claimed = await storeOf(client).claim(q, {
        consumerId: consumer,
        max: 10,
        lockMs: 60_000,
        accepts: null,
        eoqBackoffMs: () => 1000,
      });
      return claimed.messages.map((m) => m.id).sort();
    };
    const counts = async (): Promise<Record<string, number>> =>
      Object.fromEntries(Object.entries((await client.queueStatus(q)).counts).filter(([, n]) => n > 0));
    const entries = async (list: string): Promise<number> => {
      let n = 0;
      for (const bucket of await p.children(`${dir}/${q}/${list}`)) {
        n += (await p.children(`${dir}/${q}/${list}/${bucket}`)).length;
      }
      return n;
    };

    await client.enqueueBatch(q, [
      { payload: 1, id: 'a' },
      { payload: 2, id: 'b' },
      { payload: 3, id: 'later', initialBackoffMs: 60_000 },
    ]);
    assert.deepEqual(await claimAll(), ['a', 'b']);
    assert.deepEqual(await finish('a', 1, 'success'), ['ok']);
    assert.deepEqual(await finish('b', 1, 'success', 60_000), ['ok']);
    assert.deepEqual(await counts(), { 'queued-with-backoff': 1, 'done-awaiting-gc': 1, 'done-with-backoff': 1 });
    assert.equal(await entries('waiting'), 2, 'two backoffs: later (pending), b (done)');

    // A revive and a requeue take the message out of the done list in their own multi.
    assert.equal((await client.enqueue(q, 'again', { id: 'a' })).ok, true);
    assert.equal((await client.enqueue(q, 'again', { id: 'b', allowRequeue: true })).ok, true);
    assert.equal(await entries('done'), 0);
    assert.deepEqual(await counts(), { queued: 1, 'queued-with-backoff': 1, 'done-with-requeue': 1 });

    assert.deepEqual(
      (await storeOf(client).promote(q, ['later', 'b'])).map((r) => r.ok),
      [true, true],
    );
    assert.deepEqual(await counts(), { queued: 3 });
    assert.deepEqual(await claimAll(), ['a', 'b', 'later']);
    assert.deepEqual(await counts(), { queued: 3 }, 'a consumer that did not register holds no counted locks');
    assert.deepEqual(await finish('later', 1, 'error'), ['ok']);
    assert.deepEqual(await finish('a', 1, 'success'), ['ok']);
    assert.deepEqual(await finish('b', 1, 'success'), ['ok']);
    assert.deepEqual(await counts(), { 'done-awaiting-gc': 2, failed: 1 });
    assert.equal(await entries('failed'), 1);

    // The backoffs that ended (promoted) leave their entries until GC prunes them.
    await client.configure(q, { gcLifetimeMs: 3_600_000 });
    assert.equal(await entries('waiting'), 2);
    assert.equal((await client.gc(q)).ran, true);
    assert.equal(await entries('waiting'), 2, 'not yet ended: the entries wait for their own time');
  });
});

describe('zookeeper: a queued listing reads buckets as far as its page needs', () => {
  async function queuedIds(client: Client, q: string): Promise<string[]> {
    return (await listAll(client, q, { state: 'queued', limit: 1 })).map((m) => m.id);
  }

  test('ready messages behind a full bucket held back are listed in order, again from remembered bounds', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'front';
    const held = Array.from({ length: 2000 }, (_, i) => ({ payload: i, id: `held-${i}`, initialBackoffMs: 3_600_000 }));
    await client.enqueueBatch(q, held);
    for (const id of ['r1', 'r2', 'r3']) await client.enqueue(q, id, { id });
    assert.deepEqual(await queuedIds(client, q), ['r1', 'r2', 'r3']);
    // The second walk starts from each bucket's remembered lowest ready time.
    assert.deepEqual(await queuedIds(client, q), ['r1', 'r2', 'r3']);
    await client.enqueue(q, 'r4', { id: 'r4' });
    assert.deepEqual(await queuedIds(client, q), ['r1', 'r2', 'r3', 'r4']);
  });

  test('a bucket remembered as not ready yet is read again once a message is added', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'later';
    await client.enqueue(q, 'held', { id: 'held', initialBackoffMs: 3_600_000 });
    assert.deepEqual(await queuedIds(client, q), []);
    await client.enqueue(q, 'now', { id: 'now' });
    assert.deepEqual(await queuedIds(client, q), ['now']);
  });
});

describe('zookeeper: indexes under concurrency', () => {
  test('two clients racing over one queue leave counts and listings equal to every status', async () => {
    const url = await freshStoreUrl(server);
    const a = await open(url);
    const b = await open(url);
    const q = 'race';
    const n = 120;
    const handler = (job: { id: string }) => {
      const i = Number(job.id.slice(1));
      if (i % 3 === 0) return { status: 'error' as const, error: `bad ${i}` };
      return { status: 'success' as const, backoffMs: i % 3 === 1 ? 60_000 : 0 };
    };
    a.worker(q, handler, { concurrency: 8, eoqBackoffMs: 20 });
    b.worker(q, handler, { concurrency: 8, eoqBackoffMs: 20 });
    const ids = Array.from({ length: n }, (_, i) => `m${i}`);
    await Promise.all([
      a.enqueueBatch(
        q,
        ids.filter((_, i) => i % 2 === 0).map((id) => ({ payload: id, id })),
      ),
      b.enqueueBatch(
        q,
        ids.filter((_, i) => i % 2 === 1).map((id) => ({ payload: id, id })),
      ),
    ]);
    await waitFor(async () => (await Promise.all(ids.map((id) => a.status(q, id)))).every((s) => s?.outcome !== null), {
      what: 'every message to be handled',
      timeoutMs: 30_000,
    });
    const tally: Record<string, number> = {};
    for (const id of ids) {
      const state = (await a.status(q, id))?.state ?? 'gone';
      tally[state] = (tally[state] ?? 0) + 1;
    }
    assert.deepEqual(tally, { failed: 40, 'done-with-backoff': 40, 'done-awaiting-gc': 40 });
    const counts = (await b.queueStatus(q)).counts;
    assert.deepEqual(Object.fromEntries(Object.entries(counts).filter(([, c]) => c > 0)), tally);
    // Paged in sevens, each failed message comes once.
    const listed = (await listAll(b, q, { state: 'failed', limit: 7 })).map((m) => m.id);
    assert.deepEqual(listed.sort(), ids.filter((_, i) => i % 3 === 0).sort());
    assert.equal(await b.retryFailed(q).then((r) => r.retried), 40);
  });
});

describe('zookeeper: sessions', () => {
  test('a session that expires mid-handler: the message is handled again, the late ack is refused', async () => {
    const url = await freshStoreUrl(server);
    const q = 'expiry';
    const link = await slowLink(hosts, 0);
    links.push(link);
    const first = await open(url.replace(hosts, link.address));
    const second = await open(url);
    const release = gate();
    const hold = gate();
    const log = new JobLog();
    const errors: unknown[] = [];
    const stale = first.worker(
      q,
      async (job) => {
        log.record(job);
        await release.opened;
        return { status: 'error', error: 'late outcome from an expired session' };
      },
      { lockMs: 30_000, eoqBackoffMs: 50, onError: (e) => errors.push(e) },
    );
    // A failed assertion must not leave the handlers waiting: the clients' close waits for them.
    try {
      await first.enqueue(q, 'x', { id: 'm' });
      const seen = await log.handled('m', 1);
      await expireSession(first, link);

      // The claim went with the session: another consumer takes the message long before its 30 s lock ends.
      const takeover = new JobLog();
      const fresh = second.worker(
        q,
        async (job) => {
          takeover.record(job);
          await hold.opened;
        },
        { eoqBackoffMs: 50 },
      );
      const taken = await takeover.handled('m', 2, { timeoutMs: 15_000 }).catch(async (error: unknown) => {
        const seenBySecond = JSON.stringify(await second.status(q, 'm'));
        throw new Error(`no takeover; the second client sees ${seenBySecond}`, { cause: error });
      });
      assert.equal(taken.attempt, 2);
      // The expired worker learns it lost the message.
      await waitFor(() => seen.job.signal.aborted, { what: 'the expired handler to be aborted', timeoutMs: 15_000 });

      // Its late outcome (and any direct finish for that attempt) changes nothing.
      release.open();
      const late = { id: 'm', attempt: 1, outcome: 'error' as const, backoffMs: 0, error: 'late', startedAt: null };
      assert.deepEqual(await storeOf(first).finish(q, stale.id, [late]), ['lost']);
      const status = await first.status(q, 'm');
      assert.equal(status?.state, 'locked');
      assert.equal(status.consumer, fresh.id);
      assert.equal(status.attempt, 2);

      hold.open();
      const done = await waitForStatus(second, q, 'm', 'done-awaiting-gc');
      assert.equal(done.outcome, 'success');
      assert.equal(done.lastError, null);
      // The first client works on in a new session.
      await first.enqueue(q, 'y', { id: 'after' });
      // Either worker may take it: the first one's handler returns an error (failed), the second succeeds.
      await waitFor(
        async () => ['failed', 'done-awaiting-gc'].includes((await second.status(q, 'after'))?.state ?? ''),
        {
          what: 'the message enqueued after the expiry to be handled',
          timeoutMs: 10_000,
        },
      );
      await stale.stop();
      await fresh.stop();
    } finally {
      release.open();
      hold.open();
    }
  });
});

describe('zookeeper: bad input', () => {
  test('a URL without a dir, or with a bad dir or option, is refused with StoreUrlError', async () => {
    for (const url of [
      server,
      `${server}/`,
      `${server}/a b`,
      `${server}/zookeeper`,
      `zookeeper:///kvmq`,
      `${server}/kvmq?sessionTimeoutMs=5`,
      `zookeeper://user@${hosts}/kvmq`,
    ]) {
      await assert.rejects(connect(url), (error: unknown) => {
        assert.ok(error instanceof StoreUrlError, `${url}: ${String(error)}`);
        assert.match(error.message, /zookeeper:\/\//);
        return true;
      });
    }
  });

  test('a missing chroot is refused with a clear StoreUrlError, and nothing is written', async () => {
    const dir = uniqueDir('missing');
    await assert.rejects(connect(`${server}${dir}`), (error: unknown) => {
      assert.ok(error instanceof StoreUrlError, String(error));
      assert.match(error.message, /does not exist/);
      assert.match(error.message, /create/);
      return true;
    });
    assert.equal(await (await plain()).exists(dir), null);
  });

  test('a dir holding nodes that are not kvmq’s is refused, and nothing is written', async () => {
    const p = await plain();
    const dir = uniqueDir('foreign');
    await p.create(dir);
    await p.create(`${dir}/someone-elses`, 'data');
    await assert.rejects(connect(`${server}${dir}`), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /someone-elses/);
      return true;
    });
    assert.deepEqual(await p.children(dir), ['someone-elses']);

    // A queue name that is taken by a node kvmq did not make is refused too.
    const url = await freshStoreUrl(server, p);
    const client = await open(url);
    await p.create(`${new URL(url.replace(/^zookeeper:/, 'http:')).pathname}/taken`, 'not a queue');
    await assert.rejects(client.enqueue('taken', 'x'), StoreLayoutError);
    await assert.rejects(client.worker('taken', () => undefined, { autoStart: false }).start(), StoreLayoutError);
  });

  test('a wrong password is refused with a clear error, and nothing is written', async () => {
    const owner = await plain('kvmq-user:right');
    const dir = uniqueDir('auth');
    await owner.create(dir, '', 'creator');
    const good = await open(`zookeeper://kvmq-user:right@${hosts}${dir}`);
    await good.enqueue('q', 'x', { id: 'm' });
    const before = await owner.children(dir);
    for (const bad of ['kvmq-user:wrong', 'other:right']) {
      await assert.rejects(connect(`zookeeper://${bad}@${hosts}${dir}`), (error: unknown) => {
        assert.ok(error instanceof KvmqError, String(error));
        assert.equal(error.code, 'STORE_AUTH');
        assert.match(error.message, /password/);
        assert.doesNotMatch(error.message, /wrong@|right@/, 'the password is not shown');
        return true;
      });
    }
    await assert.rejects(connect(`${server}${dir}`), (e: unknown) => e instanceof KvmqError && e.code === 'STORE_AUTH');
    assert.deepEqual(await owner.children(dir), before);
    // Only the owner can read what kvmq created.
    assert.equal((await good.status('q', 'm'))?.state, 'queued');
  });

  test('a message whose metadata takes it over the packet limit is refused, nothing written', async () => {
    const client = await open(await freshStoreUrl(server));
    const metadata = { blob: 'x'.repeat(900_000) };
    await assert.rejects(
      client.enqueueBatch('q', [
        { payload: 'small', id: 'fine' },
        { payload: 'x'.repeat(200_000), id: 'big', metadata },
      ]),
      (error: unknown) => {
        assert.ok(error instanceof PayloadTooLargeError);
        assert.deepEqual([error.code, error.part, error.id], ['PAYLOAD_TOO_LARGE', 'message', 'big']);
        assert.match(error.message, /packet limit/);
        return true;
      },
    );
    assert.equal(await client.status('q', 'fine'), null);
    assert.equal((await client.queueStatus('q')).total, 0);
  });
});

describe('zookeeper: requests kvmq encodes itself', () => {
  test('a multi gives each operation its result; a failed one names the operation and changes nothing', async () => {
    const zk = sessionOf(await open(await freshStoreUrl(server)));
    const results = await zk.multi([
      { op: 'create', path: '/a', data: Buffer.from('1') },
      { op: 'create', path: '/a/seq-', kind: 'sequential' },
      { op: 'set', path: '/a', data: Buffer.from('2'), version: 0 },
      { op: 'check', path: '/a', version: 1 },
    ]);
    assert.equal(results[0]?.path, '/a');
    assert.match(results[1]?.path ?? '', /^\/a\/seq-\d{10}$/);
    assert.equal(results[2]?.version, 1);
    await assert.rejects(
      zk.multi([
        { op: 'create', path: '/b' },
        { op: 'set', path: '/a', data: Buffer.from('3'), version: 0 },
        { op: 'remove', path: '/a', version: -1 },
      ]),
      (error: unknown) => isZkError(error, ZkCode.BadVersion) && error.opIndex === 1 && error.path === '/a',
    );
    const [a, b] = await zk.getMany(['/a', '/b']);
    assert.equal(a?.data.toString(), '2');
    assert.equal(b, null);
  });

  test('multis and reads travel as kvmq’s own requests, not the client’s (its private fields still fit)', async () => {
    // direct.ts patches node-zookeeper-client's internals (the version is pinned); were they to change,
    // requests would quietly go the client's slower way and every other test would still pass.
    const zk = sessionOf(await open(await freshStoreUrl(server)));
    const before = zk.sent.direct;
    await zk.multi([{ op: 'create', path: '/d', data: Buffer.from('x') }]);
    assert.equal(zk.sent.direct - before, 1, 'the multi went through direct.ts');
    const [d, missing] = await zk.getMany(['/d', '/none']);
    assert.equal(zk.sent.direct - before, 2, 'the reads went through direct.ts in one request');
    assert.equal(d?.data.toString(), 'x');
    assert.equal(missing, null);
  });

  test('reads asked in one tick come back in order, with versions, null where a node is missing', async () => {
    const zk = sessionOf(await open(await freshStoreUrl(server)));
    const big = Buffer.alloc(100_000, 7); // a reply larger than one socket read
    await zk.create('/a', Buffer.from('first'));
    await zk.set('/a', Buffer.from('second'), 0);
    await zk.create('/big', big);
    const before = { ...zk.sent };
    // More paths in one tick than one request carries: they travel in several.
    const asked = Array.from({ length: 150 }, (_, i) =>
      zk.getMany(i % 2 === 0 ? ['/a', '/missing', '/big'] : ['/big', '/a']),
    );
    const answers = await Promise.all(asked);
    assert.equal(zk.sent.reads - before.reads, 75 * 3 + 75 * 2);
    // 375 paths: two requests of at most 256.
    assert.equal(zk.sent.readRequests - before.readRequests, 2);
    answers.forEach((answer, i) => {
      const [a, missing, large] = i % 2 === 0 ? answer : [answer[1], null, answer[0]];
      assert.equal(a?.data.toString(), 'second');
      assert.equal(a.version, 1);
      assert.equal(missing, null);
      assert.ok(large?.data.equals(big), `reply ${i}: the 100 KB node`);
      assert.equal(large?.version, 0);
    });
  });

  test('a node the session may not read fails the reads asked with it', async () => {
    const dir = (await freshStoreUrl(server)).slice(server.length);
    const owner = sessionOf(await open(`zookeeper://kvmq-user:right@${hosts}${dir}`));
    await owner.create('/mine', Buffer.from('x'));
    const stranger = await ZkSession.open({
      hosts,
      chroot: dir,
      auth: null,
      sessionTimeoutMs: 10_000,
      requestTimeoutMs: 10_000,
    });
    try {
      await assert.rejects(stranger.getMany(['/', '/mine']), (error: unknown) => isZkError(error, ZkCode.NoAuth));
      assert.deepEqual(
        (await stranger.getMany(['/'])).map((r) => r?.version),
        [0],
      );
    } finally {
      stranger.close();
    }
  });
});

describe('zookeeper: queue events as sequential nodes', () => {
  const consumer = 'events-consumer';
  const claim = (client: Client, q: string, max = 10) =>
    storeOf(client).claim(q, { consumerId: consumer, max, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 });
  const finish = (client: Client, q: string, id: string, attempt: number, outcome: 'success' | 'error' | 'retry') =>
    storeOf(client).finish(q, consumer, [
      { id, attempt, outcome, backoffMs: 0, error: outcome === 'success' ? null : `boom ${id}`, startedAt: Date.now() },
    ]);
  const summary = (events: readonly { type: string; id: string; attempt: number; error?: string }[]) =>
    events.map((e) => `${e.type} ${e.id} ${e.attempt}${e.error === undefined ? '' : ` ${e.error}`}`);

  test('each transition writes its node in its own multi, readable by a plain client; none while off', async () => {
    const url = await freshStoreUrl(server);
    const dir = new URL(url.replace(/^zookeeper:/, 'http:')).pathname;
    const client = await open(url);
    const q = 'ev-layout';
    await client.enqueue(q, 'before', { id: 'before' });
    await client.configure(q, { events: true });
    await client.enqueue(q, 'a', { id: 'a' });
    await client.enqueue(q, 'b', { id: 'b' });
    await client.enqueue(q, 'c', { id: 'c' });
    await client.enqueue(q, 'a', { id: 'a' }); // refused: its id exists, no event
    assert.deepEqual((await claim(client, q, 4)).messages.map((m) => m.id).sort(), ['a', 'b', 'before', 'c']);
    assert.deepEqual(await finish(client, q, 'a', 1, 'success'), ['ok']);
    assert.deepEqual(await finish(client, q, 'b', 1, 'retry'), ['ok']);
    assert.deepEqual(await finish(client, q, 'c', 1, 'error'), ['ok']);
    // A late finish (wrong attempt) is refused, and writes nothing.
    assert.deepEqual(await finish(client, q, 'before', 7, 'success'), ['lost']);
    assert.deepEqual(await client.remove(q, 'b'), { ok: true, id: 'b', state: null });
    assert.deepEqual(await client.retry(q, 'c'), { ok: true, id: 'c', state: 'queued' });

    const page = await client.readEvents(q);
    const started = summary(page.events.filter((e) => e.type === 'started')).sort();
    assert.deepEqual(started, ['started a 1', 'started b 1', 'started before 1', 'started c 1']);
    assert.deepEqual(summary(page.events.filter((e) => e.type !== 'started')), [
      'enqueued a 0',
      'enqueued b 0',
      'enqueued c 0',
      'completed a 1',
      'retrying b 1 boom b',
      'failed c 1 boom c',
      'removed b 1',
      'enqueued c 0',
    ]);
    assert.equal(page.missed, false);
    assert.equal(page.cursor, page.events.at(-1)?.cursor);
    assert.ok(page.events.every((e, i) => i === 0 || e.cursor > (page.events[i - 1]?.cursor ?? '')));

    // As any client sees them: e<count>_<ten digits>, a JSON array of events each, one node per multi.
    const p = await plain();
    const names = (await p.children(`${dir}/${q}/events`)).sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)));
    const stored: unknown[][] = [];
    for (const name of names) {
      const [, count] = /^e(\d+)_\d{10}$/.exec(name) ?? [];
      const data = JSON.parse(await getText(p, `${dir}/${q}/events/${name}`)) as unknown[][];
      assert.equal(data.length, Number(count), name);
      stored.push(...data);
    }
    assert.deepEqual(
      stored.map((fields) => fields.slice(0, 4)),
      page.events.map((e) => [e.type, e.id, e.attempt, e.at]),
    );
    assert.ok(page.events.every((e) => /^\d{10}\.\d{5}$/.test(e.cursor)));

    // Off again: transitions write nothing more.
    await client.configure(q, { events: false });
    await client.enqueue(q, 'd', { id: 'd' });
    const after = await client.readEvents(q, { after: page.cursor });
    assert.deepEqual(after.events, []);
    assert.equal(after.cursor, page.cursor);
  });

  test('pages follow the cursor exactly; a malformed cursor is a TypeError; head reads nothing yet', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'ev-pages';
    // A queue that does not exist: nothing, from a head that later events come after.
    const empty = await client.readEvents(q);
    assert.deepEqual(empty, { events: [], missed: false, cursor: '0000000000.00000' });
    assert.equal(await storeOf(client).eventsHead(q), '0000000000.00000');
    await client.configure(q, { events: true });
    const ids = Array.from({ length: 25 }, (_, i) => `m${String(i).padStart(2, '0')}`);
    await client.enqueueBatch(
      q,
      ids.map((id) => ({ payload: id, id })),
    );
    const head = await storeOf(client).eventsHead(q);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await client.readEvents(q, { ...(cursor === undefined ? {} : { after: cursor }), limit: 7 });
      assert.ok(page.events.length <= 7);
      seen.push(...page.events.map((e) => e.id));
      if (page.events.length === 0) {
        assert.equal(page.cursor, cursor);
        break;
      }
      cursor = page.cursor;
    }
    assert.deepEqual(seen, ids);
    assert.equal((await client.readEvents(q, { after: head })).events.length, 0);
    await client.enqueue(q, 'late', { id: 'late' });
    assert.deepEqual(
      (await client.readEvents(q, { after: head })).events.map((e) => e.id),
      ['late'],
    );
    for (const bad of ['abc', '12', '0000000001', '0000000001.0001', '-000000001.00000']) {
      await assert.rejects(storeOf(client).readEvents(q, bad, 10), (error: unknown) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.match(error.message, /not one the ZooKeeper store makes/);
        return true;
      });
    }
  });

  test('GC trims by count and by age, records the mark; a reader behind it is told it missed events', async () => {
    const url = await freshStoreUrl(server);
    const dir = new URL(url.replace(/^zookeeper:/, 'http:')).pathname;
    const client = await open(url);
    const p = await plain();
    const q = 'ev-trim';
    await client.configure(q, { events: true, eventsMaxCount: 5 });
    // One at a time: a multi's events share a node, and trims remove whole nodes.
    for (let i = 0; i < 12; i++) await client.enqueue(q, i, { id: `t${i}` });
    const first = await client.readEvents(q, { limit: 1 });
    assert.equal(first.events[0]?.id, 't0');
    assert.equal((await storeOf(client).gc(q, true)).ran, true);

    const kept = await client.readEvents(q);
    assert.deepEqual(
      kept.events.map((e) => e.id),
      ['t7', 't8', 't9', 't10', 't11'],
    );
    assert.equal(kept.missed, false, 'a read from the oldest kept misses nothing');
    const behind = await client.readEvents(q, { after: first.cursor });
    assert.equal(behind.missed, true);
    assert.equal(behind.events[0]?.id, 't7', 'the page starts at the oldest kept');
    // After the last trimmed one (the position of t7's node): nothing missed.
    const t7node = Number(kept.events[0]?.cursor.slice(0, 10)) - 1;
    const afterT6 = `${String(t7node).padStart(10, '0')}.00000`;
    assert.equal((await client.readEvents(q, { after: afterT6 })).missed, false);
    const mark = JSON.parse(await getText(p, `${dir}/${q}/events`)) as { trimmedTo: number };
    assert.equal(mark.trimmedTo, t7node);

    // By age: everything older than the age goes at the next GC, whatever the count.
    await client.configure(q, { eventsMaxAgeMs: 1, eventsMaxCount: 1000 });
    const newest = kept.events.at(-1)?.at ?? 0;
    await waitFor(() => Date.now() > newest + 1);
    await storeOf(client).gc(q, true);
    const aged = await client.readEvents(q, { after: kept.events[0]?.cursor ?? '' });
    assert.deepEqual(aged.events, []);
    assert.equal(aged.missed, true);
    // Numbers go on from where they were (the parent's cversion counts deletions too): no cursor is reused.
    await client.enqueue(q, 'fresh', { id: 'fresh' });
    const fresh = await client.readEvents(q, { after: kept.cursor });
    assert.deepEqual(
      fresh.events.map((e) => e.id),
      ['fresh'],
    );
    assert.ok((fresh.events[0]?.cursor ?? '') > kept.cursor);
  });

  test('a batch shares a node per multi; many big nodes read in order; age trims them whole', async () => {
    const url = await freshStoreUrl(server);
    const dir = new URL(url.replace(/^zookeeper:/, 'http:')).pathname;
    const client = await open(url);
    const q = 'ev-big';
    await client.configure(q, { events: true });
    const ids = Array.from({ length: 3000 }, (_, i) => `b${String(i).padStart(4, '0')}`);
    await client.enqueueBatch(
      q,
      ids.map((id) => ({ payload: id, id })),
    );
    const p = await plain();
    const names = await p.children(`${dir}/${q}/events`);
    assert.ok(names.length < 100, `a node per multi, not per event (${names.length} nodes)`);
    const page = await client.readEvents(q, { limit: 10_000 });
    assert.deepEqual(
      page.events.map((e) => e.id),
      ids,
    );
    await client.configure(q, { eventsMaxAgeMs: 1 });
    const newest = page.events.at(-1)?.at ?? 0;
    await waitFor(() => Date.now() > newest + 1);
    await storeOf(client).gc(q, true);
    const after = await client.readEvents(q, { after: page.events[0]?.cursor ?? '' });
    assert.deepEqual(after.events, []);
    assert.equal(after.missed, true);
  });

  test('writers trim on their own every thousand events, without waiting for GC', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'ev-trim-soon';
    await client.configure(q, { events: true, eventsMaxCount: 100 });
    // In multis of a few hundred: the write after the thousandth event starts a trim.
    await client.enqueueBatch(
      q,
      Array.from({ length: 1100 }, (_, i) => ({ payload: i, id: `s${i}` })),
    );
    await client.enqueue(q, 'last', { id: 'last' });
    const page = await waitFor(
      async () => {
        const read = await client.readEvents(q, { limit: 10_000 });
        return read.events[0]?.id !== 's0' && read;
      },
      { what: 'the oldest events trimmed' },
    );
    // Never more than the bound plus what writers add between trims; the newest always kept.
    assert.ok(page.events.length >= 100 && page.events.length <= 100 + 1000, String(page.events.length));
    assert.equal(page.events.at(-1)?.id, 'last');
    assert.equal(page.events.at(-2)?.id, 's1099');
  });

  test('clear removes the events; a reader after it is told it missed some', async () => {
    const client = await open(await freshStoreUrl(server));
    const q = 'ev-clear';
    await client.configure(q, { events: true });
    await client.enqueueBatch(q, [
      { payload: 1, id: 'x' },
      { payload: 2, id: 'y' },
    ]);
    const first = await client.readEvents(q, { limit: 1 });
    await client.clear(q);
    const after = await client.readEvents(q, { after: first.cursor });
    assert.deepEqual(after.events, []);
    assert.equal(after.missed, true);
    await client.enqueue(q, 'z', { id: 'z' });
    assert.deepEqual(
      (await client.readEvents(q, { after: after.cursor })).events.map((e) => e.id),
      ['z'],
    );
  });

  test('a subscriber in another process is called for new events; nothing after unsubscribe or close', async () => {
    const url = await freshStoreUrl(server);
    const writer = await open(url);
    const reader = await open(url);
    const q = 'ev-watch';
    let calls = 0;
    const unsubscribe = storeOf(reader).subscribeEvents(q, () => (calls += 1));
    // The queue does not exist yet: its making is seen, and then its events.
    await writer.configure(q, { events: true });
    await waitFor(() => calls > 0, { what: 'a call once the queue exists' });
    for (let i = 0; i < 3; i++) {
      const before = calls;
      await writer.enqueue(q, i, { id: `w${i}` });
      await waitFor(() => calls > before, { what: `a call for event ${i}` });
    }
    unsubscribe();
    const other = storeOf(reader).subscribeEvents(q, () => (calls += 1));
    const before = calls;
    await writer.enqueue(q, 'w3', { id: 'w3' });
    await waitFor(() => calls > before);
    other();
    storeOf(reader).subscribeEvents(q, () => (calls += 1));
    await reader.close();
    const closedAt = calls;
    await writer.enqueue(q, 'w4', { id: 'w4' });
    await quietPeriod();
    assert.equal(calls, closedAt, 'nothing is called after close');
  });
});

describe('zookeeper: turns and the queue list', () => {
  test('of many racing clients exactly one takes a turn; it comes again once everyMs passed', async () => {
    const url = await freshStoreUrl(server);
    const [a, b, c] = await Promise.all([open(url), open(url), open(url)]);
    const q = 'turns';
    const takes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        storeOf(i % 3 === 0 ? a : i % 3 === 1 ? b : c).takeTurn(q, 'monitor.size', 60_000),
      ),
    );
    assert.equal(takes.filter(Boolean).length, 1);
    assert.equal(await storeOf(a).takeTurn(q, 'monitor.size', 60_000), false);
    // Another name, or a short interval: its own turn.
    assert.equal(await storeOf(b).takeTurn(q, '..', 60_000), true);
    assert.equal(await storeOf(b).takeTurn(q, 'quick', 20), true);
    await waitFor(() => storeOf(c).takeTurn(q, 'quick', 20), { what: 'the turn again' });
  });

  test('queues() lists the queue dirs by name, not the marker or foreign nodes', async () => {
    const url = await freshStoreUrl(server);
    const dir = new URL(url.replace(/^zookeeper:/, 'http:')).pathname;
    const client = await open(url);
    assert.deepEqual(await client.queues(), []);
    await client.enqueue('b-queue', 1);
    await client.configure('a-queue', { paused: true });
    const p = await plain();
    await p.create(`${dir}/not-a-queue`, 'hello');
    assert.deepEqual(await client.queues(), ['a-queue', 'b-queue']);
  });
});
