/**
 * What only the embedded SQLite store promises: durability when the process
 * is killed, exclusive claims and wake-ups across processes sharing the file,
 * its layout, and clear errors for files that are not its own.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { connect, StoreLayoutError, StoreUnavailableError, StoreUrlError, type Client } from '../src/index.js';
import { SCHEMA_VERSION } from '../src/stores/sqlite/schema.js';
import { prepareStatements, SQL } from '../src/stores/sqlite/statements.js';
import { waitFor } from './support/wait.js';
import { storeOf } from '../src/client/client-store.js';
import type { Store } from '../src/stores/contract/contract.js';

const dir = mkdtempSync(join(tmpdir(), 'kvmq-sqlite-'));
const children = new Set<ChildProcessWithoutNullStreams>();
after(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
function freshUrl(): string {
  return `sqlite:${join(dir, `store-${++files}.db`)}`;
}

/** Starts a fixture child; `lines` yields its stdout lines. */
type Lines = AsyncIterator<string, undefined>;

function child(...args: string[]): { proc: ChildProcessWithoutNullStreams; lines: Lines } {
  const proc = spawn(process.execPath, [
    '--import',
    'tsx',
    join(import.meta.dirname, 'fixtures/sqlite-child.ts'),
    ...args,
  ]);
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  proc.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  return { proc, lines: createInterface({ input: proc.stdout })[Symbol.asyncIterator]() as Lines };
}

async function nextLine(lines: Lines): Promise<string> {
  const { value, done } = await lines.next();
  if (done === true) throw new Error('child exited early');
  return value;
}

function exited(proc: ChildProcessWithoutNullStreams): Promise<void> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve();
    else proc.once('exit', () => resolve());
  });
}

/** The queue's counters equal a count of its rows by phase. */
function assertCountersMatchRows(url: string, queue: string): void {
  const db = new Database(url.slice('sqlite:'.length), { readonly: true });
  try {
    const counters = db.prepare('SELECT size, done, failed FROM kvmq_queues WHERE queue = ?').get(queue);
    const rows = db
      .prepare(
        `SELECT count(*) FILTER (WHERE phase IN (0, 1)) AS size, count(*) FILTER (WHERE phase = 2) AS done,
           count(*) FILTER (WHERE phase = 3) AS failed
         FROM kvmq_messages WHERE queue = ?`,
      )
      .get(queue);
    assert.deepEqual(counters, rows);
  } finally {
    db.close();
  }
}

/**
 * A file of an older schema: written by this build (after `seed`), then taken back to that layout by `sql`,
 * which ends by setting its user_version. Returns its URL and path.
 */
async function olderFile(seed: (client: Client) => Promise<void>, sql: string): Promise<{ url: string; path: string }> {
  const url = freshUrl();
  const before = await connect(url, { maintenance: false });
  await seed(before);
  await before.close();
  const path = url.slice('sqlite:'.length);
  const db = new Database(path);
  db.exec(sql);
  db.close();
  return { url, path };
}

