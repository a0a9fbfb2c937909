/**
 * Per-queue keys besides messages: the configuration (`/kvmq/config`, zkmq's
 * conf/) and the queue-wide end-of-queue backoff with its dry-run count
 * (`/kvmq/eoq`, Carmine's ndry-runs), each read-modify-written under a
 * compare of its mod revision.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { applyConfigPatch, DEFAULT_QUEUE_CONFIG, withConfigDefaults } from '../../model/config.js';
import { prefixEnd, unchangedSince, type Kv } from './kv.js';
import { QueueKeys } from './keys.js';
import { registerOp } from './queue-registry.js';
import type { QueueConfig } from '../../model/types.js';

const MAX_TRIES = 20;

export function decodeConfig(keys: QueueKeys, value: Buffer | undefined): QueueConfig {
  if (value === undefined) return DEFAULT_QUEUE_CONFIG;
  try {
    return withConfigDefaults(JSON.parse(value.toString('utf8')) as Partial<QueueConfig>);
  } catch {
    throw new StoreLayoutError(`${keys.config} is not a kvmq configuration; delete it or fix its JSON`);
  }
}

export async function readConfig(kv: Kv, keys: QueueKeys): Promise<QueueConfig> {
  const res = await kv.range({ key: keys.config });
  return decodeConfig(keys, res.kvs[0]?.value);
}

/** Merges the patch into the stored configuration; `created` when there was none, `revision` of the write. */
export async function writeConfig(
  kv: Kv,
  keys: QueueKeys,
  patch: Partial<QueueConfig>,
): Promise<{ config: QueueConfig; created: boolean; revision: number }> {
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const res = await kv.range({ key: keys.config });
    const current = res.kvs[0];
    const config = applyConfigPatch(decodeConfig(keys, current?.value), patch);
    const written = await kv.txn({
      compare: [unchangedSince(keys.config, current)],
      success: [
        { type: 'put', key: keys.config, value: Buffer.from(JSON.stringify(config), 'utf8') },
        registerOp(keys),
        // A dead-letter queue is listed once named: messages may move there in Txns that could not register it.
        ...(config.deadLetterQueue === null ? [] : [registerOp(new QueueKeys(keys.root, config.deadLetterQueue))]),
      ],
    });
    if (written.succeeded) {
      const created = current === undefined && !(await queueExists(kv, keys, res.revision));
      return { config, created, revision: written.revision };
    }
  }
  throw new Error(`kvmq: configuring ${keys.queue} kept conflicting with other writers; try again`);
}

/**
 * Whether the queue had any key (messages, consumers, producer keys) at `revision`: a queue that has
 * been used exists even before anyone configured it. Read only when the configuration is first written.
 */
async function queueExists(kv: Kv, keys: QueueKeys, revision: number): Promise<boolean> {
  const res = await kv.txn({
    compare: [],
    success: [keys.prefix, keys.shortPrefix].map((p) => ({
      type: 'range' as const,
      key: p,
      end: prefixEnd(p),
      limit: 1,
      keysOnly: true,
      revision,
    })),
  });
  return res.responses.some((r) => r.type === 'range' && r.kvs.length > 0);
}

export interface Eoq {
  readonly dryRuns: number;
  readonly until: number;
  /** Mod revision of the key, 0 when absent. */
  readonly rev: number;
}

export function decodeEoq(value: Buffer | undefined, rev: number): Eoq {
  if (value === undefined) return { dryRuns: 0, until: 0, rev: 0 };
  try {
    const raw = JSON.parse(value.toString('utf8')) as { dryRuns?: unknown; until?: unknown };
    return {
      dryRuns: typeof raw.dryRuns === 'number' ? raw.dryRuns : 0,
      until: typeof raw.until === 'number' ? raw.until : 0,
      rev,
    };
  } catch {
    return { dryRuns: 0, until: 0, rev };
  }
}

export async function readEoq(kv: Kv, keys: QueueKeys): Promise<Eoq> {
  const res = await kv.range({ key: keys.eoq });
  const item = res.kvs[0];
  return decodeEoq(item?.value, item?.modRevision ?? 0);
}

/**
 * Counts a dry run if the queue-wide backoff has ended (else another worker
 * counted it already) and starts the next backoff. Returns the state after.
 */
export async function countDryRun(kv: Kv, keys: QueueKeys, eoqBackoffMs: (n: number) => number): Promise<Eoq> {
  let eoq = await readEoq(kv, keys);
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const now = Date.now();
    if (eoq.until > now) return eoq;
    const dryRuns = eoq.dryRuns + 1;
    const until = now + eoqBackoffMs(dryRuns);
    const res = await kv.txn({
      compare: [{ key: keys.eoq, target: 'mod', result: '=', operand: eoq.rev }],
      success: [{ type: 'put', key: keys.eoq, value: Buffer.from(JSON.stringify({ dryRuns, until }), 'utf8') }],
      failure: [{ type: 'range', key: keys.eoq }],
    });
    if (res.succeeded) return { dryRuns, until, rev: res.revision };
    const read = res.responses[0];
    const item = read?.type === 'range' ? read.kvs[0] : undefined;
    eoq = decodeEoq(item?.value, item?.modRevision ?? 0);
  }
  return eoq;
}

/** A claim took messages: the dry runs start again from 0. */
export async function resetDryRuns(kv: Kv, keys: QueueKeys): Promise<void> {
  await kv.txn({
    compare: [],
    success: [{ type: 'put', key: keys.eoq, value: Buffer.from(JSON.stringify({ dryRuns: 0, until: 0 }), 'utf8') }],
  });
}
