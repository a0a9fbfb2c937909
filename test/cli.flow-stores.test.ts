/**
 * `kvmq flow add` on the server stores, as a subprocess: PostgreSQL, Redis and etcd write a tree across two queues
 * that `kvmq work` runs children first, and `flow show` prints it.
 * Needs the servers: `node scripts/servers.mjs run redis postgres etcd -- node --import tsx --test ...`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { expectExit } from './support/cli.js';
import { etcdFixture, postgresFixture, redisFixture } from './support/stores.js';
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
  for (const fixture of [postgresFixture(), redisFixture(), etcdFixture()]) {
    it(`${fixture.name}: writes a tree from stdin, and kvmq work runs the parent after its children`, async () => {
      const store = await fixture.url();
      const added = await expectExit(0, ['flow', 'add'], { store, input: JSON.stringify(TREE) });
      assert.equal(added.stdout, 'reports/month\nfetch/sales\nfetch/stock\n');
      assert.equal(
        (await expectExit(0, ['flow', 'show', 'fetch', 'stock'], { store })).stdout,
        'reports/month waiting-children\n  fetch/sales queued\n  fetch/stock queued\n',
      );
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

  it('etcd: a mistake in the tree exits 2, a staged tree with a missing dependsOn exits 3; neither writes', async () => {
    const store = isolatedUrl();
    const bad = await expectExit(2, ['flow', 'add'], { store, input: JSON.stringify({ ...TREE, prio: 1 }) });
    assert.match(bad.stderr, /unknown option 'prio'/);
    const children = Array.from({ length: 60 }, (_, i) => ({ queue: 'fetch', payload: i }));
    const missing = [{ queue: 'fetch', id: 'earlier' }];
    const refused = await expectExit(3, ['flow', 'add'], {
      store,
      input: JSON.stringify({ ...TREE, children, dependsOn: missing }),
    });
    assert.match(refused.stderr, /^kvmq: flow not written: .*'earlier' of queue 'fetch'/);
    assert.match((await expectExit(1, ['status', 'reports'], { store })).stderr, /unknown queue 'reports'/);
    // Staged past one Txn, the tree takes a dependency enqueued before it.
    await expectExit(0, ['enqueue', 'fetch', '"e"', '--id', 'earlier'], { store });
    await expectExit(0, ['flow', 'add'], { store, input: JSON.stringify({ ...TREE, children, dependsOn: missing }) });
    const shown = (await expectExit(0, ['flow', 'show', 'fetch', 'earlier'], { store })).stdout.split('\n');
    assert.equal(shown[0], 'reports/month waiting-children');
    assert.equal(shown[1], '  fetch/earlier queued');
    assert.equal(shown.length, 63, 'the parent, its dependency, its 60 children and the last newline');
  });
});
