/**
 * `node --import tsx bench/redis-priority.ts --store redis://HOST:PORT [--sizes 10000,1000000] [--claims 6400]`
 *
 * Priority claims on Redis: for each queue size, fills a fresh queue with that many messages spread evenly
 * over 10 priorities (0, 100, ..., 900), then claims `claims` of them, 64 per call, and prints the Redis
 * server time per claimed message (`INFO commandstats`, FCALL, EVALSHA and EVAL) and the ratio to the first size.
 * A claim reads lane names, never the messages of lower priorities, so the cost should not follow the size.
 * Use a Redis of its own: INFO commandstats counts every client's commands.
 */
import { parseArgs } from 'node:util';
import { Command } from 'ioredis';
import { claimMessages } from '../src/stores/redis/claim.js';
import { openConnection } from '../src/stores/redis/connection.js';
import { enqueueMessages } from '../src/stores/redis/enqueue.js';
import { Scripts } from '../src/stores/redis/scripts.js';
import { SCRIPTS } from '../src/stores/redis/scripts.generated.js';
import { parseRedisUrl } from '../src/stores/redis/url.js';
import type { NewMessage } from '../src/stores/contract/contract.js';
import { plainMessage } from '../src/stores/contract/new-message.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    sizes: { type: 'string', default: '10000,1000000' },
    claims: { type: 'string', default: '6400' },
  },
});
if (values.store === undefined) throw new Error('--store redis://HOST:PORT is required');
const sizes = values.sizes.split(',').map(Number);
const claims = Number(values.claims);
const BATCH = 64;
const FILL = 5000;

const url = parseRedisUrl(values.store);
const redis = await openConnection(url, 'kvmq-bench');
const prefix = `bench-priority-${process.pid}`;
const scripts = new Scripts(redis, prefix, url.where, Command);
await scripts.loadAll();

function message(i: number): NewMessage {
  return plainMessage(`m${i}`, Buffer.from(`{"i":${i}}`), { priority: (i % 10) * 100 });
}

async function scriptMicros(): Promise<number> {
  const stats = await redis.info('commandstats');
  let total = 0;
  for (const [, usec] of stats.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):calls=\d+,usec=(\d+)/gm))
    total += Number(usec);
  return total;
}

const results: { size: number; perMessage: number; order: boolean }[] = [];
try {
  for (const size of sizes) {
    const queue = `q-${size}`;
    for (let i = 0; i < size; i += FILL) {
      const batch = Array.from({ length: Math.min(FILL, size - i) }, (_, k) => message(i + k));
      await enqueueMessages(scripts, queue, batch);
    }
    const request = { consumerId: 'bench', max: BATCH, lockMs: 600_000, accepts: null, eoqBackoffMs: () => 1 };
    let claimed = 0;
    let order = true;
    const start = await scriptMicros();
    while (claimed < claims) {
      const result = await claimMessages(scripts, new Map(), queue, request, url.where);
      // The first claims must all be of priority 0 (ids m0, m10, m20...).
      for (const m of result.messages) {
        // In priority order: the n-th claimed message has priority ⌊n / (size / 10)⌋ × 100.
        if (Number(m.id.slice(1)) % 10 !== Math.floor(claimed / (size / 10))) order = false;
        claimed += 1;
      }
      if (result.messages.length === 0) break;
    }
    const perMessage = ((await scriptMicros()) - start) / claimed;
    results.push({ size, perMessage, order });
    await scripts.run(SCRIPTS.clear, queue, []);
    process.stderr.write(`${size}: ${perMessage.toFixed(2)} µs per claimed message\n`);
  }
  const first = results[0]?.perMessage ?? NaN;
  console.log('queue size   claim µs/message   × first   priority 0 first');
  for (const r of results) {
    console.log(
      `${String(r.size).padStart(10)}   ${r.perMessage.toFixed(2).padStart(16)}   ${(r.perMessage / first).toFixed(2).padStart(7)}   ${r.order}`,
    );
  }
} finally {
  redis.disconnect();
}
