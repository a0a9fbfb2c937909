/**
 * HPACK (RFC 7541): a decoder with the dynamic table a peer's encoder relies
 * on, and the few constant header blocks the server sends, written as
 * literals that never touch the peer's table.
 */
import { huffmanDecode } from './huffman.js';

export class HpackError extends Error {}

// RFC 7541 Appendix A.
const STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/** An entry's size in the dynamic table: its octets plus 32 (RFC 7541 §4.1). */
function entrySize(name: string, value: string): number {
  return name.length + value.length + 32;
}

export class HpackDecoder {
  /** Newest first. */
  private readonly table: [string, string][] = [];
  private size = 0;
  private maxSize: number;

  /** `limit` is the table size the server allows the peer (its SETTINGS_HEADER_TABLE_SIZE). */
  constructor(private readonly limit = 4096) {
    this.maxSize = limit;
  }

  private evict(): void {
    while (this.size > this.maxSize) {
      const last = this.table.pop();
      if (last === undefined) break;
      this.size -= entrySize(last[0], last[1]);
    }
  }

  private entry(index: number): readonly [string, string] {
    if (index <= 0) throw new HpackError('header index 0');
    if (index <= STATIC.length) return STATIC[index - 1] as readonly [string, string];
    const dynamic = this.table[index - STATIC.length - 1];
    if (dynamic === undefined) throw new HpackError(`header index ${index} is not in the table`);
    return dynamic;
  }

  /** Decodes one header block; `onHeader` sees each field in order. */
  decode(block: Buffer, onHeader: (name: string, value: string) => void): void {
    let pos = 0;
    const integer = (prefixBits: number): number => {
      const max = (1 << prefixBits) - 1;
      let value = (block[pos++] as number) & max;
      if (value < max) return value;
      let shift = 0;
      for (;;) {
        if (pos >= block.length) throw new HpackError('truncated integer');
        const byte = block[pos++] as number;
        value += (byte & 0x7f) * 2 ** shift;
        shift += 7;
        if (byte < 0x80) break;
        if (shift > 28) throw new HpackError('integer too large');
      }
      return value;
    };
    const string = (): string => {
      if (pos >= block.length) throw new HpackError('truncated string');
      const huffman = ((block[pos] as number) & 0x80) !== 0;
      const length = integer(7);
      const end = pos + length;
      if (end > block.length) throw new HpackError('truncated string');
      const bytes = block.subarray(pos, end);
      pos = end;
      return huffman ? huffmanDecode(bytes) : bytes.toString('latin1');
    };
    while (pos < block.length) {
      const byte = block[pos] as number;
      if (byte & 0x80) {
        const [name, value] = this.entry(integer(7));
        onHeader(name, value);
      } else if (byte & 0x40) {
        const index = integer(6);
        const name = index === 0 ? string() : this.entry(index)[0];
        const value = string();
        this.table.unshift([name, value]);
        this.size += entrySize(name, value);
        this.evict();
        onHeader(name, value);
      } else if (byte & 0x20) {
        const size = integer(5);
        if (size > this.limit) throw new HpackError(`table size ${size} over the limit ${this.limit}`);
        this.maxSize = size;
        this.evict();
      } else {
        // Literal without indexing (0000) or never indexed (0001): 4-bit prefix.
        const index = integer(4);
        const name = index === 0 ? string() : this.entry(index)[0];
        onHeader(name, string());
      }
    }
  }
}

function literalInteger(value: number, prefixBits: number, first: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let rest = value - max;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  out.push(rest);
  return out;
}

function literalString(text: string): number[] {
  const bytes = Buffer.from(text, 'latin1');
  return [...literalInteger(bytes.length, 7, 0), ...bytes];
}

/** A header field as a literal without indexing, with the name from the static table when it is there. */
function field(name: string, value: string): number[] {
  const index = STATIC.findIndex(([n]) => n === name) + 1;
  const head = index > 0 ? literalInteger(index, 4, 0) : [0, ...literalString(name)];
  return [...head, ...literalString(value)];
}

/** Encodes response headers: `:status` indexed, the rest literal (no state shared with the peer). */
export function encodeHeaders(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) {
    if (name === ':status' && value === '200') out.push(0x88);
    else out.push(...field(name, value));
  }
  return Buffer.from(out);
}
