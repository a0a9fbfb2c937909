/**
 * Bad input on etcd: puts under a queue that are not part of the protocol, a delete outside the
 * protocol, an oversized value, a wrong password, a consumer deleting outside its own prefix. Each is
 * refused or ignored with a logged reason; the dispatcher keeps going and no accepted message is lost.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connect, KvmqError, StoreUnavailableError, type Client } from '../src/index.js';
import { openEtcdStore, type EtcdStore } from '../src/stores/etcd/store.js';
import { JobLog, waitForStatus } from './support/jobs.js';
import { waitFor } from './support/wait.js';
import { closedAfterAll, endpointsOf, etcdctl, isolatedUrl, startEtcd } from './fixtures/etcd-support.js';

const TIMEOUT_MS = 60_000;
const opened = closedAfterAll();

/** A store that dispatches `queue`, with its log kept for the test to read. */
async function dispatching(url: string, queue: string): Promise<{ store: EtcdStore; log: string[] }> {
  const log: string[] = [];
  const store = await openEtcdStore(url, (level, message) => log.push(`${level}: ${message}`));
  opened.add(() => store.close());
  store.dispatch(queue);
  await waitFor(() => store.host.dispatching(queue), { what: `a dispatcher for ${queue}` });
  return { store, log };
}

const client = (url: string): Promise<Client> => opened.client(url);

function prefixOf(url: string): string {
  return /\/t-[0-9a-f]+/.exec(url)?.[0] ?? '';
}

