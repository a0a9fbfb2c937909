/**
 * `node --import tsx bench/redis-events.ts --store redis://HOST:PORT --before REF [--rounds N] [--messages N]`
 *
 * What queue events cost on Redis, in Redis server time per message (`INFO commandstats`: the EVALSHA and
 * EVAL time, which includes every command a script runs; and the main thread's CPU time from `INFO cpu`):
 * enqueue, claim and finish of a success, in
 * batches of 64, for three variants side by side in one run, ten calls of one then ten of the next:
 *   before  the scripts of commit REF (e.g. one before queue events), built from its Lua, events off
 *   off     this tree's scripts, events off
 *   on      this tree's scripts, events on (default bounds: 10,000 events, trimmed inline)
 * Prints the median of the rounds per variant and the ratios. Use a Redis of its own: INFO commandstats
 * counts every client's commands.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'ioredis';
import { median } from './common.js';
import {
  BATCH,
  collectRounds,
  newLane,
  PHASES,
  runLanes,
  type Lane,
  type Measure,
  type Phase,
  variantOptions,
} from './redis-lanes.js';
import { claimMessages } from '../src/stores/redis/claim.js';
import { writeConfig } from '../src/stores/redis/config.js';
import { openConnection } from '../src/stores/redis/connection.js';
import { enqueueMessages } from '../src/stores/redis/enqueue.js';
import { finishMessages } from '../src/stores/redis/finish.js';
import { Scripts } from '../src/stores/redis/scripts.js';
import { SCRIPT_FORMS, type EvalForm, type Library, type ScriptForms } from '../src/stores/redis/script-sources.js';
import { parseRedisUrl } from '../src/stores/redis/url.js';
import { SCRIPTS, type LuaScript } from '../src/stores/redis/scripts.generated.js';

const { store, before, rounds, messages } = variantOptions('REF (the commit to compare with)');

/** A script of another commit, as it sends it. */
interface OlderScript extends EvalForm {
  readonly name: string;
  readonly fn: string;
}

/**
 * Another commit's scripts, by script name: its Lua and generator taken out of git and run here (the generated
 * module is built, not stored), and its library. A commit with script-sources.ts composes them from the module's
 * parts; an older one's module holds them whole.
 */
async function scriptsAt(ref: string): Promise<{ scripts: Map<string, OlderScript>; library: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-bench-scripts-'));
  try {
    // The Redis store's folder moved to src/stores/redis; an older commit keeps it at src/redis.
    const redisDir = refHas(ref, 'src/stores/redis') ? 'src/stores/redis' : 'src/redis';
    const paths = [redisDir, 'scripts/redis-scripts.mjs', '.prettierrc.json'];
    const archive = execFileSync('git', ['archive', ref, '--', ...paths], { maxBuffer: 256 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
    symlinkSync(join(process.cwd(), 'node_modules'), join(dir, 'node_modules'));
    execFileSync(process.execPath, [join(dir, 'scripts/redis-scripts.mjs')], { stdio: 'ignore' });
    const generated = (await import(join(dir, redisDir, 'scripts.generated.ts'))) as {
      SCRIPTS: Record<string, LuaScript & OlderScript>;
      LIBRARY?: Library;
    };
    const all = Object.values(generated.SCRIPTS);
    const composer = join(dir, redisDir, 'script-sources.ts');
    if (!existsSync(composer)) {
      return { scripts: new Map(all.map((s) => [s.name, s])), library: generated.LIBRARY?.source ?? '' };
    }
    const forms = ((await import(composer)) as { SCRIPT_FORMS: ScriptForms }).SCRIPT_FORMS;
    const scripts = all.map((s): OlderScript => ({ name: s.name, fn: forms.functionName(s), ...forms.evalForm(s) }));
    return { scripts: new Map(scripts.map((s) => [s.name, s])), library: forms.library().source };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether the commit holds `path`. */
function refHas(ref: string, path: string): boolean {
  try {
    execFileSync('git', ['cat-file', '-e', `${ref}:${path}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Sends another commit's script of the same name in place of this tree's. */
function formsOf(older: Map<string, OlderScript>): ScriptForms {
  return {
    library: () => SCRIPT_FORMS.library(),
    functionName: (script) => older.get(script.name)?.fn ?? SCRIPT_FORMS.functionName(script),
    evalForm: (script) => older.get(script.name) ?? SCRIPT_FORMS.evalForm(script),
  };
}

const url = parseRedisUrl(store);
const redis = await openConnection(url, 'kvmq-bench');
const prefix = `bench-events-${process.pid}`;
const current = new Scripts(redis, prefix, url.where, Command);
// The older commit's functions, in a library of their own name beside this tree's.
const older = await scriptsAt(before);
await redis.call('FUNCTION', 'LOAD', 'REPLACE', older.library);
await current.loadAll();
const variants = {
  before: new Scripts(redis, prefix, url.where, Command, formsOf(older.scripts)),
  off: current,
  on: current,
} as const;
type Variant = keyof typeof variants;
const MEASURES = ['script', 'cpu'] as const satisfies readonly Measure[];
const order: Variant[] = ['before', 'off', 'on'];

/** One round: a fresh queue per variant, events on for `on`. */
async function round(n: number): Promise<Lane<Variant>[]> {
  const lanes = order.map((variant) =>
    newLane(variant, `q-${variant}-${n}`, {
      scripts: variants[variant],
      enqueueMessages,
      claimMessages,
      finishMessages,
    }),
  );
  for (const lane of lanes) {
    if (lane.variant === 'on') await writeConfig(current, prefix, lane.queue, { events: true }, false);
  }
  await runLanes(redis, url.where, lanes, messages);
  for (const lane of lanes) {
    await current.run(SCRIPTS.clear, lane.queue, []);
    await redis.del(`${prefix}:{${lane.queue}}:conf`, `${prefix}:{${lane.queue}}:events-seq`);
  }
  return lanes;
}

const figures = await collectRounds(order, rounds, round).finally(() => redis.disconnect());

const med = (variant: Variant, measure: Measure, phase: Phase): number =>
  median((figures.get(variant) ?? []).map((r) => r[measure][phase]));
const TITLES: Record<(typeof MEASURES)[number], string> = {
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
