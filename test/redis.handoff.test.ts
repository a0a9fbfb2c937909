/**
 * Handoffs on Redis (src/stores/redis/lua/lib/handoff.lua): a consumer whose claim left it free slots and nothing to
 * take is parked, and an enqueue locks ready messages for it and pushes them to its list, where its BLPOP
 * takes them. What is handed off, to whom, how much, what ends a parking, and that a stopping worker gives
 * back what it did not start.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { connect, StoreLayoutError, type Client } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { claimMessages } from '../src/stores/redis/claim.js';
import { SCRIPTS } from '../src/stores/redis/scripts.generated.js';
import type { Scripts } from '../src/stores/redis/scripts.js';
import { unframe } from '../src/stores/redis/handoffs.js';
import type {
  ClaimedMessage,
  ClaimRequest,
  HandoffListener,
  HandoffReceiver,
  Store,
} from '../src/stores/contract/contract.js';
import { deletePrefixes, redisTestUrl } from './fixtures/redis-server.js';
import { waitFor } from './support/wait.js';

const base = redisTestUrl();
const redis = new Redis(base);
const clients: Client[] = [];
const receivers: HandoffReceiver[] = [];
const prefixes: string[] = [];

after(async () => {
  await Promise.all(receivers.map((receiver) => receiver.close().catch(() => undefined)));
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await deletePrefixes(base, prefixes);
  redis.disconnect();
});

interface Setup {
  readonly client: Client;
  readonly store: Store;
  /** A queue key's name. */
  key(name: string): string;
}

async function setup(label: string, q: string): Promise<Setup> {
  const prefix = `kvmq-test-handoff-${label}-${process.pid}-${randomBytes(3).toString('hex')}`;
  prefixes.push(prefix);
  const client = await connect(`${base}?prefix=${prefix}`, { maintenance: false });
  clients.push(client);
  return { client, store: storeOf(client), key: (name) => `${prefix}:{${q}}:${name}` };
}

function request(consumerId: string, max: number, accepts: ClaimRequest['accepts'] = null): ClaimRequest {
  return { consumerId, max, lockMs: 60_000, accepts, eoqBackoffMs: () => 60_000 };
}

/** What a receiver was handed, in order. */
class Handed implements HandoffListener {
  readonly messages: ClaimedMessage[] = [];
  readonly sizes: number[] = [];
  readonly errors: unknown[] = [];
  readies = 0;
  delivered(messages: readonly ClaimedMessage[], queueSize: number): void {
    this.messages.push(...messages);
    this.sizes.push(queueSize);
  }
  ready(): void {
    this.readies += 1;
  }
  failed(error: unknown): void {
    this.errors.push(error);
  }
  get ids(): string[] {
    return this.messages.map((m) => m.id);
  }
}

/** A receiver for `consumer`, and its first claim once its BLPOP waits: the consumer is parked. */
async function parked(s: Setup, q: string, consumer: string, max: number): Promise<Handed> {
  const handed = new Handed();
  assert.ok(s.store.receiveHandoffs !== undefined, 'the Redis store takes handoffs');
  receivers.push(s.store.receiveHandoffs(q, consumer, handed));
  await waitFor(
    async () => {
      await s.store.claim(q, request(consumer, max));
      return (await redis.hget(s.key('idle-workers'), consumer))?.startsWith(`${max} `);
    },
    { what: `${consumer} parked with ${max} free slots` },
  );
  assert.equal(handed.readies, 1, 'told once that handoffs can start');
  return handed;
}

/** Claims of consumer `w` by the claim script itself, with a handoff argument of the test's making; the ids taken. */
function scriptClaims(s: Setup, q: string): (max: number, handoffs: string) => Promise<string[]> {
  const scripts = (s.store as unknown as { scripts: Scripts }).scripts;
  return async (max, handoffs) =>
    (await claimMessages(scripts, new Map(), q, request('w', max), 'test', handoffs)).messages.map((m) => m.id);
}

