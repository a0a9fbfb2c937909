/** JSON laid out for reading, without changing a token of it. */

/**
 * `text` laid out with two-space indents when it is JSON, or null. Only whitespace changes: numbers keep
 * their digits (a 20-digit id stays exact, `1.0` stays `1.0`) and strings their escapes, which a
 * JSON.parse and JSON.stringify round trip would not promise.
 */
export function layoutJson(text: string): string | null {
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  let out = '';
  let depth = 0;
  let inString = false;
  let escaped = false;
  const newline = (): string => `\n${'  '.repeat(depth)}`;
  for (let at = 0; at < text.length; at++) {
    const c = text.charAt(at);
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      const next = nextToken(text, at + 1);
      if (text.charAt(next) === close) {
        out += c + close;
        at = next;
      } else {
        depth++;
        out += c + newline();
      }
    } else if (c === '}' || c === ']') {
      depth--;
      out += newline() + c;
    } else if (c === ',') out += `,${newline()}`;
    else if (c === ':') out += ': ';
    else if (!isJsonSpace(c)) out += c;
  }
  return out;
}

function nextToken(text: string, from: number): number {
  let at = from;
  while (at < text.length && isJsonSpace(text.charAt(at))) at++;
  return at;
}

/** The four characters JSON allows between tokens. */
function isJsonSpace(c: string): boolean {
  return c === ' ' || c === '\t' || c === '\n' || c === '\r';
}
