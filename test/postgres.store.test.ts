/**
 * What only the PostgreSQL store promises: its schema created and migrated once by processes that start
 * together, a newer or foreign schema refused, clear errors for a wrong password, a missing database and an
 * unreachable server, nothing acknowledged lost when the server crashes (SIGKILL, `pg_ctl stop -m
 * immediate`), one NOTIFY per enqueue call however many messages it carries, and enqueue from SQL (psql).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import {
  connect,
  PayloadTooLargeError,
  StoreAuthError,
  StoreLayoutError,
  StoreUnavailableError,
  StoreUrlError,
  type Client,
  type MessageStatus,
} from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { encodeResult } from '../src/model/result.js';
import type { Finish } from '../src/stores/contract/contract.js';
import { lockReadySql, readyCandidatesSql } from '../src/stores/postgres/claim.js';
import { clearQueues } from '../src/stores/postgres/clear.js';
import type { Queryable } from '../src/stores/postgres/queryable.js';
import { ConfigCache } from '../src/stores/postgres/queue-row.js';
import { SCHEMA_VERSION } from '../src/stores/postgres/schema.js';
import { lockKey } from '../src/stores/postgres/session.js';
import { start, type PostgresServer } from '../scripts/servers/postgres.mjs';
import { dropSchemas, freshSchema, postgresTestUrl, sql } from './fixtures/postgres-server.js';
import { waitFor } from './support/wait.js';
import { checkGroupRateGc } from './support/group-rate-gc.js';

/** A node of EXPLAIN's JSON plan, as far as the test reads it. */
interface PlanNode {
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
}

const base = postgresTestUrl();
const dir = mkdtempSync(join(tmpdir(), 'kvmq-postgres-store-'));
// The server runs as the postgres user when the tests run as root: it must reach its dir below this one.
chmodSync(dir, 0o755);
const servers: PostgresServer[] = [];
const clients: Client[] = [];
const schemas: string[] = [];

after(async () => {
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  await Promise.all(servers.map((server) => server.stop()));
  await dropSchemas(base, schemas);
  rmSync(dir, { recursive: true, force: true });
});

function schemaUrl(url = base): { url: string; schema: string } {
  const schema = freshSchema();
  schemas.push(schema);
  return { url: `${url}?schema=${schema}`, schema };
}

async function open(url: string): Promise<Client> {
  const client = await connect(url, { maintenance: false });
  clients.push(client);
  return client;
}

/**
 * clear(queue) in `schema`, in a transaction of its own, with `write` run once (its own commit) just before or
 * just after the clear's first delete of messages: what another producer can do between its statements.
 */
async function clearAround(
  schema: string,
  queue: string,
  when: 'before' | 'after',
  write: () => Promise<void>,
): Promise<void> {
  const db = new pg.Client({ connectionString: base });
  await db.connect();
  let written = false;
  const hooked = {
    async query(text: string, values?: unknown[]) {
      const deletes = !written && text.includes(`DELETE FROM "${schema}".messages`);
      if (deletes && when === 'before') await write();
      const result = await db.query(text, values);
      if (deletes && when === 'after') await write();
      written ||= deletes;
      return result;
    },
  } as Queryable;
  try {
    await db.query('BEGIN');
    await clearQueues(hooked, schema, [queue], new ConfigCache());
    await db.query('COMMIT');
    assert.equal(written, true);
  } finally {
    await db.end();
  }
}

/**
 * A fresh schema holding the message `old` of queue `q`, taken back to an older version by `downgrade` (SQL, given
 * the schema), then opened again: the client, once it has checked the schema is at SCHEMA_VERSION.
 */
async function migratedFrom(downgrade: (schema: string) => string, schema = freshSchema()): Promise<Client> {
  schemas.push(schema);
  const url = `${base}?schema=${schema}`;
  const before = await open(url);
  await before.enqueue('q', 'old', { id: 'old' });
  await before.close();
  await sql(base, downgrade(schema));
  const client = await open(url);
  const version = await sql(base, `SELECT version FROM "${schema}".version`);
  assert.deepEqual(version.rows, [{ version: SCHEMA_VERSION }]);
  return client;
}

/**
 * A claim of ten messages as the store makes it (`general`: claim.ts lockReadySql; `grouped`: the first page of
 * candidates under a group limit, readyCandidatesSql; `finish_and_claim`: a worker's claim with nothing to
 * finish), rolled back: how many it took, and the plans of its statements that read
 * messages as auto_explain reports them (nested ones too), with the pages the outermost read in all.
 */
