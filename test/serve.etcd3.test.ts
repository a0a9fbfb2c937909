/**
 * The npm etcd3 client against `kvmq serve`, unchanged: ranges, the watch
 * builder (prefix, start revision, previous values, compaction), leases
 * (keep-alive, revoke, loss), locks, elections, STM and namespaces.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { Etcd3, type IKeyValue, type IOptions } from 'etcd3';
import { startServe, type ServeProcess } from './fixtures/serve-support.js';
import { waitFor } from './support/wait.js';

const LOCK_TTL_SECONDS = 3;

type Policy = NonNullable<NonNullable<IOptions['faultHandling']>['host']>;
const NEVER = new AbortController().signal;
/**
 * etcd3 (1.1.2) takes the CANCELLED of its own watch stream, cancelled when its last watcher goes, for a
 * failure of the host: it closes all its channels, so calls still waiting for one fail with UNAVAILABLE
 * "Channel closed before call started", and counts it in the host's circuit breaker, which opens for 5 s
 * after three. An election cancels watches three times within milliseconds, against etcd as against kvmq
 * serve. With one host a breaker has nowhere else to go: the client runs without it, and its retry of
 * calls that never started stays.
 */
const withoutBreaker: Policy = () =>
  ({
    execute: async (fn: (context: { signal: AbortSignal }) => unknown) => await fn({ signal: NEVER }),
  }) as unknown as ReturnType<Policy>;
const connect = (endpoint: string): Etcd3 =>
  new Etcd3({ hosts: `http://${endpoint}`, faultHandling: { host: withoutBreaker } });

