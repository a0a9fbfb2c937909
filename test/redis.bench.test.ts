/**
 * The bench's smoke run on Redis: `bench/run.ts --quick --no-write` exits 0 and
 * prints kvmq's rows beside the raw Redis baseline (bench/raw/redis.ts). Speed
 * is never asserted here.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { deletePrefixes, redisTestUrl } from './fixtures/redis-server.js';
import { runScript } from './support/bench.js';

const prefix = `kvmq-bench-test-${process.pid}`;

after(() => deletePrefixes(redisTestUrl(), [prefix]));

void test(
  'bench --quick on Redis prints every measurement and the raw redis baseline',
  { timeout: 180_000 },
  async () => {
    const store = `${redisTestUrl()}?prefix=${prefix}`;
    const args = ['--quick', '--no-write', '--store', store];
    const { code, stdout, stderr } = await runScript('bench/run.ts', args);
    assert.equal(code, 0, `bench exited ${code}\n${stdout}\n${stderr}`);
    for (const row of [
      /^kvmq bench — store redis/m,
      /^enqueue single \(64 in flight\)\s+[\d,]+ msgs\/s/m,
      /^raw redis single \(1 row\/txn\)\s+[\d,]+ rows\/s/m,
      /^raw redis batched \(1000 rows\/txn\)\s+[\d,]+ rows\/s/m,
      /^lifecycle, concurrency 64\s+[\d,]+ msgs\/s/m,
      /^latency p50 \(enqueue → handler\)\s+[\d.]+ ms/m,
    ]) {
      assert.match(stdout, row);
    }
  },
);
