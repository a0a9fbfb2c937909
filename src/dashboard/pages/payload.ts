/**
 * A payload as the message page shows it: text whichever way it was enqueued (a JSON value, or the bytes
 * of `kvmq enqueue`, curl through the JSON gateway or etcdctl put), JSON laid out where it parses, and a
 * hex dump only for bytes that are not text.
 */
import { isPrintable, printableText } from '../../model/payload.js';
import { counted } from './format.js';
import { layoutJson } from './json-layout.js';

/** Bytes shown of a binary payload; the rest is counted, not shown. */
const HEX_BYTES_SHOWN = 4096;

export interface PayloadView {
  /** How it is shown: `JSON`, `text`, and for bytes their size first (`12 bytes, text`). */
  readonly kind: string;
  readonly text: string;
}

export function payloadView(payload: unknown): PayloadView {
  if (payload instanceof Uint8Array) {
    const size = counted(payload.byteLength, 'byte');
    const text = printableText(payload);
    if (text === null) return { kind: `${size}, binary`, text: hexDump(payload) };
    const view = textView(text);
    return { kind: `${size}, ${view.kind}`, text: view.text };
  }
  if (typeof payload === 'string' && isPrintable(payload)) return textView(payload);
  return { kind: 'JSON', text: JSON.stringify(payload, null, 2) };
}

function textView(text: string): PayloadView {
  const laidOut = layoutJson(text);
  return laidOut === null ? { kind: 'text', text } : { kind: 'JSON', text: laidOut };
}

/** Offset, 16 bytes, their printable ASCII. */
function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  const shown = bytes.subarray(0, HEX_BYTES_SHOWN);
  for (let offset = 0; offset < shown.length; offset += 16) {
    const row = shown.subarray(offset, offset + 16);
    const hex = [...row].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = [...row].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.byteLength > shown.length) lines.push(`… ${counted(bytes.byteLength - shown.length, 'more byte')}`);
  return lines.join('\n');
}
