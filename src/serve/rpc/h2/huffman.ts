/**
 * HPACK's Huffman code (RFC 7541, Appendix B), decoding only: the server
 * reads Huffman-coded header strings but writes its own headers as plain
 * literals. The code is canonical, so the bit length of each symbol's code
 * (symbols 0-255 and EOS, 256) defines it completely.
 */

// prettier-ignore
const LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
  28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5,
  6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
  23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23,
  21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22,
  23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20,
  21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const MAX_LENGTH = 30;
const EOS = 256;

/** Canonical decoding tables: per code length, the first code, and the symbols of that length in order. */
const firstCode = new Array<number>(MAX_LENGTH + 2).fill(0);
const firstIndex = new Array<number>(MAX_LENGTH + 2).fill(0);
const counts = new Array<number>(MAX_LENGTH + 2).fill(0);
const symbols: number[] = [];
{
  for (const length of LENGTHS) counts[length] = (counts[length] ?? 0) + 1;
  for (let length = 1; length <= MAX_LENGTH; length++) {
    for (let symbol = 0; symbol < LENGTHS.length; symbol++) if (LENGTHS[symbol] === length) symbols.push(symbol);
  }
  let code = 0;
  let index = 0;
  for (let length = 1; length <= MAX_LENGTH; length++) {
    firstCode[length] = code;
    firstIndex[length] = index;
    const n = counts[length] ?? 0;
    code = (code + n) << 1;
    index += n;
  }
}

export class HuffmanError extends Error {}

/** Decodes a Huffman-coded string (as latin1, one char per byte). */
export function huffmanDecode(data: Uint8Array): string {
  const out: number[] = [];
  let code = 0;
  let length = 0;
  for (let i = 0; i < data.length; i++) {
    const byte = data[i] as number;
    for (let bit = 7; bit >= 0; bit--) {
      code = (code << 1) | ((byte >> bit) & 1);
      length++;
      const offset = code - (firstCode[length] as number);
      if (offset >= 0 && offset < (counts[length] as number)) {
        const symbol = symbols[(firstIndex[length] as number) + offset] as number;
        if (symbol === EOS) throw new HuffmanError('Huffman-coded string contains EOS');
        out.push(symbol);
        code = 0;
        length = 0;
      } else if (length >= MAX_LENGTH) throw new HuffmanError('invalid Huffman code');
    }
  }
  // What is left must be padding: fewer than 8 bits, all ones (a prefix of EOS).
  if (length > 7 || code !== (1 << length) - 1) throw new HuffmanError('invalid Huffman padding');
  return Buffer.from(out).toString('latin1');
}
