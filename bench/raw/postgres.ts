/**
 * PostgreSQL's own write rate on the same server, through the same client library (node-postgres) kvmq's
 * store uses: one small keyed row per INSERT, each its own transaction, one after another on one connection,
 * and rows `batchSize` per multi-row INSERT from arrays (one statement, one commit), the shape of kvmq's
 * enqueue call. In a scratch table of the URL's schema's database, dropped after.
 */
import pg from 'pg';
import { parsePostgresUrl } from '../../src/stores/postgres/url.js';
import type { BenchSizes } from '../common.js';
import { RAW_PAYLOAD, rawIds, timeWrites, type RawFigures } from './index.js';

export async function measureRaw(url: string, sizes: BenchSizes): Promise<RawFigures> {
  const options = parsePostgresUrl(url);
  const client = new pg.Client({
    host: options.host,
    port: options.port,
    user: options.user,
    password: options.password,
    database: options.database,
  });
  await client.connect();
  const table = `kvmq_raw_bench_${process.pid}`;
  await client.query(
    `CREATE TABLE ${table} (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text NOT NULL UNIQUE,
       value bytea NOT NULL)`,
  );
  const id = rawIds();
  const single = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++)
      await client.query(`INSERT INTO ${table} (id, value) VALUES ($1, $2)`, [id(), RAW_PAYLOAD]);
  };
  const batched = async (n: number): Promise<void> => {
    for (let done = 0; done < n; done += sizes.batchSize) {
      const ids = Array.from({ length: Math.min(sizes.batchSize, n - done) }, id);
      await client.query(`INSERT INTO ${table} (id, value) SELECT i, $2 FROM unnest($1::text[]) AS i`, [
        ids,
        RAW_PAYLOAD,
      ]);
    }
  };
  try {
    return {
      ...(await timeWrites(sizes, single, batched)),
      setup:
        'node-postgres, one connection; INSERT per row, one INSERT from arrays per batch; the server as configured',
    };
  } finally {
    await client.query(`DROP TABLE ${table}`);
    await client.end();
  }
}
