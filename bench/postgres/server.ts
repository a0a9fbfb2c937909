/** What the PostgreSQL benches share: the server they measure, and the schemas they leave behind. */
import pg from 'pg';

/** The server's URL: `--store`, else the test server's ($KVMQ_TEST_POSTGRES_URL, set by scripts/servers.mjs). */
export function benchServerUrl(store: string | undefined): string {
  const url = store ?? process.env.KVMQ_TEST_POSTGRES_URL;
  if (url === undefined) throw new Error('give --store postgres://... or set KVMQ_TEST_POSTGRES_URL');
  return url;
}

/** Drops a schema a bench made, and everything in it. */
export async function dropSchema(url: string, schema: string): Promise<void> {
  const db = new pg.Client({ connectionString: url.replace(/\?.*$/, '') });
  await db.connect();
  try {
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await db.end();
  }
}
