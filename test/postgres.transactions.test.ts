/**
 * Enqueue inside the caller's transaction on PostgreSQL: a rollback leaves nothing, a commit wakes a running
 * worker at once, a worker never sees a message whose transaction is still open, batches, the same through
 * Kysely and Knex, a closed or aborted transaction refused with TransactionError, and the option refused by the
 * stores that cannot take part in a SQL transaction.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import knex from 'knex';
import { CompiledQuery, Kysely, PostgresDialect, sql as kyselySql } from 'kysely';
import pg from 'pg';
import { knexTransaction, TransactionError, type Job, type SqlTransaction } from '../src/index.js';
import { freshSchema, postgresTestUrl } from './fixtures/postgres-server.js';
import { storeTest, type Harness } from './support/harness.js';
import { postgresFixture, redisFixture, sqliteFixture } from './support/stores.js';
import { waitFor } from './support/wait.js';
import type { StoreFixture } from './support/fixture.js';

const base = postgresTestUrl();
// The app schemas the tests make, dropped with the store's.
const schemas: string[] = [];
const postgres = postgresFixture(schemas);

// Only a NOTIFY at the commit can wake these workers in time: their end-of-queue backoff is a minute.
const ASLEEP = { eoqBackoffMs: 60_000 };

/** A pg client of the test's own on the server, closed after the test, and an app table in a schema of its own. */
async function appConnection(h: Harness): Promise<{ db: pg.Client; table: string }> {
  const app = freshSchema();
  schemas.push(app);
  const db = new pg.Client({ connectionString: base });
  await db.connect();
  h.cleanup(() => db.end());
  await db.query(`CREATE SCHEMA "${app}"; CREATE TABLE "${app}".orders (id text PRIMARY KEY)`);
  return { db, table: `"${app}".orders` };
}

/** A worker whose handled jobs the test reads, started and idle before the test goes on. */
async function recordingWorker(h: Harness, queue: string, options = ASLEEP): Promise<Job[]> {
  const handled: Job[] = [];
  const worker = h.worker(
    queue,
    (job) => {
      handled.push(job);
    },
    { ...options, autoStart: false },
  );
  await worker.start();
  // Its first claim found nothing: it now waits on its backoff or a wake-up.
  await waitFor(async () => (await h.client.queueStatus(queue)).dryRuns >= 1, { what: 'the first dry claim' });
  return handled;
}

async function count(db: pg.Client, table: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
  return Number(rows[0]?.n);
}

