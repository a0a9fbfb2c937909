/** Reading payloads as raw bytes: the whole of stdin, or one message per line. */

/** Every byte of the stream, unchanged. */
export async function readAll(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of source) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/**
 * The lines of a byte stream, without their '\n' (or '\r\n'), split on bytes
 * so that no text decoding alters a payload. `onRead` sees each chunk's size,
 * for progress.
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
  }
  if (rest.length > 0) yield withoutCr(rest, 0, rest.length);
}

/** A copy of buffer[start, end), minus a trailing '\r'. */
function withoutCr(buffer: Buffer, start: number, end: number): Buffer {
  const last = end > start && buffer[end - 1] === 13 ? end - 1 : end;
  return Buffer.from(buffer.subarray(start, last));
}
