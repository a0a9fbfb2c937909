/**
 * `node --import tsx bench/schedule.ts [--store URL] [--processes N] [--slots N] [--every]`
 *
 * Schedules kept in the store, fired by many processes: N processes (default 5) each run a worker on the
 * queue, so each runs the scheduler; a schedule with a slot every second (cron `* * * * * *`, or everyMs
 * 1000 with --every) runs for `--slots` slots (default 60), then is removed. The target: exactly
 * that many messages enqueued, one per slot, none twice (counted from the queue and from its `enqueued`
 * events, which a revived duplicate would add to). Also shown: how late after its slot each was enqueued.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type Client, type MessageStatus } from '../src/index.js';
import { slotMessageId } from '../src/schedule/messages.js';
import { quantile } from './common.js';

const SCHEDULE = 'bench';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    processes: { type: 'string' },
    slots: { type: 'string' },
    every: { type: 'boolean' },
    child: { type: 'string' },
  },
});

if (values.child !== undefined) await runChild(values.store ?? '', values.child);
else await runParent();

/** One process: a worker on the queue (its handler does nothing), until SIGTERM. */
async function runChild(url: string, queue: string): Promise<void> {
  const client = await connect(url);
  client.worker(queue, () => undefined, { concurrency: 4 });
  process.stdout.write('ready\n');
  await new Promise<void>((resolve) => process.once('SIGTERM', () => resolve()));
  await client.close();
}

async function runParent(): Promise<void> {
  const processes = Number(values.processes ?? 5);
  const slots = Number(values.slots ?? 60);
  const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-schedule-')) : null;
  const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
  const queue = `bench-schedule-${Date.now().toString(36)}`;
  const client = await connect(url);
  const children: ChildProcess[] = [];
  try {
    // Finished messages stay countable for the whole run; every enqueue is an event.
    await client.configure(queue, { events: true, gcLifetimeMs: 3_600_000, eventsMaxCount: 100_000 });
    await Promise.all(Array.from({ length: processes }, () => startChild(url, queue, children)));
    const timing = values.every === true ? { everyMs: 1000 } : { cron: '* * * * * *' };
    const { schedule } = await client.schedule(queue, SCHEDULE, timing, 'tick');
    // The slots counted start with the first one enqueued: until the processes read the new schedule (within
    // the scheduler's rescan), its first slots are caught up with as one, as after any downtime.
    let first = 0;
    await waitUntil(async () => {
      first = firstSlot((await client.list(queue, { limit: 1000 })).messages);
      return first > 0;
    }, schedule.nextAt + 10_000);
    const last = first + (slots - 1) * 1000;
    process.stderr.write(`${processes} processes, ${slots} one-second slots from ${new Date(first).toISOString()}\n`);
    // The last slot's message is in the queue: remove the schedule before the slot after it.
    await waitUntil(async () => (await client.status(queue, slotMessageId(SCHEDULE, last))) !== null, last + 10_000);
    await client.unschedule(queue, SCHEDULE);
    report(await count(client, queue, first, slots), processes, slots, timing);
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => new Promise((resolve) => child.once('exit', resolve))));
    await client.close();
    if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
  }
}

function startChild(url: string, queue: string, children: ChildProcess[]): Promise<void> {
  const file = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', file, '--store', url, '--child', queue], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => line === 'ready' && resolve());
    child.once('exit', (code) => reject(new Error(`a child exited (${String(code)}) before it was ready`)));
  });
}

function slotOf(id: string): number {
  return Date.parse(id.slice(SCHEDULE.length + 1));
}

function firstSlot(messages: readonly MessageStatus[]): number {
  return messages.length === 0 ? 0 : Math.min(...messages.map((m) => slotOf(m.id)));
}

async function waitUntil(done: () => Promise<boolean>, deadline: number): Promise<void> {
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('the last slot was not enqueued in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Counted {
  /** Messages whose slot is in the counted window. */
  readonly messages: number;
  /** Messages of slots after it (enqueued before the schedule was removed). */
  readonly after: number;
  readonly expectedIds: number;
  readonly enqueuedEvents: number;
  readonly lateMs: number[];
}

async function count(client: Client, queue: string, first: number, slots: number): Promise<Counted> {
  const statuses: MessageStatus[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.list(queue, cursor === undefined ? { limit: 1000 } : { limit: 1000, cursor });
    statuses.push(...page.messages);
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
  const last = first + (slots - 1) * 1000;
  const inWindow = statuses.filter((s) => slotOf(s.id) >= first && slotOf(s.id) <= last);
  const ids = new Set(inWindow.map((s) => s.id));
  const expected = new Set(Array.from({ length: slots }, (_, i) => slotMessageId(SCHEDULE, first + i * 1000)));
  const events = await client.readEvents(queue, { limit: 10_000 });
  return {
    messages: inWindow.length,
    after: statuses.filter((s) => slotOf(s.id) > last).length,
    expectedIds: [...expected].filter((id) => ids.has(id)).length,
    enqueuedEvents: events.events.filter((e) => e.type === 'enqueued' && ids.has(e.id)).length,
    lateMs: inWindow.map((s) => s.enqueuedAt - slotOf(s.id)).sort((a, b) => a - b),
  };
}

function report(counted: Counted, processes: number, slots: number, timing: object): void {
  const ok = counted.messages === slots && counted.expectedIds === slots && counted.enqueuedEvents === slots;
  const late = (q: number): string => `${quantile(counted.lateMs, q)} ms`;
  console.log(
    [
      `schedule ${JSON.stringify(timing)}, ${processes} processes, ${slots} slots`,
      `  messages enqueued   ${counted.messages} (one per expected slot: ${counted.expectedIds})`,
      `  enqueued events     ${counted.enqueuedEvents}`,
      `  after the window    ${counted.after} (slots fired before the schedule was removed)`,
      `  enqueued after slot median ${late(0.5)}, p99 ${late(0.99)}, max ${late(1)}`,
      `  ${ok ? 'PASS' : 'FAIL'}: exactly ${slots} enqueued`,
    ].join('\n'),
  );
  if (!ok) process.exitCode = 1;
}
