/**
 * The bench's smoke run on Redis: `bench/run.ts --quick --no-write` exits 0 and
 * prints kvmq's rows beside the raw Redis baseline (bench/raw/redis.ts). Speed
 * is never asserted here.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { deletePrefixes, redisTestUrl } from './fixtures/redis-server.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const prefix = `kvmq-bench-test-${process.pid}`;

after(() => deletePrefixes(redisTestUrl(), [prefix]));

void test(
  'bench --quick on Redis prints every measurement and the raw redis baseline',
  { timeout: 180_000 },
  async () => {
    const store = `${redisTestUrl()}?prefix=${prefix}`;
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve, reject) => {
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', 'bench/run.ts', '--quick', '--no-write', '--store', store],
          {
            cwd: ROOT,
          },
        );
        let out = '';
        let err = '';
        child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
        child.on('error', reject);
        child.on('close', (exit) => resolve({ code: exit, stdout: out, stderr: err }));
      },
    );
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
