/**
 * `node --import tsx bench/serve/codec.ts [--rounds N]`
 *
 * kvmq serve's request decoding alone, in this process: Put, Range (one key, a range, an explicitly empty
 * range_end) and a Txn of a compare and a put, each decoded from its bytes as the gRPC handlers do
 * (src/serve/proto/kv.ts). Prints the median nanoseconds per decode over the rounds, to compare a change
 * to the codecs with what it replaced.
 */
import { parseArgs } from 'node:util';
import { median } from '../common.js';
import { etcdserverpb } from '../../src/serve/proto/etcd.js';
import { decodePutRequest, decodeRangeRequest, decodeTxnRequest } from '../../src/serve/proto/kv.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '7' } } });
const ROUNDS = Number(values.rounds);
const PER_ROUND = 200_000;

const key = Buffer.from('/queue/jobs/producer/0000000000000042');
const value = Buffer.alloc(256, 7);
const bytes = (type: { encode(message: object): { finish(): Uint8Array } }, message: object): Buffer =>
  Buffer.from(type.encode(message).finish());

const CASES: [string, (buf: Buffer) => unknown, Buffer][] = [
  ['put', decodePutRequest, bytes(etcdserverpb.PutRequest, { key, value, lease: 7 })],
  ['range, one key', decodeRangeRequest, bytes(etcdserverpb.RangeRequest, { key })],
  ['range, key to range_end', decodeRangeRequest, bytes(etcdserverpb.RangeRequest, { key, range_end: key, limit: 10 })],
  // Field 2 sent empty: the encoder leaves an empty field out, so its two bytes are appended by hand.
  [
    'range, empty range_end',
    decodeRangeRequest,
    Buffer.concat([bytes(etcdserverpb.RangeRequest, { key }), Buffer.from([18, 0])]),
  ],
  [
    'txn, compare and put',
    decodeTxnRequest,
    bytes(etcdserverpb.TxnRequest, {
      compare: [{ key, version: 0 }],
      success: [{ request_put: { key, value } }],
    }),
  ],
];

function nsPerDecode(decode: (buf: Buffer) => unknown, buf: Buffer): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < PER_ROUND; i++) decode(buf);
  return Number(process.hrtime.bigint() - start) / PER_ROUND;
}

for (const [, decode, buf] of CASES) nsPerDecode(decode, buf); // warm up every path first
const rounds = new Map<string, number[]>(CASES.map(([name]) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, decode, buf] of CASES) rounds.get(name)?.push(nsPerDecode(decode, buf));
}
for (const [name, times] of rounds) console.log(`${name.padEnd(26)} ${median(times).toFixed(0).padStart(6)} ns`);
