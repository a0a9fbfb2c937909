/**
 * How message fields are stored: `messages` holds one encoding tag byte then
 * the payload bytes; `outcomes` holds the outcome, then a newline and the last
 * error when there was one. Replies of the scripts arrive as Buffers.
 */
import { StoreLayoutError } from '../../model/errors.js';
import type { PayloadEncoding } from '../../model/payload.js';
import { parseFilterClass } from '../../model/filters.js';
import type { StoredContent } from '../contract/contract.js';
import type { Metadata, Outcome } from '../../model/types.js';

const JSON_TAG = 0x4a; // 'J'
const BYTES_TAG = 0x42; // 'B'

/**
 * JSON content goes as a string: a command whose arguments are all strings
 * is encoded by ioredis in one pass, about twice as fast as one with Buffers.
 */
export function encodeContent(payload: Uint8Array, encoding: PayloadEncoding): string | Buffer {
  if (encoding === 'json') {
    return 'J' + Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('utf8');
  }
  const content = Buffer.allocUnsafe(payload.byteLength + 1);
  content[0] = BYTES_TAG;
  content.set(payload, 1);
  return content;
}

export function decodeContent(content: Buffer, where: string): { payload: Buffer; encoding: PayloadEncoding } {
  const tag = content[0];
  if (tag !== JSON_TAG && tag !== BYTES_TAG) {
    throw new StoreLayoutError(`${where}: a message's content was not written by kvmq (no encoding tag)`);
  }
  return { payload: content.subarray(1), encoding: tag === JSON_TAG ? 'json' : 'bytes' };
}

const OUTCOMES: ReadonlySet<string> = new Set<Outcome>(['success', 'error', 'retry']);

export function decodeOutcome(stored: string | null): { outcome: Outcome | null; lastError: string | null } {
  if (stored === null) return { outcome: null, lastError: null };
  const newline = stored.indexOf('\n');
  const outcome = newline < 0 ? stored : stored.slice(0, newline);
  return {
    outcome: OUTCOMES.has(outcome) ? (outcome as Outcome) : null,
    lastError: newline < 0 ? null : stored.slice(newline + 1),
  };
}

/** A reply element as text (null stays null). */
export function text(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  throw new Error(`unexpected reply element from a kvmq script: ${typeof value}`);
}

/** The reply element is the text `ok`: compared as bytes, without decoding a string per message. */
export function isOk(value: unknown): boolean {
  if (Buffer.isBuffer(value)) return value.length === 2 && value[0] === 0x6f && value[1] === 0x6b;
  return text(value) === 'ok';
}

export function num(value: unknown): number {
  return typeof value === 'number' ? value : Number(text(value));
}

export function list(value: unknown): unknown[] {
  if (!Array.isArray(value)) throw new Error(`unexpected reply from a kvmq script: ${String(value)}`);
  return value;
}

/** A message's content from its `messages`, `metadata` and `filters` fields as a script replies them. */
export function storedContent(content: unknown, metadata: unknown, filterClass: unknown, where: string): StoredContent {
  const meta = text(metadata);
  const { payload, encoding } = decodeContent(content as Buffer, where);
  return {
    payload,
    encoding,
    metadata: meta === null ? {} : (JSON.parse(meta) as Metadata),
    filters: parseFilterClass(text(filterClass) ?? ''),
  };
}
