/**
 * What only the Redis store promises: Carmine's key layout as redis-cli sees
 * it, no accepted message lost when Redis restarts from its AOF, batching into
 * single script calls, and clear errors (nothing half-written) for a wrong
 * password, foreign keys under the prefix, a huge batch and a Redis out of memory.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { connect, StoreLayoutError, StoreUnavailableError, StoreUrlError, type Client } from '../src/index.js';
import { maxDeliveriesError } from '../src/model/history.js';
import type { Finish } from '../src/stores/contract/contract.js';
import { MESSAGE_STATES, type MessageState, type QueueConfig } from '../src/model/types.js';
import { start, type RedisServer, type RedisServerOptions } from '../scripts/servers/redis.mjs';
import { redisCli, redisTestUrl, testPrefixes } from './fixtures/redis-server.js';
import { quietPeriod, waitFor } from './support/wait.js';
import { listAll } from './support/list-pages.js';
import { storeOf } from '../src/client/client-store.js';
import { ENQUEUE_CALL_MESSAGES } from '../src/stores/redis/enqueue.js';
import { list, text } from '../src/stores/redis/codec.js';
import { SCRIPTS } from '../src/stores/redis/scripts.generated.js';
import type { Scripts } from '../src/stores/redis/scripts.js';

const base = redisTestUrl();
const dir = mkdtempSync(join(tmpdir(), 'kvmq-redis-store-'));
const servers: RedisServer[] = [];
const { unique: uniquePrefix, open } = testPrefixes(base);

// Registered after testPrefixes' hook, so it runs once the clients have closed.
after(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  rmSync(dir, { recursive: true, force: true });
});

/** A redis-server of the test's own, in its own directory, stopped after the file. */
async function dedicated(options: RedisServerOptions = {}): Promise<RedisServer> {
  const server = await start(mkdtempSync(join(dir, 'server-')), options);
  servers.push(server);
  return server;
}

function one(url: string, ...args: string[]): string {
  return redisCli(url, ...args)[0] ?? '';
}

/** A claim of up to `max` messages by consumer `c`, every filter class accepted, each locked for `lockMs`. */
function claimUpTo(client: Client, q: string, max: number, lockMs = 60_000) {
  return storeOf(client).claim(q, { consumerId: 'c', max, lockMs, accepts: null, eoqBackoffMs: () => 1000 });
}

/** Plain successes (no backoff, no error) of the first attempt, as a worker finishes them. */
function successes(ids: readonly string[]): Finish[] {
  return ids.map((id) => ({ id, attempt: 1, outcome: 'success', backoffMs: 0, error: null, startedAt: 1 }));
}

function redisNow(url: string): number {
  const [seconds, micros] = redisCli(url, 'TIME').map(Number);
  return (seconds ?? 0) * 1000 + Math.floor((micros ?? 0) / 1000);
}

