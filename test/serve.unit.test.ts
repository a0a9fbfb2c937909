/**
 * Pieces of `kvmq serve` checked on their own: key-range permissions, automatic
 * compaction, what kvmq adds to the generated protobuf codecs (64-bit integers,
 * an explicitly empty range_end, decode errors), and --listen parsing.
 */
import assert from 'node:assert/strict';
import { describe, mock, test } from 'node:test';
import { PERM_READ, PERM_READWRITE, PERM_WRITE, RangePermissions } from '../src/serve/auth/permissions.js';
import { AutoCompactor } from '../src/serve/mvcc/auto-compact.js';
import Long from 'long';
import protobuf from 'protobufjs/minimal.js';
import { isDecodeError } from '../src/serve/proto/decode-error.js';
import { etcdserverpb, PRESENT_EMPTY } from '../src/serve/proto/etcd.js';
import { fromBigInt, toBigInt } from '../src/serve/proto/int64.js';
import {
  decodeDeleteRangeRequest,
  decodePutRequest,
  decodeRangeRequest,
  decodeTxnRequest,
} from '../src/serve/proto/kv.js';
import { parseListen } from '../src/serve/server.js';

describe('key-range permissions', () => {
  const key = (text: string): Buffer => Buffer.from(text);
  const perms = new RangePermissions([
    { permType: PERM_READ, key: key('a/'), rangeEnd: key('a0') },
    { permType: PERM_READWRITE, key: key('a0'), rangeEnd: key('b') },
    { permType: PERM_WRITE, key: key('own'), rangeEnd: Buffer.alloc(0) },
    { permType: PERM_READ, key: key('z'), rangeEnd: Buffer.from([0]) },
  ]);

  test('a range must be covered without gaps by the union of the granted ranges', () => {
    assert.equal(perms.permits(key('a/1'), Buffer.alloc(0), PERM_READ), true);
    assert.equal(perms.permits(key('a/'), key('b'), PERM_READ), true);
    assert.equal(perms.permits(key('a/'), key('b0'), PERM_READ), false);
    assert.equal(perms.permits(key('a/'), key('a0'), PERM_WRITE), false);
    assert.equal(perms.permits(key('own'), Buffer.alloc(0), PERM_WRITE), true);
    assert.equal(perms.permits(key('own'), Buffer.alloc(0), PERM_READ), false);
    assert.equal(perms.permits(key('zz'), Buffer.from([0]), PERM_READ), true);
    assert.equal(perms.permits(key('y'), Buffer.from([0]), PERM_READ), false);
  });
});

describe('automatic compaction', () => {
  test('compacts to the newest revision sampled at least the retention ago', () => {
    mock.timers.enable({ apis: ['setInterval'] });
    try {
      let now = 0;
      let current = 10;
      const compacted: number[] = [];
      const target = {
        get currentRev() {
          return current;
        },
        compactRev: -1,
        compact: (rev: number) => {
          compacted.push(rev);
          return Promise.resolve();
        },
      };
      const compactor = new AutoCompactor(
        target,
        10_000,
        () => undefined,
        () => now,
      );
      for (let i = 1; i <= 10; i++) {
        now += 1000;
        current += 5;
        mock.timers.tick(1000);
      }
      assert.deepEqual(compacted, [10]);
      now += 1000;
      current += 5;
      mock.timers.tick(1000);
      assert.deepEqual(compacted, [10, 15]);
      compactor.stop();
    } finally {
      mock.timers.reset();
    }
  });
});

