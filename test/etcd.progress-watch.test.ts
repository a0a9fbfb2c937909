/**
 * The dispatcher's progress watch on a real etcd: calls that keep failing stall it, a failure followed by no
 * more calls (nothing is retried, so nothing waits) does not, and answered calls reset the clock.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import * as etcd3 from 'etcd3';
import { Etcd3Kv } from '../src/stores/etcd/etcd3-kv.js';
import { ProgressWatch } from '../src/stores/etcd/dispatcher/progress.js';
import { parseEtcdUrl } from '../src/stores/etcd/url.js';
import { waitFor } from './support/wait.js';
import { isolatedUrl } from './fixtures/etcd-support.js';

const STALL_MS = 1000;
const kv = new Etcd3Kv(etcd3, parseEtcdUrl(isolatedUrl()));
after(() => kv.close());

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
// etcd refuses a read at a revision it has not reached: an answer, but an error.
const failingRead = (watch: ProgressWatch): Promise<unknown> =>
  watch.kv.range({ key: '/progress', revision: 1e12 }).catch(() => undefined);

void test('calls failing for the stall time stall the watch; answered ones do not', { timeout: 30_000 }, async () => {
  const stalls: string[] = [];
  const watch = new ProgressWatch(kv, STALL_MS, (why) => stalls.push(why));
  try {
    const until = Date.now() + 2 * STALL_MS;
    while (Date.now() < until) {
      await watch.kv.range({ key: '/progress' });
      await sleep(50);
    }
    assert.deepEqual(stalls, [], 'answered calls are progress');
    for (let i = 0; i < 10 && stalls.length === 0; i++) {
      await failingRead(watch);
      await sleep(200);
    }
    await waitFor(() => stalls.length > 0, { timeoutMs: 5000, what: 'a stall' });
    // A failing read may be under way when the stall is seen (on a loaded machine a call takes long).
    assert.match(
      stalls.join('\n'),
      /no store call answered for \d+ ms \([01] under way, the last failed: .*future revision/,
    );
  } finally {
    watch.stop();
  }
});

void test('a failed call followed by no more calls does not stall the watch', { timeout: 30_000 }, async () => {
  const stalls: string[] = [];
  const watch = new ProgressWatch(kv, STALL_MS, (why) => stalls.push(why));
  try {
    await failingRead(watch);
    await sleep(3 * STALL_MS);
    assert.deepEqual(stalls, []);
  } finally {
    watch.stop();
  }
});