void describe('redis store', () => {
  void test("layout: with prefix carmine:mq, redis-cli sees Carmine's keys with their types and meanings", async () => {
    const url = `${base}?prefix=carmine:mq`;
    const client = await open(url);
    const q = `layout-${process.pid}-${randomBytes(3).toString('hex')}`;
    const key = (name: string): string => `carmine:mq:{${q}}:${name}`;
    await client.configure(q, { filterEnums: { size: ['s', 'm'] } });

    await client.enqueue(q, { n: 1 }, { id: 'held' });
    await client.enqueue(q, { n: 2 }, { id: 'later', initialBackoffMs: 60_000 });
    await client.enqueue(q, { n: 3 }, { id: 'sized', filters: { size: 'm' }, metadata: { by: 'layout' } });
    const unfiltered = (filterClass: string): boolean => filterClass === '';
    const eoq = (): number => 60_000;
    const claim = (max: number) =>
      storeOf(client).claim(q, {
        consumerId: 'layout-consumer',
        max,
        lockMs: 60_000,
        accepts: unfiltered,
        eoqBackoffMs: eoq,
      });
    assert.deepEqual(
      (await claim(1)).messages.map((m) => m.id),
      ['held'],
    );
    await client.enqueue(q, { n: 1 }, { id: 'held', allowRequeue: true });
    await client.enqueue(q, { n: 4 }, { id: 'finished' });
    assert.deepEqual(
      (await claim(1)).messages.map((m) => m.id),
      ['finished'],
    );
    const finish = {
      id: 'finished',
      attempt: 1,
      outcome: 'success' as const,
      backoffMs: 0,
      error: null,
      startedAt: null,
    };
    assert.deepEqual(await storeOf(client).finish(q, 'layout-consumer', [finish]), ['ok']);
    // Nothing left that this consumer accepts: a dry run sets the queue-wide backoff.
    assert.equal((await claim(1)).dryRuns, 1);
    await client.enqueue(q, { n: 5 }, { id: 'waiting' });
    const now = redisNow(base);

    // The nine keys of the seed, with the seed's types.
    const seedTypes: Record<string, string> = {
      messages: 'hash',
      locks: 'hash',
      backoffs: 'hash',
      nattempts: 'hash',
      'mid-circle': 'list',
      done: 'set',
      requeue: 'set',
      'eoq-backoff?': 'string',
      'ndry-runs': 'string',
    };
    for (const [name, type] of Object.entries(seedTypes)) assert.equal(one(base, 'TYPE', key(name)), type, name);

    // messages: {mid mcontent}; the content is an encoding tag ('J' JSON, 'B' bytes) then the payload.
    assert.deepEqual(redisCli(base, 'HKEYS', key('messages')).sort(), [
      'finished',
      'held',
      'later',
      'sized',
      'waiting',
    ]);
    assert.equal(one(base, 'HGET', key('messages'), 'sized'), 'J{"n":3}');
    // locks and backoffs: {mid expiry-ms}, on the Redis server's clock.
    const lock = Number(one(base, 'HGET', key('locks'), 'held'));
    assert.ok(lock > now && lock <= now + 60_000, `lock ${lock} vs now ${now}`);
    const backoff = Number(one(base, 'HGET', key('backoffs'), 'later'));
    assert.ok(backoff > now && backoff <= now + 60_000, `backoff ${backoff} vs now ${now}`);
    assert.equal(one(base, 'HGET', key('nattempts'), 'held'), '1');
    assert.equal(one(base, 'HGET', key('nattempts'), 'finished'), '1');
    // mid-circle: the ready ids without filters, next on the right; each filter class has its own list.
    assert.deepEqual(redisCli(base, 'LRANGE', key('mid-circle'), '0', '-1'), ['waiting']);
    assert.deepEqual(redisCli(base, 'LRANGE', key('mid-circle:size=m'), '0', '-1'), ['sized']);
    assert.deepEqual(redisCli(base, 'SMEMBERS', key('done')), ['finished']);
    assert.deepEqual(redisCli(base, 'SMEMBERS', key('requeue')), ['held']);
    assert.ok(Number(one(base, 'PTTL', key('eoq-backoff?'))) > 0, 'eoq-backoff? is a flag with a TTL');
    assert.equal(one(base, 'GET', key('ndry-runs')), '1');

    // Every key of the queue carries the queue name as its hash tag, and is one kvmq documents (no `dedupe`
    // or `outcomes`: a success without backoff that leaves its message done writes neither).
    const documented = [
      ...Object.keys(seedTypes),
      'mid-circle:size=m',
      'metadata',
      'filters',
      'classes',
      'holders',
      'enqueued-at',
      'updated-at',
      'schedule',
      'lock-expiry',
      'done-at',
      'pushes',
      'requeue-locks',
      'conf',
      'layout',
    ];
    const keys = redisCli(base, 'KEYS', `carmine:mq:{${q}}:*`).map((k) => k.slice(`carmine:mq:{${q}}:`.length));
    assert.deepEqual(keys.sort(), documented.sort());
    assert.equal(one(base, 'HGET', key('metadata'), 'sized'), '{"by":"layout"}');
    // holders: the consumer, the attempt it was handed and the claim's time.
    assert.match(one(base, 'HGET', key('holders'), 'held'), /^layout-consumer 1 \d{13}$/);
    assert.equal(one(base, 'HGET', key('conf'), 'filter_enums'), '{"size":["s","m"]}');

    // clear() deletes the nine keys (and kvmq's), keeping the configuration.
    await client.clear(q);
    assert.deepEqual(redisCli(base, 'KEYS', `carmine:mq:{${q}}:*`), ['carmine:mq:{' + q + '}:conf']);
    redisCli(base, 'UNLINK', key('conf'));
    redisCli(base, 'SREM', 'carmine:mq:queues', q);
  });

  void test('enqueues of one tick go in calls of 32; a worker claims and finishes many per call', async () => {
    const server = await dedicated();
    const client = await open(`${server.url}?prefix=calls`);
    const q = 'calls';
    await client.enqueue(q, 'warm-up');
    redisCli(server.url, 'CONFIG', 'RESETSTAT');
    const results = await Promise.all(Array.from({ length: 64 }, (_, i) => client.enqueue(q, { i })));
    assert.ok(results.every((r) => r.ok));
    assert.equal(scriptCalls(server).fcall, 64 / ENQUEUE_CALL_MESSAGES, 'FCALLs for 64 enqueues of one tick');

    redisCli(server.url, 'CONFIG', 'RESETSTAT');
    let handled = 0;
    const worker = client.worker(q, () => void (handled += 1), { concurrency: 64, eoqBackoffMs: 60_000 });
    await waitFor(() => handled === 65, { what: '65 messages handled' });
    await worker.stop();
    // Start-up (config, registration, GC) plus a few claims and finish batches: far fewer than one per message.
    const calls = scriptCalls(server).fcall;
    assert.ok(calls < 20, `${calls} script calls for 65 messages`);
  });

  void test('a server that lost its functions (FUNCTION FLUSH) is given the library again by the next call', async () => {
    const server = await dedicated();
    const client = await open(`${server.url}?prefix=flushed`);
    const q = 'flushed';
    await client.enqueue(q, 'warm-up', { id: 'warm-up' });
    redisCli(server.url, 'FUNCTION', 'FLUSH');
    redisCli(server.url, 'CONFIG', 'RESETSTAT');
    await sendBothKinds(client, q);
    assert.deepEqual(scriptCalls(server), { fcall: 2, evalsha: 0, eval: 0 }, 'not found, loaded, then the call again');
    await handleThree(client, q);
  });

  void test('an ACL user without FCALL: calls go by EVALSHA, and after SCRIPT FLUSH through EVAL', async () => {
    const server = await dedicated();
    const { host } = new URL(server.url);
    redisCli(server.url, 'ACL', 'SETUSER', 'no-functions', 'on', '>pw', '~*', '&*', '+@all', '-fcall', '-function');
    const client = await open(`redis://no-functions:pw@${host}?prefix=scripted`);
    const q = 'scripted';
    await client.enqueue(q, 'warm-up', { id: 'warm-up' });
    redisCli(server.url, 'SCRIPT', 'FLUSH');
    redisCli(server.url, 'CONFIG', 'RESETSTAT');
    await sendBothKinds(client, q);
    assert.deepEqual(scriptCalls(server), { fcall: 0, evalsha: 1, eval: 1 }, 'NOSCRIPT, then the same call by EVAL');
    await handleThree(client, q);
  });

  void test('a command the ACL refuses inside a function fails the call once, not again by EVALSHA', async () => {
    const server = await dedicated();
    const { host } = new URL(server.url);
    redisCli(server.url, 'ACL', 'SETUSER', 'no-xadd', 'on', '>pw', '~*', '&*', '+@all', '-xadd');
    const client = await open(`redis://no-xadd:pw@${host}?prefix=refused`);
    const q = 'refused';
    // With events on, the enqueue's function writes the message, then its event: XADD, refused.
    await client.configure(q, { events: true });
    redisCli(server.url, 'CONFIG', 'RESETSTAT');
    await assert.rejects(client.enqueue(q, 'x', { id: 'm' }), StoreUrlError);
    assert.deepEqual(scriptCalls(server), { fcall: 1, evalsha: 0, eval: 0 });
    // Calls still go by FCALL.
    await client.configure(q, { events: false });
    assert.deepEqual(await client.enqueue(q, 'y', { id: 'n' }), { ok: true, id: 'n', action: 'added' });
    assert.equal(scriptCalls(server).evalsha, 0);
  });

  void test('Redis killed and restarted from its AOF mid-run: every accepted message is handled', async () => {
    // `appendfsync always`: a reply means the write is on disk, so even a crash of Redis keeps it.
    const server = await dedicated({ args: ['--appendfsync', 'always'] });
    await produceAcrossRestart(server, () => server.restart('SIGKILL'));
  });

  void test('Redis shut down and restarted from its AOF mid-run (appendfsync everysec): nothing accepted is lost', async () => {
    const server = await dedicated();
    await produceAcrossRestart(server, () => server.restart('SIGTERM'));
  });

  void test('a wrong password or user is refused with a StoreUrlError that says so, and leaks no password', async () => {
    const server = await dedicated({ password: 'right-password' });
    const at = server.url.slice('redis://'.length);
    for (const url of [`redis://:wrong-password@${at}`, server.url, `redis://nobody:right-password@${at}`]) {
      await assert.rejects(connect(url), (error: unknown) => {
        assert.ok(error instanceof StoreUrlError, `${url}: ${String(error)}`);
        assert.match(error.message, /refused the credentials/);
        assert.match(error.message, /user and password/);
        assert.doesNotMatch(error.message, /wrong-password|right-password/);
        return true;
      });
    }
    // An ACL user with its own password works.
    redisCli(
      `redis://:right-password@${at}`,
      'ACL',
      'SETUSER',
      'kvmq-user',
      'on',
      '>user-password',
      '~*',
      '&*',
      '+@all',
    );
    const client = await open(`redis://kvmq-user:user-password@${at}?prefix=acl`);
    assert.deepEqual(await client.enqueue('acl', 'x', { id: 'm' }), { ok: true, id: 'm', action: 'added' });
    assert.equal((await client.status('acl', 'm'))?.state, 'queued');
  });

  void test('a Redis that may evict keys without a TTL (allkeys-*) is refused: it would drop queued messages', async () => {
    const server = await dedicated({ args: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'] });
    await assert.rejects(
      connect(`${server.url}?prefix=evicting`),
      (error: unknown) =>
        error instanceof StoreUrlError &&
        /maxmemory-policy allkeys-lru/.test(error.message) &&
        /noeviction/.test(error.message),
    );
  });

  void test('rediss:// with &ca=FILE: queues and wake-ups over TLS; an untrusted certificate is refused', async () => {
    const certs = mkdtempSync(join(dir, 'tls-'));
    const file = (name: string): string => join(certs, name);
    const openssl = (...args: string[]): void => {
      const run = spawnSync('openssl', args, { encoding: 'utf8' });
      assert.equal(run.status, 0, `openssl ${args.join(' ')}: ${run.stderr}`);
    };
    openssl(
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=kvmq test CA'],
      ...['-keyout', file('ca.key'), '-out', file('ca.pem')],
    );
    openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=127.0.0.1',
      '-keyout',
      file('server.key'),
      '-out',
      file('server.csr'),
    );
    writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
    openssl(
      ...['x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key')],
      ...['-CAcreateserial', '-days', '2', '-extfile', file('san.ext'), '-out', file('server.pem')],
    );
    const server = await dedicated({ tls: { cert: file('server.pem'), key: file('server.key'), ca: file('ca.pem') } });
    assert.ok(server.tlsUrl !== null);

    await assert.rejects(
      connect(`${server.tlsUrl}?prefix=tls`),
      (error: unknown) => error instanceof StoreUrlError && /certificate is not trusted/.test(error.message),
    );
    const client = await open(`${server.tlsUrl}?prefix=tls&ca=${encodeURIComponent(file('ca.pem'))}`);
    const handled: string[] = [];
    const worker = client.worker('tls', (job) => void handled.push(job.id), { eoqBackoffMs: 60_000 });
    await waitFor(async () => (await client.queueStatus('tls')).dryRuns >= 1, { what: 'the worker to go idle' });
    // Only a wake-up (over the TLS subscriber connection) brings the idle worker back this soon.
    await client.enqueue('tls', 'over TLS', { id: 'm' });
    await waitFor(() => handled.includes('m'), { what: 'the message to be handled', timeoutMs: 10_000 });
    await worker.stop();
  });

  void test('a server that is not there is a transient StoreUnavailableError', async () => {
    const server = await dedicated();
    await server.stop();
    await assert.rejects(connect(`${server.url}?prefix=gone`), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError, String(error));
      assert.equal(error.transient, true);
      assert.match(error.message, /cannot reach Redis at 127\.0\.0\.1:\d+\/0/);
      return true;
    });
  });

  void test('bad store URLs are refused with StoreUrlError before connecting', async () => {
    for (const [url, pattern] of [
      ['redis://127.0.0.1:6379/zero', /database number/],
      ['redis://127.0.0.1:6379?prefix=a{b}', /no braces/],
      ['redis://127.0.0.1:6379?prefix=', /prefix/],
      ['redis://127.0.0.1:6379?db=2', /unknown option 'db'/],
      ['redis://', /no host/],
    ] as const) {
      await assert.rejects(
        connect(url),
        (error: unknown) => error instanceof StoreUrlError && pattern.test(error.message),
      );
    }
  });

  void test('a key of the wrong type under the prefix: StoreLayoutError naming it, nothing written', async () => {
    const prefix = uniquePrefix('foreign');
    const url = `${base}?prefix=${prefix}`;
    const client = await open(url);
    redisCli(base, 'SET', `${prefix}:{q}:done`, 'not a set');
    await assert.rejects(client.enqueue('q', 'x', { id: 'm' }), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, new RegExp(`${prefix}:\\{q\\}:done holds a string, not the set`));
      assert.match(error.message, /another prefix/);
      return true;
    });
    assert.equal(one(base, 'EXISTS', `${prefix}:{q}:messages`), '0');
    await assert.rejects(client.status('q', 'm'), StoreLayoutError);

    // A filter class's ready list is checked before anything is written too.
    await client.configure('f', { filterEnums: { size: ['s', 'm'] } });
    redisCli(base, 'HSET', `${prefix}:{f}:mid-circle:size=m`, 'a', 'b');
    await assert.rejects(
      client.enqueueBatch('f', [
        { payload: 1, id: 'plain' },
        { payload: 2, id: 'sized', filters: { size: 'm' } },
      ]),
      (error: unknown) => error instanceof StoreLayoutError && /mid-circle:size=m holds a hash/.test(error.message),
    );
    assert.equal(one(base, 'EXISTS', `${prefix}:{f}:messages`), '0');
    assert.equal(one(base, 'EXISTS', `${prefix}:{f}:mid-circle`), '0');
  });

  void test('a batch larger than one script call carries is stored in order, every message whole', async () => {
    const prefix = uniquePrefix('large');
    const client = await open(`${base}?prefix=${prefix}`);
    const limit = storeOf(client).capabilities.maxPayloadBytes;
    const items = Array.from({ length: 20 }, (_, i) => ({ id: `big-${i}`, payload: Buffer.alloc(limit, i) }));
    const results = await client.enqueueBatch('large', items);
    assert.deepEqual(
      results.map((r) => (r.ok ? r.id : r.state)),
      items.map((item) => item.id),
    );
    assert.equal(Number(one(base, 'HSTRLEN', `${prefix}:{large}:messages`, 'big-7')), limit + 1);
    await client.clear('large');
  });

  void test('a batch mixing plain messages (id and content only) with others keeps its order and every option', async () => {
    const prefix = uniquePrefix('shapes');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'shapes';
    const results = await client.enqueueBatch(q, [
      { id: 'p1', payload: { n: 1 } },
      { id: 'meta', payload: { n: 2 }, metadata: { by: 'test' } },
      { id: 'p2', payload: Buffer.from([1, 2]) },
      { id: 'later', payload: { n: 3 }, initialBackoffMs: 60_000 },
      { id: 'tried', payload: { n: 4 }, attempts: 7 },
      { id: 'p3', payload: 'three' },
      { id: 'p1', payload: { n: 5 } },
    ]);
    assert.deepEqual(
      results.map((r) => (r.ok ? r.action : r.state)),
      ['added', 'added', 'added', 'added', 'added', 'added', 'queued'],
    );
    const claimed = await claimUpTo(client, q, 10);
    assert.deepEqual(
      claimed.messages.map((m) => m.id),
      ['p1', 'meta', 'p2', 'tried', 'p3'],
    );
    const byId = new Map(claimed.messages.map((m) => [m.id, m]));
    assert.deepEqual(byId.get('meta')?.metadata, { by: 'test' });
    assert.deepEqual(byId.get('p1')?.metadata, {});
    assert.equal(byId.get('p2')?.encoding, 'bytes');
    assert.deepEqual([...(byId.get('p2')?.payload ?? [])], [1, 2]);
    assert.equal(byId.get('p1')?.policy, null);
    assert.match(byId.get('tried')?.policy ?? '', /7/);
    assert.equal((await client.status(q, 'later'))?.state, 'queued-with-backoff');
  });

  void test('the keys of held messages turn from listpacks to hash tables once they hold 32, with no entry added', async () => {
    const prefix = uniquePrefix('wide');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'wide';
    const key = (name: string): string => `${prefix}:{${q}}:${name}`;
    await client.enqueueBatch(
      q,
      Array.from({ length: 60 }, (_, i) => ({ payload: i, id: `w${String(i).padStart(2, '0')}` })),
    );
    const claim = async (max: number): Promise<string[]> => (await claimUpTo(client, q, max)).messages.map((m) => m.id);
    const encodings = (): string[] =>
      ['locks', 'holders', 'lock-expiry'].map((k) => one(base, 'OBJECT', 'ENCODING', key(k)));

    const held = await claim(5);
    assert.deepEqual(encodings(), ['listpack', 'listpack', 'listpack']);
    held.push(...(await claim(40)));
    assert.equal(held.length, 45);
    // Each lookup and write is a hash lookup now, not a scan of the listpack.
    assert.deepEqual(encodings(), ['hashtable', 'hashtable', 'skiplist']);
    const sorted = [...held].sort();
    assert.deepEqual(redisCli(base, 'HKEYS', key('locks')).sort(), sorted);
    assert.deepEqual(redisCli(base, 'HKEYS', key('holders')).sort(), sorted);
    assert.deepEqual(redisCli(base, 'ZRANGE', key('lock-expiry'), '0', '-1').sort(), sorted);

    assert.deepEqual(
      await storeOf(client).finish(q, 'c', successes(held)),
      held.map(() => 'ok'),
    );
    for (const name of ['locks', 'holders', 'lock-expiry']) assert.equal(one(base, 'EXISTS', key(name)), '0', name);
    assert.equal((await client.queueStatus(q)).counts['done-awaiting-gc'], 45);
  });

  void test('an ACL user without OBJECT claims and finishes as before, the keys of held messages left as listpacks', async () => {
    const prefix = uniquePrefix('no-object');
    const user = `kvmq-no-object-${process.pid}-${randomBytes(3).toString('hex')}`;
    redisCli(base, 'ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-object');
    try {
      const { host } = new URL(base);
      const client = await open(`redis://${user}:pw@${host}?prefix=${prefix}`);
      const q = 'no-object';
      await client.enqueueBatch(
        q,
        Array.from({ length: 40 }, (_, i) => ({ payload: i, id: `n${i}` })),
      );
      const claimed = await claimUpTo(client, q, 40);
      assert.equal(claimed.messages.length, 40);
      assert.equal(one(base, 'OBJECT', 'ENCODING', `${prefix}:{${q}}:locks`), 'listpack');
      const finished = await storeOf(client).finish(q, 'c', successes(claimed.messages.map((m) => m.id)));
      assert.ok(finished.every((r) => r === 'ok'));
      assert.equal((await client.queueStatus(q)).counts['done-awaiting-gc'], 40);
    } finally {
      redisCli(base, 'ACL', 'DELUSER', user);
    }
  });

  void test('Redis out of memory: enqueue fails whole with a clear error; workers still drain, GC frees room', async () => {
    const server = await dedicated({ args: ['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction'] });
    const client = await open(`${server.url}?prefix=oom`);
    const q = 'oom';
    await client.configure(q, { gcLifetimeMs: 0, gcIntervalMs: 3_600_000 });
    const payload = Buffer.alloc(32 * 1024, 1);
    const accepted: string[] = [];
    let refusal: unknown = null;
    for (let i = 0; i < 1000 && refusal === null; i++) {
      try {
        const result = await client.enqueue(q, payload, { id: `m${i}` });
        if (result.ok) accepted.push(result.id);
      } catch (error) {
        refusal = error;
      }
    }
    assert.ok(refusal instanceof StoreUnavailableError, `expected an out-of-memory error, got ${String(refusal)}`);
    assert.equal(refusal.transient, true);
    assert.match(refusal.message, /out of memory/);
    assert.match(refusal.message, /nothing was written/);
    assert.ok(accepted.length > 5, `only ${accepted.length} accepted before memory ran out`);

    // A refused batch leaves none of its messages behind.
    await assert.rejects(
      client.enqueueBatch(q, [
        { payload, id: 'x1' },
        { payload, id: 'x2' },
      ]),
      StoreUnavailableError,
    );
    for (const id of [`m${accepted.length}`, 'x1', 'x2']) assert.equal(await client.status(q, id), null, id);
    assert.equal((await client.queueStatus(q)).total, accepted.length);

    // Claims, finishes and GC still run, and free the memory: from a client that connects now too, which
    // cannot load the library of functions (FUNCTION LOAD needs memory) and runs its scripts by EVALSHA.
    const late = await open(`${server.url}?prefix=oom`);
    const handled = new Set<string>();
    const worker = late.worker(q, (job) => void handled.add(job.id), { concurrency: 8, eoqBackoffMs: 50 });
    await waitFor(() => handled.size === accepted.length, { what: 'the accepted messages to be handled' });
    await worker.stop();
    // The worker's own GC may have removed the first ones already.
    assert.equal((await client.gc(q)).ran, true);
    assert.equal((await client.queueStatus(q)).total, 0);
    assert.deepEqual(await client.enqueue(q, payload, { id: 'after' }), { ok: true, id: 'after', action: 'added' });
  });
});