describe('protobuf codecs', () => {
  const EMPTY = Buffer.alloc(0);
  /** Length-delimited fields, in the order given, including empty ones (the generated encoders omit those). */
  const fields = (...list: [number, Uint8Array][]): Buffer => {
    const w = protobuf.Writer.create();
    for (const [field, value] of list) w.uint32((field << 3) | 2).bytes(value);
    return w.finish() as Buffer;
  };

  test('negative int64 reads back; lease IDs keep all 64 bits', () => {
    const put = (lease: Long): Buffer =>
      Buffer.from(etcdserverpb.PutRequest.encode({ key: Buffer.from('k'), lease }).finish());
    assert.equal(decodePutRequest(put(Long.fromString('7587870931240826627'))).lease, 7587870931240826627n);
    assert.equal(decodePutRequest(put(Long.fromString('9223372036854775807'))).lease, 0x7fffffffffffffffn);
    assert.equal(decodePutRequest(put(Long.fromInt(-1))).lease, -1n);
    const range = Buffer.from(etcdserverpb.RangeRequest.encode({ key: Buffer.from('k'), revision: -1 }).finish());
    assert.equal(range.length, 3 + 1 + 10);
    assert.equal(decodeRangeRequest(range).revision, -1);
    // uint64 fields (member IDs) stay unsigned past 2^63.
    const target = Long.fromString('18446744073709551615', true);
    const moved = etcdserverpb.MoveLeaderRequest.decode(
      etcdserverpb.MoveLeaderRequest.encode({ targetID: target }).finish(),
    );
    assert.equal(toBigInt(moved.targetID), 0xffffffffffffffffn);
    assert.equal(toBigInt(fromBigInt(0xffffffffffffffffn)), -1n);
  });

  test('an explicitly empty range_end is told apart from an absent one, nested in a Txn too', () => {
    const key: [number, Uint8Array] = [1, Buffer.from('a')];
    assert.equal(decodeRangeRequest(fields(key, [2, EMPTY])).rangeEnd, PRESENT_EMPTY);
    assert.notEqual(decodeRangeRequest(fields(key)).rangeEnd, PRESENT_EMPTY);
    assert.equal(decodeRangeRequest(fields(key)).rangeEnd.length, 0);
    assert.equal(decodeRangeRequest(fields(key, [2, Buffer.from('b')])).rangeEnd.toString(), 'b');
    // The last occurrence of a field wins.
    assert.equal(decodeRangeRequest(fields(key, [2, Buffer.from('b')], [2, EMPTY])).rangeEnd, PRESENT_EMPTY);
    assert.equal(decodeRangeRequest(fields(key, [2, EMPTY], [2, Buffer.from('b')])).rangeEnd.toString(), 'b');
    assert.equal(decodeDeleteRangeRequest(fields(key, [2, EMPTY])).rangeEnd, PRESENT_EMPTY);

    const compare = fields([3, Buffer.from('c')], [64, EMPTY]);
    const rangeOp = fields([1, fields(key, [2, EMPTY])]);
    const deleteOp = fields([3, fields(key, [2, EMPTY])]);
    const plainOp = fields([1, fields(key)]);
    const txn = decodeTxnRequest(fields([1, compare], [2, rangeOp], [2, plainOp], [3, deleteOp]));
    assert.equal(txn.compare[0]?.rangeEnd, PRESENT_EMPTY);
    const [ranged, plain] = txn.success;
    assert.ok(ranged?.kind === 'range' && ranged.range.rangeEnd === PRESENT_EMPTY);
    assert.ok(plain?.kind === 'range' && plain.range.rangeEnd !== PRESENT_EMPTY);
    const deleted = txn.failure[0];
    assert.ok(deleted?.kind === 'delete' && deleted.deleteRange.rangeEnd === PRESENT_EMPTY);
  });

  test('unknown fields are skipped; malformed bytes fail with a decode error', () => {
    const withUnknown = Buffer.concat([fields([1, Buffer.from('k')]), fields([99, Buffer.from('x')])]);
    assert.equal(decodePutRequest(withUnknown).key.toString(), 'k');
    for (const bytes of [[0xff, 0xff, 0xff], [0x0a, 0x10, 0x01], [0x0b]]) {
      assert.throws(() => decodeRangeRequest(Buffer.from(bytes)), isDecodeError);
    }
  });
});

describe('--listen', () => {
  test('HOST:PORT and [IPv6]:PORT; anything else is refused with an example', () => {
    assert.deepEqual(parseListen('127.0.0.1:2379'), { host: '127.0.0.1', port: 2379 });
    assert.deepEqual(parseListen('[::1]:0'), { host: '::1', port: 0 });
    assert.throws(() => parseListen('localhost'), /use e\.g\. 127\.0\.0\.1:2379/);
    assert.throws(() => parseListen('h:99999'), /HOST:PORT/);
  });
});
