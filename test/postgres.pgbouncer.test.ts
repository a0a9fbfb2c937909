/**
 * The PostgreSQL store through PgBouncer in transaction mode (URL option `pooler=transaction`): enqueue, claim,
 * finish, retry, listing, events, configuration, an enqueue in the caller's transaction and a transactional
 * handler all work; what needs a session of its own is replaced: wake-ups by polling, instant release by lock
 * expiry (a killed worker's message is handled again once its lock ends), and no consumer is swept as dead by
 * a process that reaches the server directly.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import pg from 'pg';
import { storeOf } from '../src/client/client-store.js';
import { connect, StoreUrlError } from '../src/index.js';
import { freshSchema, postgresTestUrl } from './fixtures/postgres-server.js';
import { storeTest } from './support/harness.js';
import { pgbouncerFixture } from './support/stores.js';
import { waitFor } from './support/wait.js';

const base = new URL(postgresTestUrl());
// The schemas of the app tables, dropped with the store's.
const schemas: string[] = [];
const pooled = pgbouncerFixture(schemas);

void describe('postgres through pgbouncer in transaction mode', () => {
  storeTest(pooled, 'the store declares neither wake-ups nor instant release', async (h) => {
    const { capabilities } = storeOf(h.client);
    assert.equal(capabilities.wakeups, false);
    assert.equal(capabilities.instantRelease, false);
    await assert.rejects(connect(`${h.url.replace(/&pooler=\w+/, '')}&pooler=statement`), StoreUrlError);
  });

  storeTest(pooled, 'enqueue, claim, finish, retry, list, events and configuration work', async (h) => {
    const queue = h.queue();
    await h.client.configure(queue, { events: true });
    const attempts = new Map<string, number[]>();
    h.worker(
      queue,
      (job) => {
        attempts.set(job.id, [...(attempts.get(job.id) ?? []), job.attempt]);
        if (job.id === 'flaky' && job.attempt === 1) return { status: 'retry', backoffMs: 0 };
        if (job.id === 'bad') return { status: 'error', error: 'refused' };
      },
      { concurrency: 4 },
    );
    await h.client.enqueueBatch(
      queue,
      ['ok', 'flaky', 'bad'].map((id) => ({ id, payload: { id } })),
    );
    await waitFor(async () => (await h.client.queueStatus(queue)).counts['done-awaiting-gc'] === 2, {
      what: 'two done',
      timeoutMs: 10_000,
    });
    await waitFor(async () => (await h.client.status(queue, 'bad'))?.state === 'failed', { what: 'one failed' });
    assert.deepEqual(attempts.get('flaky'), [1, 2]);
    const failed = await h.client.list(queue, { state: 'failed' });
    assert.deepEqual(
      failed.messages.map((m) => m.id),
      ['bad'],
    );
    const events = await h.client.readEvents(queue);
    assert.ok(events.events.some((event) => event.type === 'completed' && event.id === 'ok'));
    assert.equal((await h.client.retry(queue, 'bad')).ok, true);
  });

  storeTest(pooled, 'an idle worker finds a new message by polling', async (h) => {
    const queue = h.queue();
    const handled: string[] = [];
    const worker = h.worker(queue, (job) => void handled.push(job.id), { eoqBackoffMs: 60_000, autoStart: false });
    await worker.start();
    await waitFor(async () => (await h.client.queueStatus(queue)).dryRuns >= 1, { what: 'the first dry claim' });
    await h.client.enqueue(queue, 'x', { id: 'late' });
    await waitFor(() => handled.includes('late'), { what: 'the message handled', timeoutMs: 5000 });
  });

  storeTest(pooled, 'enqueue in a transaction and transactional handlers work through it', async (h) => {
    const queue = h.queue();
    const app = freshSchema();
    schemas.push(app);
    const db = new pg.Client({ connectionString: (await pooled.url()).replace(/\?.*$/, '') });
    await db.connect();
    h.cleanup(() => db.end());
    await db.query(`CREATE SCHEMA "${app}"`);
    await db.query(`CREATE TABLE "${app}".rows (id text PRIMARY KEY)`);
    h.worker(
      queue,
      async (job) => {
        await job.tx?.query(`INSERT INTO "${app}".rows (id) VALUES ($1)`, [job.id]);
        if (job.attempt === 1) throw new Error('once');
      },
      { transactional: true, maxAttempts: 2, retryBackoffMs: 0 },
    );
    await db.query('BEGIN');
    await h.client.enqueue(queue, 'x', { id: 'rolled-back', tx: db });
    await db.query('ROLLBACK');
    await db.query('BEGIN');
    await h.client.enqueue(queue, 'x', { id: 'kept', tx: db });
    await db.query('COMMIT');
    await waitFor(async () => (await h.client.status(queue, 'kept'))?.state === 'done-awaiting-gc', {
      what: 'the committed message done',
      timeoutMs: 10_000,
    });
    assert.equal(await h.client.status(queue, 'rolled-back'), null);
    const { rows } = await db.query<{ id: string }>(`SELECT id FROM "${app}".rows`);
    assert.deepEqual(
      rows.map((r) => r.id),
      ['kept'],
    );
  });

  storeTest(
    pooled,
    "a killed worker's message is handled again when its lock ends, and not swept by a direct client",
    async (h) => {
      const queue = h.queue();
      await h.client.enqueue(queue, 'x', { id: 'orphan' });
      const child = h.spawn('worker-process.ts', [h.url, queue, 'hang', '1500']);
      await child.line(/^claimed orphan 1$/);
      // A client that reaches PostgreSQL directly sweeps dead consumers' messages: this one holds no lock to test.
      const schema = /schema=([a-z0-9_]+)/.exec(h.url)?.[1] ?? '';
      const sweeper = await connect(`${base.href}?schema=${schema}`, { maintenance: false });
      h.cleanup(() => sweeper.close());
      const seen: number[] = [];
      sweeper.worker(queue, (job) => void seen.push(job.attempt), { eoqBackoffMs: 50, lockMs: 1500 });
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(seen.length, 0, 'a live consumer behind the pooler is not taken for dead');
      await child.kill('SIGKILL');
      await waitFor(() => seen.includes(2), { what: 'the message handled again at attempt 2', timeoutMs: 10_000 });
      assert.equal((await h.client.status(queue, 'orphan'))?.attempt, 2);
    },
  );
});
