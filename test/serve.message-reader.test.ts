/**
 * The transport's gRPC message reassembly on its own: messages split anywhere (down to one byte per
 * chunk), several in one chunk, and a message declared too large refused on its prefix.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MessageReader } from '../src/serve/rpc/http2/message-reader.js';

function framed(payload: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(payload.length, 1);
  return Buffer.concat([prefix, payload]);
}

function read(reader: MessageReader, chunks: Buffer[]): { messages: string[]; error: string | null } {
  const messages: string[] = [];
  const target = { onMessage: (m: Buffer) => messages.push(m.toString()) };
  for (const chunk of chunks) {
    const error = reader.push(chunk, target);
    if (error !== null) return { messages, error: `${error.code} ${error.message}` };
  }
  return { messages, error: null };
}

describe('gRPC message reassembly', () => {
  const stream = Buffer.concat([
    framed(Buffer.from('first')),
    framed(Buffer.alloc(0)),
    framed(Buffer.from('x'.repeat(300))),
  ]);
  const expected = ['first', '', 'x'.repeat(300)];

  test('whole, split at every offset, and one byte at a time', () => {
    assert.deepEqual(read(new MessageReader(1000), [stream]).messages, expected);
    for (let at = 1; at < stream.length; at++) {
      const reader = new MessageReader(1000);
      assert.deepEqual(
        read(reader, [stream.subarray(0, at), stream.subarray(at)]).messages,
        expected,
        `split at ${at}`,
      );
      assert.equal(reader.pending, 0);
    }
    const bytes = [...stream].map((b) => Buffer.from([b]));
    assert.deepEqual(read(new MessageReader(1000), bytes).messages, expected);
  });

  test('a message declared past the limit, or compressed, is refused on its prefix', () => {
    const big = Buffer.alloc(5);
    big.writeUInt32BE(2001, 1);
    const reader = new MessageReader(2000);
    assert.deepEqual(read(reader, [big]), {
      messages: [],
      error: '8 grpc: received message larger than max (2001 vs. 2000)',
    });
    assert.deepEqual(read(new MessageReader(2000), [framed(Buffer.from('z'), 1)]), {
      messages: [],
      error: '13 grpc: compressed flag set with identity or empty encoding',
    });
  });
});
