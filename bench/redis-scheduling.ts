/**
 * `node --import tsx bench/redis-scheduling.ts --store redis://HOST:PORT --before DIR [--rounds N] [--messages N]`
 *
 * What issue 13's scheduling costs plain messages on Redis (no priority, group, debounce or rate limit), in
 * Redis server time per message (`INFO commandstats`: FCALL, EVALSHA and EVAL time, every command a script runs;
 * and the main thread's CPU time from `INFO cpu`): enqueue, claim and finish of a success in batches of 64,
 * this tree's store code beside DIR's (a checkout of the commit before, e.g. `git worktree add DIR bfb4eb9`
 * with node_modules linked), ten calls of one then ten of the other, a fresh queue per variant and round.
 * Prints the median of the rounds per variant and the ratios. Use a Redis of its own: INFO commandstats
 * counts every client's commands.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Command } from 'ioredis';
import { successFinish } from './common.js';
import { openConnection } from '../src/redis/connection.js';
import { parseRedisUrl } from '../src/redis/url.js';
import type { NewMessage } from '../src/store/contract.js';
import * as afterClaim from '../src/redis/claim.js';
import * as afterEnqueue from '../src/redis/enqueue.js';
import * as afterFinish from '../src/redis/finish.js';
import * as afterScripts from '../src/redis/scripts.js';
import * as afterGenerated from '../src/redis/scripts.generated.js';
import { plainMessage } from '../src/store/new-message.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    before: { type: 'string' },
    rounds: { type: 'string', default: '7' },
    messages: { type: 'string', default: '6400' },
  },
});
if (values.store === undefined || values.before === undefined) {
  throw new Error('--store redis://HOST:PORT and --before DIR (a checkout of the commit to compare) are required');
}
const rounds = Number(values.rounds);
const messages = Number(values.messages);
const BATCH = 64;
const CHUNK = 10 * BATCH;

/** One tree's store code: the same modules, from this tree or from DIR. */
interface Code {
  readonly claim: typeof afterClaim;
  readonly enqueue: typeof afterEnqueue;
  readonly finish: typeof afterFinish;
  readonly scripts: typeof afterScripts;
  readonly generated: typeof afterGenerated;
}

async function codeAt(dir: string): Promise<Code> {
  const at = (file: string): string => join(resolve(dir), 'src/redis', file);
  return {
    claim: (await import(at('claim.ts'))) as typeof afterClaim,
    enqueue: (await import(at('enqueue.ts'))) as typeof afterEnqueue,
    finish: (await import(at('finish.ts'))) as typeof afterFinish,
    scripts: (await import(at('scripts.ts'))) as typeof afterScripts,
    generated: (await import(at('scripts.generated.ts'))) as typeof afterGenerated,
  };
}

const url = parseRedisUrl(values.store);
const redis = await openConnection(url, 'kvmq-bench');
const prefix = `bench-sched-${process.pid}`;
const codes = {
  before: await codeAt(values.before),
  after: {
    claim: afterClaim,
    enqueue: afterEnqueue,
    finish: afterFinish,
    scripts: afterScripts,
    generated: afterGenerated,
  } as Code,
};
type Variant = keyof typeof codes;
const order: Variant[] = ['before', 'after'];
const runners = new Map<Variant, afterScripts.Scripts>();
for (const v of order) {
  const scripts = new codes[v].scripts.Scripts(redis, prefix, url.where, Command);
  await scripts.loadAll();
  runners.set(v, scripts);
}

type Phase = 'enqueue' | 'claim' | 'finish';
type Measure = 'script' | 'cpu' | 'commands';
const PHASES = ['enqueue', 'claim', 'finish'] as const;
const MEASURES = ['script', 'cpu', 'commands'] as const;

async function serverMicros(): Promise<Record<Measure, number>> {
  const [stats, cpu] = await Promise.all([redis.info('commandstats'), redis.info('cpu')]);
  let script = 0;
  for (const [, usec] of stats.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):calls=\d+,usec=(\d+)/gm))
    script += Number(usec);
  // Commands run inside scripts (Redis counts them too): a count, free of the machine's noise.
  let commands = 0;
  for (const [, name, calls] of stats.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)) {
    if (!['eval', 'evalsha', 'fcall', 'info'].includes(name ?? '')) commands += Number(calls);
  }
  const seconds = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
  return {
    script,
    cpu: 1e6 * (seconds('used_cpu_user_main_thread') + seconds('used_cpu_sys_main_thread')),
    commands,
  };
}

