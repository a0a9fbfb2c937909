/**
 * A `statement_timeout` that fires mid-claim or mid-enqueue (a table locked by someone else past it): the call
 * fails with a transient StoreUnavailableError that says what happened, its transaction is rolled back, the
 * worker tries again, and every message is handled once, none lost, none twice.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pg from 'pg';
import { connect, StoreUnavailableError, type Client } from '../src/index.js';
import { dropSchemas, freshSchema, postgresTestUrl, sql } from './fixtures/postgres-server.js';
import { waitFor } from './support/wait.js';

const base = postgresTestUrl();
const schema = freshSchema();
const role = `kvmq_timeout_${process.pid}`;
const clients: Client[] = [];

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await dropSchemas(base, [schema]);
  await sql(base, `DROP ROLE IF EXISTS ${role}`);
});

void test('a statement_timeout mid-claim and mid-enqueue is a transient error; nothing is lost or doubled', async () => {
  // A role whose every statement may run 300 ms at most, as a production database may set it.
  await sql(base, `CREATE ROLE ${role} LOGIN SUPERUSER PASSWORD 'timeout-pw'`);
  await sql(base, `ALTER ROLE ${role} SET statement_timeout = '300ms'`);
  const at = new URL(base);
  const url = `postgres://${role}:timeout-pw@${at.host}${at.pathname}?schema=${schema}`;
  const errors: unknown[] = [];
  const client = await connect(url, { maintenance: false, onError: (error) => void errors.push(error) });
  clients.push(client);
  const q = 'timeout';
  await client.enqueueBatch(
    q,
    Array.from({ length: 20 }, (_, i) => ({ id: `m${i}`, payload: i })),
  );

  // Another session holds the messages table past the timeout.
  const locker = new pg.Client({ connectionString: base });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE "${schema}".messages IN ACCESS EXCLUSIVE MODE`);
    await assert.rejects(client.enqueue(q, 'late', { id: 'late' }), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError, String(error));
      assert.ok(error.transient);
      assert.match(error.message, /canceled the statement: .*statement timeout/);
      return true;
    });
    const handled: string[] = [];
    const worker = client.worker(q, (job) => void handled.push(job.id), {
      concurrency: 4,
      lockMs: 5000,
      onError: (error) => void errors.push(error),
    });
    await waitFor(() => errors.some((error) => error instanceof StoreUnavailableError), {
      what: "the worker's claim to time out",
      timeoutMs: 10_000,
    });
    assert.deepEqual(handled, [], 'nothing claimed while the table is locked');
    await locker.query('ROLLBACK');
    await waitFor(() => handled.length >= 20, { what: 'every message handled once the lock is gone' });
    await worker.stop();
    assert.deepEqual([...handled].sort(), Array.from({ length: 20 }, (_, i) => `m${i}`).sort(), 'each once');
    for (const error of errors) assert.ok(error instanceof StoreUnavailableError, String(error));
    const status = await client.queueStatus(q);
    assert.equal(status.total, 20, 'the timed-out enqueue wrote nothing');
    assert.equal(status.counts['done-awaiting-gc'], 20);
  } finally {
    await locker.end();
  }
});
