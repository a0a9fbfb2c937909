/**
 * A consumer's registration value, `/queue/{q}/consumer/{client}`: plain text
 * (its host, as the etcds seed has it) or a JSON object. The dispatcher reads
 * from it what the consumer takes: how many deliveries at once (capacity),
 * which filter classes, and, for kvmq's own consumers, lock times, envelopes
 * and the request (`ask`) it answers.
 */
import { checkWorkerFilters, type WorkerFilter } from '../../model/filters.js';

/** A plain consumer (text registration, or JSON without capacity) holds this many deliveries at once. */
export const PLAIN_CAPACITY = 1;
const MAX_CAPACITY = 100_000;

export interface Registration {
  /** Written by kvmq's own consumer. */
  readonly kvmq: boolean;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  /** Order of start within one process (startedAt has only millisecond precision). */
  readonly seq: number;
  readonly seenAt: number;
  /** Deliveries it holds at most at once. */
  readonly capacity: number;
  /** Each delivery is locked this long (renewed by extends); null: held as long as the registration lives. */
  readonly lockMs: number | null;
  /** Accepted filter pairs `name=value` (kvmq's consumers); null: no list. */
  readonly accepts: readonly string[] | null;
  /** zkmq filters for plain JSON consumers, e.g. {"performance_class":{"value":"high","method":"at_least"}}. */
  readonly filters: Readonly<Record<string, Required<WorkerFilter>>> | null;
  /** Deliveries carry kvmq's envelope (record + payload) instead of the bare payload. */
  readonly envelope: boolean;
  /** A request number the dispatcher answers at `{registration}/answer` once it has served it. */
  readonly ask: number;
  /** Why the registration was not understood, if it was not: such a consumer gets nothing. */
  readonly invalid: string | null;
}

export function parseRegistration(value: Buffer): Registration {
  const text = value.toString('utf8');
  const plain: Registration = {
    kvmq: false,
    host: text,
    pid: 0,
    startedAt: 0,
    seq: 0,
    seenAt: 0,
    capacity: PLAIN_CAPACITY,
    lockMs: null,
    accepts: null,
    filters: null,
    envelope: false,
    ask: 0,
    invalid: null,
  };
  if (!text.trimStart().startsWith('{')) return plain;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return plain;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return plain;
  const r = raw as Record<string, unknown>;
  const int = (v: unknown, fallback: number, min: number, max: number): number =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : fallback;
  let filters: Registration['filters'] = null;
  let invalid: string | null = null;
  if (r.filters !== undefined) {
    try {
      filters = checkWorkerFilters(r.filters);
    } catch (error) {
      invalid = `its filters are invalid: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  const accepts = Array.isArray(r.accepts) && r.accepts.every((a) => typeof a === 'string') ? r.accepts : null;
  return {
    kvmq: r.kvmq === 1,
    host: typeof r.host === 'string' ? r.host : '',
    pid: int(r.pid, 0, 0, Number.MAX_SAFE_INTEGER),
    startedAt: int(r.startedAt, 0, 0, Number.MAX_SAFE_INTEGER),
    seq: int(r.seq, 0, 0, Number.MAX_SAFE_INTEGER),
    seenAt: int(r.seenAt, 0, 0, Number.MAX_SAFE_INTEGER),
    capacity: int(r.capacity, PLAIN_CAPACITY, 0, MAX_CAPACITY),
    lockMs: typeof r.lockMs === 'number' && Number.isInteger(r.lockMs) && r.lockMs > 0 ? r.lockMs : null,
    accepts,
    filters,
    envelope: r.envelope === true,
    ask: int(r.ask, 0, 0, Number.MAX_SAFE_INTEGER),
    invalid,
  };
}

export interface KvmqRegistration {
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly seq: number;
  readonly seenAt: number;
  readonly capacity: number;
  readonly lockMs: number;
  readonly accepts: readonly string[] | null;
  readonly ask: number;
}

export function encodeKvmqRegistration(r: KvmqRegistration): Buffer {
  return Buffer.from(JSON.stringify({ kvmq: 1, envelope: true, ...r }), 'utf8');
}

/** Whether a class is accepted under a list of accepted `name=value` pairs: every pair of the class must be. */
export function acceptedByPairs(pairs: ReadonlySet<string>, filterClass: string): boolean {
  if (filterClass === '') return true;
  for (const pair of filterClass.split('&')) if (!pairs.has(pair)) return false;
  return true;
}
