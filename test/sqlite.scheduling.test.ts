/**
 * The SQLite store's layout for priorities, groups, debounce and rate limits:
 * which index each claim-path query reads (EXPLAIN QUERY PLAN), and what is
 * kept per message and per queue.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { connect } from '../src/index.js';
import { prepareStatements, type Statements } from '../src/stores/sqlite/statements.js';
import { storeOf } from '../src/client/client-store.js';
import { checkGroupRateGc } from './support/group-rate-gc.js';

const dir = mkdtempSync(join(tmpdir(), 'kvmq-sqlite-scheduling-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let files = 0;
/** A fresh file with kvmq's current layout; returns its path. */
async function freshFile(): Promise<string> {
  const path = join(dir, `store-${++files}.db`);
  const client = await connect(`sqlite:${path}`, { maintenance: false });
  await client.close();
  return path;
}

const PARAMS = {
  queue: 'q',
  filters: '',
  priority: 0,
  now: 0,
  limit: 1,
  lockUntil: 0,
  consumer: 'c',
  t: 0,
  seq: 0,
  full: '[]',
  seqs: '[]',
};

/** The query plan's details of one prepared statement, with every parameter bound. */
function plan(db: Database.Database, sql: Statements, name: keyof Statements): string {
  const source = sql[name].source;
  const explain = db.prepare(`EXPLAIN QUERY PLAN ${source}`);
  const rows = (
    source.includes('@') ? explain.all(PARAMS) : explain.all(...Array.from(source.matchAll(/\?/g), () => 0))
  ) as { detail: string }[];
  return rows.map((row) => row.detail).join(' | ');
}

describe('sqlite scheduling layout', () => {
  test('claim queries read the pending index at one class and priority, never a scan', async () => {
    const db = new Database(await freshFile());
    try {
      const sql = prepareStatements(db);
      const pending = /INDEX kvmq_messages_pending \(queue=\? AND filters=\? AND priority=\? AND ready_at[<>]/;
      for (const name of ['lockReady', 'nextReady', 'readyCandidates', 'backoffCounts'] as const) {
        const detail = plan(db, sql, name);
        assert.match(detail, pending, name);
        assert.doesNotMatch(detail, /\bSCAN kvmq_messages\b/, name);
        // Read in the index's order: no sort of what was found.
        if (name !== 'backoffCounts') assert.doesNotMatch(detail, /TEMP B-TREE/, name);
      }
      // The next priority present is one seek past the current one.
      assert.match(plan(db, sql, 'nextPriority'), /kvmq_messages_pending \(queue=\? AND filters=\? AND priority>\?\)/);
      assert.match(plan(db, sql, 'heldGroups'), /kvmq_messages_group_held/);
      assert.match(plan(db, sql, 'debounceWaiting'), /kvmq_messages_debounce \(queue=\? AND debounce_id=\?\)/);
    } finally {
      db.close();
    }
  });

  test('priority, group and debounce id are columns of the message; the rate limit is a column of the queue', async () => {
    const path = await freshFile();
    const client = await connect(`sqlite:${path}`, { maintenance: false });
    try {
      await client.configure('q', { rateLimit: { max: 4, perMs: 1000 } });
      await client.enqueue('q', 'x', { id: 'a', priority: 3, group: 'g', debounce: { id: 'd', ms: 0 } });
      await client.enqueue('q', 'y', { id: 'b' });
      const before = Date.now();
      await storeOf(client).claim('q', {
        consumerId: 'c',
        max: 10,
        lockMs: 1000,
        accepts: null,
        eoqBackoffMs: () => 50,
      });
      const db = new Database(path, { readonly: true });
      try {
        assert.deepEqual(
          db.prepare('SELECT id, priority, group_name, debounce_id FROM kvmq_messages ORDER BY id').all(),
          [
            { id: 'a', priority: 3, group_name: 'g', debounce_id: 'd' },
            { id: 'b', priority: 0, group_name: null, debounce_id: null },
          ],
        );
        // Two claimed at 250 ms each: the tat is two intervals past the claim's clock.
        const tat = (db.prepare("SELECT rate_tat FROM kvmq_queues WHERE queue = 'q'").pluck().get() as number) - before;
        assert.ok(tat >= 500 && tat < 500 + (Date.now() - before) + 1, `tat ${tat} ms past the claim`);
      } finally {
        db.close();
      }
      await client.clear('q');
      const db2 = new Database(path, { readonly: true });
      try {
        assert.equal(db2.prepare("SELECT rate_tat FROM kvmq_queues WHERE queue = 'q'").pluck().get(), 0);
      } finally {
        db2.close();
      }
    } finally {
      await client.close();
    }
  });

  test('a lock that expired is taken again only while its group has room', async () => {
    const path = await freshFile();
    const client = await connect(`sqlite:${path}`, { maintenance: false });
    const claim = (consumerId: string, lockMs: number): Promise<string[]> =>
      storeOf(client)
        .claim('q', { consumerId, max: 10, lockMs, accepts: null, eoqBackoffMs: () => 50 })
        .then((result) => result.messages.map((m) => m.id));
    try {
      await client.enqueue('q', 1, { id: 'g1', group: 'g' });
      await client.enqueue('q', 2, { id: 'g2', group: 'g' });
      // Both held while there is no limit; one lock ends soon, the other stays.
      assert.deepEqual(await claim('short', 50), ['g1', 'g2']);
      await storeOf(client).extend('q', 'short', [{ id: 'g2', attempt: 1 }], 60_000);
      await client.configure('q', { groupConcurrency: 1 });
      await new Promise((resolve) => setTimeout(resolve, 80));
      assert.equal((await client.status('q', 'g1'))?.state, 'queued');
      // g2 still holds the group's one slot: g1 waits.
      assert.deepEqual(await claim('other', 60_000), []);
      await client.configure('q', { groupConcurrency: 2 });
      assert.deepEqual(await claim('other', 60_000), ['g1']);
    } finally {
      await client.close();
    }
  });

  test('GC deletes the rate rows of groups whose next start has come', async () => {
    const path = await freshFile();
    const client = await connect(`sqlite:${path}`, { maintenance: false });
    const db = new Database(path, { readonly: true });
    try {
      await checkGroupRateGc(client, () =>
        Promise.resolve(db.prepare('SELECT group_name FROM kvmq_group_rates').pluck().all() as string[]),
      );
    } finally {
      db.close();
      await client.close();
    }
  });
});
