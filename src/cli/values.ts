/** How a message's values (payload, result) print: as text in tables and lines, and inside JSON output. */
import { printableText } from '../model/payload.js';

/** JSON as JSON; bytes as text when they are printable UTF-8 (what `kvmq enqueue` stores), else base64. */
export function valueText(value: unknown): string {
  if (!(value instanceof Uint8Array)) return JSON.stringify(value);
  const bytes = Buffer.from(value);
  const text = printableText(bytes);
  return `${bytes.length} bytes: ${text === null ? `base64 ${bytes.toString('base64')}` : JSON.stringify(text)}`;
}

/** Bytes (a payload, a result) as base64: JSON.stringify would spell a Buffer out byte by byte. */
export function jsonOf<T extends { payload?: unknown; result?: unknown }>(m: T): T {
  const bytesIn = (value: unknown): value is Uint8Array => value instanceof Uint8Array;
  if (!bytesIn(m.payload) && !bytesIn(m.result)) return m;
  const base64 = (value: Uint8Array): { base64: string } => ({ base64: Buffer.from(value).toString('base64') });
  return {
    ...m,
    ...(bytesIn(m.payload) ? { payload: base64(m.payload) } : {}),
    ...(bytesIn(m.result) ? { result: base64(m.result) } : {}),
  };
}