describe('the etcd3 client on kvmq serve', () => {
  let server: ServeProcess;
  let client: Etcd3;

  before(async () => {
    server = await startServe();
    client = connect(server.endpoint);
  });

  after(async () => {
    client.close();
    await server.stop();
  });

  test('the etcd3 client’s put, get, ranges, count, delete and txn see each other’s writes', async () => {
    await client.put('kv/a').value('1');
    await client.put('kv/b').value('2');
    await client.put('kv/c').value('3');
    assert.equal(await client.get('kv/a').string(), '1');
    assert.deepEqual(await client.getAll().prefix('kv/').strings(), { 'kv/a': '1', 'kv/b': '2', 'kv/c': '3' });
    assert.deepEqual(await client.getAll().prefix('kv/').sort('Key', 'Descend').limit(2).keys(), ['kv/c', 'kv/b']);
    assert.equal(await client.getAll().prefix('kv/').count(), 3);
    const deleted = await client.delete().key('kv/b').exec();
    assert.equal(deleted.deleted, '1');
    assert.equal(await client.get('kv/b').string(), null);
    const txn = await client
      .if('kv/a', 'Value', '==', '1')
      .then(client.put('kv/a').value('one'))
      .else(client.get('kv/a'))
      .commit();
    assert.equal(txn.succeeded, true);
    assert.equal(await client.get('kv/a').string(), 'one');
  });

  test('the watch builder: prefix, previous values, history from a start revision', async () => {
    const first = await client.put('w/x').value('1').exec();
    const startRevision = first.header.revision;
    await client.put('w/x').value('2');
    await client.delete().key('w/x');
    const events: string[] = [];
    const watcher = await client.watch().prefix('w/').startRevision(startRevision).withPreviousKV().create();
    watcher.on('put', (kv: IKeyValue, previous?: IKeyValue) =>
      events.push(`put ${kv.key.toString()}=${kv.value.toString()} was ${previous?.value.toString() ?? '-'}`),
    );
    watcher.on('delete', (kv: IKeyValue, previous?: IKeyValue) =>
      events.push(`delete ${kv.key.toString()} was ${previous?.value.toString() ?? '-'}`),
    );
    await waitFor(() => events.length >= 3, { what: () => `history events, got ${JSON.stringify(events)}` });
    await client.put('w/y').value('live');
    await waitFor(() => events.length >= 4, { what: () => `a live event, got ${JSON.stringify(events)}` });
    assert.deepEqual(events, ['put w/x=1 was -', 'put w/x=2 was 1', 'delete w/x was 2', 'put w/y=live was -']);
    await watcher.cancel();
  });

  test('leases: keep-alive, keys deleted on revoke, loss seen by the holder', async () => {
    const lease = client.lease(3);
    await lease.put('leased/a').value('x');
    const id = await lease.grant();
    const renewed = new Promise<void>((resolve) => lease.once('keepaliveSucceeded', () => resolve()));
    await renewed;
    assert.equal(await client.get('leased/a').string(), 'x');
    const lost = new Promise<string>((resolve) => lease.on('lost', (error) => resolve(error.message)));
    // Someone else revokes the lease: its keys go at once and the holder hears of it.
    const other = connect(server.endpoint);
    try {
      await other.leaseClient.leaseRevoke({ ID: id });
    } finally {
      other.close();
    }
    assert.equal(await client.get('leased/a').string(), null);
    assert.match(await lost, /lease/i);
  });

  test('a lease that is not kept alive expires and takes its keys', { timeout: 30_000 }, async () => {
    const lease = client.lease(2, { autoKeepAlive: false });
    await lease.put('expiring/a').value('x');
    const watcher = await client.watch().key('expiring/a').create();
    const deleted = new Promise<void>((resolve) => watcher.on('delete', () => resolve()));
    await deleted;
    assert.equal(await client.get('expiring/a').string(), null);
    await watcher.cancel();
  });

  test('a lock is held by one client at a time', { timeout: 30_000 }, async () => {
    // Short leases: etcd3 leaves a timer of the lease's TTL behind a lock released at once, which would
    // keep this process alive for the default 30 s.
    const first = client.lock('the-lock').ttl(LOCK_TTL_SECONDS);
    await first.acquire();
    // etcd3's locks do not queue: a second acquire fails while the first holds.
    await assert.rejects(client.lock('the-lock').ttl(LOCK_TTL_SECONDS).acquire(), /Failed to acquire a lock/);
    await first.release();
    const inside = await client
      .lock('the-lock')
      .ttl(LOCK_TTL_SECONDS)
      .do(() => Promise.resolve('inside'));
    assert.equal(inside, 'inside');
  });

  test('elections: one leader, observers follow, resign hands over', { timeout: 30_000 }, async () => {
    const election = client.election('the-election', LOCK_TTL_SECONDS);
    const observer = await election.observe();
    const seen: string[] = [];
    observer.on('change', (value) => {
      if (value !== undefined) seen.push(value);
    });
    const alice = election.campaign('alice');
    await alice.wait();
    // etcd3's observer takes the last put of a watch response for the leader, and etcd sends puts of
    // consecutive revisions in one response: it must see alice before bob's key exists.
    await waitFor(() => seen.includes('alice'), { what: 'the observer to see alice' });
    const bob = election.campaign('bob');
    // Listened to from the start: bob may be elected before alice's resign has returned.
    const bobWaiting = once(bob, '_isWaiting');
    const bobElected = bob.wait();
    let elected = false;
    bob.on('elected', () => (elected = true));
    // etcd3's own event (for its tests): bob has seen alice's key and waits for it to go.
    await bobWaiting;
    assert.equal(await election.leader(), 'alice');
    assert.equal(elected, false);
    await alice.resign();
    await bobElected;
    await waitFor(() => seen.includes('bob'), { what: 'the observer to see bob' });
    assert.equal(await election.leader(), 'bob');
    await bob.resign();
    await observer.cancel();
  });

  test('STM: concurrent read-modify-write transactions do not lose updates', { timeout: 30_000 }, async () => {
    await client.put('stm/counter').value('0');
    const increment = (): Promise<unknown> =>
      client.stm({ retries: 50 }).transact(async (tx) => {
        const value = Number(await tx.get('stm/counter').string());
        await tx.put('stm/counter').value(String(value + 1));
      });
    await Promise.all(Array.from({ length: 10 }, increment));
    assert.equal(await client.get('stm/counter').string(), '10');
  });

  test('namespaces prefix every key', async () => {
    const ns = client.namespace('tenant/');
    await ns.put('k').value('v');
    assert.equal(await client.get('tenant/k').string(), 'v');
    assert.deepEqual(await ns.getAll().keys(), ['k']);
  });

  test('a future revision and an unknown lease fail with the errors the client knows', async () => {
    await assert.rejects(client.get('x').revision(1_000_000).exec(), /future revision/);
    await assert.rejects(
      client.put('bad-lease').value('v').lease('123456').exec(),
      (error: Error) => error.constructor.name === 'EtcdLeaseInvalidError' || /lease not found/.test(error.message),
    );
  });
});
