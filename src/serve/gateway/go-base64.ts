/**
 * Base64 as etcd's gateway reads bytes fields: the standard alphabet with its padding, line breaks
 * ignored, and Go's error for anything else ("illegal base64 data at input byte 2"), which names the
 * offset Go's decoder stops at.
 */

const ALPHABET = /[A-Za-z0-9+/]/;

export class Base64Error extends Error {
  constructor(offset: number) {
    super(`illegal base64 data at input byte ${offset}`);
    this.name = 'Base64Error';
  }
}

/** Where Go's base64.StdEncoding would fail on `text`, or -1 when it decodes. */
function corruptAt(text: string): number {
  let at = 0;
  for (;;) {
    for (let j = 0; j < 4; j++) {
      if (at === text.length) {
        if (j === 0) return -1;
        return at - j;
      }
      const char = text[at] ?? '';
      at++;
      if (ALPHABET.test(char)) continue;
      if (char === '\n' || char === '\r') {
        j--;
        continue;
      }
      if (char !== '=') return at - 1;
      // Padding: only in the last two places of a quantum, and nothing but line breaks after it.
      if (j < 2) return at - 1;
      if (j === 2) {
        while (text[at] === '\n' || text[at] === '\r') at++;
        if (at === text.length) return text.length;
        if (text[at] !== '=') return at - 1;
        at++;
      }
      while (text[at] === '\n' || text[at] === '\r') at++;
      return at < text.length ? at : -1;
    }
  }
}

export function decodeGoBase64(text: string): Buffer {
  const offset = corruptAt(text);
  if (offset >= 0) throw new Base64Error(offset);
  return Buffer.from(text.replace(/[\r\n]/g, ''), 'base64');
}