void describe('redis handoffs', () => {
  void test('an enqueue locks ready messages for a parked consumer, up to its free slots, and it gets them', async () => {
    const q = 'hand';
    const s = await setup('basic', q);
    const handed = await parked(s, q, 'c1', 2);
    await s.client.enqueueBatch(q, [
      { id: 'a', payload: { n: 1 } },
      { id: 'b', payload: 'two', metadata: { by: 'test' } },
      { id: 'c', payload: 3 },
    ]);
    // Locked by the enqueue itself: no claim ran in between.
    assert.equal((await s.client.status(q, 'a'))?.state, 'locked');
    assert.equal((await s.client.status(q, 'b'))?.state, 'locked');
    assert.equal((await s.client.status(q, 'c'))?.state, 'queued');
    await waitFor(() => handed.messages.length === 2, { what: 'two messages handed over' });
    assert.deepEqual(handed.ids, ['a', 'b']);
    assert.deepEqual(
      handed.messages.map((m) => [m.attempt, Buffer.from(m.payload).toString()]),
      [
        [1, '{"n":1}'],
        [1, '"two"'],
      ],
    );
    assert.deepEqual(handed.messages[1]?.metadata, { by: 'test' });
    assert.deepEqual(handed.sizes, [3]);
    // Its slots are taken until it claims again; another consumer claims the rest.
    assert.match((await redis.hget(s.key('idle-workers'), 'c1')) ?? '', /^0 60000 \d+ \d+ 2$/);
    assert.deepEqual(
      (await s.store.claim(q, request('c2', 5))).messages.map((m) => m.id),
      ['c'],
    );
    // The handed messages are c1's to finish.
    const finishes = handed.messages.map((m) => ({
      id: m.id,
      attempt: m.attempt,
      outcome: 'success' as const,
      backoffMs: 0,
      error: null,
      startedAt: 1,
    }));
    assert.deepEqual(await s.store.finish(q, 'c1', finishes), ['ok', 'ok']);
    assert.equal((await s.client.queueStatus(q)).dryRuns, 0);
  });

  void test("a claim ends the consumer's parking; a consumer without a receiver, or one that filters, is never parked", async () => {
    const q = 'unpark';
    const s = await setup('unpark', q);
    const handed = await parked(s, q, 'c1', 1);
    assert.equal(await redis.hget(s.key('conf'), 'handoff'), '1');
    await s.client.enqueue(q, 'x', { id: 'x' });
    // Once x arrived (else it would stay owed), c1's next claim, with no slot free, unparks it.
    await waitFor(() => handed.ids.includes('x'), { what: 'x handed to c1' });
    await s.store.claim(q, request('c1', 0));
    assert.equal(await redis.hget(s.key('idle-workers'), 'c1'), null);
    assert.equal(await redis.hget(s.key('conf'), 'handoff'), null, 'no consumer parked: enqueues skip the lookup');
    await s.store.claim(q, request('no-receiver', 3));
    await s.store.claim(
      q,
      request('c1', 3, (filterClass) => filterClass === ''),
    );
    assert.equal(await redis.exists(s.key('idle-workers')), 0);
    await s.client.enqueue(q, 'y', { id: 'y' });
    assert.equal((await s.client.status(q, 'y'))?.state, 'queued');
  });

  void test('nothing is handed off on a paused queue, with a rate limit or groups, nor a delayed or lower-priority message', async () => {
    const q = 'kept';
    const s = await setup('kept', q);
    const handed = await parked(s, q, 'c1', 10);
    const queued = async (id: string): Promise<void> =>
      assert.equal((await s.client.status(q, id))?.state, 'queued', `${id} waits for a claim`);

    await s.client.enqueue(q, 'later', { id: 'later', initialBackoffMs: 60_000 });
    assert.equal((await s.client.status(q, 'later'))?.state, 'queued-with-backoff');
    await s.client.enqueue(q, 'low', { id: 'low', priority: 5 });
    await queued('low');
    await s.client.pause(q);
    await s.client.enqueue(q, 'paused', { id: 'paused' });
    await queued('paused');
    await s.client.resume(q);
    await s.client.configure(q, { rateLimit: { max: 100, perMs: 1000 } });
    await s.client.enqueue(q, 'limited', { id: 'limited' });
    await queued('limited');
    await s.client.configure(q, { rateLimit: null });
    await s.client.enqueue(q, 'grouped', { id: 'grouped', group: 'g' });
    await s.client.enqueue(q, 'beside-a-group', { id: 'beside-a-group' });
    await queued('grouped');
    await queued('beside-a-group');
    assert.deepEqual(handed.ids, []);
    // The parking held: its free slots are untouched.
    assert.match((await redis.hget(s.key('idle-workers'), 'c1')) ?? '', /^10 /);
  });

  void test('a claim takes fewer by the messages handed to the consumer that it had not received when it asked', async () => {
    const q = 'on-the-way';
    const s = await setup('on-the-way', q);
    const claim = scriptClaims(s, q);
    assert.deepEqual(await claim(2, '1 0 0'), []);
    await s.client.enqueue(q, 1, { id: 'h1' });
    await s.client.enqueue(q, 2, { id: 'h2' });
    assert.equal(await redis.llen(s.key('idle-workers:w')), 2);
    assert.match((await redis.hget(s.key('idle-workers'), 'w')) ?? '', /^0 60000 \d+ 1 2$/);
    await s.client.enqueueBatch(q, [
      { id: 'r1', payload: 1 },
      { id: 'r2', payload: 2 },
      { id: 'r3', payload: 3 },
    ]);
    // Handed two under token 1, received one: one is on its way, so three free slots take two.
    assert.deepEqual(await claim(3, '2 1 1'), ['r1', 'r2']);
    // Not parked (no slot left free), yet the one on its way stays owed: a record of no free slots keeps it,
    // for a lock from this claim.
    const owedUntil = (await redis.hget(s.key('idle-workers'), 'w'))?.match(/^0 60000 \d+ 2 1 (\d+)$/)?.[1];
    assert.ok(owedUntil !== undefined, 'a record of one message owed, with its end');
    await s.client.enqueueBatch(q, [
      { id: 'r3', payload: 3 },
      { id: 'r4', payload: 4 },
      { id: 'r5', payload: 5 },
    ]);
    assert.equal(await redis.llen(s.key('idle-workers:w')), 2, 'nothing handed to a record of no free slots');
    // Sent before it arrived: of three free slots, one still waits for it.
    assert.deepEqual(await claim(3, '3 2 0'), ['r3', 'r4']);
    assert.deepEqual(await redis.hget(s.key('idle-workers'), 'w').then((v) => v?.split(' ').slice(3)), [
      '3',
      '1',
      owedUntil,
    ]);
    // Sent after it arrived: nothing is owed any more.
    assert.deepEqual(await claim(3, '4 3 1'), ['r5']);
    assert.equal(await claim(2, '5 4 0').then((ids) => ids.length), 0);
    assert.match((await redis.hget(s.key('idle-workers'), 'w')) ?? '', /^2 60000 \d+ 5 0$/);
    await s.client.enqueueBatch(
      q,
      ['h3', 'h4', 'r6', 'r7', 'r8'].map((id) => ({ id, payload: id })),
    );
    // A count under another token than the parking's says nothing: both handed are on their way.
    assert.deepEqual(await claim(3, '6 4 2'), ['r6']);
  });

  void test('messages on their way stay owed through claims that take nothing, so a full worker is handed no more', async () => {
    const q = 'owed';
    const s = await setup('owed', q);
    const claim = scriptClaims(s, q);
    // A worker of two slots, parked; two messages are handed to it, and neither has arrived.
    assert.deepEqual(await claim(2, '1 0 0'), []);
    await s.client.enqueue(q, 1, { id: 'first' });
    await s.client.enqueue(q, 2, { id: 'second' });
    // Its next claim went out before both arrived: no slot is left for it, and it is not parked.
    assert.deepEqual(await claim(2, '2 1 0'), []);
    // The first arrived, then it claimed again with the one slot it saw free (the second still on its way).
    assert.deepEqual(await claim(1, '3 2 1'), []);
    await s.client.enqueue(q, 3, { id: 'third' });
    assert.equal(await redis.llen(s.key('idle-workers:w')), 2, 'the third is not handed to a full worker');
    assert.equal((await s.client.status(q, 'third'))?.state, 'queued');
    assert.deepEqual(await claim(1, '4 3 0'), [], 'nor claimed by it while the second is on its way');
    // Once the second arrived, the worker's next free slot takes the third.
    assert.deepEqual(await claim(1, '5 4 1'), ['third']);
  });

  void test('a handed message that never arrives stops being owed after a lock; till then the claim sleeps', async () => {
    const q = 'lost-on-the-way';
    const s = await setup('lost-on-the-way', q);
    const scripts = (s.store as unknown as { scripts: Scripts }).scripts;
    const claim = (max: number, handoffs: string): ReturnType<typeof claimMessages> =>
      claimMessages(scripts, new Map(), q, { ...request('w', max), lockMs: 1000 }, 'test', handoffs);
    assert.deepEqual((await claim(1, '1 0 0')).messages, []);
    await s.client.enqueue(q, 1, { id: 'lost' });
    // Taken from the worker's list by a BLPOP whose reply was lost with its connection: it never arrives.
    assert.equal(await redis.del(s.key('idle-workers:w')), 1);
    await s.client.enqueue(q, 2, { id: 'ready' });
    // Its one slot waits for the lost message: nothing is taken, and the claim says when to look again
    // (not "at once", which would be a worker asleep until some wake-up, nor a spin).
    const before = Date.now();
    const waiting = await claim(1, '2 1 0');
    assert.deepEqual(waiting.messages, []);
    const wakeAt = waiting.wakeAt ?? 0;
    assert.ok(wakeAt > before && wakeAt <= Date.now() + 1000, `look again at ${waiting.wakeAt} (${before})`);
    // Still owed within the lock, whatever claims come in between.
    assert.deepEqual((await claim(1, '3 2 0')).messages, []);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, wakeAt - Date.now()) + 20));
    // A lock later the worker would take it as lost if it came, and its lock has ended: the worker's slot
    // claims again, and the lost message comes back too.
    const taken = (await claim(2, '4 3 0')).messages;
    assert.deepEqual(taken.map((m) => [m.id, m.attempt]).sort(), [
      ['lost', 2],
      ['ready', 1],
    ]);
  });

  void test('a parking lasts at most half a short lock, and ends a quarter of it later', async () => {
    const q = 'short-lock';
    const s = await setup('short-lock', q);
    const scripts = (s.store as unknown as { scripts: Scripts }).scripts;
    const before = Date.now();
    const result = await claimMessages(scripts, new Map(), q, { ...request('w', 2), lockMs: 1000 }, 'test', '1 0 0');
    const after = Date.now();
    assert.ok(result.wakeAt !== null && result.wakeAt <= after + 500, `claim again by ${result.wakeAt} (${after})`);
    const [free, lockMs, until] = ((await redis.hget(s.key('idle-workers'), 'w')) ?? '').split(' ').map(Number);
    assert.deepEqual([free, lockMs], [2, 1000]);
    assert.ok(until !== undefined && until > before && until <= after + 750, `parked until ${until} (${after})`);
  });

  void test('a claim left no free slot by messages on their way to its consumer counts no dry run', async () => {
    const q = 'no-dry';
    const s = await setup('no-dry', q);
    const claimMax = scriptClaims(s, q);
    const claim = (handoffs: string): Promise<string[]> => claimMax(1, handoffs);
    assert.deepEqual(await claim('1 0 0'), []);
    assert.equal((await s.client.queueStatus(q)).dryRuns, 1);
    await s.client.enqueue(q, 1, { id: 'h' });
    assert.equal((await s.client.queueStatus(q)).dryRuns, 0, 'a handoff resets the dry runs');
    // Sent before h arrived: its one slot waits for h, so it takes nothing, and that is not a dry run.
    assert.deepEqual(await claim('2 1 0'), []);
    assert.equal((await s.client.queueStatus(q)).dryRuns, 0);
  });

  void test('an entry kvmq did not write in the list is a StoreLayoutError to the worker, which goes on receiving', async () => {
    const q = 'foreign';
    const s = await setup('foreign', q);
    const handed = await parked(s, q, 'c1', 1);
    const list = s.key('idle-workers:c1');
    await redis.rpush(list, 'not an entry', '1:1', '1:1-:99:x');
    await waitFor(() => handed.errors.length === 3, { what: 'three foreign entries reported' });
    for (const error of handed.errors) {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /idle-workers:c1 was not written by kvmq/);
    }
    await s.client.enqueue(q, 'after', { id: 'after' });
    await waitFor(() => handed.ids.includes('after'), { what: 'the next handoff' });
    assert.equal(await redis.llen(list), 0);
  });

  void test('a parking that ran out, or that kvmq did not write, is dropped by the next enqueue', async () => {
    const q = 'expired';
    const s = await setup('expired', q);
    const handed = await parked(s, q, 'c1', 4);
    const parking = (await redis.hget(s.key('idle-workers'), 'c1')) ?? '';
    // Ended at 1 ms past the epoch, all else as the claim wrote it.
    await redis.hset(s.key('idle-workers'), 'c1', parking.replace(/^(\d+ \d+) \d+/, '$1 1'));
    await s.client.enqueue(q, 'm', { id: 'm' });
    assert.equal((await s.client.status(q, 'm'))?.state, 'queued');
    assert.equal(await redis.exists(s.key('idle-workers')), 0);
    assert.equal(await redis.hget(s.key('conf'), 'handoff'), null);

    const other = await parked(s, q, 'c2', 4);
    await redis.hset(s.key('idle-workers'), 'c2', '4 60000 not a parking');
    await s.client.enqueue(q, 'n', { id: 'n' });
    assert.equal((await s.client.status(q, 'n'))?.state, 'queued');
    assert.equal(await redis.exists(s.key('idle-workers')), 0);
    assert.deepEqual([...handed.ids, ...other.ids], []);
  });

  void test('what waits in the list of a consumer whose BLPOP is gone comes back when it stops (unpark)', async () => {
    const q = 'gone';
    const s = await setup('gone', q);
    const scripts = (s.store as unknown as { scripts: Scripts }).scripts;
    // Parked as a receiver's claims park it, with no BLPOP behind: its entries stay in its list.
    await claimMessages(scripts, new Map(), q, request('gone', 3), 'test', '1 0 0');
    await s.client.enqueueBatch(q, [
      { id: 'm1', payload: 1 },
      { id: 'm2', payload: 2 },
    ]);
    await s.client.enqueue(q, 3, { id: 'm3' });
    await s.client.enqueue(q, 4, { id: 'm4' });
    assert.equal(await redis.llen(s.key('idle-workers:gone')), 2);
    assert.ok((await redis.pttl(s.key('idle-workers:gone'))) > 60_000, 'the list goes away by itself');
    assert.equal((await s.client.status(q, 'm4'))?.state, 'queued');

    const entries = (await scripts.run(SCRIPTS.unpark, q, ['gone'])) as Buffer[];
    const ids = entries.map((entry) => {
      const fields = unframe(entry);
      return fields.filter((_, i) => i >= 2 && i % 6 === 2).map((id) => id?.toString());
    });
    assert.deepEqual(ids, [['m1', 'm2'], ['m3']]);
    assert.equal(await redis.hget(s.key('idle-workers'), 'gone'), null);
    // An empty entry ends a BLPOP that still waits.
    assert.deepEqual(await redis.lrange(s.key('idle-workers:gone'), 0, -1), ['']);
  });

  void test('an idle worker gets each message from the enqueue itself, one handler at a time, each once', async () => {
    const q = 'worker';
    const s = await setup('worker', q);
    const seen: string[] = [];
    let running = 0;
    let most = 0;
    const worker = s.client.worker(
      q,
      async (job) => {
        running += 1;
        most = Math.max(most, running);
        seen.push(job.id);
        await new Promise((resolve) => setTimeout(resolve, 2));
        running -= 1;
      },
      { concurrency: 1 },
    );
    const parkedAgain = async (): Promise<boolean> =>
      (await redis.hvals(s.key('idle-workers'))).some((value) => value.startsWith('1 '));
    const early: string[] = [];
    for (let i = 0; i < 10; i++) {
      await waitFor(parkedAgain, { what: `the worker parked before message ${i}` });
      await s.client.enqueue(q, i, { id: `m${i}` });
      const state = (await s.client.status(q, `m${i}`))?.state;
      if (state !== 'locked' && state !== 'done-awaiting-gc') early.push(`m${i}: ${state}`);
    }
    // Then a burst: more than its one slot, so most wait for its claims.
    await Promise.all(Array.from({ length: 20 }, (_, i) => s.client.enqueue(q, i, { id: `b${i}` })));
    await waitFor(() => seen.length === 30, { what: '30 handled', timeoutMs: 10_000 });
    await worker.stop();
    assert.deepEqual(early, [], 'each message was locked for the worker by its enqueue');
    assert.equal(most, 1);
    assert.equal(new Set(seen).size, 30);
    assert.equal(await redis.exists(s.key('idle-workers')), 0, 'a stopped worker is not parked');
  });

  void test('a stopping worker gives back what was handed to it and not started; nothing stays locked', async () => {
    const q = 'stop';
    const s = await setup('stop', q);
    let release: () => void = () => undefined;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const started: string[] = [];
    const worker = s.client.worker(
      q,
      async (job) => {
        started.push(job.id);
        await blocked;
      },
      { concurrency: 1, prefetch: 4 },
    );
    await waitFor(async () => (await redis.hget(s.key('idle-workers'), worker.id))?.startsWith('5 '), {
      what: 'the worker parked with 5 free slots',
    });
    const ids = ['s1', 's2', 's3', 's4', 's5'];
    await s.client.enqueueBatch(
      q,
      ids.map((id) => ({ id, payload: id })),
    );
    const state = async (id: string): Promise<string | undefined> => (await s.client.status(q, id))?.state;
    // All five locked for the worker by the enqueue: one runs, four wait in the worker.
    assert.deepEqual(
      await Promise.all(ids.map(state)),
      ids.map(() => 'locked'),
    );
    await waitFor(() => started.length === 1, { what: 'the first handler' });
    const stopped = worker.stop();
    release();
    await stopped;
    assert.deepEqual(await Promise.all(ids.map(state)), ['done-awaiting-gc', 'queued', 'queued', 'queued', 'queued']);
    assert.deepEqual(started, ['s1']);
  });
});