async function claimPlans(
  schema: string,
  queue: string,
  path: 'general' | 'grouped' | 'finish_and_claim',
): Promise<{ claimed: number; text: string; buffers: number }> {
  const db = new pg.Client({ connectionString: base.replace(/\?.*$/, '') });
  const plans: string[] = [];
  db.on('notice', (notice) => plans.push(notice.message ?? ''));
  await db.connect();
  let claimed: number;
  try {
    await db.query(`LOAD 'auto_explain'`);
    await db.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
      SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_format = json;
      SET auto_explain.log_level = notice`);
    const config = await db.query<{ config: string | null }>(`SELECT config FROM "${schema}".queues WHERE queue = $1`, [
      queue,
    ]);
    const claim = async (): Promise<pg.QueryResult> => {
      await db.query('BEGIN');
      const now = Date.now();
      try {
        if (path === 'grouped') {
          return await db.query(readyCandidatesSql(`"${schema}"`), [queue, now, [''], [], -1, -1, -1, 10]);
        }
        return path === 'general'
          ? await db.query(lockReadySql(`"${schema}"`), [queue, now, [''], now + 30_000, 'c', 10])
          : await db.query(
              `SELECT * FROM "${schema}".finish_and_claim($1, $2, 'c', $3, false, '{}', '{}', ARRAY[''], NULL, 10, $4, '{}')`,
              [queue, now, config.rows[0]?.config ?? null, now + 30_000],
            );
      } finally {
        await db.query('ROLLBACK');
      }
    };
    // Once to plan the statements (the catalogs' pages), then as measured.
    await claim();
    plans.length = 0;
    const rows = await claim();
    claimed = rows.rows.filter((row: { r_seq?: unknown; seq?: unknown }) => (row.r_seq ?? row.seq) !== null).length;
  } finally {
    await db.end();
  }
  const read = plans
    .map((text) => JSON.parse(text.slice(text.indexOf('{'))) as { 'Query Text': string; Plan: PlanNode })
    .filter((explained) => explained['Query Text'].includes('messages'));
  assert.ok(read.length > 0, 'auto_explain reported the claim');
  return {
    claimed,
    text: JSON.stringify(read.map((explained) => explained.Plan)),
    buffers: Math.max(...read.map(({ Plan }) => (Plan['Shared Hit Blocks'] ?? 0) + (Plan['Shared Read Blocks'] ?? 0))),
  };
}

/** finish_and_claim's two forms (sql-finish-claim.ts): this kvmq's, and the one kvmq before schema 8 calls. */
const FINISH_AND_CLAIM_ARGS = 'text, bigint, text, text, boolean, text[], integer[], text[], text[], integer, bigint';

/** SQL that drops both forms of finish_and_claim, as a schema before version 3 lacked it. */
function dropFinishAndClaim(schema: string): string {
  return `DROP FUNCTION "${schema}".finish_and_claim(${FINISH_AND_CLAIM_ARGS}),
    "${schema}".finish_and_claim(${FINISH_AND_CLAIM_ARGS}, bigint[]);`;
}

/** The status of message `id` of queue `q`, once it is done. */
function doneStatus(client: Client, id: string): Promise<MessageStatus> {
  return waitFor(async () => {
    const s = await client.status('q', id);
    return s?.state === 'done-awaiting-gc' ? s : null;
  });
}

async function dedicated(): Promise<PostgresServer> {
  const serverDir = mkdtempSync(join(dir, 'server-'));
  chmodSync(serverDir, 0o755);
  const server = await start(serverDir);
  servers.push(server);
  return server;
}

void describe('postgres store', () => {
  void test('processes opening a fresh schema together migrate it once', async () => {
    const { url, schema } = schemaUrl();
    const opened = await Promise.all(Array.from({ length: 6 }, () => open(url)));
    const version = await sql(base, `SELECT version FROM "${schema}".version`);
    assert.deepEqual(
      version.rows.map((r: { version: number }) => r.version),
      [SCHEMA_VERSION],
    );
    await opened[0]?.enqueue('q', 'x', { id: 'm' });
    assert.equal((await opened[5]?.status('q', 'm'))?.state, 'queued');
  });

  void test('a schema of version 1 gains the reports table; its messages stay', async () => {
    // Schema 1 had neither reports nor finish_and_claim.
    const client = await migratedFrom(
      (schema) =>
        `DROP TABLE "${schema}".reports; ${dropFinishAndClaim(schema)} UPDATE "${schema}".version SET version = 1`,
    );
    assert.equal((await client.status('q', 'old'))?.state, 'queued');
    assert.deepEqual((await client.show('q', 'old'))?.log, []);
  });

  void test('a schema a newer kvmq migrated, tables kvmq did not make, or a schema dropped under it are refused', async () => {
    const newer = schemaUrl();
    await open(newer.url);
    await sql(base, `UPDATE "${newer.schema}".version SET version = ${SCHEMA_VERSION + 1}`);
    await assert.rejects(connect(newer.url), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError);
      assert.match(error.message, /newer kvmq/);
      return true;
    });
    const foreign = schemaUrl();
    await sql(base, `CREATE SCHEMA "${foreign.schema}"; CREATE TABLE "${foreign.schema}".jobs (id int)`);
    await assert.rejects(connect(foreign.url), StoreLayoutError);

    const dropped = schemaUrl();
    const running = await open(dropped.url);
    await sql(base, `DROP SCHEMA "${dropped.schema}" CASCADE`);
    await assert.rejects(running.enqueue('q', 'x'), (error: unknown) => {
      assert.ok(error instanceof StoreLayoutError, String(error));
      assert.match(error.message, /not as it made them/);
      return true;
    });
  });

  void test('a schema 2 is upgraded in place: its messages kept, the one-statement finish and claim installed', async () => {
    const { url, schema } = schemaUrl();
    const before = await open(url);
    await before.enqueueBatch(
      'q',
      [1, 2, 3].map((n) => ({ payload: n, id: `m-${n}` })),
    );
    await before.close();
    // Schema 2 is schema 3 without finish_and_claim.
    await sql(base, `${dropFinishAndClaim(schema)} UPDATE "${schema}".version SET version = 2`);
    const after = await open(url);
    const version = await sql(base, `SELECT version FROM "${schema}".version`);
    assert.deepEqual(
      version.rows.map((r: { version: number }) => r.version),
      [SCHEMA_VERSION],
    );
    const handled: unknown[] = [];
    const worker = after.worker('q', (job) => void handled.push(job.payload), { concurrency: 2 });
    await waitFor(() => handled.length === 3, { what: 'the three messages handled' });
    await worker.stop();
    assert.equal((await after.queueStatus('q')).counts['done-awaiting-gc'], 3);
    const calls = await sql(
      base,
      `SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = $1 AND p.proname IN ('finish_and_claim', 'enqueue_messages') ORDER BY p.pronargs`,
      [schema],
    );
    // The older form of finish_and_claim (a SQL wrapper), enqueue_messages and this kvmq's finish_and_claim: the
    // two hot ones keep generic plans.
    assert.deepEqual(
      calls.rows.map((r: { proconfig: string[] | null }) => r.proconfig),
      [null, ['plan_cache_mode=force_generic_plan'], ['plan_cache_mode=force_generic_plan']],
    );
  });

  void test('a version 3 schema is migrated: its messages stay, results are kept from then on', async () => {
    // What version 3 was: no result columns (its functions are replaced by the migration).
    const client = await migratedFrom(
      (schema) => `ALTER TABLE "${schema}".messages DROP COLUMN result, DROP COLUMN result_encoding;
       UPDATE "${schema}".version SET version = 3`,
    );
    const worker = client.worker('q', ({ id }) => ({ status: 'success', result: `${id} done` }));
    try {
      await client.enqueue('q', 'new', { id: 'new' });
      for (const id of ['old', 'new']) {
        assert.equal((await doneStatus(client, id)).result, `${id} done`);
      }
      assert.equal((await client.enqueue('q', 'again', { id: 'old' })).ok, true);
    } finally {
      await worker.stop();
    }
  });

  void test('a flow committed while a queue is cleared has its child counted as removed, not deleted uncounted', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    await client.enqueue('kids', 'old');
    // The flow commits between the clear's ends of owing children and its deletes, as another producer's can.
    await clearAround(schema, 'kids', 'before', async () => {
      const children = [{ queue: 'kids', payload: 'a', id: 'a' }];
      await client.flow({ queue: 'parents', payload: 'p', id: 'p', children });
    });
    assert.equal(await client.status('kids', 'a'), null);
    assert.equal(await client.status('kids', 'old'), null);
    assert.equal((await client.queueStatus('kids')).counts.queued, 0);
    const parent = await client.status('parents', 'p');
    assert.equal(parent?.state, 'failed');
    assert.equal(parent.lastError, 'child kids/a failed: removed');
  });

  void test('a message committed just after a clear deletes its queue stays counted and is delivered', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    await client.enqueueBatch('q', [{ payload: 'old' }, { payload: 'old' }]);
    await clearAround(schema, 'q', 'after', async () => {
      await client.enqueue('q', 'new', { id: 'new' });
    });
    assert.equal((await client.status('q', 'new'))?.state, 'queued');
    assert.equal((await client.queueStatus('q')).counts.queued, 1);
    const handled: unknown[] = [];
    client.worker('q', (job) => void handled.push(job.payload));
    await waitFor(() => handled.length === 1, { what: 'the message enqueued during the clear delivered' });
    assert.deepEqual(handled, ['new']);
  });

  void test('a version 6 schema is migrated: its messages stay, and it writes flows', async () => {
    // What version 6 was: no flow columns nor their indexes (its functions are replaced by the migration).
    const client = await migratedFrom(
      (schema) => `DROP INDEX "${schema}".messages_waiting;
       ALTER TABLE "${schema}".messages DROP COLUMN parent_seq, DROP COLUMN parent_wait, DROP COLUMN child_failure,
         DROP COLUMN children_left;
       UPDATE "${schema}".version SET version = 6`,
    );
    await client.flow({ queue: 'q', payload: 'p', id: 'p', children: [{ queue: 'q', payload: 'c', id: 'c' }] });
    assert.equal((await client.status('q', 'p'))?.state, 'waiting-children');
    const worker = client.worker('q', ({ id }) => ({ status: 'success', result: `${id} done` }));
    try {
      for (const id of ['old', 'c', 'p']) {
        assert.equal((await doneStatus(client, id)).result, `${id} done`);
      }
    } finally {
      await worker.stop();
    }
  });

  void test('a version 7 schema is migrated; the form of finish_and_claim an older kvmq calls answers as before', async () => {
    const schema = freshSchema();
    // What version 7 was: finish_and_claim in its older form only.
    const client = await migratedFrom(
      () => `DROP FUNCTION "${schema}".finish_and_claim(${FINISH_AND_CLAIM_ARGS}, bigint[]);
       UPDATE "${schema}".version SET version = 7`,
      schema,
    );
    // A process of the older kvmq, still running, claims as it did: messages, and nothing more when none are left.
    const { config } = (await sql(base, `SELECT config FROM "${schema}".queues WHERE queue = 'q'`)).rows[0] as {
      config: string | null;
    };
    const olderClaim = (): Promise<pg.QueryResult> =>
      sql(
        base,
        `SELECT * FROM "${schema}".finish_and_claim('q', $1, 'older', $2, false, '{}', '{}',
           ARRAY(SELECT filters FROM "${schema}".classes WHERE queue = 'q'), NULL, 64, $3)`,
        [Date.now(), config, Date.now() + 60_000],
      );
    const took = await olderClaim();
    assert.deepEqual(
      took.rows.map((r: { r_id: string }) => r.r_id),
      ['old'],
    );
    assert.equal(took.fields.length, 11, 'the columns it knows');
    assert.equal((await olderClaim()).rows.length, 0, 'none: its own general claim then records the dry run');
    const worker = client.worker('q', () => undefined);
    try {
      await client.enqueue('q', 'new', { id: 'new' });
      assert.equal((await doneStatus(client, 'new')).state, 'done-awaiting-gc');
    } finally {
      await worker.stop();
    }
  });

  void test("a version 10 schema is migrated: a message's reports leave with it by a trigger, holders go unindexed", async () => {
    const schema = freshSchema();
    // What version 10 was: the reports' foreign key with its cascade, and the holders' index.
    const client = await migratedFrom(
      () => `DROP TRIGGER messages_gone ON "${schema}".messages; DROP FUNCTION "${schema}".reports_gone();
       ALTER TABLE "${schema}".reports ADD FOREIGN KEY (seq) REFERENCES "${schema}".messages (seq) ON DELETE CASCADE;
       CREATE INDEX messages_holder ON "${schema}".messages (queue, consumer) WHERE phase = 1;
       UPDATE "${schema}".version SET version = 10`,
      schema,
    );
    const layout = await sql(
      base,
      `SELECT (SELECT count(*)::int FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f') AS keys,
         (SELECT count(*)::int FROM pg_trigger WHERE tgrelid = $2::regclass AND tgname = 'messages_gone') AS triggers,
         to_regclass($3) IS NULL AS unindexed`,
      [`"${schema}".reports`, `"${schema}".messages`, `"${schema}".messages_holder`],
    );
    assert.deepEqual(layout.rows, [{ keys: 0, triggers: 1, unindexed: true }]);
    // A queue that keeps no successes deletes each with its finish; the message reports before it returns.
    await client.configure('q', { keepDone: 0 });
    const reports = async (): Promise<number> =>
      ((await sql(base, `SELECT count(*)::int AS n FROM "${schema}".reports`)).rows[0] as { n: number }).n;
    const worker = client.worker('q', async (job) => {
      job.progress(50);
      await waitFor(async () => (await reports()) === 1, { what: 'the report stored' });
    });
    try {
      await waitFor(async () => (await client.status('q', 'old')) === null, { what: 'old handled and deleted' });
      assert.equal(await reports(), 0, 'its report went with it');
    } finally {
      await worker.stop();
    }
  });

  void test('a version 11 schema is migrated: its text keys take the C collation, whatever the database has', async () => {
    const schema = freshSchema();
    const keys = `SELECT c.relname || '.' || a.attname AS key, coalesce(l.collname, 'default') AS collation
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_collation l ON l.oid = a.attcollation AND a.attcollation <> 100
      WHERE n.nspname = $1 AND c.relkind = 'r' AND a.atttypid = 'text'::regtype AND NOT a.attisdropped
        AND a.attname IN ('queue', 'id', 'filters', 'consumer', 'group_name', 'debounce_id', 'name')
      ORDER BY 1`;
    // What version 11 was: every key in the database's collation (each column this kvmq made C, set back).
    const client = await migratedFrom(
      () => `DO $do$ DECLARE k record; BEGIN
         FOR k IN SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = '${schema}' AND c.relkind = 'r' AND a.attcollation = 'pg_catalog."C"'::regcollation
         LOOP
           EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I TYPE text COLLATE "default"', '${schema}', k.relname,
             k.attname);
         END LOOP;
       END $do$; UPDATE "${schema}".version SET version = 11`,
      schema,
    );
    const collations = (await sql(base, keys, [schema])).rows as { key: string; collation: string }[];
    assert.equal(collations.length, 20, JSON.stringify(collations));
    assert.deepEqual(
      collations.filter((k) => k.collation !== 'C'),
      [],
    );
    const worker = client.worker('q', () => undefined);
    try {
      assert.equal((await doneStatus(client, 'old')).state, 'done-awaiting-gc');
    } finally {
      await worker.stop();
    }
  });

  void test('a claim that takes the last ready messages says when to look again; one that takes none counts a dry run', async () => {
    // Without a pinned session no dead holders are swept (a general transaction now and then): every claim after
    // the first, which reads the queue, is the one statement.
    const { url } = schemaUrl();
    const client = await open(`${url}&pooler=transaction`);
    const claim = async (max: number) => {
      const result = await storeOf(client).claim('q', {
        consumerId: 'c',
        max,
        lockMs: 60_000,
        accepts: null,
        eoqBackoffMs: (n) => 1000 * n,
      });
      return { ...result, ids: result.messages.map((m) => m.id) };
    };
    await client.enqueueBatch(
      'q',
      ['a', 'b', 'c'].map((id) => ({ payload: id, id })),
    );
    const full = await claim(2);
    assert.deepEqual(full.ids, ['a', 'b']);
    assert.equal(full.wakeAt, null, 'more may be ready: claim again at once');
    const before = Date.now();
    const last = await claim(2);
    assert.deepEqual(last.ids, ['c']);
    // When the end-of-queue backoff of a first dry run would end: the worker waits for a wake-up until then.
    assert.ok(
      last.wakeAt !== null && last.wakeAt >= before + 1000 && last.wakeAt <= Date.now() + 1000,
      `${last.wakeAt}`,
    );
    assert.equal(last.dryRuns, 0, 'no dry run counted: it took a message');
    // A backoff that ends sooner brings the time forward.
    await client.enqueue('q', 'later', { id: 'later', initialBackoffMs: 300 });
    const dry = await claim(2);
    assert.deepEqual(dry.ids, []);
    assert.equal(dry.dryRuns, 1);
    assert.ok(dry.wakeAt !== null && dry.wakeAt <= Date.now() + 300, `${dry.wakeAt}`);
    const again = await claim(2);
    assert.equal(again.dryRuns, 1, 'counted once per end-of-queue backoff');
    assert.equal((await client.queueStatus('q')).dryRuns, 1);
  });

  void test('a queue that keeps no successes (keepDone 0) has them removed at their finish, on either path', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    const store = storeOf(client);
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const success = (id: string): Finish => ({
      id,
      attempt: 1,
      outcome: 'success',
      backoffMs: 0,
      error: null,
      startedAt: Date.now(),
    });
    const rows = async (queue: string) =>
      (await sql(base, `SELECT id FROM "${schema}".messages WHERE queue = $1 ORDER BY id`, [queue])).rows.map(
        (r: { id: string }) => r.id,
      );
    for (const queue of ['none', 'kept']) {
      await client.configure(queue, { events: true, ...(queue === 'none' ? { keepDone: 0 } : {}) });
      await client.enqueueBatch(
        queue,
        ids.map((id) => ({ payload: id, id })),
      );
      const claimed = await store.claim(queue, {
        consumerId: 'c',
        max: 5,
        lockMs: 60_000,
        accepts: null,
        eoqBackoffMs: () => 1000,
      });
      assert.equal(claimed.messages.length, 5);
      // Plain successes alone: finish_and_claim's one statement.
      assert.deepEqual(await store.finish(queue, 'c', [success('a'), success('b')]), ['ok', 'ok']);
      // Beside an error, and a success with a result: the general finish.
      const result = encodeResult({ n: 1 });
      assert.ok(typeof result !== 'string');
      assert.deepEqual(
        await store.finish(queue, 'c', [
          success('c'),
          { ...success('d'), outcome: 'error', error: 'boom' },
          { ...success('e'), result },
        ]),
        ['ok', 'ok', 'ok'],
      );
    }
    assert.deepEqual(await rows('kept'), ids);
    // What a success keeps (its result) stays until GC; so does a failure.
    assert.deepEqual(await rows('none'), ['d', 'e']);
    const status = await client.queueStatus('none');
    assert.equal(status.counts['done-awaiting-gc'], 1);
    assert.equal(status.counts.failed, 1);
    assert.equal(status.total, 2);
    assert.equal((await client.queueStatus('kept')).counts['done-awaiting-gc'], 4);
    const completed = (await client.readEvents('none')).events.filter((e) => e.type === 'completed');
    assert.deepEqual(completed.map((e) => e.id).sort(), ['a', 'b', 'c', 'e']);
    // Its id is free: an enqueue adds it anew, and it runs again.
    assert.equal((await client.enqueue('none', 'again', { id: 'a' })).ok, true);
    assert.equal((await client.status('none', 'a'))?.state, 'queued');
    assert.equal((await client.gc('none')).removed, 1, 'GC removes the success it kept');
  });

  void test('a wrong password, a missing database and an unreachable server are clear kvmq errors', async () => {
    const wrong = new URL(base);
    wrong.password = 'not-the-password';
    await assert.rejects(connect(`${wrong.href}?schema=kvmq_never`), (error: unknown) => {
      assert.ok(error instanceof StoreAuthError, String(error));
      assert.match(error.message, /refused the login/);
      assert.doesNotMatch(error.message, /not-the-password/);
      return true;
    });
    const missing = new URL(base);
    missing.pathname = '/no_such_db';
    await assert.rejects(connect(missing.href), (error: unknown) => {
      assert.ok(error instanceof StoreUrlError, String(error));
      assert.match(error.message, /no_such_db.*does not exist/);
      return true;
    });
    const closed = new URL(base);
    closed.port = '1'; // nothing listens on a privileged port of loopback
    await assert.rejects(connect(closed.href), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError, String(error));
      assert.match(error.message, /cannot be reached/);
      return true;
    });
    await assert.rejects(connect(`${base}?schema=Bad-Name`), StoreUrlError);
    await assert.rejects(connect(`${base}?shcema=x`), /unknown option 'shcema'/);
  });

  void test('a payload over the limit is refused before it reaches the server; one at the limit is stored', async () => {
    const client = await open(schemaUrl().url);
    const limit = storeOf(client).capabilities.maxPayloadBytes;
    await assert.rejects(client.enqueue('q', Buffer.alloc(limit + 1)), PayloadTooLargeError);
    await client.enqueue('q', Buffer.alloc(limit, 7), { id: 'big' });
    const details = await client.show('q', 'big');
    assert.equal((details?.payload as Buffer).length, limit);
  });

  void test("an enqueue and a claim do not wait for a transaction that updates their queue's row", async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    await client.enqueue('q', 'first', { id: 'first' });
    // As a claim recording a dry run holds the row until its commit.
    const holder = new pg.Client({ connectionString: base });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`UPDATE "${schema}".queues SET dry_runs = dry_runs WHERE queue = 'q'`);
      const stillWaiting = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 5000).unref());
      const enqueued = client.enqueue('q', 'second', { id: 'second' }).then((r) => (r.ok ? 'stored' : 'refused'));
      assert.equal(await Promise.race([enqueued, stillWaiting]), 'stored');
      const claimed = storeOf(client)
        .claim('q', { consumerId: 'c', max: 2, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 })
        .then((r) => r.messages.map((m) => m.id).join());
      assert.equal(await Promise.race([claimed, stillWaiting]), 'first,second');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });

  void test('a batch of enqueues sends one NOTIFY for its queue', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    const listener = new pg.Client({ connectionString: base });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query(`LISTEN "${schema}.wake"`);
    try {
      await client.enqueueBatch(
        'q',
        Array.from({ length: 50 }, (_, i) => ({ payload: i })),
      );
      await waitFor(() => heard.length > 0, { what: 'the wake-up of the batch' });
      await client.enqueue('later', 'x', { initialBackoffMs: 60_000 });
      // A last marker: once it is heard, everything sent before it was.
      await sql(base, `SELECT pg_notify('${schema}.wake', 'marker')`);
      await waitFor(() => heard.includes('marker'), { what: 'the marker' });
      assert.deepEqual(heard, ['q', 'marker'], 'one wake-up for the batch; none for a message not ready yet');
    } finally {
      await listener.end();
    }
  });

  void test('a claim reads the head of each ready range: as many pages at 50,000 waiting as at 1,000', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    const fill = async (queue: string, n: number, initialBackoffMs = 0): Promise<void> => {
      for (let done = 0; done < n; done += 1000) {
        const batch = Array.from({ length: 1000 }, (_, i) => ({
          payload: done + i,
          priority: (done + i) % 3,
          initialBackoffMs,
        }));
        await client.enqueueBatch(queue, batch);
      }
    };
    await fill('small', 1000);
    await fill('large', 50_000);
    // Delayed messages at the first priority follow its ready ones in the index.
    await client.enqueueBatch(
      'large',
      Array.from({ length: 5000 }, (_, i) => ({ payload: i, initialBackoffMs: 3_600_000 })),
    );
    // Fewer ready than a claim asks, behind 50,000 delayed at each priority before theirs: the claim looks
    // past every priority's ready range, never through its delayed messages.
    await fill('delayed', 50_000, 3_600_000);
    await client.enqueueBatch(
      'delayed',
      Array.from({ length: 5 }, (_, i) => ({ payload: i, priority: 2 })),
    );
    // Statistics of the filled table, as autovacuum would gather: generic plans once guessed a tenth of it.
    await sql(base, `ANALYZE "${schema}".messages`);
    for (const path of ['general', 'grouped', 'finish_and_claim'] as const) {
      const [small, large, delayed] = [
        await claimPlans(schema, 'small', path),
        await claimPlans(schema, 'large', path),
        await claimPlans(schema, 'delayed', path),
      ];
      assert.deepEqual([small.claimed, large.claimed, delayed.claimed], [10, 10, 5], path);
      for (const { text } of [small, large, delayed]) {
        assert.match(text, /"Index Name":"messages_pending"/, path);
        assert.doesNotMatch(text, /"Node Type":"Seq Scan"[^{}]*"Relation Name":"messages"/, path);
        assert.doesNotMatch(text, /"Node Type":"Hash Join"/, path);
      }
      assert.ok(
        large.buffers <= small.buffers + 40 && delayed.buffers <= small.buffers + 40,
        `${path}: pages read ${small.buffers} at 1,000 ready, ${large.buffers} at 55,000, ${delayed.buffers} at 5 ready behind 50,000 delayed`,
      );
    }
  });

  for (const crash of ['SIGKILL', 'immediate'] as const) {
    void test(`a server crash (${crash}) loses nothing acknowledged`, { timeout: 60_000 }, async () => {
      const server = await dedicated();
      const { url } = schemaUrl(server.url);
      const client = await open(url);
      const acknowledged: string[] = [];
      let stop = false;
      const producers = Array.from({ length: 4 }, async (_, p) => {
        for (let i = 0; !stop; i++) {
          const id = `p${p}-${i}`;
          try {
            await client.enqueue('q', { i }, { id });
            acknowledged.push(id);
          } catch {
            return;
          }
        }
      });
      await waitFor(() => acknowledged.length >= 200, { what: '200 acknowledged enqueues', timeoutMs: 20_000 });
      await client.enqueue('q', 'done later', { id: 'finished' });
      // However slow the machine under four producers, wait until the worker has finished some.
      const worker = client.worker('q', () => undefined, { concurrency: 4 });
      await waitFor(async () => (await client.queueStatus('q')).counts['done-awaiting-gc'] >= 10, {
        what: '10 messages done',
        timeoutMs: 20_000,
      });
      await worker.stop();
      const finished = (await client.list('q', { state: 'done-awaiting-gc', limit: 1000 })).messages.map((m) => m.id);
      await server.restart(crash);
      stop = true;
      await Promise.all(producers);
      await client.close();

      const after = await open(url);
      const missing: string[] = [];
      for (const id of acknowledged) if ((await after.status('q', id)) === null) missing.push(id);
      assert.deepEqual(missing, [], 'every acknowledged enqueue survived');
      for (const id of finished) assert.equal((await after.status('q', id))?.state, 'done-awaiting-gc', id);
      assert.ok(finished.length > 0);
      const counts = (await after.queueStatus('q')).counts;
      assert.equal(counts['done-awaiting-gc'], finished.length);
    });
  }

  void test('a worker whose pinned session ends stops its handler; another takes the message at once', async () => {
    const { url, schema } = schemaUrl();
    const holder = await open(url);
    const other = await open(url);
    let aborted = false;
    const started: number[] = [];
    holder.worker(
      'q',
      async (job) => {
        started.push(job.attempt);
        await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
        aborted = true;
      },
      { lockMs: 60_000, onError: () => undefined },
    );
    await holder.enqueue('q', 'x', { id: 'm' });
    await waitFor(() => started.length > 0, { what: 'the handler to start' });
    // The server ends the session holding the worker's advisory lock, as when its connection dies.
    const ended = await sql(
      base,
      `SELECT pg_terminate_backend(pid) FROM pg_locks
       WHERE locktype = 'advisory' AND classid = $1::bigint::oid AND granted`,
      [lockKey(`kvmq ${schema}`)],
    );
    assert.equal(ended.rowCount, 1);
    const handled: number[] = [];
    other.worker('q', (job) => {
      handled.push(job.attempt);
    });
    await waitFor(() => aborted, { what: 'the handler to be told its claim ended', timeoutMs: 15_000 });
    await waitFor(() => handled.length > 0, { what: 'another worker to take the message', timeoutMs: 15_000 });
    assert.deepEqual(handled, [2], 'handled again long before its 60 s lock would end');
  });

  void test('psql enqueues with the schema function; a worker handles the message', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    const psql = (statement: string): string => {
      const run = spawnSync('psql', [base, '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', statement], {
        encoding: 'utf8',
      });
      assert.equal(run.status, 0, run.stderr);
      return run.stdout.trim();
    };
    const answer = JSON.parse(
      psql(
        `SELECT "${schema}".enqueue('from-sql', '{"order": 42}', ` +
          `'{"id": "o-42", "priority": 3, "metadata": {"by": "psql"}}')`,
      ),
    ) as unknown;
    assert.deepEqual(answer, { ok: true, id: 'o-42', action: 'added' });
    const again = JSON.parse(psql(`SELECT "${schema}".enqueue('from-sql', '1', '{"id": "o-42"}')`)) as unknown;
    assert.deepEqual(again, { ok: false, id: 'o-42', state: 'queued' });
    // Inside the caller's transaction: rolled back, nothing is stored.
    psql(`BEGIN; SELECT "${schema}".enqueue('from-sql', '2', '{"id": "rolled-back"}'); ROLLBACK;`);
    assert.equal(await client.status('from-sql', 'rolled-back'), null);

    const details = await client.show('from-sql', 'o-42');
    assert.deepEqual(details?.payload, { order: 42 });
    assert.deepEqual(details.metadata, { by: 'psql' });
    assert.equal(details.priority, 3);
    const seen: unknown[] = [];
    const worker = client.worker('from-sql', (job) => {
      seen.push(job.payload);
    });
    await waitFor(() => seen.length > 0, { what: 'the worker to handle the message' });
    await worker.stop();
    assert.deepEqual(seen, [{ order: 42 }]);
    assert.throws(() => psql(`SELECT "${schema}".enqueue('bad name!', '1')`), /queue name/);
  });

  void test('GC deletes the rate rows of groups whose next start has come; claims read only the others', async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    await checkGroupRateGc(client, async () => {
      const rows = await sql(base, `SELECT group_name FROM "${schema}".group_rates`);
      return rows.rows.map((row: { group_name: string }) => row.group_name);
    });
  });

  void test("a write PostgreSQL aborts as a deadlock's victim is run again and goes through", async () => {
    const { url, schema } = schemaUrl();
    const client = await open(url);
    await client.enqueueBatch('q', [
      { payload: 1, id: 'a' },
      { payload: 2, id: 'b' },
    ]);
    const side = new pg.Client({ connectionString: base.replace(/\?.*$/, '') });
    await side.connect();
    try {
      // kvmq's session looks for deadlocks after the default second, this one only after ten: kvmq is the victim.
      await side.query("SET deadlock_timeout = '10s'");
      await side.query('BEGIN');
      await side.query(`SELECT 1 FROM "${schema}".messages WHERE id = 'b' FOR UPDATE`);
      // Locks a, in seq order, then waits for b.
      const removing = storeOf(client).remove('q', ['a', 'b']);
      await waitFor(async () => {
        // kvmq's statement on this schema, not a lock wait of another test file sharing the server.
        const waiting = await sql(
          base,
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1",
          [`%"${schema}".%`],
        );
        return (waiting.rows[0] as { n: number }).n > 0;
      });
      // Waits for kvmq's lock on a: a deadlock, which PostgreSQL ends by rolling kvmq's transaction back.
      await side.query(`SELECT 1 FROM "${schema}".messages WHERE id = 'a' FOR UPDATE`);
      await side.query('COMMIT');
      const results = await removing;
      assert.deepEqual(
        results.map((r) => [r.id, r.ok]),
        [
          ['a', true],
          ['b', true],
        ],
      );
    } finally {
      await side.end();
    }
  });
});
