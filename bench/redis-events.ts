/**
 * `node --import tsx bench/redis-events.ts --store redis://HOST:PORT [--before REF] [--rounds N] [--messages N]`
 *
 * What queue events cost on Redis, in Redis server time per message (`INFO commandstats`: the EVALSHA and
 * EVAL time, which includes every command a script runs; and the main thread's CPU time from `INFO cpu`):
 * enqueue, claim and finish of a success, in
 * batches of 64, for three variants side by side in one run, ten calls of one then ten of the next:
 *   before  the scripts of commit REF (default f-base: before queue events), events off
 *   off     this tree's scripts, events off
 *   on      this tree's scripts, events on (default bounds: 10,000 events, trimmed inline)
 * Prints the median of the rounds per variant and the ratios. Use a Redis of its own: INFO commandstats
 * counts every client's commands.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Command } from 'ioredis';
import { successFinish } from './common.js';
import { claimMessages } from '../src/redis/claim.js';
import { writeConfig } from '../src/redis/config.js';
import { openConnection } from '../src/redis/connection.js';
import { enqueueMessages } from '../src/redis/enqueue.js';
import { finishMessages } from '../src/redis/finish.js';
import { Scripts, type ScriptArg } from '../src/redis/scripts.js';
import { parseRedisUrl } from '../src/redis/url.js';
import { SCRIPTS, type LuaScript } from '../src/redis/scripts.generated.js';
import type { NewMessage } from '../src/store/contract.js';
import { plainMessage } from '../src/store/new-message.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    before: { type: 'string', default: 'f-base' },
    rounds: { type: 'string', default: '7' },
    messages: { type: 'string', default: '6400' },
  },
});
if (values.store === undefined) throw new Error('--store redis://HOST:PORT is required');
const rounds = Number(values.rounds);
const messages = Number(values.messages);
const BATCH = 64;

/** The generated scripts module of another commit, by script name. */
async function scriptsAt(ref: string): Promise<Map<string, LuaScript>> {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-bench-scripts-'));
  try {
    const file = join(dir, 'scripts.generated.ts');
    writeFileSync(file, execFileSync('git', ['show', `${ref}:src/redis/scripts.generated.ts`], { encoding: 'utf8' }));
    const module = (await import(file)) as { SCRIPTS: Record<string, LuaScript> };
    return new Map(Object.values(module.SCRIPTS).map((s) => [s.name, s]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs another commit's script of the same name in place of this tree's. */
class ScriptsAt extends Scripts {
  constructor(
    redis: ConstructorParameters<typeof Scripts>[0],
    prefix: string,
    where: string,
    private readonly older: Map<string, LuaScript>,
  ) {
    super(redis, prefix, where, Command);
  }

  override run(script: LuaScript, queue: string, args: readonly ScriptArg[]): Promise<unknown> {
    return super.run(this.older.get(script.name) ?? script, queue, args);
  }
}

const url = parseRedisUrl(values.store);
const redis = await openConnection(url, 'kvmq-bench');
const prefix = `bench-events-${process.pid}`;
const current = new Scripts(redis, prefix, url.where, Command);
await current.loadAll();
const variants = {
  before: new ScriptsAt(redis, prefix, url.where, await scriptsAt(values.before)),
  off: current,
  on: current,
} as const;
type Variant = keyof typeof variants;
type Phase = 'enqueue' | 'claim' | 'finish';
type Measure = 'script' | 'cpu';
const PHASES = ['enqueue', 'claim', 'finish'] as const;
const MEASURES = ['script', 'cpu'] as const;
const order: Variant[] = ['before', 'off', 'on'];

/**
 * Server time so far, µs: `script`, what INFO commandstats counts for FCALL, EVALSHA and EVAL (wall time inside
 * Redis, which counts the moments another process had the CPU); `cpu`, the main thread's CPU time (every
 * command, steadier on a loaded machine).
 */
async function serverMicros(): Promise<Record<Measure, number>> {
  const [stats, cpu] = await Promise.all([redis.info('commandstats'), redis.info('cpu')]);
  let script = 0;
  for (const [, usec] of stats.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):calls=\d+,usec=(\d+)/gm))
    script += Number(usec);
  const seconds = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
  return { script, cpu: 1e6 * (seconds('used_cpu_user_main_thread') + seconds('used_cpu_sys_main_thread')) };
}

function newMessage(id: string): NewMessage {
  return plainMessage(id, Buffer.from(JSON.stringify({ id })));
}

/** A variant's queue in a round, and the messages it holds. */
interface Lane {
  readonly variant: Variant;
  readonly queue: string;
  readonly held: { id: string; attempt: number }[];
  readonly micros: Record<Measure, Record<Phase, number>>;
}

const CHUNK = 10 * BATCH;
const ids = Array.from({ length: messages }, (_, i) => `m${i}`);

/** Chunk `c` of a phase on a lane: ten script calls of 64 messages. */
async function work(lane: Lane, phase: Phase, c: number): Promise<void> {
  const scripts = variants[lane.variant];
  const slice = ids.slice(c * CHUNK, (c + 1) * CHUNK);
  if (phase === 'enqueue') {
    for (let i = 0; i < slice.length; i += BATCH) {
      await enqueueMessages(scripts, lane.queue, slice.slice(i, i + BATCH).map(newMessage));
    }
  } else if (phase === 'claim') {
    const request = { consumerId: 'bench', max: BATCH, lockMs: 600_000, accepts: null, eoqBackoffMs: () => 1 };
    while (lane.held.length < (c + 1) * CHUNK && lane.held.length < messages) {
      const claimed = await claimMessages(scripts, new Map(), lane.queue, request, url.where);
      lane.held.push(...claimed.messages.map((m) => ({ id: m.id, attempt: m.attempt })));
    }
  } else {
    const held = lane.held.slice(c * CHUNK, (c + 1) * CHUNK);
    for (let i = 0; i < held.length; i += BATCH) {
      const batch = held.slice(i, i + BATCH).map(successFinish);
      await finishMessages(scripts, lane.queue, 'bench', batch);
    }
  }
}

/**
 * One round: a fresh queue per variant; each phase goes a chunk at a time, variant after variant, so the
 * load of a shared machine falls on all three alike. Returns µs of server time per message per phase.
 */
async function round(n: number): Promise<Lane[]> {
  const lanes: Lane[] = order.map((variant) => ({
    variant,
    queue: `q-${variant}-${n}`,
    held: [],
    micros: { script: { enqueue: 0, claim: 0, finish: 0 }, cpu: { enqueue: 0, claim: 0, finish: 0 } },
  }));
  for (const lane of lanes) {
    if (lane.variant === 'on') await writeConfig(current, prefix, lane.queue, { events: true }, false);
  }
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
  for (const lane of lanes) {
    await current.run(SCRIPTS.clear, lane.queue, []);
    await redis.del(`${prefix}:{${lane.queue}}:conf`, `${prefix}:{${lane.queue}}:events-seq`);
    for (const measure of MEASURES) for (const phase of PHASES) lane.micros[measure][phase] /= messages;
  }
  return lanes;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const figures = new Map<Variant, Record<Measure, Record<Phase, number>>[]>(order.map((v) => [v, []]));
try {
  // A warm-up round (loads the older scripts, which are not in the server's cache yet).
  await round(-1);
  for (let n = 0; n < rounds; n++) {
    for (const lane of await round(n)) figures.get(lane.variant)?.push(lane.micros);
    process.stderr.write(`round ${n + 1}/${rounds}\n`);
  }
} finally {
  redis.disconnect();
}

const med = (variant: Variant, measure: Measure, phase: Phase): number =>
  median((figures.get(variant) ?? []).map((r) => r[measure][phase]));
const TITLES: Record<Measure, string> = {
  script: 'script time (INFO commandstats, EVALSHA + EVAL)',
  cpu: 'main-thread CPU time (INFO cpu)',
};
for (const measure of MEASURES) {
  console.log(
    `\nRedis ${TITLES[measure]} per message, µs: median of ${rounds} rounds of ${messages} messages, batches of ${BATCH}`,
  );
  console.log('| phase | before | events off | events on | off / before | on / off |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const phase of PHASES) {
    const [before, off, on] = order.map((v) => med(v, measure, phase)) as [number, number, number];
    console.log(
      `| ${phase} | ${before.toFixed(2)} | ${off.toFixed(2)} | ${on.toFixed(2)} | ` +
        `${(off / before).toFixed(3)} | ${(on / off).toFixed(3)} |`,
    );
  }
}
