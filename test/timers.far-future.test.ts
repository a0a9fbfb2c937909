/**
 * Wake-ups years ahead, on every store and through kvmq serve: a process holding a message due in 2030 and a
 * schedule next due in 2030 stays idle (Node runs a timer beyond 24.8 days after 1 ms, with a warning, so an
 * uncapped one spins), and a message due soon is still handled. The processes run side by side, so the
 * window is paid once. How a long wait re-arms, and that it never ends early, is tested with a tiny cap.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { connect } from '../src/index.js';
import { setLongTimeout, timerDelay, MAX_TIMER_MS } from '../src/model/time.js';
import { spawnChild, type Child } from './support/child.js';
import { waitFor } from './support/wait.js';
import { redisFixture, sqliteFixture } from './support/stores.js';
import { isolatedUrl } from './fixtures/etcd-support.js';
import { freshStoreUrl } from './fixtures/zookeeper-env.js';

// Shorter than ten seconds to keep the file quick; at 100 ticks a second, 2 % of it is still 100 ticks' worth.
const WINDOW_MS = 5000;
const MAX_CPU_SHARE = 0.02;
const CLOCK_TICKS_PER_SECOND = 100;
/** The longest wait for the processes' start-up work to end before the window. */
const SETTLE_MS = 15_000;
const QUEUE = 'far';
/**
 * The etcd clients' session lease is renewed every third of its TTL: a deliberate cost, paid however near the
 * wake-ups are, and about 40 % of an idle client's CPU at the default 5 s (34 clock ticks in 30 s, 21 on a
 * one-minute lease). A long TTL keeps it out of what is measured here.
 */
const LONG_LEASE = '?leaseTtlMs=600000';

const children: Child[] = [];
const dirs: string[] = [];
after(async () => {
  await Promise.all(children.map((child) => child.kill('SIGKILL')));
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

function spawn(script: string, args: string[]): Child {
  const child = spawnChild(script, args);
  children.push(child);
  return child;
}

/** The CPU time a process has used so far (user and system), in ms, from /proc. */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/**
 * Waits until the processes have done their start-up work: a half second in which none used more than one clock
 * tick of CPU. On a loaded machine that work runs late, and counted in the window it reads as a spin. One that
 * spins never settles: after SETTLE_MS the window measures it anyway.
 */
async function startedUp(pids: readonly number[]): Promise<void> {
  const deadline = Date.now() + SETTLE_MS;
  for (;;) {
    const before = await Promise.all(pids.map(cpuMs));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const used = await Promise.all(pids.map(async (pid, i) => (await cpuMs(pid)) - (before[i] ?? 0)));
    if (used.every((ms) => ms <= 1000 / CLOCK_TICKS_PER_SECOND) || Date.now() > deadline) return;
  }
}

async function servedUrl(): Promise<{ url: string; server: Child }> {
  const dir = await mkdtemp(join(tmpdir(), 'kvmq-far-serve-'));
  dirs.push(dir);
  const server = spawn('serve-process.ts', ['--data', join(dir, 'data')]);
  const match = await server.line(/^ready http:\/\/(\S+)$/, 30_000);
  // No key prefix: kvmq serve dispatches the queues at its root itself.
  return { url: `etcd://${match[1] ?? ''}${LONG_LEASE}`, server };
}

const stores: Record<string, () => Promise<{ url: string; server?: Child }>> = {
  sqlite: async () => ({ url: await sqliteFixture().url() }),
  redis: async () => ({ url: await redisFixture().url() }),
  zookeeper: async () => ({ url: await freshStoreUrl() }),
  etcd: () => Promise.resolve({ url: isolatedUrl(LONG_LEASE) }),
  'kvmq serve': servedUrl,
};

void describe('a wake-up years ahead', { concurrency: true }, () => {
  for (const [name, open] of Object.entries(stores)) {
    void test(
      `${name}: leaves the processes idle, and a message due soon is still handled`,
      {
        timeout: 90_000,
      },
      async (t) => {
        const { url, server } = await open();
        const holder = spawn('far-future-process.ts', [url, QUEUE]);
        await holder.line(/^ready$/, 30_000);
        const watched = server === undefined ? [holder] : [holder, server];
        // Past the start (first claims, the first scheduler pass, the dispatcher's first read, the JIT's work).
        await startedUp(watched.map((child) => child.pid));
        const before = await Promise.all(watched.map((child) => cpuMs(child.pid)));
        await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
        const used = await Promise.all(watched.map(async (child, i) => (await cpuMs(child.pid)) - (before[i] ?? 0)));
        t.diagnostic(`CPU over ${WINDOW_MS} ms: ${used.join(' ms, ')} ms`);
        used.forEach((ms, i) => {
          const child = watched[i];
          assert.ok(
            ms < WINDOW_MS * MAX_CPU_SHARE,
            `${child === server ? 'kvmq serve' : 'the client'} used ${ms} ms of CPU in ${WINDOW_MS} ms idle; ` +
              `stderr: ${child?.stderr.slice(0, 500) ?? ''}`,
          );
        });

        const client = await connect(url, { maintenance: false });
        try {
          await client.enqueue(QUEUE, 'now', { id: 'soon', runAt: Date.now() + 300 });
          await holder.line(/^handled soon$/, 30_000);
          assert.equal((await client.status(QUEUE, 'far'))?.state, 'queued-with-backoff', 'the 2030 message waits');
        } finally {
          await client.close();
        }
        for (const child of watched) assert.doesNotMatch(child.stderr, /TimeoutOverflowWarning/);
      },
    );
  }
});

void describe('setLongTimeout', () => {
  void test('a wait longer than the cap is re-armed in legs of at most the cap, and ends no earlier than asked', async () => {
    const start = Date.now();
    let endedAt = 0;
    const timer = setLongTimeout(() => (endedAt = Date.now()), 1000, 30);
    assert.equal(timer.armedMs, 30);
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(endedAt, 0, 'still waiting after several legs');
    const leg: number = timer.armedMs;
    assert.ok(leg > 0 && leg <= 30, `armed for ${leg} ms`);
    await waitFor(() => endedAt !== 0, { timeoutMs: 10_000, what: 'the wait to end' });
    assert.ok(endedAt - start >= 1000, `ended after ${endedAt - start} ms`);
  });

  void test('a far-off wait is armed for the longest delay Node keeps, and clear() ends it', async () => {
    let fired = false;
    const warnings: Error[] = [];
    const onWarning = (warning: Error): number => warnings.push(warning);
    process.on('warning', onWarning);
    const timer = setLongTimeout(() => (fired = true), Date.parse('2030-01-02T09:00:00Z') - Date.now());
    assert.equal(timer.armedMs, MAX_TIMER_MS);
    await new Promise((resolve) => setTimeout(resolve, 50));
    timer.clear();
    process.off('warning', onWarning);
    assert.equal(fired, false);
    assert.deepEqual(warnings, []);
  });

  void test('timerDelay keeps a delay between 0 and the cap', () => {
    assert.equal(timerDelay(-5), 0);
    assert.equal(timerDelay(10), 10);
    assert.equal(timerDelay(Number.MAX_SAFE_INTEGER), MAX_TIMER_MS);
  });
});
