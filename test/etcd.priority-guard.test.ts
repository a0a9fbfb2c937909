/**
 * The dispatcher's priority guard (src/stores/etcd/dispatcher/priority-guard.ts) as etcd and kvmq serve's engine
 * evaluate it: a compare over the higher priorities' ordered keys passes while none was created after the
 * revision the mirror has seen, fails once one was, and its failure read names that key's revision.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { newIdx, QueueKeys } from '../src/stores/etcd/keys.js';
import { parseEtcdUrl } from '../src/stores/etcd/url.js';
import { priorityGuard, unseenRevision } from '../src/stores/etcd/dispatcher/priority-guard.js';
import { Engine } from '../src/serve/engine.js';
import { LocalKv } from '../src/serve/dispatch/local-kv.js';
import { isolatedUrl } from './fixtures/etcd-support.js';
import type { Kv, RangeResult } from '../src/stores/etcd/kv.js';

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

async function etcdKv(): Promise<{ kv: Kv; root: string }> {
  const options = parseEtcdUrl(isolatedUrl());
  const { Etcd3Kv } = await import('../src/stores/etcd/etcd3-kv.js');
  const kv = new Etcd3Kv(await import('etcd3'), options);
  cleanups.push(() => kv.close());
  return { kv, root: options.prefix };
}

function serveKv(): Promise<{ kv: Kv; root: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-guard-test-'));
  const engine = new Engine({ dataDir: join(dir, 'data') });
  cleanups.push(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return Promise.resolve({ kv: new LocalKv(engine, 10), root: '' });
}

/** Enqueues one message of `priority` (its ordered key only): the revision it was created at. */
async function enqueue(kv: Kv, keys: QueueKeys, priority: number, id: string): Promise<number> {
  const res = await kv.txn({
    compare: [],
    success: [{ type: 'put', key: keys.ordered(newIdx(priority), id), value: Buffer.from(id) }],
  });
  return res.revision;
}

/** A delivery Txn of `priority` planned at `seen`, with the guard alone: passed, or the revision to wait for. */
async function deliver(kv: Kv, keys: QueueKeys, priority: number, seen: number): Promise<'passed' | number> {
  const guard = priorityGuard(keys, priority, seen);
  assert.ok(guard !== null);
  const res = await kv.txn({ compare: [guard.compare], success: [], failure: [guard.read] });
  if (res.succeeded) return 'passed';
  return unseenRevision(res.responses[0] as RangeResult, seen);
}

for (const [name, open] of [
  ['etcd', etcdKv],
  ['kvmq serve', serveKv],
] as const) {
  void describe(`priority guard on ${name}`, () => {
    void test('fails once a higher priority got a key after the plan, and names its revision', async () => {
      const { kv, root } = await open();
      const keys = new QueueKeys(root, 'guard');
      assert.equal(priorityGuard(keys, 0, 1), null, 'priority 0 has nothing above it: no compare');
      await enqueue(kv, keys, 0, 'p0');
      await enqueue(kv, keys, 500, 'old500');
      const seen = await enqueue(kv, keys, 600, 'old600');
      assert.equal(await deliver(kv, keys, 600, seen), 'passed', 'every higher key existed at the plan');
      // A lower priority and the same one do not fail it.
      await enqueue(kv, keys, 700, 'new700');
      await enqueue(kv, keys, 600, 'new600');
      assert.equal(await deliver(kv, keys, 600, seen), 'passed');
      const refill = await enqueue(kv, keys, 500, 'refill500');
      assert.equal(await deliver(kv, keys, 600, seen), refill, 'a refilled 500 fails a 600 planned before it');
      assert.equal(await deliver(kv, keys, 500, seen), 'passed', 'a 500 is not behind its own band');
      assert.equal(await deliver(kv, keys, 600, refill), 'passed', 'planned after seeing it: passes');
      const urgent = await enqueue(kv, keys, 0, 'refill0');
      assert.equal(await deliver(kv, keys, 500, refill), urgent, 'priority 0 is above every band');
    });
  });
}
