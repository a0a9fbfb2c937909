/**
 * `kvmq flow add` on the server stores, as a subprocess: PostgreSQL and Redis write a tree across two queues that
 * `kvmq work` runs children first; etcd has no flows, and both `flow add` and `flow show` say so (exit 1).
 * Needs the servers: `node scripts/servers.mjs run redis postgres etcd -- node --import tsx --test ...`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectExit } from './support/cli.js';
import { postgresFixture, redisFixture } from './support/stores.js';
import { isolatedUrl } from './fixtures/etcd-support.js';

const TREE = {
  queue: 'reports',
  id: 'month',
  payload: { month: '2026-11' },
  children: [
    { queue: 'fetch', id: 'sales', payload: 'sales' },
    { queue: 'fetch', id: 'stock', payload: { base64: Buffer.from('stock').toString('base64') } },
  ],
};

describe('kvmq flow add on server stores', () => {
  for (const fixture of [postgresFixture(), redisFixture()]) {
    it(`${fixture.name}: writes a tree from stdin, and kvmq work runs the parent after its children`, async () => {
      const store = await fixture.url();
      const added = await expectExit(0, ['flow', 'add'], { store, input: JSON.stringify(TREE) });
      assert.equal(added.stdout, 'reports/month\nfetch/sales\nfetch/stock\n');
      const report = ['work', 'reports', '--exec', 'cat', '--idle-exit-ms', '500ms'];
      assert.equal((await expectExit(0, report, { store })).stdout, '', 'the parent waits for its children');
      const fetched = await expectExit(0, ['work', 'fetch', '--exec', 'cat; echo', '--idle-exit-ms', '500ms'], {
        store,
      });
      assert.deepEqual(fetched.stdout.trim().split('\n').sort(), ['sales', 'stock']);
      assert.equal((await expectExit(0, report, { store })).stdout, '{"month":"2026-11"}');
      const again = await expectExit(3, ['flow', 'add', '-'], { store, input: JSON.stringify(TREE) });
      assert.match(again.stderr, /^kvmq: flow not written: message 'month' of queue 'reports' exists/);
    });
  }

  it('etcd: flow add and flow show say flows are not available there, exit 1, and write nothing', async () => {
    const store = isolatedUrl();
    const add = await expectExit(1, ['flow', 'add'], { store, input: JSON.stringify(TREE) });
    const show = await expectExit(1, ['flow', 'show', 'reports', 'month'], { store });
    for (const run of [add, show]) {
      assert.equal(run.stdout, '');
      assert.match(run.stderr, /^kvmq: flows are not available on this etcd store yet; use SQLite, PostgreSQL/);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    }
    // A mistake in the tree is still a mistake (exit 2) before the store is asked.
    const bad = await expectExit(2, ['flow', 'add'], { store, input: JSON.stringify({ ...TREE, prio: 1 }) });
    assert.match(bad.stderr, /unknown option 'prio'/);
    assert.match((await expectExit(1, ['status', 'reports'], { store })).stderr, /unknown queue 'reports'/);
  });
});