void describe('redis store: failures, listings and counts', () => {
  const claimOne = (client: Client, q: string, lockMs?: number) => claimUpTo(client, q, 1, lockMs);
  // A success carries no error, as a worker's does: without a backoff it is a plain success.
  const finish = (client: Client, q: string, id: string, outcome: 'success' | 'error', backoffMs = 0) =>
    storeOf(client).finish(q, 'c', [
      { id, attempt: 1, outcome, backoffMs, error: outcome === 'success' ? null : 'e', startedAt: Date.now() },
    ]);
  /** Enqueues `ids` (each its own payload), claims them one at a time in that order, and runs `each` on each. */
  const enqueueClaimEach = async (client: Client, q: string, ids: string[], each?: (id: string) => Promise<void>) => {
    await client.enqueueBatch(
      q,
      ids.map((id) => ({ payload: id, id })),
    );
    for (const id of ids) {
      assert.equal((await claimOne(client, q)).messages[0]?.id, id);
      await each?.(id);
    }
  };

  void test('list pages stay exact while enqueues, claims and removes change the ready list between pages', async () => {
    const client = await open(`${base}?prefix=${uniquePrefix('churn')}`);
    const q = 'churn';
    const initial = Array.from({ length: 300 }, (_, i) => `m${String(i).padStart(3, '0')}`);
    await client.enqueueBatch(
      q,
      initial.map((id) => ({ payload: id, id })),
    );
    const claimed = new Set<string>();
    const removed = new Set<string>();
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let n = 0; ; n++) {
      const page = await client.list(q, { state: 'queued', limit: 7, ...(cursor === undefined ? {} : { cursor }) });
      seen.push(...page.messages.map((m) => m.id));
      // Between pages: new messages at the back, claims at the front, a removal anywhere.
      await client.enqueueBatch(q, [
        { payload: 'new', id: `new-${n}-a` },
        { payload: 'new', id: `new-${n}-b` },
      ]);
      for (const m of (await claimUpTo(client, q, 2)).messages) {
        assert.ok(!removed.has(m.id), `${m.id} was handed out after its removal`);
        claimed.add(m.id);
      }
      const victim = initial[(n * 37) % initial.length] ?? '';
      if ((await client.remove(q, victim)).ok) removed.add(victim);
      if (page.cursor === null) break;
      cursor = page.cursor;
    }
    assert.equal(new Set(seen).size, seen.length, 'no message is listed twice');
    for (const id of initial) {
      if (!claimed.has(id) && !removed.has(id)) assert.ok(seen.includes(id), `${id} stayed queued but was not listed`);
    }
    assert.ok(removed.size > 10 && claimed.size > 10);
    // Counts and listing agree at the end.
    const queued = (await client.queueStatus(q)).counts.queued;
    const all = await client.list(q, { state: 'queued', limit: 1000 });
    assert.equal(all.messages.length, queued);
  });

  void test('every state: queueStatus counts what list lists and status says; a full listing pages through all', async () => {
    const client = await open(`${base}?prefix=${uniquePrefix('states')}`);
    const q = 'states';
    const run = async (id: string, then: () => Promise<unknown>): Promise<void> => {
      await client.enqueue(q, id, { id });
      assert.equal((await claimOne(client, q)).messages[0]?.id, id);
      await then();
    };
    await run('locked', () => Promise.resolve());
    await run('locked-requeue', () => client.enqueue(q, 'again', { id: 'locked-requeue', allowRequeue: true }));
    await run('done', () => finish(client, q, 'done', 'success'));
    await run('done-backoff', () => finish(client, q, 'done-backoff', 'success', 60_000));
    await run('done-requeue', async () => {
      await finish(client, q, 'done-requeue', 'success', 60_000);
      await client.enqueue(q, 'again', { id: 'done-requeue', allowRequeue: true });
    });
    await run('failed', () => finish(client, q, 'failed', 'error'));
    await client.enqueueBatch(q, [
      { payload: 1, id: 'queued-1' },
      { payload: 2, id: 'queued-2' },
      { payload: 3, id: 'later', initialBackoffMs: 60_000 },
    ]);
    const expected: Record<MessageState, string[]> = {
      queued: ['queued-1', 'queued-2'],
      'queued-with-backoff': ['later'],
      locked: ['locked'],
      'locked-with-requeue': ['locked-requeue'],
      'done-awaiting-gc': ['done'],
      'done-with-backoff': ['done-backoff'],
      'done-with-requeue': ['done-requeue'],
      failed: ['failed'],
      'waiting-children': [],
    };
    const status = await client.queueStatus(q);
    for (const state of MESSAGE_STATES) {
      assert.equal(status.counts[state], expected[state].length, `count of ${state}`);
      const page = await client.list(q, { state });
      assert.deepEqual(page.messages.map((m) => m.id).sort(), expected[state], `list of ${state}`);
      for (const m of page.messages) assert.deepEqual(m, await client.status(q, m.id));
    }
    const every: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.list(q, { limit: 1, ...(cursor === undefined ? {} : { cursor }) });
      every.push(...page.messages.map((m) => m.id));
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);
    // States in MESSAGE_STATES order, each message once.
    const order = every.map((id) => MESSAGE_STATES.findIndex((state) => expected[state].includes(id)));
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
    );
    assert.deepEqual([...every].sort(), Object.values(expected).flat().sort());
    assert.equal(every.length, status.total);
  });

  void test('a lost lock at maxDeliveries fails the message with the model error text', async () => {
    const client = await open(`${base}?prefix=${uniquePrefix('poison')}`);
    const q = 'poison';
    await client.configure(q, { maxDeliveries: 1 });
    await client.enqueue(q, 'x', { id: 'm' });
    assert.equal((await claimOne(client, q, 50)).messages.length, 1);
    await new Promise((resolve) => setTimeout(resolve, 120));
    assert.equal((await claimOne(client, q)).messages.length, 0);
    const failed = await client.status(q, 'm');
    assert.equal(failed?.state, 'failed');
    assert.equal(failed.lastError, maxDeliveriesError(1));
    assert.deepEqual(
      (await client.show(q, 'm'))?.history.map((r) => [r.attempt, r.outcome, r.consumer]),
      [[1, 'lost', 'c']],
    );
  });

  void test('a claim that takes the last ready messages says when to look again; one that leaves some, at once', async () => {
    const client = await open(`${base}?prefix=${uniquePrefix('drained')}`);
    const q = 'drained';
    const claim = (max: number) => claimUpTo(client, q, max);
    await client.enqueueBatch(q, [
      { payload: 1, id: 'a' },
      { payload: 2, id: 'b' },
      { payload: 3, id: 'c' },
    ]);
    const full = await claim(2);
    assert.deepEqual(
      full.messages.map((m) => m.id),
      ['a', 'b'],
    );
    assert.equal(full.wakeAt, null, 'more may be ready: claim again at once');
    const before = Date.now();
    const last = await claim(2);
    assert.deepEqual(
      last.messages.map((m) => m.id),
      ['c'],
    );
    // As the dry run a claim now would make: the end-of-queue backoff after one dry run (1,000 ms here).
    assert.ok(
      last.wakeAt !== null && last.wakeAt >= before + 900 && last.wakeAt <= Date.now() + 1000,
      String(last.wakeAt),
    );
    assert.equal(last.dryRuns, 0, 'no dry run counted: it took messages');
    // A full claim that leaves nothing ready says so too.
    await client.enqueue(q, 4, { id: 'd' });
    const exact = await claim(1);
    assert.deepEqual(
      exact.messages.map((m) => m.id),
      ['d'],
    );
    assert.ok(exact.wakeAt !== null && exact.wakeAt >= Date.now() + 800, String(exact.wakeAt));
    // A backoff that ends sooner brings the wake-up forward.
    await client.enqueue(q, 4, { id: 'later', initialBackoffMs: 200 });
    await client.enqueue(q, 5, { id: 'now' });
    const soon = await claim(2);
    assert.deepEqual(
      soon.messages.map((m) => m.id),
      ['now'],
    );
    assert.ok(soon.wakeAt !== null && soon.wakeAt <= Date.now() + 200, String(soon.wakeAt));
  });

  void test('an idle worker handed one message at a time gets it from the enqueue, then claims once to wait again', async () => {
    const prefix = uniquePrefix('idle');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'idle';
    const polls: (readonly string[])[] = [];
    const handled: string[] = [];
    const worker = client.worker(q, (job) => void handled.push(job.id), {
      concurrency: 1,
      eoqBackoffMs: 60_000,
      monitor: ({ claimed }) => void polls.push(claimed),
    });
    const parked = (): boolean => one(base, 'HGET', `${prefix}:{${q}}:idle-workers`, worker.id).startsWith('1 ');
    await waitFor(parked, { what: 'the worker to wait, parked' });
    // The wake channel's subscription, once confirmed, asks for a claim too, which may come after the first
    // parking: counted from when the claims have settled.
    let before = -1;
    await waitFor(
      async () => {
        const seen = polls.length;
        await quietPeriod(200);
        before = seen;
        return polls.length === seen && parked();
      },
      { what: 'the claims to settle, the worker parked' },
    );
    for (const id of ['m1', 'm2', 'm3']) {
      await client.enqueue(q, id, { id });
      assert.notEqual((await client.status(q, id))?.state, 'queued', `${id} was locked for the worker by its enqueue`);
      await waitFor(() => handled.includes(id), { what: `${id} to be handled` });
      await waitFor(parked, { what: `the worker to wait again after ${id}` });
    }
    await worker.stop();
    // Each message reached the monitor as it arrived, then one claim found nothing and parked the worker again:
    // three script calls a message (enqueue, finish, claim), as with a wake-up and a claim.
    assert.deepEqual(polls.slice(before), [['m1'], [], ['m2'], [], ['m3'], []]);
  });

  void test('a foreign key a claim or finish reads before writing: StoreLayoutError, nothing written', async () => {
    const prefix = uniquePrefix('read-first');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'read-first';
    await client.enqueue(q, 'x', { id: 'm' });
    redisCli(base, 'SET', `${prefix}:{${q}}:lock-expiry`, 'not kvmq');
    await assert.rejects(claimOne(client, q), StoreLayoutError);
    redisCli(base, 'DEL', `${prefix}:{${q}}:lock-expiry`);
    assert.equal((await client.status(q, 'm'))?.state, 'queued');
    assert.deepEqual(
      (await claimOne(client, q)).messages.map((m) => m.id),
      ['m'],
    );
    redisCli(base, 'HSET', `${prefix}:{${q}}:requeue`, 'a', 'b');
    await assert.rejects(finish(client, q, 'm', 'success'), StoreLayoutError);
    redisCli(base, 'DEL', `${prefix}:{${q}}:requeue`);
    assert.equal((await client.status(q, 'm'))?.state, 'locked');
    assert.deepEqual(await finish(client, q, 'm', 'success'), ['ok']);
  });

  void test('the layout mark: set by a checked enqueue, cleared by clear, a later foreign key still refused', async () => {
    const prefix = uniquePrefix('mark');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'mark';
    const key = (name: string): string => `${prefix}:{${q}}:${name}`;
    assert.equal(one(base, 'EXISTS', key('layout')), '0');
    await client.enqueue(q, 'x', { id: 'm' });
    assert.equal(one(base, 'GET', key('layout')), '1');
    // Marked: a foreign key a claim writes is met by the write itself, still a StoreLayoutError.
    redisCli(base, 'SET', key('holders'), 'not kvmq');
    await assert.rejects(claimOne(client, q), StoreLayoutError);
    redisCli(base, 'DEL', key('holders'));
    // clear deletes the mark with the messages: the next enqueue checks every key again, writing nothing.
    await client.clear(q);
    assert.equal(one(base, 'EXISTS', key('layout')), '0');
    redisCli(base, 'SET', key('locks'), 'not kvmq');
    await assert.rejects(client.enqueue(q, 'y', { id: 'n' }), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /:locks holds a string/);
      return true;
    });
    assert.equal(one(base, 'EXISTS', key('messages')), '0');
    assert.equal(one(base, 'EXISTS', key('layout')), '0');
    // A mark of another type is refused by name.
    redisCli(base, 'DEL', key('locks'));
    redisCli(base, 'HSET', key('layout'), 'a', 'b');
    await assert.rejects(client.enqueue(q, 'y', { id: 'n' }), /:layout holds a hash/);
    redisCli(base, 'DEL', key('layout'));
    await client.enqueue(q, 'y', { id: 'n' });
    assert.deepEqual(
      (await claimOne(client, q)).messages.map((m) => m.id),
      ['n'],
    );
  });

  void test('a foreign key met only on the failure path: StoreLayoutError, nothing written', async () => {
    const prefix = uniquePrefix('rare');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'rare';
    await client.enqueue(q, 'x', { id: 'm' });
    await claimOne(client, q);
    redisCli(base, 'SET', `${prefix}:{${q}}:history`, 'not kvmq');
    await assert.rejects(finish(client, q, 'm', 'error'), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /history/);
      return true;
    });
    assert.equal((await client.status(q, 'm'))?.state, 'locked');
    redisCli(base, 'DEL', `${prefix}:{${q}}:history`);
    assert.deepEqual(await finish(client, q, 'm', 'error'), ['ok']);
    assert.equal((await client.status(q, 'm'))?.state, 'failed');
  });
  void test('a lock whose holder is the consumer alone (as written before the attempt was in it) still counts', async () => {
    const prefix = uniquePrefix('legacy-holder');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'legacy';
    const holders = `${prefix}:{${q}}:holders`;
    await client.enqueue(q, 'x', { id: 'kept' });
    await client.enqueue(q, 'x', { id: 'stale' });
    await client.enqueue(q, 'x', { id: 'renewed' });
    for (let i = 0; i < 3; i++) await claimOne(client, q);
    for (const id of ['kept', 'stale', 'renewed']) redisCli(base, 'HSET', holders, id, 'c');
    // The attempt is then read from nattempts: a finish of another attempt is lost, as before.
    redisCli(base, 'HSET', `${prefix}:{${q}}:nattempts`, 'stale', '2');
    const status = await client.status(q, 'kept');
    assert.equal(status?.state, 'locked');
    assert.equal(status.consumer, 'c');
    assert.deepEqual(await storeOf(client).extend(q, 'c', [{ id: 'renewed', attempt: 1 }], 60_000), []);
    assert.deepEqual(await finish(client, q, 'kept', 'success'), ['ok']);
    assert.deepEqual(await finish(client, q, 'stale', 'success'), ['lost']);
    assert.equal((await client.status(q, 'kept'))?.state, 'done-awaiting-gc');
    assert.equal((await client.status(q, 'stale'))?.state, 'locked');
  });

  /** Every id `list` gives for `state`, in pages of `limit`, in listing order. */
  const listIds = async (client: Client, q: string, state: MessageState, limit: number): Promise<string[]> => {
    const messages = await listAll(client, q, { state, limit });
    for (const m of messages) assert.equal(m.state, state, `${m.id} listed as ${state}`);
    return messages.map((m) => m.id);
  };

  void test('done-awaiting-gc pages by finish time past backoffs, requeues and retries; only backoffs write dedupe', async () => {
    const prefix = uniquePrefix('done-mix');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'mix';
    const key = (name: string): string => `${prefix}:{${q}}:${name}`;
    const store = storeOf(client);
    const ids = ['p1', 'b-long', 'p2', 'b-short', 'r-long', 'p3', 'r-due', 'r-now', 'retry', 'failed', 'p4'];
    await enqueueClaimEach(client, q, ids);
    for (const id of ['r-long', 'r-due', 'r-now']) {
      assert.equal((await client.enqueue(q, 'again', { id, allowRequeue: true })).ok, true);
    }
    const backoffs: Record<string, number> = { 'b-long': 60_000, 'b-short': 100, 'r-long': 60_000, 'r-due': 100 };
    for (const id of ids) {
      if (id === 'failed') await finish(client, q, id, 'error');
      else if (id === 'retry') {
        const retry: Finish = { id, attempt: 1, outcome: 'retry', backoffMs: 0, error: 'e', startedAt: Date.now() };
        assert.deepEqual(await store.finish(q, 'c', [retry]), ['ok']);
      } else assert.deepEqual(await finish(client, q, id, 'success', backoffs[id] ?? 0), ['ok'], id);
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
    // b-short's backoff is over; r-due is queued again (still in done until a claim moves it).
    const awaiting = ['p1', 'p2', 'b-short', 'p3', 'p4'];
    assert.equal((await client.status(q, 'r-due'))?.state, 'queued');
    assert.deepEqual(redisCli(base, 'ZRANGE', key('dedupe'), '0', '-1').sort(), ['b-long', 'b-short']);
    const byFinish = redisCli(base, 'ZRANGE', key('done-at'), '0', '-1').filter((id) => awaiting.includes(id));
    for (const limit of [1, 2, 100]) {
      assert.deepEqual(await listIds(client, q, 'done-awaiting-gc', limit), byFinish, `pages of ${limit}`);
    }
    assert.deepEqual(await listIds(client, q, 'done-with-backoff', 1), ['b-long']);
    assert.deepEqual(await listIds(client, q, 'done-with-requeue', 1), ['r-long']);
    const counts = (await client.queueStatus(q)).counts;
    assert.equal(counts['done-awaiting-gc'], awaiting.length);
    assert.equal(counts['done-with-backoff'], 1);
    assert.equal(counts['done-with-requeue'], 1);
    // A revived plain success leaves done-at: listed no more.
    assert.equal((await client.enqueue(q, 'again', { id: 'p2' })).ok, true);
    assert.deepEqual(
      await listIds(client, q, 'done-awaiting-gc', 2),
      byFinish.filter((id) => id !== 'p2'),
    );
  });

  void test('done-awaiting-gc passes messages in a backoff within the budget of a call, going on from the last one passed', async () => {
    const client = await open(`${base}?prefix=${uniquePrefix('done-pass')}`);
    const q = 'pass';
    const ids = Array.from({ length: 30 }, (_, i) => (i % 6 === 5 ? `p${i}` : `b${i}`));
    await enqueueClaimEach(client, q, ids, async (id) => {
      assert.deepEqual(await finish(client, q, id, 'success', id.startsWith('b') ? 60_000 : 0), ['ok']);
    });
    // The list script itself, with a budget of one look per call (a pass counts as a quarter of one).
    const scripts = (storeOf(client) as unknown as { scripts: Scripts }).scripts;
    const listed: string[] = [];
    let position = ['', '', '', ''];
    let calls = 0;
    for (; calls < 100;) {
      const reply = list(await scripts.run(SCRIPTS.list, q, ['done-awaiting-gc', '', 100, 1, '0', ...position]));
      calls += 1;
      for (let i = 5; i < reply.length; i += 8) listed.push(text(reply[i]) ?? '');
      if (text(reply[0]) === 'end') break;
      position = reply.slice(1, 5).map((part) => text(part) ?? '');
    }
    assert.deepEqual(
      listed,
      ids.filter((id) => id.startsWith('p')),
    );
    // 25 passes at four a call and 5 looks at one a call, give or take a call.
    assert.ok(calls >= 9 && calls <= 12, `${calls} calls`);
  });

  void test('a success that leaves its message done writes no outcome field; every reader still says success', async () => {
    const prefix = uniquePrefix('no-outcome');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'outcomes';
    const outcomes = `${prefix}:{${q}}:outcomes`;
    const store = storeOf(client);
    const ids = ['plain', 'retried', 'backed', 'marked', 'requeued', 'revived'];
    await enqueueClaimEach(client, q, ids);
    const retry: Finish = { id: 'retried', attempt: 1, outcome: 'retry', backoffMs: 0, error: 'e', startedAt: 1 };
    assert.deepEqual(await store.finish(q, 'c', [retry]), ['ok']);
    assert.equal(redisCli(base, 'HGET', outcomes, 'retried').join('\n'), 'retry\ne');
    assert.equal((await claimOne(client, q)).messages[0]?.id, 'retried');
    assert.equal((await client.enqueue(q, 'again', { id: 'marked', allowRequeue: true })).ok, true);
    for (const id of ['plain', 'retried', 'marked', 'revived']) {
      assert.deepEqual(
        await store.finish(q, 'c', [
          { ...retry, id, attempt: id === 'retried' ? 2 : 1, outcome: 'success', error: null },
        ]),
        ['ok'],
        id,
      );
    }
    // Long enough for the reads below on a loaded machine; the last ones wait for it to end.
    const backoffMs = 1000;
    for (const id of ['backed', 'requeued'])
      assert.deepEqual(await finish(client, q, id, 'success', backoffMs), ['ok']);
    // A requeue of a done-with-backoff message: queued again once the backoff ends, its success kept.
    assert.equal((await client.enqueue(q, 'again', { id: 'requeued', allowRequeue: true })).ok, true);
    assert.deepEqual(await client.enqueue(q, 'again', { id: 'revived' }), {
      ok: true,
      id: 'revived',
      action: 'revived',
    });
    // Only the messages that run again keep the field; the retry's was deleted by the success.
    assert.deepEqual(redisCli(base, 'HKEYS', outcomes).sort(), ['marked', 'requeued']);
    const seen = async (id: string) => {
      const s = await client.status(q, id);
      return [s?.state, s?.outcome, s?.lastError];
    };
    assert.deepEqual(await seen('plain'), ['done-awaiting-gc', 'success', null]);
    assert.deepEqual(await seen('retried'), ['done-awaiting-gc', 'success', null]);
    assert.deepEqual(await seen('backed'), ['done-with-backoff', 'success', null]);
    assert.deepEqual(await seen('marked'), ['queued', 'success', null]);
    assert.deepEqual(await seen('requeued'), ['done-with-requeue', 'success', null]);
    assert.deepEqual(await seen('revived'), ['queued', null, null]);
    assert.equal((await client.show(q, 'retried'))?.outcome, 'success');
    const listed = await client.list(q, { outcome: 'success', limit: 10 });
    assert.deepEqual(listed.messages.map((m) => m.id).sort(), ['backed', 'marked', 'plain', 'requeued', 'retried']);
    await waitFor(async () => (await seen('backed'))[0] === 'done-awaiting-gc', { what: 'the backoff to end' });
    assert.deepEqual(await seen('backed'), ['done-awaiting-gc', 'success', null]);
    assert.deepEqual(await seen('requeued'), ['queued', 'success', null]);
  });

  void test('plain successes with a dedupe entry (as an older kvmq wrote) are listed once, counted, revived and collected', async () => {
    const prefix = uniquePrefix('old-dedupe');
    const client = await open(`${base}?prefix=${prefix}`);
    const q = 'old';
    const key = (name: string): string => `${prefix}:{${q}}:${name}`;
    const ids = ['old-1', 'new', 'old-2', 'old-3'];
    await enqueueClaimEach(client, q, ids, async (id) => {
      assert.deepEqual(await finish(client, q, id, 'success'), ['ok']);
    });
    assert.equal(one(base, 'ZCARD', key('dedupe')), '0');
    // The previous kvmq wrote every plain success there, by its finish time.
    for (const id of ids.filter((id) => id.startsWith('old'))) {
      redisCli(base, 'ZADD', key('dedupe'), one(base, 'ZSCORE', key('done-at'), id), id);
    }
    for (const limit of [1, 3]) {
      assert.deepEqual((await listIds(client, q, 'done-awaiting-gc', limit)).sort(), [...ids].sort());
    }
    assert.deepEqual(await listIds(client, q, 'done-with-backoff', 1), []);
    let counts = (await client.queueStatus(q)).counts;
    assert.equal(counts['done-awaiting-gc'], ids.length);
    assert.equal(counts['done-with-backoff'], 0);

    assert.deepEqual(await client.enqueue(q, 'again', { id: 'old-1' }), { ok: true, id: 'old-1', action: 'revived' });
    assert.equal(one(base, 'ZSCORE', key('dedupe'), 'old-1'), '');
    assert.equal((await client.status(q, 'old-1'))?.state, 'queued');
    await client.configure(q, { gcLifetimeMs: 0, gcIntervalMs: 3_600_000 });
    assert.equal((await client.gc(q)).ran, true);
    for (const id of ['new', 'old-2', 'old-3']) assert.equal(await client.status(q, id), null, id);
    assert.equal(one(base, 'EXISTS', key('dedupe')), '0');
    counts = (await client.queueStatus(q)).counts;
    assert.equal(counts.queued, 1);
    assert.equal(counts['done-awaiting-gc'], 0);
  });
});

