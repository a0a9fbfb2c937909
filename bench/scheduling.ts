/**
 * `node --import tsx bench/scheduling.ts [--store URL] [--rounds N] [--quick] [--baseline DIR]`
 *
 * What the scheduling features cost plain messages (no priority, group, debounce or rate limit): enqueue and
 * the full lifecycle on this checkout and, with `--baseline DIR` (a checkout from before, e.g. `git archive
 * bfb4eb9`), on that checkout's client, alternating run by run on fresh queues; medians of the rounds.
 * Target: within 10 %. What a deep queue costs priority claims is bench/priority.ts.
 */
import { besideBaseline, clientCases, rotatingRounds, type Case } from './beside-baseline.js';
import { median, successFinish, table, timed, whole, type BenchContext } from './common.js';
import type { Client } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import type { Store } from '../src/stores/contract/contract.js';

const bench = await besideBaseline('scheduling', 1000);
const { scale, rounds, client, baselineClient } = bench;
const cases: Case[] = [
  { label: 'enqueue+claim+finish, store calls', n: 4000 * scale, run: storeCycle },
  ...clientCases(scale),
];

/** A client's store; a baseline checkout from before the store went private still has it as a field. */
function storeBehind(c: Client): Store {
  const old = (c as unknown as { store?: Store }).store;
  return old ?? storeOf(c);
}

/**
 * The store's own calls, one after another, without a worker: enqueue two, claim (asking for more than there
 * is, so a claim also looks past priority 0), finish them. The least noisy view of the plain hot path.
 */
async function storeCycle({ client: c }: BenchContext, queue: string, n: number): Promise<number> {
  const request = { consumerId: 'bench', max: 4, lockMs: 30_000, accepts: null, eoqBackoffMs: () => 10 };
  return timed(async () => {
    for (let i = 0; i < n; i += 2) {
      await c.enqueueBatch(queue, [{ payload: { i } }, { payload: { i: i + 1 } }]);
      const { messages } = await storeBehind(c).claim(queue, request);
      const finishes = messages.map(successFinish);
      await storeBehind(c).finish(queue, request.consumerId, finishes);
    }
  });
}

type Variant = 'now' | 'baseline';

async function once(c: Case, variant: Variant): Promise<number> {
  const queue = bench.freshQueue(variant);
  const on = variant === 'baseline' && baselineClient !== null ? baselineClient : client;
  return c.run({ ...bench.ctx, client: on }, queue, c.n);
}

async function plainCosts(): Promise<string> {
  const rows: string[][] = [];
  const variants: Variant[] = baselineClient === null ? ['now'] : ['now', 'baseline'];
  for (const c of cases) {
    const times = await rotatingRounds(variants, rounds, (variant) => once(c, variant));
    const ms = (v: Variant): number => median(times.get(v) ?? []);
    const perSec = (v: Variant): string => whole.format((c.n * 1000) / ms(v));
    const row = [c.label, whole.format(c.n), perSec('now')];
    if (baselineClient !== null) row.push(perSec('baseline'), `${(ms('now') / ms('baseline')).toFixed(3)} ×`);
    rows.push(row);
    const spread = variants.map((v) => `${v} ${(times.get(v) ?? []).map(Math.round).join(', ')} ms`);
    process.stderr.write(`bench: ${c.label}: ${spread.join('; ')}\n`);
  }
  const header = ['plain messages', 'messages', 'this checkout /s'];
  if (baselineClient !== null) header.push('baseline /s', 'time now/baseline');
  return table(header, rows, false);
}

try {
  const plain = await plainCosts();
  process.stdout.write(`${plain}\nstore ${storeOf(client).kind}, median of ${rounds} rotating rounds\n`);
} finally {
  await bench.close();
}
