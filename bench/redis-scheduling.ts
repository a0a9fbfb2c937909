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
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command } from 'ioredis';
import { median } from './common.js';
import { collectRounds, MEASURES, newLane, PHASES, runLanes, type Lane, variantOptions } from './redis-lanes.js';
import { openConnection } from '../src/stores/redis/connection.js';
import { parseRedisUrl } from '../src/stores/redis/url.js';
import * as afterClaim from '../src/stores/redis/claim.js';
import * as afterEnqueue from '../src/stores/redis/enqueue.js';
import * as afterFinish from '../src/stores/redis/finish.js';
import * as afterScripts from '../src/stores/redis/scripts.js';
import * as afterGenerated from '../src/stores/redis/scripts.generated.js';

const { store, before, rounds, messages } = variantOptions('DIR (a checkout of the commit to compare)');

/** One tree's store code: the same modules, from this tree or from DIR. */
interface Code {
  readonly claim: typeof afterClaim;
  readonly enqueue: typeof afterEnqueue;
  readonly finish: typeof afterFinish;
  readonly scripts: typeof afterScripts;
  readonly generated: typeof afterGenerated;
}

async function codeAt(dir: string): Promise<Code> {
  // The Redis store's folder moved to src/stores/redis; an older tree keeps it at src/redis.
  const redisDir = existsSync(join(resolve(dir), 'src/stores/redis')) ? 'src/stores/redis' : 'src/redis';
  const at = (file: string): string => join(resolve(dir), redisDir, file);
  return {
    claim: (await import(at('claim.ts'))) as typeof afterClaim,
    enqueue: (await import(at('enqueue.ts'))) as typeof afterEnqueue,
    finish: (await import(at('finish.ts'))) as typeof afterFinish,
    scripts: (await import(at('scripts.ts'))) as typeof afterScripts,
    generated: (await import(at('scripts.generated.ts'))) as typeof afterGenerated,
  };
}

const url = parseRedisUrl(store);
const redis = await openConnection(url, 'kvmq-bench');
const prefix = `bench-sched-${process.pid}`;
const codes = {
  before: await codeAt(before),
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

/** One round: a fresh queue per variant, each running its tree's store code. */
async function round(n: number): Promise<Lane<Variant>[]> {
  const lanes = order.map((variant) => {
    const code = codes[variant];
    return newLane(variant, `q-${variant}-${n}`, {
      scripts: runners.get(variant) as afterScripts.Scripts,
      enqueueMessages: code.enqueue.enqueueMessages,
      claimMessages: code.claim.claimMessages,
      finishMessages: code.finish.finishMessages,
    });
  });
  await runLanes(redis, url.where, lanes, messages);
  const clear = runners.get('after') as afterScripts.Scripts;
  for (const lane of lanes) await clear.run(afterGenerated.SCRIPTS.clear, lane.queue, []);
  return lanes;
}

const figures = await collectRounds(order, rounds, round).finally(() => redis.disconnect());
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
