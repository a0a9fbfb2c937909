/** The conformance suite on PostgreSQL: a fresh schema per test, on the server `npm test` starts. */
import { after } from 'node:test';
import { conformance } from './conformance/index.js';
import { dropSchemas, freshSchema, postgresTestUrl } from './fixtures/postgres-server.js';

const base = postgresTestUrl();
const schemas: string[] = [];

after(() => dropSchemas(base, schemas));

conformance({
  name: 'postgres',
  overNetwork: true,
  url() {
    const schema = freshSchema();
    schemas.push(schema);
    return Promise.resolve(`${base}?schema=${schema}`);
  },
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: true,
    instantRelease: true,
    deadLetterQueue: true,
    overlapClaims: false,
  },
});