void describe('redis store: queue events, turns and the queue registry', () => {
  const consumer = 'c';
  const claim = (client: Client, q: string, max = 64, lockMs = 60_000) =>
    storeOf(client).claim(q, { consumerId: consumer, max, lockMs, accepts: null, eoqBackoffMs: () => 60_000 });
  const finish = (client: Client, q: string, finishes: readonly Partial<Finish>[]) =>
    storeOf(client).finish(
      q,
      consumer,
      finishes.map((f) => ({
        id: '',
        attempt: 1,
        outcome: 'success' as const,
        backoffMs: 0,
        error: null,
        startedAt: Date.now(),
        ...f,
      })),
    );
  /** Every kept event, oldest first, as [type, id, attempt, error]. */
  const events = async (client: Client, q: string): Promise<(string | number | undefined)[][]> =>
    (await storeOf(client).readEvents(q, null, 10_000)).events.map((e) => [e.type, e.id, e.attempt, e.error]);
  /** A queue of its own with events on (and options), on the shared server. */
  async function eventsQueue(label: string, config: Partial<QueueConfig> = {}) {
    const prefix = uniquePrefix(label);
    const client = await open(`${base}?prefix=${prefix}`);
    const q = label;
    await client.configure(q, { events: true, ...config });
    return { client, q, prefix, key: (name: string) => `${prefix}:{${q}}:${name}` };
  }

  void test('each transition writes its event in the script that makes it; with events off, none', async () => {
    const { client, q } = await eventsQueue('transitions');
    const before = redisNow(base);
    await client.enqueue(q, 'a', { id: 'a' });
    await client.enqueueBatch(
      q,
      ['b', 'c', 'd', 'e'].map((id) => ({ payload: id, id })),
    );
    assert.equal((await claim(client, q)).messages.length, 5);
    await finish(client, q, [
      { id: 'a' },
      { id: 'b', outcome: 'retry', error: 'again', backoffMs: 60_000 },
      { id: 'c', outcome: 'error', error: 'boom' },
      // A give-back: handed back unrun, no event.
      { id: 'd', outcome: 'retry', startedAt: null },
    ]);
    assert.equal((await client.enqueue(q, 'e2', { id: 'e', allowRequeue: true })).ok, true);
    assert.equal((await client.retry(q, 'c')).ok, true);
    assert.equal((await client.remove(q, 'd')).ok, true);
    assert.deepEqual(await client.enqueue(q, 'a2', { id: 'a' }), { ok: true, id: 'a', action: 'revived' });
    assert.equal((await client.enqueue(q, 'refused', { id: 'e' })).ok, false);
    const after = redisNow(base);

    assert.deepEqual(await events(client, q), [
      ['enqueued', 'a', 0, undefined],
      ['enqueued', 'b', 0, undefined],
      ['enqueued', 'c', 0, undefined],
      ['enqueued', 'd', 0, undefined],
      ['enqueued', 'e', 0, undefined],
      ...['a', 'b', 'c', 'd', 'e'].map((id) => ['started', id, 1, undefined]),
      ['completed', 'a', 1, undefined],
      ['retrying', 'b', 1, 'again'],
      ['failed', 'c', 1, 'boom'],
      ['enqueued', 'e', 1, undefined],
      ['enqueued', 'c', 0, undefined],
      ['removed', 'd', 1, undefined],
      ['enqueued', 'a', 1, undefined],
    ]);
    const page = await storeOf(client).readEvents(q, null, 100);
    assert.deepEqual(
      page.events.map((e) => e.cursor),
      page.events.map((_, i) => String(i + 1)),
    );
    for (const e of page.events) assert.ok(e.at >= before && e.at <= after, `at ${e.at} in [${before}, ${after}]`);
    assert.equal(await storeOf(client).eventsHead(q), '17');

    // The same transitions on a queue without events write no event and no event key.
    const off = 'quiet';
    await client.enqueue(off, 'x', { id: 'x' });
    await claim(client, off);
    await finish(client, off, [{ id: 'x', outcome: 'error', error: 'e' }]);
    assert.deepEqual((await storeOf(client).readEvents(off, null, 10)).events, []);
    assert.equal(await storeOf(client).eventsHead(off), '0');
  });

  void test('layout: one stream entry per script call, its id the number of its last event', async () => {
    const { client, q, key } = await eventsQueue('stream', { eventsMaxCount: 500 });
    await client.enqueue(q, 'one', { id: 'one' });
    await client.enqueueBatch(
      q,
      ['b1', 'b2', 'b3'].map((id) => ({ payload: id, id })),
    );
    await claim(client, q, 2);
    await finish(client, q, [{ id: 'one', outcome: 'error', error: 'two words\nand a \\n line' }]);
    assert.equal(one(base, 'TYPE', key('events')), 'stream');
    assert.equal(one(base, 'TYPE', key('events-seq')), 'string');
    assert.equal(one(base, 'GET', key('events-seq')), '7');
    assert.equal(one(base, 'HGET', key('conf'), 'events'), '1');
    assert.equal(one(base, 'HGET', key('conf'), 'events_max_count'), '500');
    assert.equal(one(base, 'HGET', key('conf'), 'events_max_age'), String(24 * 3600 * 1000));
    const entries = redisCli(base, 'XRANGE', key('events'), '-', '+');
    // --raw prints each entry as its id then its fields and values, one per line (the events field's lines too).
    const ids = entries.filter((line) => /^\d+-0$/.test(line));
    assert.deepEqual(ids, ['1-0', '4-0', '6-0', '7-0']);
    const claimEntry = entries.slice(entries.indexOf('6-0') + 1, entries.indexOf('7-0'));
    assert.equal(claimEntry[0], 'at');
    assert.deepEqual(claimEntry.slice(2), ['n', '2', 'events', 'started 1 one', 'started 1 b1']);
    const failEntry = entries.slice(entries.indexOf('7-0') + 1);
    // An error stays on its event's line: newlines and backslashes are escaped.
    assert.deepEqual(failEntry.slice(2), ['n', '1', 'events', 'failed 1 one two words\\nand a \\\\n line']);
    assert.deepEqual((await storeOf(client).readEvents(q, '6', 10)).events[0]?.error, 'two words\nand a \\n line');
    // A large batch spreads over entries of at most 100 events.
    await client.enqueueBatch(
      q,
      Array.from({ length: 250 }, (_, i) => ({ payload: i, id: `many-${i}` })),
    );
    assert.deepEqual(
      redisCli(base, 'XRANGE', key('events'), '8', '+').filter((line) => /^\d+-0$/.test(line)),
      ['107-0', '207-0', '257-0'],
    );
    const page = await storeOf(client).readEvents(q, '100', 10);
    assert.deepEqual(
      page.events.map((e) => [e.cursor, e.id]),
      Array.from({ length: 10 }, (_, i) => [String(101 + i), `many-${93 + i}`]),
    );
    assert.equal(page.cursor, '110');
  });

  void test('a foreign events key: StoreLayoutError naming it, the transition not written either', async () => {
    const { client, q, key } = await eventsQueue('foreign-events');
    await client.enqueue(q, 'x', { id: 'x' });
    redisCli(base, 'DEL', key('events'));
    redisCli(base, 'SET', key('events'), 'not kvmq');
    await assert.rejects(client.enqueue(q, 'y', { id: 'y' }), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /:events /);
      return true;
    });
    assert.equal(await client.status(q, 'y'), null);
    await assert.rejects(claim(client, q), StoreLayoutError);
    assert.equal((await client.status(q, 'x'))?.state, 'queued');
    assert.equal(one(base, 'GET', key('events-seq')), '1');
    redisCli(base, 'DEL', key('events-seq'));
    redisCli(base, 'HSET', key('events-seq'), 'f', 'v');
    redisCli(base, 'DEL', key('events'));
    await assert.rejects(claim(client, q), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /events-seq/);
      return true;
    });
    assert.equal((await client.status(q, 'x'))?.attempt, 0);
    // With events off, the foreign keys are not touched and the queue works, its failure path too.
    await client.configure(q, { events: false });
    redisCli(base, 'SET', key('events'), 'not kvmq');
    assert.equal((await claim(client, q)).messages.length, 1);
    assert.deepEqual(await finish(client, q, [{ id: 'x', outcome: 'error', error: 'e' }]), ['ok']);
    assert.equal((await client.status(q, 'x'))?.state, 'failed');
    redisCli(base, 'DEL', key('events-seq'), key('events'));
  });

  void test('a lock lost at maxDeliveries writes failed; a dead-letter move writes enqueued there', async () => {
    const { client, q } = await eventsQueue('poison', { maxDeliveries: 1, deadLetterQueue: 'poison-dead' });
    await client.configure('poison-dead', { events: true });
    await client.enqueue(q, 'x', { id: 'lost' });
    await client.enqueue(q, 'y', { id: 'error' });
    assert.equal((await claim(client, q, 1, 50)).messages.length, 1);
    const lockEnd = redisNow(base) + 50;
    await waitFor(() => redisNow(base) > lockEnd, { what: 'the lock to lapse on the Redis clock' });
    const claimed = await claim(client, q, 1);
    assert.deepEqual(
      claimed.messages.map((m) => m.id),
      ['error'],
    );
    await finish(client, q, [{ id: 'error', outcome: 'error', error: 'bad' }]);
    assert.deepEqual(await events(client, q), [
      ['enqueued', 'lost', 0, undefined],
      ['enqueued', 'error', 0, undefined],
      ['started', 'lost', 1, undefined],
      ['failed', 'lost', 1, maxDeliveriesError(1)],
      ['started', 'error', 1, undefined],
      ['failed', 'error', 1, 'bad'],
    ]);
    assert.deepEqual(await events(client, 'poison-dead'), [
      ['enqueued', 'lost', 0, undefined],
      ['enqueued', 'error', 0, undefined],
    ]);
  });

  void test('trimming: inline by count within one stream node, exactly at GC; a reader behind is told', async () => {
    const { client, q } = await eventsQueue('trim', { eventsMaxCount: 50 });
    for (let i = 0; i < 300; i++) await client.enqueue(q, i, { id: `m${i}` });
    const kept = (await storeOf(client).readEvents(q, null, 10_000)).events;
    // MINID ~ drops whole stream nodes (at most 100 entries) only, and never one within the bound.
    assert.ok(kept.length >= 50 && kept.length <= 150, `${kept.length} kept before GC`);
    assert.equal(kept.at(-1)?.cursor, '300');
    assert.ok((await client.gc(q)).ran);
    const page = await storeOf(client).readEvents(q, null, 10_000);
    assert.deepEqual(
      page.events.map((e) => e.id),
      Array.from({ length: 50 }, (_, i) => `m${250 + i}`),
    );
    assert.equal(page.missed, false);
    const behind = await storeOf(client).readEvents(q, '10', 5);
    assert.equal(behind.missed, true);
    assert.deepEqual(
      behind.events.map((e) => e.cursor),
      ['251', '252', '253', '254', '255'],
    );
    const exact = await storeOf(client).readEvents(q, '250', 5);
    assert.equal(exact.missed, false);
    assert.equal(exact.events[0]?.cursor, '251');
    // Entries go whole: with batches, GC keeps the entry that holds the oldest event within the bound.
    for (let i = 0; i < 10; i++) {
      await client.enqueueBatch(
        q,
        Array.from({ length: 30 }, (_, j) => ({ payload: j, id: `b${i}-${j}` })),
      );
    }
    assert.ok((await client.gc(q)).ran);
    const batched = (await storeOf(client).readEvents(q, null, 10_000)).events;
    assert.ok(batched.length >= 50 && batched.length < 80, `${batched.length} kept after GC`);
    assert.equal(batched.at(-1)?.cursor, '600');
  });

  void test('trimming by age at GC: older events go, younger stay', async () => {
    const { client, q } = await eventsQueue('age');
    await client.enqueueBatch(
      q,
      ['old1', 'old2'].map((id) => ({ payload: id, id })),
    );
    const oldAt = (await storeOf(client).readEvents(q, null, 10)).events[0]?.at ?? 0;
    await waitFor(() => redisNow(base) > oldAt + 3000, { what: '3 s on the Redis clock', timeoutMs: 10_000 });
    await client.enqueue(q, 'young', { id: 'young' });
    // The bound falls about 1.5 s after the old events: GC has that long to run.
    await client.configure(q, { eventsMaxAgeMs: redisNow(base) - oldAt - 1500 });
    assert.ok((await client.gc(q)).ran);
    const page = await storeOf(client).readEvents(q, null, 10);
    assert.deepEqual(
      page.events.map((e) => e.id),
      ['young'],
    );
    assert.equal((await storeOf(client).readEvents(q, '0', 10)).missed, true);
  });

  void test('clear removes the events and keeps the numbering: a reader behind is told, one at the head is not', async () => {
    const { client, q, key } = await eventsQueue('clear');
    await client.enqueueBatch(
      q,
      ['a', 'b', 'c'].map((id) => ({ payload: id, id })),
    );
    const head = await storeOf(client).eventsHead(q);
    await client.clear(q);
    assert.equal(one(base, 'EXISTS', key('events')), '0');
    assert.equal(await storeOf(client).eventsHead(q), head);
    // Told once: the page's cursor is past the gap.
    assert.deepEqual(await storeOf(client).readEvents(q, '1', 10), { events: [], missed: true, cursor: head });
    assert.deepEqual(await storeOf(client).readEvents(q, head, 10), { events: [], missed: false, cursor: head });
    await client.enqueue(q, 'd', { id: 'd' });
    const next = await storeOf(client).readEvents(q, head, 10);
    assert.deepEqual(
      next.events.map((e) => [e.cursor, e.id]),
      [['4', 'd']],
    );
    assert.equal(next.missed, false);
    assert.equal((await storeOf(client).readEvents(q, '2', 10)).missed, true);
    assert.equal((await storeOf(client).readEvents(q, null, 10)).missed, false);
  });

  void test('a cursor the store did not make is a TypeError that says so', async () => {
    const { client, q } = await eventsQueue('cursors');
    for (const bad of ['', 'abc', '-1', '1-0', '01', '1.5', '99999999999999999']) {
      await assert.rejects(storeOf(client).readEvents(q, bad, 10), (error: unknown) => {
        assert.ok(error instanceof TypeError, `${bad}: ${String(error)}`);
        assert.match(error.message, /not one the Redis store made/);
        return true;
      });
    }
    assert.deepEqual(await storeOf(client).readEvents(q, null, 10), { events: [], missed: false, cursor: '0' });
  });

  void test("a queue's wake channel stays subscribed while a wake or a cancel listener is left, not after", async () => {
    const prefix = uniquePrefix('channel');
    const store = storeOf(await open(`${base}?prefix=${prefix}`));
    const subscribed = (q: string): number => Number(redisCli(base, 'PUBSUB', 'NUMSUB', `${prefix}:{${q}}:wake`)[1]);
    const stopWake = store.subscribe('q', () => undefined);
    const stopCancels = store.subscribeCancels('q', () => undefined);
    await waitFor(() => subscribed('q') === 1, { what: 'the wake channel subscribed' });
    stopWake();
    // The subscriber's commands run in order: once another channel is subscribed, an unsubscribe sent before is done.
    const stopOther = store.subscribe('other', () => undefined);
    await waitFor(() => subscribed('other') === 1, { what: 'another channel subscribed' });
    assert.equal(subscribed('q'), 1, 'unsubscribed while a cancel listener is left');
    stopCancels();
    await waitFor(() => subscribed('q') === 0, { what: 'the wake channel unsubscribed' });
    stopOther();
  });

  void test('subscribeEvents: called after events are written, on the wake-up connection; nothing after close', async () => {
    const server = await dedicated();
    const url = `${server.url}?prefix=subscribe`;
    const client = await open(url);
    const writer = await open(url);
    for (const q of ['s1', 's2']) await writer.configure(q, { events: true });
    let calls = 0;
    const stops = ['s1', 's2'].map((q) => storeOf(client).subscribeEvents(q, () => (calls += 1)));
    const wake = storeOf(client).subscribe('s1', () => undefined);
    // Called once when the subscription is confirmed (nothing is missed while it was not).
    await waitFor(() => calls >= 2, { what: 'the calls at subscription' });
    calls = 0;
    await writer.enqueue('s2', 'x');
    await waitFor(() => calls >= 1, { what: 'a call after an event' });
    const subscribers = redisCli(server.url, 'CLIENT', 'LIST').filter((line) => line.includes('name=kvmq-wakeups'));
    assert.equal(subscribers.length, 1, subscribers.join('\n'));
    stops.forEach((stop) => stop());
    wake();
    storeOf(client).subscribeEvents('s1', () => (calls += 100));
    await client.close();
    calls = 0;
    await writer.enqueue('s1', 'y');
    await writer.enqueue('s1', 'z');
    assert.equal(calls, 0);
    await waitFor(
      () => redisCli(server.url, 'CLIENT', 'LIST').filter((line) => line.includes('name=kvmq-wakeups')).length === 0,
      { what: 'the subscriber connection to close' },
    );
  });

  void test('takeTurn: one caller per everyMs across clients, SET NX PX in the queue hash tag', async () => {
    const prefix = uniquePrefix('turns');
    const [a, b] = [await open(`${base}?prefix=${prefix}`), await open(`${base}?prefix=${prefix}`)];
    const q = 'turns';
    const takers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => storeOf(i % 2 === 0 ? a : b).takeTurn(q, 'warn.disk', 60_000)),
    );
    assert.equal(takers.filter(Boolean).length, 1);
    const key = `${prefix}:{${q}}:turn:warn.disk`;
    const ttl = Number(one(base, 'PTTL', key));
    assert.ok(ttl > 0 && ttl <= 60_000, `PTTL ${ttl}`);
    // Another name, another queue: turns of their own.
    assert.equal(await storeOf(a).takeTurn(q, 'other', 60_000), true);
    assert.equal(await storeOf(a).takeTurn('elsewhere', 'warn.disk', 60_000), true);
    assert.equal(await storeOf(b).takeTurn(q, 'short', 50), true);
    assert.equal(await storeOf(a).takeTurn(q, 'short', 50), false);
    await waitFor(() => storeOf(a).takeTurn(q, 'short', 50), { what: 'the next turn after 50 ms' });
    await assert.rejects(storeOf(a).takeTurn(q, 'zero', 0), TypeError);
  });

  void test('queues(): those with a configuration or messages, sorted, from the registry set', async () => {
    const prefix = uniquePrefix('registry');
    const client = await open(`${base}?prefix=${prefix}`);
    await client.enqueue('c', 'x', { id: 'x' });
    await client.enqueue('a', 'x');
    await client.configure('b', { paused: true });
    await storeOf(client).registerConsumer('consumers-only', { id: 'w', host: 'h', pid: 1, ttlMs: 60_000 });
    await client.enqueue('gone', 'x', { id: 'x' });
    await client.remove('gone', 'x');
    assert.deepEqual(await client.queues(), ['a', 'b', 'c']);
    assert.deepEqual(redisCli(base, 'SMEMBERS', `${prefix}:queues`).sort(), ['a', 'b', 'c', 'gone']);
    // Another process sees the same, and a queue it writes first joins.
    const other = await open(`${base}?prefix=${prefix}`);
    await other.enqueue('aa', 'x');
    assert.deepEqual(await client.queues(), ['a', 'aa', 'b', 'c']);
  });
});

