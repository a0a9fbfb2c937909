/**
 * The bench's smoke run: `bench/run.ts --quick --no-write` against a temp
 * SQLite file exits 0 and prints a row for every measurement. Speed is never
 * asserted here; the full bench reports it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { benchSqliteUrls, runScript } from './support/bench.js';

const sqliteUrl = benchSqliteUrls('bench-test');

void test('bench --quick runs every measurement and prints its row', { timeout: 120_000 }, async () => {
  const { code, stdout, stderr } = await runScript('bench/run.ts', [
    '--quick',
    '--no-write',
    '--store',
    sqliteUrl('bench.db'),
  ]);
  assert.equal(code, 0, `bench exited ${code}\n${stdout}\n${stderr}`);
  const rows = [
    /^enqueue single \(64 in flight\)\s+[\d,]+ msgs\/s/m,
    /^enqueue batched \(1000\/call\)\s+[\d,]+ msgs\/s/m,
    /^raw sqlite single \(1 row\/txn\)\s+[\d,]+ rows\/s/m,
    /^raw sqlite batched \(1000 rows\/txn\)\s+[\d,]+ rows\/s/m,
    /^lifecycle, concurrency 1\s+[\d,]+ msgs\/s/m,
    /^lifecycle, concurrency 64\s+[\d,]+ msgs\/s/m,
    /^latency p50 \(enqueue → handler\)\s+[\d.]+ ms/m,
    /^latency p99 \(enqueue → handler\)\s+[\d.]+ ms/m,
    /^backlog enqueue cost @1k\s+[\d.]+ µs\/msg/m,
    /^backlog enqueue cost @20k\s+[\d.]+ µs\/msg/m,
    /^backlog claim cost @1k\s+[\d.]+ µs\/msg/m,
    /^backlog claim cost @20k\s+[\d.]+ µs\/msg/m,
    /^backlog RSS @20k\s+\d+ MB/m,
  ];
  for (const row of rows) assert.match(stdout, row);
});

void test('bench refuses an unknown flag', { timeout: 60_000 }, async () => {
  const { code, stderr } = await runScript('bench/run.ts', ['--quick', '--no-write', '--speed']);
  assert.notEqual(code, 0);
  assert.match(stderr, /speed/);
});