void describe('enqueue in the caller transaction', () => {
  storeTest(postgres, 'a rolled back transaction leaves neither the message nor a count', async (h) => {
    const queue = h.queue();
    const { db } = await appConnection(h);
    await db.query('BEGIN');
    const result = await h.client.enqueue(queue, { n: 1 }, { id: 'rolled-back', tx: db });
    assert.deepEqual(result, { ok: true, id: 'rolled-back', action: 'added' });
    await db.query('ROLLBACK');
    assert.equal(await h.client.status(queue, 'rolled-back'), null);
    const status = await h.client.queueStatus(queue);
    assert.equal(status.total, 0);
    assert.equal(status.counts.queued, 0);
  });

  storeTest(postgres, 'a commit wakes a running worker at once, with the caller rows beside', async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    const handled = await recordingWorker(h, queue);
    await db.query('BEGIN');
    await db.query(`INSERT INTO ${table} (id) VALUES ('o-1')`);
    await h.client.enqueue(queue, { order: 'o-1' }, { id: 'o-1', tx: db });
    await db.query('COMMIT');
    await waitFor(() => handled.length === 1, { what: 'the committed message handled' });
    assert.deepEqual(handled[0]?.payload, { order: 'o-1' });
    assert.equal(await count(db, table), 1);
  });

  storeTest(postgres, 'a worker never takes a message whose transaction is still open', async (h) => {
    const queue = h.queue();
    const { db } = await appConnection(h);
    // A worker that claims every 20 ms.
    const handled = await recordingWorker(h, queue, { eoqBackoffMs: 20 });
    await db.query('BEGIN');
    await h.client.enqueue(queue, 'pending', { id: 'open', tx: db });
    const before = (await h.client.queueStatus(queue)).dryRuns;
    // Many claims come and go while the transaction stays open.
    await waitFor(async () => (await h.client.queueStatus(queue)).dryRuns >= before + 5, { what: 'more claims' });
    assert.equal(handled.length, 0);
    assert.equal(await h.client.status(queue, 'open'), null, 'another connection does not see it');
    await db.query('COMMIT');
    await waitFor(() => handled.length === 1, { what: 'the message handled after the commit' });
  });

  storeTest(postgres, 'a batch in a transaction commits or rolls back whole', async (h) => {
    const queue = h.queue();
    const { db } = await appConnection(h);
    const items = (prefix: string): { id: string; payload: number }[] =>
      Array.from({ length: 25 }, (_, i) => ({ id: `${prefix}-${i}`, payload: i }));
    await db.query('BEGIN');
    const dropped = await h.client.enqueueBatch(queue, items('dropped'), { tx: db });
    assert.equal(dropped.filter((r) => r.ok).length, 25);
    await db.query('ROLLBACK');
    assert.equal((await h.client.queueStatus(queue)).total, 0);

    const handled = await recordingWorker(h, queue);
    await db.query('BEGIN');
    await h.client.enqueueBatch(queue, items('kept'), { tx: db });
    await db.query('COMMIT');
    await waitFor(() => handled.length === 25, { what: 'the 25 committed messages handled' });
    assert.deepEqual(
      handled.map((job) => job.id).sort(),
      items('kept')
        .map((item) => item.id)
        .sort(),
    );
  });

  storeTest(postgres, 'through Kysely: the order and its message commit together, or neither', async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    const kysely = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: base, max: 2 }) }),
    });
    h.cleanup(() => kysely.destroy());
    const handled = await recordingWorker(h, queue);
    await kysely.transaction().execute(async (trx) => {
      await kyselySql`INSERT INTO ${kyselySql.raw(table)} (id) VALUES (${'k-1'})`.execute(trx);
      const tx: SqlTransaction = { query: (text, values) => trx.executeQuery(CompiledQuery.raw(text, values)) };
      await h.client.enqueue(queue, { order: 'k-1' }, { id: 'k-1', tx });
    });
    await waitFor(() => handled.length === 1, { what: 'the message committed through Kysely' });
    await assert.rejects(
      kysely.transaction().execute(async (trx) => {
        await kyselySql`INSERT INTO ${kyselySql.raw(table)} (id) VALUES (${'k-2'})`.execute(trx);
        const tx: SqlTransaction = { query: (text, values) => trx.executeQuery(CompiledQuery.raw(text, values)) };
        await h.client.enqueue(queue, { order: 'k-2' }, { id: 'k-2', tx });
        throw new Error('the order is refused');
      }),
      /the order is refused/,
    );
    assert.equal(await h.client.status(queue, 'k-2'), null);
    assert.equal(await count(db, table), 1);
    assert.equal(handled.length, 1);
  });

  storeTest(postgres, 'through Knex: the order and its message commit together, or neither', async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    const k = knex({ client: 'pg', connection: base, pool: { min: 0, max: 2 } });
    h.cleanup(() => k.destroy());
    const handled = await recordingWorker(h, queue);
    await k.transaction(async (trx) => {
      await trx.raw(`INSERT INTO ${table} (id) VALUES (?)`, ['n-1']);
      await h.client.enqueueBatch(
        queue,
        [
          { id: 'n-1', payload: { order: 'n-1' }, priority: 3, metadata: { why: 'a ? in a value' } },
          { id: 'n-1b', payload: 'second' },
        ],
        { tx: knexTransaction(trx) },
      );
    });
    await waitFor(() => handled.length === 2, { what: 'the messages committed through Knex' });
    assert.deepEqual(handled.find((job) => job.id === 'n-1')?.metadata, { why: 'a ? in a value' });
    await assert.rejects(
      k.transaction(async (trx) => {
        await trx.raw(`INSERT INTO ${table} (id) VALUES (?)`, ['n-2']);
        await h.client.enqueue(queue, { order: 'n-2' }, { id: 'n-2', tx: knexTransaction(trx) });
        throw new Error('the order is refused');
      }),
      /the order is refused/,
    );
    assert.equal(await h.client.status(queue, 'n-2'), null);
    assert.equal(await count(db, table), 1);
  });

  storeTest(postgres, 'a transaction not begun, or aborted, is a TransactionError', async (h) => {
    const queue = h.queue();
    const { db } = await appConnection(h);
    await assert.rejects(h.client.enqueue(queue, 1, { id: 'no-begin', tx: db }), TransactionError);
    await db.query('BEGIN');
    await assert.rejects(db.query('SELECT 1/0'));
    await assert.rejects(h.client.enqueue(queue, 1, { id: 'aborted', tx: db }), TransactionError);
    // An executor that does not say where its connection stands: the server's answer tells.
    const executor: SqlTransaction = { query: (text, values) => db.query(text, values) };
    await assert.rejects(h.client.enqueueBatch(queue, [{ payload: 1 }], { tx: executor }), (error: unknown) => {
      assert.ok(error instanceof TransactionError);
      assert.equal(error.code, 'TRANSACTION');
      assert.match(error.message, /aborted/);
      return true;
    });
    await db.query('ROLLBACK');
    assert.equal((await h.client.queueStatus(queue)).total, 0);
  });

  storeTest(postgres, 'a tx that is not a transaction is a TypeError', async (h) => {
    const queue = h.queue();
    const bad = { tx: { begin: true } } as unknown as { tx: SqlTransaction };
    await assert.rejects(h.client.enqueue(queue, 1, bad), TypeError);
    await assert.rejects(h.client.enqueueBatch(queue, [{ payload: 1, ...bad }]), TypeError);
  });
});