/** FCALL, EVALSHA and EVAL commands the server received (failed and refused ones too) since its stats were reset. */
function scriptCalls(server: RedisServer): { fcall: number; evalsha: number; eval: number } {
  const stats = redisCli(server.url, 'INFO', 'commandstats').join('\n');
  const count = (name: string): number => {
    const line = new RegExp(`^cmdstat_${name}:calls=(\\d+).*rejected_calls=(\\d+)`, 'm').exec(stats);
    return Number(line?.[1] ?? 0) + Number(line?.[2] ?? 0);
  };
  return { fcall: count('fcall'), evalsha: count('evalsha'), eval: count('eval') };
}

/** One JSON and one bytes message in one call: the call carries both strings and Buffers. */
async function sendBothKinds(client: Client, q: string): Promise<void> {
  const [json, bytes] = await Promise.all([
    client.enqueue(q, { n: 1 }, { id: 'json', priority: 5 }),
    client.enqueue(q, Buffer.from([0, 255, 10]), { id: 'bytes', initialBackoffMs: 0 }),
  ]);
  assert.deepEqual(
    [json, bytes],
    [
      { ok: true, id: 'json', action: 'added' },
      { ok: true, id: 'bytes', action: 'added' },
    ],
  );
}

/** A worker handles the three messages of sendBothKinds and its warm-up, and their finishes are stored. */
async function handleThree(client: Client, q: string): Promise<void> {
  const seen = new Map<string, unknown>();
  const worker = client.worker(q, (job) => void seen.set(job.id, job.payload), { concurrency: 4 });
  await waitFor(() => seen.size === 3, { what: 'three messages handled' });
  await worker.stop();
  assert.deepEqual(seen.get('json'), { n: 1 });
  assert.deepEqual(seen.get('bytes'), Buffer.from([0, 255, 10]));
  assert.equal((await client.status(q, 'bytes'))?.state, 'done-awaiting-gc', 'its finish went through too');
}

