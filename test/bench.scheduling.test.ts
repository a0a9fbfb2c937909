/**
 * Smoke runs of the scheduling benches on a temp SQLite file, so they keep working: each exits 0 and prints
 * its figures. Speed is never asserted; the rate-limit run checks only what the limit promises (no more than
 * max + rate × t handled), which holds however slow the machine is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { benchSqliteUrls, runScript } from './support/bench.js';

const sqliteUrl = benchSqliteUrls('bench-scheduling');

void test('bench/priority.ts --quick drains by priority and prints both tables', { timeout: 120_000 }, async () => {
  const store = sqliteUrl('priority.db');
  const args = ['--quick', '--store', store, '--small', '2000', '--large', '10000', '--probe', '300'];
  const { code, stdout, stderr } = await runScript('bench/priority.ts', args);
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  assert.match(stdout, /^small\s+2,000\s+10\s+300\s+[\d.]+/m);
  assert.match(stdout, /^large\s+10,000\s+10\s+300\s+[\d.]+/m);
  assert.match(stdout, /^claim cost large\/small: [\d.]+ ×/m);
  assert.match(stdout, /^lifecycle, concurrency 64\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+[\d.]+ ×$/m);
});

void test(
  'bench/priority.ts --claims-only checks the order of priorities laid out in blocks',
  { timeout: 120_000 },
  async () => {
    const store = sqliteUrl('priority-blocks.db');
    // Runs of 150 per level: each drain of 300 crosses levels, and the refills continue the same stream.
    const args = ['--claims-only', '--store', store, '--small', '2000', '--large', '10000', '--probe', '300'];
    const { code, stdout, stderr } = await runScript('bench/priority.ts', [...args, '--run', '150', '--rounds', '2']);
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    assert.match(stdout, /^claim cost large\/small: [\d.]+ ×/m);
    assert.match(stdout, /^paired rounds large\/small: median [\d.]+ ×/m);
    assert.doesNotMatch(stdout, /plain \/s/);
  },
);

void test('bench/rate-limit.ts: two processes together stay within the limit', { timeout: 120_000 }, async () => {
  const store = sqliteUrl('rate.db');
  const args = ['--store', store, '--max', '5', '--per-ms', '1000', '--seconds', '3'];
  const { code, stdout, stderr } = await runScript('bench/rate-limit.ts', args);
  assert.equal(code, 0, `${stdout}\n${stderr}`);
  const handled = Number(/^handled ([\d,]+)/m.exec(stdout)?.[1]?.replace(/,/g, ''));
  // 5 at once, then 5 a second for 3 s: at most 20, whoever claims.
  assert.ok(handled > 0 && handled <= 20, stdout);
  assert.match(stdout, /^claims on the store [\d,]+/m);
});
