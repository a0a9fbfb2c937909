/** The conformance suite on Redis: a fresh key prefix per test, on the server `npm test` starts. */
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import { conformance } from './conformance/index.js';
import { deletePrefixes, redisTestUrl } from './fixtures/redis-server.js';

const base = redisTestUrl();
const prefixes: string[] = [];
let counter = 0;

after(() => deletePrefixes(base, prefixes));

conformance({
  name: 'redis',
  overNetwork: true,
  url() {
    const prefix = `kvmq-test-${process.pid}-${++counter}-${randomBytes(3).toString('hex')}`;
    prefixes.push(prefix);
    return Promise.resolve(`${base}?prefix=${prefix}`);
  },
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: true,
    instantRelease: false,
    deadLetterQueue: true,
    overlapClaims: true,
    flows: true,
  },
});