async function ctl(endpoints: string, args: string[]): Promise<string> {
  const res = await etcdctl(endpoints, args);
  assert.equal(res.code, 0, `etcdctl ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

void describe('etcd bad input', () => {
  void test(
    'puts under a queue that are not part of the protocol are ignored with a logged reason',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const endpoints = endpointsOf(url);
      const q = `${prefixOf(url)}/queue/noise`;
      const { log } = await dispatching(url, 'noise');
      const foreign = [
        `${q}/garbage`,
        `${q}/12345`,
        `${q}/producer/bad key`,
        `${q}/producer/a/b`,
        `${q}/consumer/x/not-an-idx/y`,
        `${q}/0000000000000000001/orphan`,
      ];
      for (const key of foreign) await ctl(endpoints, ['put', key, 'noise']);
      const kvmq = await client(url);
      const jobs = new JobLog();
      kvmq.worker('noise', (job) => jobs.record(job));
      await kvmq.enqueue('noise', 'fine', { id: 'fine' });
      await ctl(endpoints, ['put', `${q}/producer/plain`, 'also fine']);
      await jobs.handled('fine');
      await jobs.handled('plain', 1, { timeoutMs: 15_000 });
      for (const key of foreign.slice(0, 5)) {
        await waitFor(() => log.some((line) => line.includes(key)), {
          what: () => `a log line about ${key} (log: ${log.join(' | ')})`,
        });
      }
      // Nothing it ignored was removed: those keys are not kvmq's to delete.
      for (const key of foreign)
        assert.equal((await ctl(endpoints, ['get', '--print-value-only', key])).trim(), 'noise', key);
    },
  );

  void test(
    'an ordered key deleted outside the protocol is put back; the message is still handled',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const endpoints = endpointsOf(url);
      const prefix = prefixOf(url);
      const { log } = await dispatching(url, 'undelete');
      const kvmq = await client(url);
      await kvmq.enqueue('undelete', { keep: 'me' }, { id: 'keep' });
      const keys = (await ctl(endpoints, ['get', '--prefix', '--keys-only', `${prefix}/queue/undelete/`])).split('\n');
      const ordered = keys.find((k) => /\/\d{19}\/keep$/.test(k));
      assert.ok(ordered !== undefined);
      // A consumer mistaking the ordered key for its delivery deletes it.
      await ctl(endpoints, ['del', ordered]);
      await waitFor(
        async () => (await ctl(endpoints, ['get', '--print-value-only', ordered])).trim() === '{"keep":"me"}',
        {
          what: 'the ordered key to be restored',
        },
      );
      assert.ok(
        log.some((line) => line.includes(ordered) && /restor/.test(line)),
        `a log line about restoring ${ordered} (log: ${log.join(' | ')})`,
      );
      const jobs = new JobLog();
      kvmq.worker('undelete', (job) => jobs.record(job));
      assert.deepEqual((await jobs.handled('keep')).payload, { keep: 'me' });
    },
  );

  void test(
    'an oversized plain value fails with its reason, readable where it is; the queue keeps working',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const endpoints = endpointsOf(url);
      const key = `${prefixOf(url)}/queue/big/producer/huge`;
      const { log } = await dispatching(url, 'big');
      // etcdctl takes a value from stdin when none is given on the command line.
      const big = 'x'.repeat(1200 * 1024);
      const res = await etcdctl(endpoints, ['put', key], { input: big });
      assert.equal(res.code, 0, res.stderr);
      const kvmq = await client(url);
      const jobs = new JobLog();
      kvmq.worker('big', (job) => jobs.record(job));
      await kvmq.enqueue('big', 'small', { id: 'small' });
      await jobs.handled('small');
      await waitFor(() => log.some((line) => line.includes(key) && /over kvmq's limit/.test(line)), {
        what: () => `a log line about ${key} (log: ${log.join(' | ')})`,
      });
      assert.equal(jobs.of('huge').length, 0);
      assert.equal((await ctl(endpoints, ['get', '--keys-only', key])).trim(), key, 'not accepted, not lost');
      // Failed with the reason, counted and listed as such, its payload readable; remove deletes it.
      const failed = await waitForStatus(kvmq, 'big', 'huge', 'failed');
      assert.match(failed.lastError ?? '', /over kvmq's limit/);
      const status = await kvmq.queueStatus('big');
      assert.equal(status.counts.failed, 1);
      assert.equal(status.counts.queued, 0, 'the put is not counted as waiting too');
      const page = await kvmq.list('big', { state: 'failed' });
      assert.deepEqual(
        page.messages.map((m) => m.id),
        ['huge'],
      );
      const shown = await kvmq.show('big', 'huge');
      assert.equal((shown?.payload as Buffer).length, big.length);
      assert.deepEqual(await kvmq.retry('big', 'huge'), { ok: false, id: 'huge', state: 'failed' });
      assert.deepEqual(await kvmq.remove('big', 'huge'), { ok: true, id: 'huge', state: null });
      assert.equal((await ctl(endpoints, ['get', '--keys-only', key])).trim(), '', 'removed with the message');
      assert.equal((await kvmq.queueStatus('big')).counts.failed, 0);
    },
  );

  void test(
    'a record kvmq did not write is refused with StoreLayoutError, not overwritten',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const endpoints = endpointsOf(url);
      const record = `${prefixOf(url)}/queue/layout/kvmq/msg/taken`;
      await ctl(endpoints, ['put', record, 'not json']);
      const kvmq = await client(url);
      await assert.rejects(
        kvmq.enqueue('layout', 'x', { id: 'taken' }),
        (e: unknown) => e instanceof KvmqError && e.code === 'STORE_LAYOUT',
      );
      await assert.rejects(
        kvmq.status('layout', 'taken'),
        (e: unknown) => e instanceof KvmqError && e.code === 'STORE_LAYOUT',
      );
      assert.equal((await ctl(endpoints, ['get', '--print-value-only', record])).trim(), 'not json');
    },
  );

  void test(
    'a dead endpoint and a malformed URL are refused with errors that say what to do',
    { timeout: TIMEOUT_MS },
    async () => {
      await assert.rejects(
        connect('etcd://127.0.0.1:1'),
        (e: unknown) => e instanceof StoreUnavailableError && /etcd running/.test(e.message),
      );
      for (const bad of [
        'etcd://',
        'etcd://host',
        'etcd://h:99999',
        'etcd://h:2379/bad prefix',
        'etcd://h:2379?leaseTtlMs=10',
        'etcd://h:2379?dispatcherStallMs=10',
      ]) {
        await assert.rejects(connect(bad), (e: unknown) => e instanceof KvmqError && e.code === 'STORE_URL', bad);
      }
      await assert.rejects(
        connect('etcds://h:2379'),
        (e: unknown) => e instanceof KvmqError && /ca=FILE/.test(e.message),
      );
    },
  );

  void test(
    'with etcd auth: a wrong password is refused; a consumer cannot delete outside its own prefix',
    { timeout: 90_000 },
    async () => {
      const { node, cleanup } = await startEtcd();
      opened.add(cleanup);
      const ep = node.endpoints;
      const root = ['--user=root:rootpw'];
      await ctl(ep, ['user', 'add', 'root', '--new-user-password=rootpw', '--interactive=false']);
      await ctl(ep, ['role', 'add', 'root']);
      await ctl(ep, ['user', 'grant-role', 'root', 'root']);
      await ctl(ep, ['auth', 'enable']);
      // kvmq's own user: read-write on the queues.
      await ctl(ep, [...root, 'user', 'add', 'kvmq', '--new-user-password=kvmqpw', '--interactive=false']);
      await ctl(ep, [...root, 'role', 'add', 'queues']);
      await ctl(ep, [...root, 'role', 'grant-permission', 'queues', 'readwrite', '--prefix=true', '/queue/']);
      await ctl(ep, [...root, 'role', 'grant-permission', 'queues', 'readwrite', '--prefix=true', '/q/']);
      await ctl(ep, [...root, 'user', 'grant-role', 'kvmq', 'queues']);
      // A plain consumer: read the queue, write only under its own registration.
      await ctl(ep, [...root, 'user', 'add', 'worker-a', '--new-user-password=apw', '--interactive=false']);
      await ctl(ep, [...root, 'role', 'add', 'worker-a']);
      await ctl(ep, [...root, 'role', 'grant-permission', 'worker-a', 'read', '--prefix=true', '/queue/jobs/']);
      await ctl(ep, [
        ...root,
        'role',
        'grant-permission',
        'worker-a',
        'readwrite',
        '--prefix=true',
        '/queue/jobs/consumer/worker-a',
      ]);
      await ctl(ep, [...root, 'user', 'grant-role', 'worker-a', 'worker-a']);

      await assert.rejects(connect(`etcd://kvmq:wrong@${ep}`), (e: unknown) => {
        assert.ok(e instanceof KvmqError, String(e));
        assert.equal(e.code, 'STORE_AUTH');
        assert.match(e.message, /user name or password/);
        return true;
      });

      const kvmq = await client(`etcd://kvmq:kvmqpw@${ep}`);
      // Holds the message until the test ends; a forced stop (pushed last, so run first) ends the handler.
      const holder = kvmq.worker(
        'jobs',
        (job) => new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve())),
        {
          concurrency: 1,
        },
      );
      opened.add(async () => {
        await Promise.all([holder.stop(), holder.stop()]);
      });
      await kvmq.enqueue('jobs', 'held by kvmq', { id: 'held' });
      const held = await waitForStatus(kvmq, 'jobs', 'held', 'locked');
      const delivery = (
        await ctl(ep, [...root, 'get', '--prefix', '--keys-only', `/queue/jobs/consumer/${held.consumer ?? ''}/`])
      )
        .split('\n')
        .find((k) => k.endsWith('/held'));
      assert.ok(delivery !== undefined);
      const refused = await etcdctl(ep, ['--user=worker-a:apw', 'del', delivery]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /permission denied/);
      assert.equal((await kvmq.status('jobs', 'held'))?.state, 'locked', 'the other consumer still holds it');
      // Its own prefix is fine.
      await ctl(ep, ['--user=worker-a:apw', 'put', '/queue/jobs/consumer/worker-a', 'host-a']);
    },
  );
});