/**
 * Producers enqueue and a worker handles while `restart` takes Redis down and
 * brings it back; then every enqueue that was accepted must have been handled.
 */
async function produceAcrossRestart(server: RedisServer, restart: () => Promise<void>): Promise<void> {
  const url = `${server.url}?prefix=aof`;
  const recovered: unknown[] = [];
  const onError = (error: unknown): void => void recovered.push(error);
  const producer = await open(url, { onError });
  const consumer = await open(url, { onError });
  const q = 'aof';
  const handled = new Set<string>();
  const worker = consumer.worker(q, (job) => void handled.add(job.id), {
    concurrency: 16,
    lockMs: 1000,
    eoqBackoffMs: 50,
    onError,
  });
  const accepted = new Set<string>();
  let failed = 0;
  let producing = true;
  const lane = async (): Promise<void> => {
    while (producing) {
      try {
        const result = await producer.enqueue(q, { at: Date.now() });
        if (result.ok) accepted.add(result.id);
      } catch (error) {
        // Refused or lost with the connection: not accepted, so not owed.
        if (!(error instanceof StoreUnavailableError)) throw error;
        failed += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  };
  const lanes = Array.from({ length: 8 }, lane);
  await waitFor(() => accepted.size >= 1000, { what: '1000 accepted enqueues', timeoutMs: 20_000 });
  await restart();
  const atRestart = accepted.size;
  await waitFor(() => accepted.size >= atRestart + 1000, { what: 'enqueues to resume', timeoutMs: 30_000 });
  producing = false;
  await Promise.all(lanes);
  await waitFor(() => [...accepted].every((id) => handled.has(id)), {
    what: () => `every accepted message handled (${[...accepted].filter((id) => !handled.has(id)).length} missing)`,
    timeoutMs: 30_000,
  });
  await worker.stop();
  const status = await consumer.queueStatus(q);
  assert.ok(status.total >= accepted.size, `the store counts ${status.total} of ${accepted.size} accepted`);
  // Errors are expected while Redis is down; they must all be the transient kind.
  for (const error of recovered) assert.ok(error instanceof StoreUnavailableError, String(error));
  // The restart happened under load: some request was cut off by it (else this proves nothing).
  assert.ok(failed + recovered.length > 0, 'no enqueue or worker request failed while Redis was down');
}
