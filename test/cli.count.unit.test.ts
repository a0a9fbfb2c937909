/** How the CLI writes counts: grouped as en-US does, without loading ICU's number data for integers. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countOf, formatCount } from '../src/cli/progress.js';

test('counts are grouped by three digits exactly as en-US groups them', () => {
  const samples = [0, 1, 12, 999, 1000, 10_000, 123_456, 1_234_567, -1, -1000, -987_654_321, 2 ** 53 - 1, 1.5, 1e21];
  for (const n of samples) assert.equal(formatCount(n), n.toLocaleString('en-US'), String(n));
  assert.equal(countOf(1, 'message'), '1 message');
  assert.equal(countOf(1234, 'message'), '1,234 messages');
});
