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
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { connect, StoreLayoutError, StoreUnavailableError, StoreUrlError } from '../src/index.js';
import { waitFor } from './support/wait.js';

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
      assert.deepEqual(tables, ['kvmq_classes', 'kvmq_consumers', 'kvmq_messages', 'kvmq_queues']);
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

  test('bad URLs and foreign files are refused with errors that say what to do', async () => {
    await assert.rejects(connect('sqlite::memory:'), StoreUrlError);
    await assert.rejects(connect(`sqlite:${join(dir, 'missing-dir', 'x.db')}`), /does not exist; create it first/);
    await assert.rejects(connect(`sqlite:${join(dir, 'x.db')}?sync=full`), /unknown option 'sync'/);
    const foreign = join(dir, 'foreign.db');
    writeFileSync(foreign, 'this is not a database, just some text that is long enough to have a header');
    await assert.rejects(connect(`sqlite:${foreign}`), StoreLayoutError);
  });
});
