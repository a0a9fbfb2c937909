/**
 * Streams kvmq is done with, on etcd: the session lease's keep-alive exchange (one every third of its TTL) and
 * a watch it no longer needs. Each ends cleanly: one ended with an error made the npm etcd3 client close every
 * connection to the member, so an idle process reconnected at each renewal, and a standby dispatcher each time
 * it re-armed its watch. Connections are counted through a TCP proxy in front of etcd.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { connect } from '../src/index.js';
import { slowLink } from './support/slow-link.js';
import { waitFor } from './support/wait.js';
import { etcdTestUrl } from './fixtures/etcd-support.js';

const TTL_MS = 2000;

void describe('etcd streams', () => {
  void test('renewals reuse the connection they found', { timeout: 60_000 }, async () => {
    const link = await slowLink(new URL(etcdTestUrl()).host, 0);
    const url = `etcd://${link.address}/t-${randomBytes(6).toString('hex')}?leaseTtlMs=${TTL_MS}`;
    const client = await connect(url, { maintenance: false });
    try {
      const handled: string[] = [];
      client.worker('q', (job) => void handled.push(job.id));
      await client.enqueue('q', 'first', { id: 'first' });
      await waitFor(() => handled.includes('first'), { timeoutMs: 30_000, what: 'the first message handled' });
      const before = link.opened;
      // Six renewals at least, each a third of the TTL apart.
      await new Promise((resolve) => setTimeout(resolve, 2 * TTL_MS + 500));
      assert.equal(link.opened, before, `connections opened over ${2 * TTL_MS + 500} ms of renewals`);
      // The lease lived on: the worker's registration still brings it a message.
      await client.enqueue('q', 'second', { id: 'second' });
      await waitFor(() => handled.includes('second'), { timeoutMs: 30_000, what: 'the second message handled' });
    } finally {
      await client.close();
      await link.close();
    }
  });

  void test('a watch that ends keeps the connection', { timeout: 60_000 }, async () => {
    const link = await slowLink(new URL(etcdTestUrl()).host, 0);
    const url = `etcd://${link.address}/t-${randomBytes(6).toString('hex')}`;
    const client = await connect(url, { maintenance: false });
    try {
      await client.configure('q', { events: true });
      const before = link.opened;
      for (let i = 0; i < 5; i++) {
        const reading = new AbortController();
        const seen = (async () => {
          for await (const event of client.events('q', { signal: reading.signal })) if (event.id === `m${i}`) return;
        })();
        // Enqueued until the live read sees one: it watches by then.
        const enqueuing = setInterval(() => void client.enqueue('q', 'x', { id: `m${i}` }), 100);
        await seen.finally(() => clearInterval(enqueuing));
        reading.abort();
      }
      await client.status('q', 'm0');
      assert.equal(link.opened, before, 'connections opened while five watches began and ended');
    } finally {
      await client.close();
      await link.close();
    }
  });
});
