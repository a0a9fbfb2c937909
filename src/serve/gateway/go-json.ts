/**
 * A JSON reader that fails the way etcd's gateway does: etcd decodes request bodies with Go's
 * encoding/json, and its error texts reach the client ("invalid character 'b' looking for beginning of
 * object key string"). Numbers keep their literal text, since int64 fields need every digit.
 */

export type JsonNode =
  | { readonly kind: 'object'; readonly fields: ReadonlyMap<string, JsonNode> }
  | { readonly kind: 'array'; readonly items: readonly JsonNode[] }
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'number'; readonly literal: string }
  | { readonly kind: 'bool'; readonly value: boolean }
  | { readonly kind: 'null' };

/** Input that is not JSON; `eof` when it stopped short rather than at a wrong character. */
export class JsonSyntaxError extends Error {
  constructor(
    message: string,
    readonly eof: boolean,
  ) {
    super(message);
    this.name = 'JsonSyntaxError';
  }
}

/** Go's nesting limit for encoding/json. */
const MAX_DEPTH = 10_000;
// Deeper than this would overflow the JS stack first; no etcd request nests more than a few levels.
const DEPTH_LIMIT = Math.min(MAX_DEPTH, 500);

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

/** How Go quotes a character in a syntax error: 'x', '\'', '"', '\n'. */
function quoteChar(char: string): string {
  if (char === "'") return `'\\''`;
  if (char === '"') return `'"'`;
  const quoted = JSON.stringify(char);
  return `'${quoted.slice(1, -1)}'`;
}

class Reader {
  pos: number;

  constructor(
    readonly text: string,
    start: number,
  ) {
    this.pos = start;
  }

  fail(context: string): never {
    if (this.pos >= this.text.length) throw new JsonSyntaxError('unexpected EOF', true);
    const char = String.fromCodePoint(this.text.codePointAt(this.pos) ?? 0);
    throw new JsonSyntaxError(`invalid character ${quoteChar(char)} ${context}`, false);
  }

  skipSpace(): void {
    while (this.pos < this.text.length && WHITESPACE.has(this.text[this.pos] ?? '')) this.pos++;
  }

  value(depth: number): JsonNode {
    this.skipSpace();
    const char = this.text[this.pos];
    if (char === '{') return this.object(depth + 1);
    if (char === '[') return this.array(depth + 1);
    if (char === '"') return { kind: 'string', value: this.string() };
    if (char === '-' || (char !== undefined && char >= '0' && char <= '9')) return this.number();
    if (char === 't') return this.literal('true', { kind: 'bool', value: true });
    if (char === 'f') return this.literal('false', { kind: 'bool', value: false });
    if (char === 'n') return this.literal('null', { kind: 'null' });
    return this.fail('looking for beginning of value');
  }

  private nest(depth: number): void {
    if (depth > DEPTH_LIMIT) throw new JsonSyntaxError('exceeded max depth', false);
  }

  private object(depth: number): JsonNode {
    this.nest(depth);
    this.pos++;
    const fields = new Map<string, JsonNode>();
    this.skipSpace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return { kind: 'object', fields };
    }
    for (;;) {
      this.skipSpace();
      if (this.text[this.pos] !== '"') this.fail('looking for beginning of object key string');
      const key = this.string();
      this.skipSpace();
      if (this.text[this.pos] !== ':') this.fail('after object key');
      this.pos++;
      fields.set(key, this.value(depth));
      this.skipSpace();
      const next = this.text[this.pos];
      this.pos++;
      if (next === '}') return { kind: 'object', fields };
      if (next !== ',') {
        this.pos--;
        this.fail('after object key:value pair');
      }
    }
  }

  private array(depth: number): JsonNode {
    this.nest(depth);
    this.pos++;
    const items: JsonNode[] = [];
    this.skipSpace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return { kind: 'array', items };
    }
    for (;;) {
      items.push(this.value(depth));
      this.skipSpace();
      const next = this.text[this.pos];
      this.pos++;
      if (next === ']') return { kind: 'array', items };
      if (next !== ',') {
        this.pos--;
        this.fail('after array element');
      }
    }
  }

  private string(): string {
    const start = this.pos;
    this.pos++;
    for (;;) {
      const char = this.text[this.pos];
      if (char === undefined) this.fail('in string literal');
      if (char === '"') break;
      if (char < ' ') this.fail('in string literal');
      if (char === '\\') {
        this.pos++;
        const escape = this.text[this.pos];
        if (escape === 'u') {
          for (let i = 0; i < 4; i++) {
            this.pos++;
            if (!/[0-9a-fA-F]/.test(this.text[this.pos] ?? '')) this.fail('in \\u hexadecimal character escape');
          }
        } else if (escape === undefined || !'"\\/bfnrt'.includes(escape)) {
          this.fail('in string escape code');
        }
      }
      this.pos++;
    }
    this.pos++;
    return JSON.parse(this.text.slice(start, this.pos)) as string;
  }

  private digits(): number {
    const start = this.pos;
    while (/[0-9]/.test(this.text[this.pos] ?? '')) this.pos++;
    return this.pos - start;
  }

  private number(): JsonNode {
    const start = this.pos;
    if (this.text[this.pos] === '-') {
      this.pos++;
      if (!/[0-9]/.test(this.text[this.pos] ?? '')) this.fail('in numeric literal');
    }
    if (this.text[this.pos] === '0') this.pos++;
    else this.digits();
    if (this.text[this.pos] === '.') {
      this.pos++;
      if (this.digits() === 0) this.fail('after decimal point in numeric literal');
    }
    if (this.text[this.pos] === 'e' || this.text[this.pos] === 'E') {
      this.pos++;
      if (this.text[this.pos] === '+' || this.text[this.pos] === '-') this.pos++;
      if (this.digits() === 0) this.fail('in exponent of numeric literal');
    }
    return { kind: 'number', literal: this.text.slice(start, this.pos) };
  }

  private literal(word: string, node: JsonNode): JsonNode {
    for (let i = 0; i < word.length; i++) {
      if (this.text[this.pos] !== word[i]) this.fail(`in literal ${word} (expecting ${quoteChar(word[i] ?? '')})`);
      this.pos++;
    }
    return node;
  }
}

/**
 * The JSON value starting at `start` (after whitespace) and where it ends; what follows it is not read,
 * as Go's json.Decoder reads one value of a stream at a time. Null when only whitespace is left.
 */
export function readJsonValue(text: string, start = 0): { node: JsonNode; end: number } | null {
  const reader = new Reader(text, start);
  reader.skipSpace();
  if (reader.pos >= text.length) return null;
  const node = reader.value(0);
  return { node, end: reader.pos };
}

/** A whole text as one JSON value, failing as Go's json.Unmarshal does. */
export function parseJson(text: string): JsonNode {
  try {
    const read = readJsonValue(text);
    if (read === null) throw new JsonSyntaxError('unexpected end of JSON input', true);
    const reader = new Reader(text, read.end);
    reader.skipSpace();
    if (reader.pos < text.length) reader.fail('after top-level value');
    return read.node;
  } catch (error) {
    if (error instanceof JsonSyntaxError && error.eof) throw new JsonSyntaxError('unexpected end of JSON input', true);
    throw error;
  }
}