/** Once a migrated file's client has closed: the file is at this build's schema version, and `more` holds. */
function assertMigrated(path: string, more: (db: Database.Database) => void = () => undefined): void {
  const db = new Database(path, { readonly: true });
  try {
    assert.equal(db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    more(db);
  } finally {
    db.close();
  }
}

/** Claims up to `max` of queue old's messages as consumer c. */
function claimAsC(client: Client, max: number): ReturnType<Store['claim']> {
  return storeOf(client).claim('old', {
    consumerId: 'c',
    max,
    lockMs: 10_000,
    accepts: null,
    eoqBackoffMs: () => 1000,
  });
}

// The layout kvmq wrote before schema 2, to check the migration.
// What schema 12 added (flows), dropped to write an older layout.
const DROP_FLOWS_12 = `DROP INDEX kvmq_messages_children; DROP INDEX kvmq_messages_waiting;
  ${['parent_seq', 'parent_wait', 'child_failure', 'children_left'].map((c) => `ALTER TABLE kvmq_messages DROP COLUMN ${c};`).join(' ')}
  ALTER TABLE kvmq_queues DROP COLUMN waiting;`;
// What schemas 9 and later added, dropped to write an older layout.
const DROP_RESULT_9 = `${DROP_FLOWS_12}
  ALTER TABLE kvmq_messages DROP COLUMN result; ALTER TABLE kvmq_messages DROP COLUMN result_encoding;`;

const SCHEMA_1 = `
CREATE TABLE kvmq_messages (
  seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, id TEXT NOT NULL, payload BLOB NOT NULL, encoding INTEGER NOT NULL,
  metadata TEXT NOT NULL, filters TEXT NOT NULL, phase INTEGER NOT NULL, ready_at INTEGER NOT NULL,
  lock_until INTEGER NOT NULL DEFAULT 0, consumer TEXT, backoff_until INTEGER NOT NULL DEFAULT 0,
  requeue INTEGER NOT NULL DEFAULT 0, next_payload BLOB, next_encoding INTEGER, attempt INTEGER NOT NULL DEFAULT 0,
  outcome TEXT, last_error TEXT, enqueued_at INTEGER NOT NULL, updated_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX kvmq_messages_by_id ON kvmq_messages (queue, id);
CREATE INDEX kvmq_messages_ready ON kvmq_messages (queue, filters, ready_at, seq) WHERE phase = 0;
CREATE INDEX kvmq_messages_locked ON kvmq_messages (queue, lock_until) WHERE phase = 1;
CREATE INDEX kvmq_messages_done ON kvmq_messages (queue, updated_at) WHERE phase = 2;
CREATE TABLE kvmq_queues (
  queue TEXT PRIMARY KEY, size INTEGER NOT NULL DEFAULT 0, dry_runs INTEGER NOT NULL DEFAULT 0,
  eoq_until INTEGER NOT NULL DEFAULT 0, gc_at INTEGER NOT NULL DEFAULT 0, gc_lock_until INTEGER NOT NULL DEFAULT 0,
  config TEXT
) STRICT, WITHOUT ROWID;
CREATE TABLE kvmq_classes (queue TEXT NOT NULL, filters TEXT NOT NULL, PRIMARY KEY (queue, filters)) STRICT, WITHOUT ROWID;
CREATE TABLE kvmq_consumers (
  queue TEXT NOT NULL, id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, started_at INTEGER NOT NULL,
  seen_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (queue, id)
) STRICT, WITHOUT ROWID;
`;

describe('sqlite store', () => {
  test('every enqueue that returned survives kill -9 of the producer', async () => {
    const url = freshUrl();
    const { proc, lines } = child('enqueue', url, 'durable');
    assert.equal(await nextLine(lines), 'ready');
    const acknowledged: string[] = [];
    while (acknowledged.length < 500) acknowledged.push(await nextLine(lines));
    proc.kill('SIGKILL');
    await exited(proc);

    const client = await connect(url);
    try {
      for (const id of acknowledged) {
        const status = await client.status('durable', id);
        assert.equal(status?.state, 'queued', `message ${id} was acknowledged but is gone`);
      }
    } finally {
      await client.close();
    }
  });

  test('workers in three processes share the file and each message is handled exactly once', async () => {
    const url = freshUrl();
    const total = 1500;
    const workers = [child('work', url, 'shared'), child('work', url, 'shared')];
    for (const w of workers) assert.equal(await nextLine(w.lines), 'ready');

    const handled = new Map<string, number>();
    const collect = async (lines: Lines) => {
      for (;;) {
        const { value, done } = await lines.next();
        if (done === true) return;
        const [, id] = value.split(' ');
        if (id !== undefined) handled.set(id, (handled.get(id) ?? 0) + 1);
      }
    };
    const collecting = workers.map((w) => collect(w.lines));

    const client = await connect(url);
    const local = client.worker(
      'shared',
      (job) => {
        handled.set(job.id, (handled.get(job.id) ?? 0) + 1);
      },
      { concurrency: 8 },
    );
    for (let i = 0; i < total; i += 100) {
      const batch = Array.from({ length: 100 }, (_, j) => ({ payload: i + j }));
      await client.enqueueBatch('shared', batch);
    }
    const deadline = Date.now() + 30_000;
    while (handled.size < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await local.stop();
    for (const w of workers) w.proc.kill('SIGTERM');
    await Promise.all(workers.map((w) => exited(w.proc)));
    await Promise.all(collecting);

    assert.equal(handled.size, total, 'every message handled');
    const twice = [...handled].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], 'no message handled twice');
    const status = await client.queueStatus('shared');
    assert.equal(status.counts['done-awaiting-gc'], total);
    await client.close();
  });

  test('an idle worker in another process wakes on an enqueue, long before its end-of-queue backoff', async () => {
    const url = freshUrl();
    const w = child('work', url, 'wake', '60000');
    assert.equal(await nextLine(w.lines), 'ready');
    const client = await connect(url);
    // Let the worker run dry first, so only a wake-up can bring it back within the test's time.
    await new Promise((r) => setTimeout(r, 300));
    const result = await client.enqueue('wake', 'hello', { id: 'wake-1' });
    assert.ok(result.ok);
    let timer: NodeJS.Timeout | undefined;
    const line = await Promise.race([
      nextLine(w.lines),
      new Promise<string>((r) => (timer = setTimeout(() => r('timed out'), 10_000))),
    ]);
    clearTimeout(timer);
    assert.equal(line, 'handled wake-1 1');
    w.proc.kill('SIGTERM');
    await exited(w.proc);
    await client.close();
  });

  test('while another connection holds the write lock, calls fail as transient, workers retry, and nothing is lost', async () => {
    const url = freshUrl();
    const client = await connect(`${url}?busyTimeoutMs=50`);
    const handled: string[] = [];
    const errors: unknown[] = [];
    const worker = client.worker('away', (job) => void handled.push(job.id), {
      eoqBackoffMs: 50,
      onError: (error) => errors.push(error),
    });
    await client.enqueue('away', 'before', { id: 'before' });
    await waitFor(() => handled.includes('before'));

    // A write lock held elsewhere makes the store unavailable to kvmq, as a dead or stuck store would.
    const blocker = new Database(url.slice('sqlite:'.length));
    blocker.exec('BEGIN EXCLUSIVE');
    try {
      await assert.rejects(
        client.enqueue('away', 'during', { id: 'during' }),
        (error) => error instanceof StoreUnavailableError && error.transient,
      );
      await waitFor(() => errors.length >= 2, { timeoutMs: 10_000 });
      assert.ok(
        errors.every((e) => e instanceof StoreUnavailableError),
        'the worker reports typed, transient errors',
      );
    } finally {
      blocker.exec('COMMIT');
      blocker.close();
    }

    const after = await client.enqueue('away', 'after', { id: 'after' });
    assert.ok(after.ok);
    await waitFor(() => handled.includes('after'), { timeoutMs: 10_000 });
    assert.equal(await client.status('away', 'during'), null, 'the refused enqueue wrote nothing');
    assert.equal((await client.status('away', 'before'))?.state, 'done-awaiting-gc');
    await worker.stop();
    await client.close();
  });

  test('layout: plain SQLite sees kvmq tables, one row per message, WAL mode', async () => {
    const url = freshUrl();
    const client = await connect(url);
    await client.configure('layout', { filterEnums: { size: ['s', 'm', 'l'] } });
    await client.enqueue('layout', { a: 1 }, { id: 'm1', filters: { size: 'm' }, metadata: { by: 'test' } });
    await client.close();

    const db = new Database(url.slice('sqlite:'.length), { readonly: true });
    try {
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
      assert.deepEqual(tables, [
        'kvmq_classes',
        'kvmq_consumers',
        'kvmq_events',
        'kvmq_group_rates',
        'kvmq_messages',
        'kvmq_queues',
        'kvmq_reports',
        'kvmq_schedules',
        'kvmq_turns',
      ]);
      const row = db
        .prepare('SELECT id, filters, metadata, phase, attempt FROM kvmq_messages WHERE queue = ?')
        .get('layout');
      assert.deepEqual(row, { id: 'm1', filters: 'size=m', metadata: '{"by":"test"}', phase: 0, attempt: 0 });
      const config = db.prepare('SELECT config FROM kvmq_queues WHERE queue = ?').pluck().get('layout') as string;
      assert.deepEqual((JSON.parse(config) as { filterEnums: unknown }).filterEnums, { size: ['s', 'm', 'l'] });
    } finally {
      db.close();
    }
  });

  test("every one of the store's statements prepares on the current layout", async () => {
    // Statements are prepared on first use, so one that no test runs would fail only in a user's hands.
    const url = freshUrl();
    await (await connect(url)).close();
    const db = new Database(url.slice('sqlite:'.length));
    try {
      const statements = prepareStatements(db);
      for (const name of Object.keys(SQL) as (keyof typeof SQL)[]) assert.ok(statements[name].source, name);
    } finally {
      db.close();
    }
  });

  test('counters match the rows after three processes fail, retry and one is killed holding locks', async () => {
    const url = freshUrl();
    const total = 900;
    const client = await connect(url, { maintenance: false });
    const batch = Array.from({ length: total }, (_, i) => ({
      id: `m${i}`,
      payload: i % 3 === 0 ? { fail: true } : i % 3 === 1 ? { retry: true } : { plain: i },
    }));
    const doomed = child('work', url, 'mixed', '50', '500');
    const survivor = child('work', url, 'mixed', '50', '500');
    for (const w of [doomed, survivor]) assert.equal(await nextLine(w.lines), 'ready');
    await client.enqueueBatch('mixed', batch);
    // Killed while it holds messages: their locks expire and the survivor takes them over. On a
    // loaded machine the survivor may take nearly all of them, so the kill waits 10 s at most.
    const handledSome = (async () => {
      for (let i = 0; i < 100; i++) await nextLine(doomed.lines);
    })();
    await Promise.race([handledSome, delay(10_000)]);
    doomed.proc.kill('SIGKILL');
    await handledSome.catch(() => undefined);
    await exited(doomed.proc);
    void (async () => {
      for (;;) if ((await survivor.lines.next()).done === true) return;
    })();

    await waitFor(
      async () => {
        const { counts } = await client.queueStatus('mixed');
        return counts['done-awaiting-gc'] + counts.failed === total;
      },
      { timeoutMs: 30_000 },
    );
    survivor.proc.kill('SIGTERM');
    await exited(survivor.proc);
    const status = await client.queueStatus('mixed');
    assert.equal(status.counts.failed, total / 3);
    assert.equal(status.counts['done-awaiting-gc'], (2 * total) / 3);
    assert.equal(status.total, total);
    assertCountersMatchRows(url, 'mixed');
    const failed = await client.list('mixed', { state: 'failed', limit: 1000 });
    assert.equal(failed.messages.length, total / 3);
    assert.equal(failed.cursor, null);

    assert.deepEqual(await client.retryFailed('mixed'), { retried: total / 3 });
    assert.equal((await client.queueStatus('mixed')).counts.queued, total / 3);
    assertCountersMatchRows(url, 'mixed');
    await client.remove('mixed', 'm0');
    await client.remove('mixed', 'm2');
    assertCountersMatchRows(url, 'mixed');
    assert.equal((await client.queueStatus('mixed')).total, total - 2);
    await client.clear('mixed');
    assertCountersMatchRows(url, 'mixed');
    await client.close();
  });

  test('a schema 1 file is migrated: counters computed from its rows, old configuration read with defaults', async () => {
    const url = freshUrl();
    const path = url.slice('sqlite:'.length);
    const far = Date.now() + 3_600_000;
    const db = new Database(path);
    db.exec(SCHEMA_1);
    const insert = db.prepare(
      `INSERT INTO kvmq_messages (queue, id, payload, encoding, metadata, filters, phase, ready_at, lock_until, consumer,
         backoff_until, attempt, outcome, enqueued_at, updated_at)
       VALUES ('old', ?, ?, 0, '{}', '', ?, 0, ?, ?, ?, ?, ?, 1, 1)`,
    );
    const payload = Buffer.from('"x"');
    for (const id of ['q1', 'q2', 'q3']) insert.run(id, payload, 0, 0, null, 0, 0, null);
    insert.run('l1', payload, 1, far, 'gone', 0, 1, null);
    for (const id of ['d1', 'd2']) insert.run(id, payload, 2, 0, null, 0, 1, 'success');
    insert.run('b1', payload, 2, 0, null, far, 1, 'success');
    db.prepare("INSERT INTO kvmq_queues (queue, size, config) VALUES ('old', 4, ?)").run(
      JSON.stringify({ gcLifetimeMs: 1234, gcIntervalMs: 30_000, filterEnums: {} }),
    );
    db.exec("INSERT INTO kvmq_classes VALUES ('old', ''); PRAGMA user_version = 1");
    db.close();

    const client = await connect(url, { maintenance: false });
    try {
      const status = await client.queueStatus('old');
      assert.deepEqual(
        { ...status.counts, total: status.total },
        {
          queued: 3,
          'queued-with-backoff': 0,
          locked: 1,
          'locked-with-requeue': 0,
          'done-awaiting-gc': 2,
          'done-with-backoff': 1,
          'done-with-requeue': 0,
          failed: 0,
          'waiting-children': 0,
          total: 7,
        },
      );
      const config = await client.config('old');
      assert.equal(config.gcLifetimeMs, 1234);
      assert.equal(config.maxDeliveries, 10);
      assert.equal(config.paused, false);
      const listed = await client.list('old', { states: ['done-awaiting-gc', 'done-with-backoff'] });
      assert.deepEqual(
        listed.messages.map((m) => [m.id, m.state]),
        [
          ['d1', 'done-awaiting-gc'],
          ['d2', 'done-awaiting-gc'],
          ['b1', 'done-with-backoff'],
        ],
      );
      await client.enqueue('old', 'new', { id: 'n1', attempts: 3 });
      const claimed = await claimAsC(client, 10);
      assert.deepEqual(
        claimed.messages.map((m) => [m.id, m.policy]),
        [
          ['q1', null],
          ['q2', null],
          ['q3', null],
          ['n1', '{"attempts":3}'],
        ],
      );
    } finally {
      await client.close();
    }
    assertMigrated(path);
    assertCountersMatchRows(url, 'old');
  });

  test('a schema 4 file is migrated: schedules work, messages, configuration and event rows stay', async () => {
    const { url, path } = await olderFile(
      async (c) => {
        await c.configure('old', { gcLifetimeMs: 4321, events: true });
        await c.enqueue('old', 'kept', { id: 'm1', priority: 3 });
      },
      // Back to schema 4's layout: what schemas 5 and 6 added goes; its event rows had no time per event.
      `DROP TABLE kvmq_schedules;
      ALTER TABLE kvmq_queues DROP COLUMN events_buffer; ALTER TABLE kvmq_queues DROP COLUMN events_buffered;
      DELETE FROM kvmq_events;
      INSERT INTO kvmq_events (queue, seq, at, count, events) VALUES ('old', 1, 1000, 2, '[[0,"m1",0],[3,"x",1,"boom"]]');
      ${DROP_RESULT_9}
      PRAGMA user_version = 4`,
    );

    const client = await connect(url, { maintenance: false });
    try {
      assert.equal((await client.config('old')).gcLifetimeMs, 4321);
      assert.equal((await client.show('old', 'm1'))?.priority, 3);
      const { created } = await client.schedule('old', 'hourly', { cron: '0 * * * *' }, 'x');
      assert.equal(created, true);
      // The old rows read with their row's time; new events follow them in order.
      await client.enqueue('old', 'new', { id: 'm2' });
      const page = await client.readEvents('old');
      assert.deepEqual(
        page.events.map((e) => [e.type, e.id, e.cursor, e.error ?? null, e.at === 1000]),
        [
          ['enqueued', 'm1', '1.0', null, true],
          ['failed', 'x', '1.1', 'boom', true],
          ['enqueued', 'm2', '3.0', null, false],
        ],
      );
      assert.deepEqual(
        (await client.schedules('old')).map((s) => s.name),
        ['hourly'],
      );
    } finally {
      await client.close();
    }
    assertMigrated(path);
  });

  test("a schema 7 file gains the reports table; a message's reports are deleted with it", async () => {
    const { url, path } = await olderFile(async (c) => {
      await c.enqueue('old', 'kept', { id: 'm1' });
    }, `DROP TRIGGER kvmq_reports_gone; DROP TABLE kvmq_reports; ${DROP_RESULT_9} PRAGMA user_version = 7`);

    const client = await connect(url, { maintenance: false });
    try {
      assert.deepEqual((await client.show('old', 'm1'))?.log, []);
      const store = storeOf(client);
      const claimed = await claimAsC(client, 1);
      assert.equal(claimed.messages.length, 1);
      assert.deepEqual(await store.report?.('old', 'c', [{ id: 'm1', attempt: 1, progress: '7', lines: ['a'] }]), [
        'ok',
      ]);
      assert.equal((await client.show('old', 'm1'))?.progress, 7);
      const finish = { id: 'm1', attempt: 1, outcome: 'success', backoffMs: 0, error: null, startedAt: 1 } as const;
      assert.deepEqual(await store.finish('old', 'c', [finish]), ['ok']);
      await client.remove('old', 'm1');
    } finally {
      await client.close();
    }
    assertMigrated(path, (db) => {
      assert.deepEqual(db.prepare('SELECT count(*) AS n FROM kvmq_reports').get(), { n: 0 });
    });
  });

  test('a schema 6 file is migrated: its JSON events, buffered ones included, read back with their cursors', async () => {
    const { url, path } = await olderFile(
      async (c) => {
        await c.configure('old', { events: true });
      },
      // Back to schema 6's layout: a WITHOUT ROWID events table of JSON lists, and JSON items in the queue row.
      `DROP TABLE kvmq_events;
      CREATE TABLE kvmq_events (queue TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL,
        first INTEGER NOT NULL DEFAULT 0, count INTEGER NOT NULL, events TEXT NOT NULL, PRIMARY KEY (queue, seq))
        STRICT, WITHOUT ROWID;
      INSERT INTO kvmq_events VALUES ('old', 1, 1002, 1, 3,
        '[[0,"m1",0,null,1000],[1,"m1",1,null,1001],[2,"m1",1,null,1002]]');
      UPDATE kvmq_queues SET events_trimmed = 1, events_trimmed_index = 0, events_buffered = 2,
        events_buffer = '[0,"m2",0,null,2000],[3,"m3",1,"boom",2001]' WHERE queue = 'old';
      ${DROP_RESULT_9}
      PRAGMA user_version = 6`,
    );

    const client = await connect(url, { maintenance: false });
    try {
      const expected = [
        ['started', 'm1', '1.1', 1001, null],
        ['completed', 'm1', '1.2', 1002, null],
        ['enqueued', 'm2', '4.0', 2000, null],
        ['failed', 'm3', '4.1', 2001, 'boom'],
      ];
      const page = await client.readEvents('old');
      assert.deepEqual(
        page.events.map((e) => [e.type, e.id, e.cursor, e.at, e.error ?? null]),
        expected,
      );
      assert.equal(await storeOf(client).eventsHead('old'), '4.1');
      // Cursors handed out before the upgrade read on from the same event; one before the trimmed mark missed.
      const fromBuffer = await client.readEvents('old', { after: '4.0' });
      assert.deepEqual([fromBuffer.missed, fromBuffer.events.map((e) => e.id)], [false, ['m3']]);
      assert.deepEqual((await client.readEvents('old', { after: '1.0' })).events.length, 4);
      assert.equal((await client.readEvents('old', { after: '1.0' })).missed, false);
      assert.equal((await client.readEvents('old', { after: '0.0' })).missed, true);
      // New events follow, after the JSON rows (which take no more).
      await client.enqueue('old', 'new', { id: 'm4' });
      const next = await client.readEvents('old', { after: '4.1' });
      assert.deepEqual(
        next.events.map((e) => [e.type, e.id, e.cursor]),
        [['enqueued', 'm4', '6.0']],
      );
      // Their times are from 1970: GC trims them by age, JSON rows as any, and a reader behind is told.
      await client.gc('old');
      const trimmed = await client.readEvents('old', { after: '1.0' });
      assert.deepEqual([trimmed.missed, trimmed.events.map((e) => e.cursor)], [true, ['6.0']]);
    } finally {
      await client.close();
    }
    assertMigrated(path, (db) => {
      const columns = db.prepare("SELECT name FROM pragma_table_info('kvmq_events')").pluck().all();
      assert.deepEqual(columns, ['id', 'queue', 'seq', 'at', 'first', 'count', 'events']);
    });
  });

  test('a schema 2 file is migrated: events, turns and priorities work, its configuration reads events off', async () => {
    const { url, path } = await olderFile(
      async (c) => {
        await c.configure('old', { gcLifetimeMs: 4321 });
        await c.enqueue('old', 'kept', { id: 'm1' });
      },
      // Back to schema 2's layout: what schemas 3 to 6 added goes.
      `DROP TABLE kvmq_schedules;
      ALTER TABLE kvmq_queues DROP COLUMN events_buffer; ALTER TABLE kvmq_queues DROP COLUMN events_buffered;
      DROP INDEX kvmq_messages_pending; DROP INDEX kvmq_messages_group_held; DROP INDEX kvmq_messages_debounce;
      ALTER TABLE kvmq_messages DROP COLUMN priority; ALTER TABLE kvmq_messages DROP COLUMN group_name;
      ALTER TABLE kvmq_messages DROP COLUMN debounce_id; ALTER TABLE kvmq_queues DROP COLUMN rate_tat;
      CREATE INDEX kvmq_messages_ready ON kvmq_messages (queue, filters, ready_at, seq) WHERE phase = 0;
      DROP TABLE kvmq_events; DROP TABLE kvmq_turns; ALTER TABLE kvmq_queues DROP COLUMN events_trimmed;
      ALTER TABLE kvmq_queues DROP COLUMN events_trimmed_index;
      UPDATE kvmq_queues SET config = json_remove(config, '$.events', '$.eventsMaxCount', '$.eventsMaxAgeMs');
      ${DROP_RESULT_9}
      PRAGMA user_version = 2`,
    );

    const client = await connect(url, { maintenance: false });
    try {
      const config = await client.config('old');
      assert.deepEqual([config.gcLifetimeMs, config.events, config.eventsMaxCount], [4321, false, 10_000]);
      assert.equal((await client.status('old', 'm1'))?.state, 'queued');
      assert.deepEqual(await client.queues(), ['old']);
      await client.configure('old', { events: true });
      await client.enqueue('old', 'new', { id: 'm2' });
      const page = await client.readEvents('old');
      assert.deepEqual(
        page.events.map((e) => [e.type, e.id]),
        [['enqueued', 'm2']],
      );
      assert.equal(await storeOf(client).takeTurn('old', 'warn', 60_000), true);
      // The old message reads as priority 0, and an urgent new one overtakes a later one.
      await client.enqueue('old', 'late', { id: 'm3', priority: 5 });
      await client.enqueue('old', 'urgent', { id: 'm4', priority: 1 });
      assert.equal((await client.show('old', 'm1'))?.priority, 0);
      const claimed = await claimAsC(client, 10);
      assert.deepEqual(
        claimed.messages.map((m) => m.id),
        ['m1', 'm2', 'm4', 'm3'],
      );
    } finally {
      await client.close();
    }
    assertMigrated(path);
  });

  test('events: trimmed as written and within a row, readers told of the gap', async () => {
    const url = freshUrl();
    const client = await connect(url, { maintenance: false });
    const ids = Array.from({ length: 10 }, (_, i) => Array.from({ length: 10 }, (_, j) => `m${i}-${j}`)).flat();
    try {
      await client.configure('trim', { events: true, eventsMaxCount: 25 });
      const behind = await storeOf(client).eventsHead('trim');
      for (let i = 0; i < 100; i += 10) {
        await client.enqueueBatch(
          'trim',
          ids.slice(i, i + 10).map((id) => ({ payload: 1, id })),
        );
      }
      const db = new Database(url.slice('sqlite:'.length), { readonly: true });
      // Kept: the rows' events past their trimmed ones, and those still in the queue row.
      const kept = (): number =>
        (db
          .prepare('SELECT coalesce(sum(count - first), 0) FROM kvmq_events WHERE queue = ?')
          .pluck()
          .get('trim') as number) +
        (db.prepare('SELECT events_buffered FROM kvmq_queues WHERE queue = ?').pluck().get('trim') as number);
      try {
        // Trimmed every tenth of the bound as written, not only at GC: at most one batch past it.
        assert.ok(kept() >= 25 && kept() <= 35, `${kept()} events kept for a bound of 25`);
        await client.gc('trim');
        assert.equal(kept(), 25, 'GC trims to the bound exactly, within a row');
      } finally {
        db.close();
      }
      const page = await client.readEvents('trim', { limit: 1000 });
      assert.deepEqual(
        page.events.map((e) => e.id),
        ids.slice(75),
      );
      assert.equal((await client.readEvents('trim', { after: behind })).missed, true);
      // A cursor in the kept part of the oldest row: nothing missed; in its trimmed part: missed.
      const oldestKept = page.events[0]?.cursor ?? '';
      const [seq = 0, index = 0] = oldestKept.split('.').map(Number);
      assert.ok(index >= 2, `the oldest kept row was cut in its middle (${oldestKept})`);
      const inside = await client.readEvents('trim', { after: oldestKept });
      assert.deepEqual([inside.missed, inside.events[0]?.id], [false, 'm7-6']);
      const cut = await client.readEvents('trim', { after: `${seq}.${index - 2}` });
      assert.deepEqual([cut.missed, cut.events[0]?.id], [true, 'm7-5']);
      const atMark = await client.readEvents('trim', { after: `${seq}.${index - 1}` });
      assert.deepEqual([atMark.missed, atMark.events[0]?.id], [false, 'm7-5']);

      // clear takes the events too; a reader behind it is told.
      const head = await storeOf(client).eventsHead('trim');
      await client.clear('trim');
      assert.deepEqual((await client.readEvents('trim')).events, []);
      assert.equal((await client.readEvents('trim', { after: oldestKept })).missed, true);
      const upToDate = await client.readEvents('trim', { after: head });
      assert.equal(upToDate.missed, false, 'a reader that had read everything missed nothing');
    } finally {
      await client.close();
    }
  });

  test('events: the newest wait in the queue row, read at once and in order; their cursors hold once moved', async () => {
    const url = freshUrl();
    const writer = await connect(url, { maintenance: false });
    const reader = await connect(url, { maintenance: false });
    const db = new Database(url.slice('sqlite:'.length), { readonly: true });
    const stored = (): { rows: unknown[]; buffered: number } => ({
      rows: db.prepare("SELECT seq, count FROM kvmq_events WHERE queue = 'buf' ORDER BY seq").all(),
      buffered: db.prepare("SELECT events_buffered FROM kvmq_queues WHERE queue = 'buf'").pluck().get() as number,
    });
    const ids = Array.from({ length: 200 }, (_, i) => `m${i}`);
    try {
      await writer.configure('buf', { events: true });
      for (const id of ids.slice(0, 5)) await writer.enqueue('buf', 1, { id });
      assert.deepEqual(stored(), { rows: [], buffered: 5 }, 'five single enqueues wrote no events row');
      // Another connection reads them from the committed queue row, numbered as the row they will become.
      const first = await reader.readEvents('buf');
      assert.deepEqual(
        first.events.map((e) => `${e.id} ${e.cursor}`),
        ['m0 1.0', 'm1 1.1', 'm2 1.2', 'm3 1.3', 'm4 1.4'],
      );
      assert.equal(await storeOf(reader).eventsHead('buf'), '1.4');
      const middle = await reader.readEvents('buf', { after: '1.1', limit: 2 });
      assert.deepEqual([middle.events.map((e) => e.id), middle.cursor], [['m2', 'm3'], '1.3']);

      // Until the queue row is full; then they move to a row, and the next wait in the queue row again.
      let written = 5;
      while (stored().rows.length === 0) await writer.enqueue('buf', 1, { id: ids[written++] });
      const moved = written;
      assert.ok(moved > 16 && moved < 100, `moved after ${moved} events`);
      assert.deepEqual(stored(), { rows: [{ seq: 1, count: moved }], buffered: 0 }, 'all moved, the last along');
      await writer.enqueue('buf', 1, { id: ids[written++] });
      assert.deepEqual(stored(), { rows: [{ seq: 1, count: moved }], buffered: 1 });
      // The buffer now reads on in that row: the next move grows the row, and no cursor changes.
      assert.equal(await storeOf(reader).eventsHead('buf'), `1.${moved}`);
      const rest = await reader.readEvents('buf', { after: middle.cursor, limit: 1000 });
      assert.deepEqual(
        rest.events.map((e) => e.id),
        ids.slice(4, written),
      );
      assert.deepEqual([rest.missed, rest.cursor], [false, `1.${moved}`]);
      while (stored().rows.length === 1 && stored().buffered > 0) {
        await writer.enqueue('buf', 1, { id: ids[written++] });
      }
      assert.deepEqual(stored().rows, [{ seq: 1, count: written }], 'the second move grew the row');
      const again = await reader.readEvents('buf', { after: middle.cursor, limit: 1000 });
      assert.deepEqual(
        again.events.map((e) => `${e.id} ${e.cursor}`),
        ids.slice(4, written).map((id, i) => `${id} 1.${i + 4}`),
        'cursors read before a move hold after it',
      );
      const times = again.events.map((e) => e.at);
      assert.deepEqual(
        times,
        times.toSorted((a, b) => a - b),
        'each event keeps its own time',
      );
    } finally {
      db.close();
      await reader.close();
      await writer.close();
    }
  });

  test('events: the queue row stays under its bound with long errors; events stay in order', async () => {
    const url = freshUrl();
    const client = await connect(url, { maintenance: false });
    const db = new Database(url.slice('sqlite:'.length), { readonly: true });
    // A long name and the failure's 500-character error take the queue row past its size bound.
    const queue = `long-errors-${'x'.repeat(116)}`; // 128 characters, the most a name may have
    const buffered = (): unknown =>
      db.prepare('SELECT events_buffered FROM kvmq_queues WHERE queue = ?').pluck().get(queue);
    const rowChars = (): unknown =>
      db
        .prepare('SELECT length(queue) + length(config) + length(events_buffer) FROM kvmq_queues WHERE queue = ?')
        .pluck()
        .get(queue);
    try {
      await client.configure(queue, { events: true });
      await client.enqueue(queue, 1, { id: 'a' });
      assert.equal(buffered(), 1);
      await client.enqueue(queue, 1, { id: 'b' });
      const worker = client.worker(queue, () => {
        throw new Error('e'.repeat(2000));
      });
      await waitFor(async () => (await client.status(queue, 'b'))?.state === 'failed');
      await worker.stop();
      // Two failures with 500-character errors do not fit beside the name and configuration: one moved.
      assert.ok((rowChars() as number) <= 900, `the queue row holds ${String(rowChars())} characters`);
      assert.ok((db.prepare('SELECT count(*) FROM kvmq_events WHERE queue = ?').pluck().get(queue) as number) >= 1);
      const page = await client.readEvents(queue);
      assert.deepEqual(page.events.map((e) => [e.type, e.id, (e.error?.length ?? 0) > 400]).toSorted(), [
        ['enqueued', 'a', false],
        ['enqueued', 'b', false],
        ['failed', 'a', true],
        ['failed', 'b', true],
        ['started', 'a', false],
        ['started', 'b', false],
      ]);
      assert.deepEqual(
        page.events.filter((e) => e.id === 'a').map((e) => e.type),
        ['enqueued', 'started', 'failed'],
      );
      const positions = page.events.map((e) => e.cursor.split('.').map(Number));
      assert.deepEqual(
        positions.map(([seq = 0, index = 0]) => seq + index),
        [1, 2, 3, 4, 5, 6],
        'each event numbered after the one before',
      );
    } finally {
      db.close();
      await client.close();
    }
  });

  test("events: each row's seq numbers its first event, so the count bound cuts rows of any size exactly", async () => {
    const url = freshUrl();
    const client = await connect(url, { maintenance: false });
    try {
      await client.configure('pos', { events: true, eventsMaxCount: 7 });
      for (const id of ['a', 'b', 'c']) await client.enqueue('pos', 1, { id });
      await client.enqueueBatch(
        'pos',
        ['d', 'e', 'f', 'g', 'h'].map((id) => ({ payload: 1, id })),
      );
      await client.enqueue('pos', 1, { id: 'i' });
      const db = new Database(url.slice('sqlite:'.length), { readonly: true });
      try {
        // Seven kept, counted over the rows past their trimmed events and the queue row's buffer.
        const kept =
          (db.prepare('SELECT sum(count - first) FROM kvmq_events WHERE queue = ?').pluck().get('pos') as number) +
          (db.prepare('SELECT events_buffered FROM kvmq_queues WHERE queue = ?').pluck().get('pos') as number);
        assert.equal(kept, 7);
      } finally {
        db.close();
      }
      const all = await client.readEvents('pos');
      const positions = all.events.map((e) => e.cursor.split('.').map(Number));
      assert.deepEqual(
        positions.map(([seq = 0, index = 0]) => seq + index),
        [3, 4, 5, 6, 7, 8, 9],
        'seq + index numbers each event in the queue',
      );
      assert.deepEqual(
        all.events.map((e) => e.id),
        ['c', 'd', 'e', 'f', 'g', 'h', 'i'],
      );
      // b's place, one before c's: the last trimmed, so a reader there missed nothing; one before it did.
      const [seq = 0, index = 0] = positions[0] ?? [];
      assert.ok(index >= 2, 'a, b and c share a row');
      const afterB = await client.readEvents('pos', { after: `${seq}.${index - 1}` });
      assert.deepEqual([afterB.missed, afterB.events.length], [false, 7]);
      assert.equal((await client.readEvents('pos', { after: `${seq}.${index - 2}` })).missed, true, 'b was trimmed');
      // Two more single enqueues: c and d go; seven kept, no more.
      for (const id of ['j', 'k']) await client.enqueue('pos', 1, { id });
      const after = await client.readEvents('pos');
      assert.deepEqual(
        after.events.map((e) => e.id),
        ['e', 'f', 'g', 'h', 'i', 'j', 'k'],
      );
      const d = `${seq}.${index + 1}`;
      assert.equal((await client.readEvents('pos', { after: d })).missed, false, 'd was the last trimmed');
      assert.equal((await client.readEvents('pos', { after: `${seq}.${index}` })).missed, true, 'c was trimmed');
    } finally {
      await client.close();
    }
  });

  test('events: the age bound trims within a row, so old events sharing a row with a new one go', async () => {
    const url = freshUrl();
    const client = await connect(url, { maintenance: false });
    try {
      await client.configure('aged', { events: true, eventsMaxAgeMs: 300 });
      for (const id of ['a', 'b', 'c']) await client.enqueue('aged', 1, { id });
      const cursors = (await client.readEvents('aged')).events.map((e) => e.cursor);
      await delay(400);
      await client.enqueue('aged', 1, { id: 'd' });
      await client.gc('aged');
      const page = await client.readEvents('aged');
      assert.deepEqual(
        page.events.map((e) => e.id),
        ['d'],
      );
      assert.equal((await client.readEvents('aged', { after: cursors[0] })).missed, true);
      const fromC = await client.readEvents('aged', { after: cursors[2] });
      assert.deepEqual([fromC.missed, fromC.events.map((e) => e.id)], [false, ['d']]);
    } finally {
      await client.close();
    }
  });

  test("a reader in this process sees events written by another process's worker", async () => {
    const url = freshUrl();
    const client = await connect(url, { maintenance: false });
    await client.configure('seen', { events: true });
    const w = child('work', url, 'seen', '60000');
    try {
      assert.equal(await nextLine(w.lines), 'ready');
      const seen: string[] = [];
      const reading = (async () => {
        for await (const event of client.events('seen', { after: 'start' })) {
          seen.push(`${event.type} ${event.id}`);
          if (event.type === 'completed') return;
        }
      })();
      await client.enqueue('seen', 'x', { id: 'm' });
      await reading;
      assert.deepEqual(seen, ['enqueued m', 'started m', 'completed m']);
    } finally {
      w.proc.kill('SIGTERM');
      await exited(w.proc);
      await client.close();
    }
  });

  test('bad URLs and foreign files are refused with errors that say what to do', async () => {
    await assert.rejects(connect('sqlite::memory:'), StoreUrlError);
    await assert.rejects(connect(`sqlite:${join(dir, 'missing-dir', 'x.db')}`), /does not exist; create it first/);
    await assert.rejects(connect(`sqlite:${join(dir, 'x.db')}?sync=full`), /unknown option 'sync'/);
    const foreign = join(dir, 'foreign.db');
    writeFileSync(foreign, 'this is not a database, just some text that is long enough to have a header');
    await assert.rejects(connect(`sqlite:${foreign}`), StoreLayoutError);
  });
});
