/** Reading payloads as raw bytes: the whole of stdin, or one message per line, each read to a bound. */
import { InputTooLargeError } from './errors.js';

/**
 * The most bytes read for one payload: four times the largest any store takes (1 MiB on each), so a payload a
 * little over a store's limit still gets the store's exact refusal, and a stream without end is not read for
 * ever.
 */
export const PAYLOAD_INPUT_MAX_BYTES = 4 * 1024 * 1024;

/** Every byte of the stream, unchanged; more than `maxBytes` stops the reading with an InputTooLargeError. */
export async function readAll(
  source: AsyncIterable<Buffer>,
  what = 'stdin',
  maxBytes = PAYLOAD_INPUT_MAX_BYTES,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of source) {
    bytes += chunk.length;
    if (bytes > maxBytes) throw new InputTooLargeError(`${what} is over ${maxBytes} bytes: ${tooMuch(maxBytes)}`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function tooMuch(maxBytes: number): string {
  return maxBytes === PAYLOAD_INPUT_MAX_BYTES
    ? 'far over the 1 MiB payload limit of every store; store large data elsewhere and enqueue a reference to it'
    : 'more than this command reads';
}

/**
 * The lines of a byte stream, without their '\n' (or '\r\n'), split on bytes
 * so that no text decoding alters a payload. `onRead` sees each chunk's size,
 * for progress. A line longer than PAYLOAD_INPUT_MAX_BYTES stops the reading
 * with an InputTooLargeError.
 */
export async function* readLines(
  source: AsyncIterable<Buffer>,
  onRead: (bytes: number) => void = () => undefined,
): AsyncGenerator<Buffer> {
  let rest = Buffer.alloc(0);
  for await (const chunk of source) {
    onRead(chunk.length);
    const buffer = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
    let start = 0;
    for (let end = buffer.indexOf(10, start); end >= 0; end = buffer.indexOf(10, start)) {
      yield withoutCr(buffer, start, end);
      start = end + 1;
    }
    // A copy: the stream may reuse the chunk's memory.
    rest = Buffer.from(buffer.subarray(start));
    if (rest.length > PAYLOAD_INPUT_MAX_BYTES) {
      throw new InputTooLargeError(
        `a line is over ${PAYLOAD_INPUT_MAX_BYTES} bytes: ${tooMuch(PAYLOAD_INPUT_MAX_BYTES)}`,
      );
    }
  }
  if (rest.length > 0) yield withoutCr(rest, 0, rest.length);
}

/** A copy of buffer[start, end), minus a trailing '\r'. */
function withoutCr(buffer: Buffer, start: number, end: number): Buffer {
  const last = end > start && buffer[end - 1] === 13 ? end - 1 : end;
  return Buffer.from(buffer.subarray(start, last));
}
