/** client.metrics() on Redis: a fresh key prefix per test, on the server `npm test` starts. */
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import { deletePrefixes, redisTestUrl } from './fixtures/redis-server.js';
import { metricsSuite } from './metrics/suite.js';

const base = redisTestUrl();
const prefixes: string[] = [];

after(() => deletePrefixes(base, prefixes));

metricsSuite({
  name: 'redis',
  url() {
    const prefix = `kvmq-metrics-${process.pid}-${randomBytes(4).toString('hex')}`;
    prefixes.push(prefix);
    return Promise.resolve(`${base}?prefix=${prefix}`);
  },
});
