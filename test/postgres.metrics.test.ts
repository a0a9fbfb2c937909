/** client.metrics() on PostgreSQL: a fresh schema per test, on the server `npm test` starts. */
import { after } from 'node:test';
import { dropSchemas, freshSchema, postgresTestUrl } from './fixtures/postgres-server.js';
import { metricsSuite } from './metrics/suite.js';

const base = postgresTestUrl();
const schemas: string[] = [];

after(() => dropSchemas(base, schemas));

metricsSuite({
  name: 'postgres',
  url() {
    const schema = freshSchema();
    schemas.push(schema);
    return Promise.resolve(`${base}?schema=${schema}`);
  },
});
