/** A JSON document given to a command (a file or stdin), its mistakes told with the line and column. */
import { createReadStream } from 'node:fs';
import { InputTooLargeError, UsageError } from './errors.js';
import { readAll } from './input.js';

/** The most bytes of a JSON document read: 64 MiB, far more than a flow of 10,000 small messages takes. */
export const JSON_INPUT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The text of `file` ('-' = stdin); `undefined` reads stdin when it is a pipe or a file, not a terminal. A file
 * that cannot be read is a usage mistake, said in one line; more than JSON_INPUT_MAX_BYTES an InputTooLargeError.
 */
export async function readJsonInput(file: string | undefined, what: string): Promise<{ source: string; text: string }> {
  if (file === undefined && process.stdin.isTTY) {
    throw new UsageError(`missing argument: give ${what} as a file, or '-' (or a pipe) for stdin`);
  }
  const source = file === undefined || file === '-' ? 'stdin' : file;
  try {
    const stream = source === 'stdin' ? process.stdin : createReadStream(source);
    return { source, text: (await readAll(stream, source, JSON_INPUT_MAX_BYTES)).toString() };
  } catch (error) {
    if (error instanceof InputTooLargeError || source === 'stdin') throw error;
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory' : (error as Error).message;
    throw new UsageError(`cannot read ${file}: ${reason}`);
  }
}

/** The parsed document; bad JSON is a UsageError naming `source` and the line and column JSON.parse stopped at. */
export function parseJsonText(source: string, text: string): unknown {
  // A byte order mark is no JSON, but an editor may write one.
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  try {
    return JSON.parse(body);
  } catch (error) {
    const { reason, position } = parseFailure(body, (error as Error).message);
    const where = position === null ? '' : ` at ${lineAndColumn(body, position)}`;
    throw new UsageError(`${source} is not valid JSON: ${reason}${where}`);
  }
}

/**
 * What JSON.parse said, without the text it quotes, and where: its position when it gives one, the end for a
 * document cut short, else (an unexpected token, said with a quote of the text around it) found again.
 */
function parseFailure(text: string, message: string): { reason: string; position: number | null } {
  const plain = message.replace(/ \(line \d+ column \d+\)$/, '');
  const at = /^(.*?)(?: in JSON)? at position (\d+)$/s.exec(plain);
  if (at !== null) return { reason: at[1] ?? plain, position: Number(at[2]) };
  if (/end of JSON input/.test(plain)) return { reason: plain, position: text.length };
  const token = /^(Unexpected token .*?), .* is not valid JSON$/s.exec(plain);
  return { reason: token?.[1] ?? plain, position: token === null ? null : failingPosition(text) };
}

/**
 * The index of the first character JSON.parse refuses: the shortest prefix that fails before its own end ends
 * just after it. Every shorter prefix is the start of some document, so this holds for each longer one.
 */
function failingPosition(text: string): number {
  let low = 1;
  let high = text.length;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (failsWithin(text.slice(0, middle))) high = middle;
    else low = middle + 1;
  }
  return low - 1;
}

function failsWithin(prefix: string): boolean {
  try {
    JSON.parse(prefix);
    return false;
  } catch (error) {
    const message = (error as Error).message;
    if (/end of JSON input/.test(message)) return false;
    const at = / at position (\d+)/.exec(message);
    return at === null || Number(at[1]) < prefix.length;
  }
}

/** 'line L column C' (both from 1) of a position in the text. */
function lineAndColumn(text: string, position: number): string {
  const before = text.slice(0, position);
  const line = before.split('\n').length;
  const column = position - before.lastIndexOf('\n');
  return `line ${line} column ${column}`;
}
