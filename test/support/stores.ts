/**
 * Fixtures for test files that run a few tests on more than one store (outside the conformance suite):
 * SQLite in a fresh temp dir, Redis and etcd under a fresh key prefix and PostgreSQL in a fresh schema on the
 * servers `npm test` starts.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { start as startPgBouncer, type PgBouncer } from '../../scripts/servers/pgbouncer.mjs';
import { dropSchemas, freshSchema, postgresTestUrl } from '../fixtures/postgres-server.js';
import { deletePrefixes, redisTestUrl } from '../fixtures/redis-server.js';
import { isolatedUrl } from '../fixtures/etcd-support.js';
import { tempSqlite } from '../fixtures/sqlite-temp.js';
import type { StoreFixture } from './fixture.js';

/** A fresh SQLite file per url(); the dirs go when the file's tests end. */
export function sqliteFixture(): StoreFixture {
  return tempSqlite('test');
}

/** A fresh key prefix per url() on the test Redis; its keys go when the file's tests end. */
export function redisFixture(): StoreFixture {
  const base = redisTestUrl();
  const prefixes: string[] = [];
  let counter = 0;
  after(() => deletePrefixes(base, prefixes));
  return {
    name: 'redis',
    url() {
      const prefix = `kvmq-test-${process.pid}-${++counter}-${randomBytes(3).toString('hex')}`;
      prefixes.push(prefix);
      return Promise.resolve(`${base}?prefix=${prefix}`);
    },
  };
}

/** A fresh key prefix per url() on the test etcd. */
export function etcdFixture(): StoreFixture {
  return { name: 'etcd', overNetwork: true, url: () => Promise.resolve(isolatedUrl()) };
}

/** A fresh schema per url() on the test PostgreSQL; the schemas (and `extra`, added later) go when the file's tests end. */
export function postgresFixture(extra: string[] = []): StoreFixture {
  const base = postgresTestUrl();
  const schemas: string[] = [];
  after(() => dropSchemas(base, [...schemas, ...extra]));
  return {
    name: 'postgres',
    overNetwork: true,
    url() {
      const schema = freshSchema();
      schemas.push(schema);
      return Promise.resolve(`${base}?schema=${schema}`);
    },
  };
}

/**
 * A fresh schema per url() on the test PostgreSQL through PgBouncer in transaction mode (URL option
 * `pooler=transaction`), started before the file's tests in a temp dir and stopped after them.
 */
export function pgbouncerFixture(schemas: string[] = []): StoreFixture {
  const base = new URL(postgresTestUrl());
  let bouncer: PgBouncer | null = null;
  let dir: string | null = null;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kvmq-pgbouncer-'));
    // PgBouncer runs as the postgres user when the tests run as root.
    await chmod(dir, 0o755);
    bouncer = await startPgBouncer(dir, { port: Number(base.port), password: decodeURIComponent(base.password) });
  });
  after(async () => {
    await bouncer?.stop();
    await dropSchemas(base.href, schemas);
    if (dir !== null) await rm(dir, { recursive: true, force: true });
  });
  return {
    name: 'postgres through pgbouncer',
    overNetwork: true,
    url() {
      if (bouncer === null) throw new Error('pgbouncer is not running');
      const schema = freshSchema();
      schemas.push(schema);
      return Promise.resolve(`${bouncer.url}?schema=${schema}&pooler=transaction`);
    },
  };
}
