/**
 * A range_end sent explicitly empty. etcd tells it apart from an absent one: its decoder gives a non-nil
 * empty slice, which reads as "every key from `key` on", as "\0" does (a client library sends an empty
 * range_end only if asked to, but a protobuf library may encode one when the field is set).
 *
 * The generated decoders keep no presence for proto3 fields: an empty bytes field on the wire leaves no own
 * property. So the decoders of the messages with a range_end are wrapped, here only: when a message ends
 * without a range_end of its own, its fields are scanned again, and if one was sent (necessarily empty),
 * range_end becomes PRESENT_EMPTY. Nested messages (a Txn's operations and compares) are decoded through
 * the same namespace, so the wrappers cover them too.
 */
import protobuf from 'protobufjs/minimal.js';
import type { etcdserverpb } from './generated/etcd.js';

export const PRESENT_EMPTY: Buffer = Buffer.alloc(0);

const LEN = 2;

/** Whether the message between `start` and `end` has a length-delimited field numbered `field`. */
function hasField(buf: Uint8Array, start: number, end: number, field: number): boolean {
  const scan = protobuf.Reader.create(buf);
  scan.pos = start;
  scan.len = end;
  let found = false;
  while (scan.pos < end) {
    const tag = scan.uint32();
    if (tag === ((field << 3) | LEN)) found = true;
    scan.skipType(tag & 7);
  }
  return found;
}

type Decode<T> = (reader: protobuf.Reader | Uint8Array, length?: number) => T;

function keepEmptyRangeEnd<T extends { range_end: Uint8Array }>(type: { decode: Decode<T> }, field: number): void {
  const decode = type.decode.bind(type);
  type.decode = (...args: Parameters<Decode<T>>): T => {
    const [input] = args;
    const start = input instanceof protobuf.Reader ? input.pos : 0;
    // The generated decoder takes more arguments than its declaration names (depth, merge target); all pass on.
    const message = decode(...args);
    if (!Object.prototype.hasOwnProperty.call(message, 'range_end')) {
      const buf = input instanceof protobuf.Reader ? input.buf : input;
      const end = input instanceof protobuf.Reader ? input.pos : input.length;
      if (hasField(buf, start, end, field)) message.range_end = PRESENT_EMPTY;
    }
    return message;
  };
}

/** Installs the wrappers on the generated namespace (once). */
export function installRangeEndPresence(pb: typeof etcdserverpb): void {
  const installed = pb as { rangeEndPresence?: boolean };
  if (installed.rangeEndPresence === true) return;
  installed.rangeEndPresence = true;
  keepEmptyRangeEnd(pb.RangeRequest, 2);
  keepEmptyRangeEnd(pb.DeleteRangeRequest, 2);
  keepEmptyRangeEnd(pb.Compare, 64);
}
