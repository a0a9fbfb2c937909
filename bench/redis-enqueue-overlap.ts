/**
 * `node --import tsx bench/redis-enqueue-overlap.ts --store redis://HOST:PORT [--n N] [--rounds R]
 *   [--tree DIR]...`
 *
 * Single `client.enqueue` calls with 64 in flight (the peers bench's enqueue), per message: the wall time, this
 * process's CPU (user + system), the Redis server's CPU (`INFO cpu`) and its script calls (`INFO
 * commandstats`). `overlap` is (client + server CPU) / wall: 1 when the two take turns, up to 2 when each
 * works while the other does. Each `--tree DIR` loads that checkout's kvmq (its src/index.ts; default: this
 * one); with several, their rounds alternate in one process (the order reversed every round), so a change in
 * the machine's load hits them alike, and the median of the paired wall-time ratios (each tree's to the
 * first's) is printed with the medians.
 */
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { inFlight } from './common.js';
import type { Redis as RedisClass } from 'ioredis';
import type { Client, connect as Connect } from '../src/index.js';

const IN_FLIGHT = 64;

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '9' },
    tree: { type: 'string', multiple: true },
  },
});
const url = values.store ?? process.env.KVMQ_TEST_REDIS_URL;
if (url === undefined) throw new TypeError('--store redis://HOST:PORT is required (or $KVMQ_TEST_REDIS_URL)');
const n = Number(values.n);
const rounds = Number(values.rounds);
const trees = (values.tree ?? [fileURLToPath(new URL('..', import.meta.url))]).map((dir) => resolve(dir));

// The first tree's ioredis reads the server's counters.
const { Redis } = createRequire(resolve(trees[0] ?? '.', 'package.json'))('ioredis') as { Redis: typeof RedisClass };
const admin = new Redis(url);

/** Seconds of CPU the server has used, and the script calls it has run, so far. */
async function serverCounters(): Promise<{ cpu: number; scripts: number }> {
  const info = (await admin.info('cpu')) + (await admin.info('commandstats'));
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  let scripts = 0;
  for (const match of info.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):calls=(\d+)/gm)) scripts += Number(match[1]);
  return { cpu: field('used_cpu_user') + field('used_cpu_sys'), scripts };
}

interface Round {
  wallUs: number;
  clientUs: number;
  serverUs: number;
  scriptCalls: number;
  overlap: number;
}

const fixed = (v: number): number => Number(v.toFixed(3));

function median(list: number[]): number {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

async function round(client: Client, queue: string, count: number): Promise<Round> {
  const server = await serverCounters();
  const cpu = process.cpuUsage();
  const start = performance.now();
  await inFlight(count, IN_FLIGHT, (i) => client.enqueue(queue, { i }));
  const wallUs = ((performance.now() - start) * 1000) / count;
  const used = process.cpuUsage(cpu);
  const after = await serverCounters();
  await client.clear(queue);
  const clientUs = (used.user + used.system) / count;
  const serverUs = ((after.cpu - server.cpu) * 1e6) / count;
  const scriptCalls = (after.scripts - server.scripts) / count;
  return { wallUs, clientUs, serverUs, scriptCalls, overlap: (clientUs + serverUs) / wallUs };
}

const clients: Client[] = [];
try {
  for (const tree of trees) {
    const entry = pathToFileURL(resolve(tree, 'src/index.ts')).href;
    const { connect } = (await import(entry)) as { connect: typeof Connect };
    clients.push(await connect(url, { maintenance: false }));
  }
  const stamp = Date.now().toString(36);
  for (const [t, client] of clients.entries()) await round(client, `overlap-${stamp}-${t}-warm`, n);
  const all: Round[][] = trees.map(() => []);
  for (let r = 0; r < rounds; r++) {
    const order = [...clients.keys()];
    if (r % 2 === 1) order.reverse();
    for (const t of order) {
      const figures = await round(clients[t] as Client, `overlap-${stamp}-${t}-${r}`, n);
      all[t]?.push(figures);
      const line = Object.fromEntries(Object.entries(figures).map(([k, v]: [string, number]) => [k, fixed(v)]));
      console.log(JSON.stringify({ round: r, tree: trees[t], ...line }));
    }
  }
  const keys: (keyof Round)[] = ['wallUs', 'clientUs', 'serverUs', 'scriptCalls', 'overlap'];
  for (const [t, tree] of trees.entries()) {
    const mine = all[t] ?? [];
    const first = all[0] ?? [];
    const ratios = mine.map((f, r) => f.wallUs / (first[r]?.wallUs ?? NaN));
    console.log(
      JSON.stringify({
        tree,
        n,
        rounds,
        median: Object.fromEntries(keys.map((k) => [k, fixed(median(mine.map((f) => f[k])))])),
        wallToFirst: t === 0 ? undefined : { median: fixed(median(ratios)), all: ratios.map(fixed) },
      }),
    );
  }
} finally {
  await Promise.all(clients.map((client) => client.close()));
  admin.disconnect();
}