function newMessage(id: string): NewMessage {
  return plainMessage(id, Buffer.from(JSON.stringify({ id })));
}

interface Lane {
  readonly variant: Variant;
  readonly queue: string;
  readonly held: { id: string; attempt: number }[];
  readonly micros: Record<Measure, Record<Phase, number>>;
}

const ids = Array.from({ length: messages }, (_, i) => `m${i}`);

async function work(lane: Lane, phase: Phase, c: number): Promise<void> {
  const code = codes[lane.variant];
  const scripts = runners.get(lane.variant) as afterScripts.Scripts;
  const slice = ids.slice(c * CHUNK, (c + 1) * CHUNK);
  if (phase === 'enqueue') {
    for (let i = 0; i < slice.length; i += BATCH) {
      await code.enqueue.enqueueMessages(scripts, lane.queue, slice.slice(i, i + BATCH).map(newMessage));
    }
  } else if (phase === 'claim') {
    const request = { consumerId: 'bench', max: BATCH, lockMs: 600_000, accepts: null, eoqBackoffMs: () => 1 };
    while (lane.held.length < (c + 1) * CHUNK && lane.held.length < messages) {
      const claimed = await code.claim.claimMessages(scripts, new Map(), lane.queue, request, url.where);
      lane.held.push(...claimed.messages.map((m) => ({ id: m.id, attempt: m.attempt })));
    }
  } else {
    const held = lane.held.slice(c * CHUNK, (c + 1) * CHUNK);
    for (let i = 0; i < held.length; i += BATCH) {
      const batch = held.slice(i, i + BATCH).map(successFinish);
      await code.finish.finishMessages(scripts, lane.queue, 'bench', batch);
    }
  }
}

async function round(n: number): Promise<Lane[]> {
  const lanes: Lane[] = order.map((variant) => ({
    variant,
    queue: `q-${variant}-${n}`,
    held: [],
    micros: {
      script: { enqueue: 0, claim: 0, finish: 0 },
      cpu: { enqueue: 0, claim: 0, finish: 0 },
      commands: { enqueue: 0, claim: 0, finish: 0 },
    },
  }));
  for (const phase of PHASES) {
    for (let c = 0; c * CHUNK < messages; c++) {
      for (let k = 0; k < lanes.length; k++) {
        const lane = lanes[(c + k) % lanes.length] as Lane;
        const start = await serverMicros();
        await work(lane, phase, c);
        const end = await serverMicros();
        for (const measure of MEASURES) lane.micros[measure][phase] += end[measure] - start[measure];
      }
    }
  }
  const clear = runners.get('after') as afterScripts.Scripts;
  for (const lane of lanes) {
    await clear.run(afterGenerated.SCRIPTS.clear, lane.queue, []);
    for (const measure of MEASURES) for (const phase of PHASES) lane.micros[measure][phase] /= messages;
  }
  return lanes;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const figures = new Map<Variant, Record<Measure, Record<Phase, number>>[]>(order.map((v) => [v, []]));
try {
  await round(-1);
  for (let n = 0; n < rounds; n++) {
    for (const lane of await round(n)) figures.get(lane.variant)?.push(lane.micros);
    process.stderr.write(`round ${n + 1}/${rounds}\n`);
  }
  for (const measure of MEASURES) {
    const title = { script: 'script time, µs', cpu: 'main-thread CPU, µs', commands: 'Redis commands' }[measure];
    console.log(`${title} per message (median of ${rounds}):`);
    console.log(`phase     ${order.map((v) => v.padStart(8)).join(' ')}   after/before`);
    for (const phase of PHASES) {
      const m = order.map((v) => median((figures.get(v) ?? []).map((f) => f[measure][phase])));
      const [before, after] = m as [number, number];
      console.log(
        `${phase.padEnd(9)} ${m.map((x) => x.toFixed(2).padStart(8)).join(' ')}   ${(after / before).toFixed(3)}`,
      );
    }
  }
} finally {
  redis.disconnect();
}