void describe('transactional handlers', () => {
  storeTest(postgres, 'a handler that writes, then throws, leaves no row; the message is retried', async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    h.worker(
      queue,
      async (job) => {
        assert.ok(job.tx !== undefined);
        await job.tx.query(`INSERT INTO ${table} (id) VALUES ($1)`, [`${job.id}-${job.attempt}`]);
        if (job.attempt === 1) throw new Error('the first attempt fails after its write');
      },
      { transactional: true, maxAttempts: 2, retryBackoffMs: 0 },
    );
    await h.client.enqueue(queue, 'x', { id: 'm' });
    await waitFor(async () => (await h.client.status(queue, 'm'))?.state === 'done-awaiting-gc', {
      what: 'the message done at its second attempt',
    });
    const { rows } = await db.query<{ id: string }>(`SELECT id FROM ${table}`);
    assert.deepEqual(
      rows.map((r) => r.id),
      ['m-2'],
    );
    const details = await h.client.show(queue, 'm');
    assert.deepEqual(
      details?.history.map((record) => [record.attempt, record.outcome, record.error?.split('\n')[0]]),
      [[1, 'retry', 'Error: the first attempt fails after its write']],
    );
  });

  storeTest(postgres, "a handler that succeeds commits its row with the message's outcome", async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    const next = h.queue('next');
    let seenInside: number | null = null;
    let nextInside: unknown;
    h.worker(
      queue,
      async (job) => {
        await job.tx?.query(`INSERT INTO ${table} (id) VALUES ($1)`, [job.id]);
        // The next step's message, in the same transaction.
        await h.client.enqueue(next, 'then', { id: 'next', tx: job.tx });
        // Another connection sees neither the row nor the outcome before the commit.
        seenInside = await count(db, table);
        nextInside = await h.client.status(next, 'next');
      },
      { transactional: true },
    );
    await h.client.enqueue(queue, 'x', { id: 'ok' });
    await waitFor(async () => (await h.client.status(queue, 'ok'))?.state === 'done-awaiting-gc', {
      what: 'the message done',
    });
    assert.equal(seenInside, 0);
    assert.equal(nextInside, null);
    assert.equal(await count(db, table), 1);
    assert.equal((await h.client.status(next, 'next'))?.state, 'queued');
  });

  storeTest(postgres, 'a handler that times out can no longer write through job.tx', async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    const late: unknown[] = [];
    h.worker(
      queue,
      async (job) => {
        await job.tx?.query(`INSERT INTO ${table} (id) VALUES ($1)`, [`${job.id}-early`]);
        await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
        // Past its timeout: the transaction was rolled back and its connection given back.
        await new Promise((resolve) => setTimeout(resolve, 100));
        late.push(
          await job.tx
            ?.query(`INSERT INTO ${table} (id) VALUES ($1)`, [`${job.id}-late`])
            .catch((error: unknown) => error),
        );
      },
      { transactional: true, timeoutMs: 200 },
    );
    await h.client.enqueue(queue, 'x', { id: 'slow' });
    await waitFor(() => late.length === 1, { what: 'the late write tried' });
    assert.ok(late[0] instanceof TransactionError, String(late[0]));
    assert.equal((await h.client.status(queue, 'slow'))?.state, 'failed');
    assert.equal(await count(db, table), 0);
  });

  storeTest(postgres, 'a worker killed inside its transaction leaves no row; another handles it', async (h) => {
    const queue = h.queue();
    const { db, table } = await appConnection(h);
    await h.client.enqueue(queue, 'x', { id: 'killed' });
    const child = h.spawn('transactional-worker.ts', [h.url, queue, table]);
    await child.line(/^wrote killed 1$/);
    await child.kill('SIGKILL');
    assert.equal(await count(db, table), 0);
    const attempts: number[] = [];
    h.worker(
      queue,
      async (job) => {
        attempts.push(job.attempt);
        await job.tx?.query(`INSERT INTO ${table} (id) VALUES ($1)`, [`${job.id}-${job.attempt}`]);
      },
      { transactional: true },
    );
    await waitFor(async () => (await h.client.status(queue, 'killed'))?.state === 'done-awaiting-gc', {
      what: 'the message handled again',
      timeoutMs: 15_000,
    });
    assert.deepEqual(attempts, [2]);
    const { rows } = await db.query<{ id: string }>(`SELECT id FROM ${table}`);
    assert.deepEqual(
      rows.map((r) => r.id),
      ['killed-2'],
    );
  });
});

/** The tx option on a store that cannot take part in a SQL transaction: refused, nothing written. */
function refusedOn(fixture: StoreFixture): void {
  storeTest(fixture, `the tx and transactional options are a TypeError on ${fixture.name}`, async (h) => {
    const queue = h.queue();
    const db = new pg.Client({ connectionString: base });
    await db.connect();
    h.cleanup(() => db.end());
    await db.query('BEGIN');
    const refused = (error: unknown): boolean => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, new RegExp(`not available on this ${fixture.name} store.*PostgreSQL`));
      return true;
    };
    await assert.rejects(h.client.enqueue(queue, 1, { tx: db }), refused);
    await assert.rejects(h.client.enqueueBatch(queue, [{ payload: 1 }], { tx: db }), refused);
    await db.query('ROLLBACK');
    assert.equal((await h.client.queueStatus(queue)).total, 0);
    assert.throws(
      () => h.client.worker(queue, () => undefined, { transactional: true }),
      new RegExp(`transactional is not available on this ${fixture.name} store`),
    );
  });
}

void describe('the tx option elsewhere', () => {
  refusedOn(sqliteFixture());
  refusedOn(redisFixture());
});
