/**
 * What the Redis benchmarks that compare variants of the store code share (redis-events.ts,
 * redis-scheduling.ts): Redis server time per message for enqueue, claim and finish of a success in batches
 * of 64, each variant on a queue of its own (a lane), ten calls of one variant then ten of the next.
 */
import { parseArgs } from 'node:util';
import { successFinish } from './common.js';
import type { claimMessages } from '../src/stores/redis/claim.js';
import type { RedisConnection } from '../src/stores/redis/connection.js';
import type { enqueueMessages } from '../src/stores/redis/enqueue.js';
import type { finishMessages } from '../src/stores/redis/finish.js';
import type { Scripts } from '../src/stores/redis/scripts.js';
import type { NewMessage } from '../src/stores/contract/contract.js';
import { plainMessage } from '../src/stores/contract/new-message.js';

export const BATCH = 64;
const CHUNK = 10 * BATCH;

export const PHASES = ['enqueue', 'claim', 'finish'] as const;
export type Phase = (typeof PHASES)[number];
export const MEASURES = ['script', 'cpu', 'commands'] as const;
export type Measure = (typeof MEASURES)[number];
export type Figures = Record<Measure, Record<Phase, number>>;

/** The store code a lane runs: this tree's, or another commit's with the same signatures. */
export interface LaneCode {
  readonly scripts: Scripts;
  readonly enqueueMessages: typeof enqueueMessages;
  readonly claimMessages: typeof claimMessages;
  readonly finishMessages: typeof finishMessages;
}

/** A variant's queue in a round, the messages it holds, and the server time it took so far. */
export interface Lane<V extends string> {
  readonly variant: V;
  readonly queue: string;
  readonly code: LaneCode;
  readonly held: { id: string; attempt: number }[];
  readonly micros: Figures;
}

export function newLane<V extends string>(variant: V, queue: string, code: LaneCode): Lane<V> {
  const zero = (): Record<Phase, number> => ({ enqueue: 0, claim: 0, finish: 0 });
  return { variant, queue, code, held: [], micros: { script: zero(), cpu: zero(), commands: zero() } };
}

/**
 * Server figures so far: `script`, µs INFO commandstats counts for FCALL, EVALSHA and EVAL (wall time inside
 * Redis, which counts the moments another process had the CPU); `cpu`, µs of the main thread's CPU time (every
 * command, steadier on a loaded machine); `commands`, the commands run inside scripts (a count, free of the
 * machine's noise).
 */
async function serverFigures(redis: RedisConnection): Promise<Record<Measure, number>> {
  const [stats, cpu] = await Promise.all([redis.info('commandstats'), redis.info('cpu')]);
  let script = 0;
  for (const [, usec] of stats.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):calls=\d+,usec=(\d+)/gm))
    script += Number(usec);
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

/** Chunk `c` of a phase on a lane: ten script calls of 64 messages. */
async function work<V extends string>(lane: Lane<V>, ids: string[], phase: Phase, c: number, where: string) {
  const { code } = lane;
  const slice = ids.slice(c * CHUNK, (c + 1) * CHUNK);
  if (phase === 'enqueue') {
    for (let i = 0; i < slice.length; i += BATCH) {
      await code.enqueueMessages(code.scripts, lane.queue, slice.slice(i, i + BATCH).map(newMessage));
    }
  } else if (phase === 'claim') {
    const request = { consumerId: 'bench', max: BATCH, lockMs: 600_000, accepts: null, eoqBackoffMs: () => 1 };
    while (lane.held.length < (c + 1) * CHUNK && lane.held.length < ids.length) {
      const claimed = await code.claimMessages(code.scripts, new Map(), lane.queue, request, where);
      lane.held.push(...claimed.messages.map((m) => ({ id: m.id, attempt: m.attempt })));
    }
  } else {
    const held = lane.held.slice(c * CHUNK, (c + 1) * CHUNK);
    for (let i = 0; i < held.length; i += BATCH) {
      const batch = held.slice(i, i + BATCH).map(successFinish);
      await code.finishMessages(code.scripts, lane.queue, 'bench', batch);
    }
  }
}

/**
 * Enqueues, claims and finishes `messages` messages on every lane; each phase goes a chunk at a time, lane
 * after lane (the first lane turning each chunk), so the load of a shared machine falls on all alike. Leaves
 * each lane's figures per message.
 */
export async function runLanes<V extends string>(
  redis: RedisConnection,
  where: string,
  lanes: readonly Lane<V>[],
  messages: number,
): Promise<void> {
  const ids = Array.from({ length: messages }, (_, i) => `m${i}`);
  for (const phase of PHASES) {
    for (let c = 0; c * CHUNK < messages; c++) {
      for (let k = 0; k < lanes.length; k++) {
        const lane = lanes[(c + k) % lanes.length] as Lane<V>;
        const start = await serverFigures(redis);
        await work(lane, ids, phase, c, where);
        const end = await serverFigures(redis);
        for (const measure of MEASURES) lane.micros[measure][phase] += end[measure] - start[measure];
      }
    }
  }
  for (const lane of lanes) {
    for (const measure of MEASURES) for (const phase of PHASES) lane.micros[measure][phase] /= messages;
  }
}

/**
 * A warm-up round (it loads scripts the server has not cached yet), then `rounds` rounds; returns each
 * variant's figures, one entry per round.
 */
export async function collectRounds<V extends string>(
  order: readonly V[],
  rounds: number,
  round: (n: number) => Promise<readonly Lane<V>[]>,
): Promise<Map<V, Figures[]>> {
  const figures = new Map<V, Figures[]>(order.map((v) => [v, []]));
  await round(-1);
  for (let n = 0; n < rounds; n++) {
    for (const lane of await round(n)) figures.get(lane.variant)?.push(lane.micros);
    process.stderr.write(`round ${n + 1}/${rounds}\n`);
  }
  return figures;
}

/** The options of a bench comparing Redis variants: `--store`, `--before` (`before` says what it names), rounds. */
export function variantOptions(before: string): { store: string; before: string; rounds: number; messages: number } {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      before: { type: 'string' },
      rounds: { type: 'string', default: '7' },
      messages: { type: 'string', default: '6400' },
    },
  });
  if (values.store === undefined || values.before === undefined) {
    throw new Error(`--store redis://HOST:PORT and --before ${before} are required`);
  }
  return {
    store: values.store,
    before: values.before,
    rounds: Number(values.rounds),
    messages: Number(values.messages),
  };
}
