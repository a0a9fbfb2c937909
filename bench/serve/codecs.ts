/**
 * kvmq serve's codecs side by side: the generated ones (src/serve/proto) against the hand-written ones they
 * replaced, taken from git (commit abb039c) into a temporary directory for the run. Each case decodes a
 * request and encodes its response, as a server call does; prints ns per message and new/old.
 *
 *   node --import tsx bench/serve/codecs.ts [--markdown]
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Long from 'long';
import { median, table } from '../common.js';
import { etcdserverpb } from '../../src/serve/proto/etcd.js';
import { ResponseHeaders, type ServerIdentity } from '../../src/serve/proto/header.js';
import * as kv from '../../src/serve/proto/kv.js';
import * as lease from '../../src/serve/proto/lease.js';
import type {
  Event,
  KeyValue,
  PutResponse,
  RangeResponse,
  TxnResponse,
  WatchResponse,
} from '../../src/serve/proto/types.js';
import * as watch from '../../src/serve/proto/watch.js';

/** The last commit with the hand-written codecs. */
const OLD_COMMIT = 'abb039c';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OLD_FILES = ['wire.ts', 'kv.ts', 'header.ts', 'lease.ts', 'watch.ts', 'types.ts'];

/** What the bench calls of the old codecs (the engine's types did not change). */
interface OldCodecs {
  reader(buf: Buffer): unknown;
  header: unknown;
  readPutRequest(r: unknown): unknown;
  readRangeRequest(r: unknown): unknown;
  readTxnRequest(r: unknown): unknown;
  encodePutResponse(h: unknown, resp: PutResponse): Buffer;
  encodeRangeResponse(h: unknown, resp: RangeResponse): Buffer;
  encodeTxnResponse(h: unknown, resp: TxnResponse): Buffer;
  decodeLeaseId(buf: Buffer): bigint;
  encodeLeaseResponse(h: unknown, revision: number, id: bigint, ttl: number): Buffer;
  encodeWatchResponse(h: unknown, resp: WatchResponse): Buffer;
}

const identity: ServerIdentity = { clusterId: 0xcdf818194e3a8c32n, memberId: 0x8e9e05c52164694dn, raftTerm: 2 };

async function loadOld(dir: string): Promise<OldCodecs> {
  for (const name of OLD_FILES) {
    const text = execFileSync('git', ['show', `${OLD_COMMIT}:src/serve/proto/${name}`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    writeFileSync(join(dir, name), text);
  }
  const load = async <T>(name: string): Promise<T> => (await import(pathToFileURL(join(dir, name)).href)) as T;
  const wire = await load<{ Reader: new (buf: Buffer) => unknown }>('wire.ts');
  const header = await load<{ HeaderCodec: new (identity: ServerIdentity) => unknown }>('header.ts');
  const oldKv = await load<Pick<OldCodecs, 'readPutRequest' | 'readRangeRequest' | 'readTxnRequest'>>('kv.ts');
  const kvOut = await load<Pick<OldCodecs, 'encodePutResponse' | 'encodeRangeResponse' | 'encodeTxnResponse'>>('kv.ts');
  const oldLease = await load<Pick<OldCodecs, 'decodeLeaseId' | 'encodeLeaseResponse'>>('lease.ts');
  const oldWatch = await load<Pick<OldCodecs, 'encodeWatchResponse'>>('watch.ts');
  return {
    reader: (buf) => new wire.Reader(buf),
    header: new header.HeaderCodec(identity),
    ...oldKv,
    ...kvOut,
    ...oldLease,
    ...oldWatch,
  };
}

// ---- the messages ----

const LEASE = Long.fromString('7587870931240826627');
const REVISION = 123456;
const encoded = (writer: { finish(): Uint8Array }): Buffer => Buffer.from(writer.finish());

function keyValue(i: number): KeyValue {
  return {
    key: Buffer.from(`kvmq/q/jobs/m/${String(i).padStart(8, '0')}`),
    createRevision: REVISION - 1000 + i,
    modRevision: REVISION - 500 + i,
    version: 3,
    value: Buffer.alloc(200, 'v'),
    lease: 0n,
  };
}

const putRequest = encoded(
  etcdserverpb.PutRequest.encode({ key: Buffer.from('kvmq/q/jobs/m/00000001'), value: Buffer.alloc(200, 'v') }),
);
const putResponse: PutResponse = { revision: REVISION, prevKv: null };
const rangeRequest = encoded(
  etcdserverpb.RangeRequest.encode({ key: Buffer.from('kvmq/q/jobs/m/'), range_end: Buffer.from('kvmq/q/jobs/m0') }),
);
const rangeResponse = (n: number): RangeResponse => {
  const kvs = Array.from({ length: n }, (_, i) => keyValue(i));
  return { revision: REVISION, kvs, more: false, count: n, keysOnly: false };
};
const range1 = rangeResponse(1);
const range100 = rangeResponse(100);

/** As kvmq's etcd store sends an enqueue: a compare on the record, three writes, a read when it fails. */
const txnRequest = encoded(
  etcdserverpb.TxnRequest.encode({
    compare: [
      {
        key: Buffer.from('kvmq/q/jobs/r/abc'),
        target: etcdserverpb.Compare.CompareTarget.Mod,
        result: etcdserverpb.Compare.CompareResult.Equal,
        mod_revision: REVISION - 7,
      },
    ],
    success: [
      { request_put: { key: Buffer.from('kvmq/q/jobs/r/abc'), value: Buffer.alloc(200, 'v') } },
      { request_put: { key: Buffer.from('kvmq/q/jobs/i/00000001'), value: Buffer.from('abc'), lease: LEASE } },
      { request_put: { key: Buffer.from('kvmq/q/jobs/n'), value: Buffer.from('1') } },
    ],
    failure: [{ request_range: { key: Buffer.from('kvmq/q/jobs/r/abc') } }],
  }),
);
const txnResponse: TxnResponse = {
  revision: REVISION,
  succeeded: true,
  responses: [0, 1, 2].map(() => ({ kind: 'put', put: { revision: REVISION, prevKv: null } })),
};

/** Fresh events each time, so neither codec's per-event cache answers from an earlier run. */
function watchResponse(n: number): WatchResponse {
  const events: Event[] = Array.from({ length: n }, (_, i) => ({ type: 0, kv: keyValue(i), prevKv: null }));
  return {
    revision: REVISION,
    watchId: 1,
    created: false,
    canceled: false,
    compactRevision: 0,
    cancelReason: '',
    fragment: false,
    events,
  };
}

const keepAliveRequest = encoded(etcdserverpb.LeaseKeepAliveRequest.encode({ ID: LEASE }));

interface Case {
  readonly name: string;
  readonly old: () => unknown;
  readonly new: () => unknown;
}

function cases(old: OldCodecs, h: ResponseHeaders): Case[] {
  return [
    {
      name: 'Put (PutRequest + PutResponse)',
      old: () => [old.readPutRequest(old.reader(putRequest)), old.encodePutResponse(old.header, putResponse)],
      new: () => [kv.decodePutRequest(putRequest), kv.encodePutResponse(h, putResponse)],
    },
    {
      name: 'Range, 1 kv',
      old: () => [old.readRangeRequest(old.reader(rangeRequest)), old.encodeRangeResponse(old.header, range1)],
      new: () => [kv.decodeRangeRequest(rangeRequest), kv.encodeRangeResponse(h, range1)],
    },
    {
      name: 'Range, 100 kvs',
      old: () => [old.readRangeRequest(old.reader(rangeRequest)), old.encodeRangeResponse(old.header, range100)],
      new: () => [kv.decodeRangeRequest(rangeRequest), kv.encodeRangeResponse(h, range100)],
    },
    {
      name: 'Txn (enqueue: compare, 3 puts)',
      old: () => [old.readTxnRequest(old.reader(txnRequest)), old.encodeTxnResponse(old.header, txnResponse)],
      new: () => [kv.decodeTxnRequest(txnRequest), kv.encodeTxnResponse(h, txnResponse)],
    },
    {
      name: 'WatchResponse, 1 event',
      old: () => old.encodeWatchResponse(old.header, watchResponse(1)),
      new: () => watch.encodeWatchResponse(h, watchResponse(1)),
    },
    {
      name: 'WatchResponse, 10 events',
      old: () => old.encodeWatchResponse(old.header, watchResponse(10)),
      new: () => watch.encodeWatchResponse(h, watchResponse(10)),
    },
    {
      name: 'LeaseKeepAlive (request + response)',
      old: () => old.encodeLeaseResponse(old.header, REVISION, old.decodeLeaseId(keepAliveRequest), 60),
      new: () =>
        lease.encodeLeaseKeepAliveResponse(h, REVISION, lease.decodeLeaseKeepAliveRequest(keepAliveRequest), 60),
    },
  ];
}

/** ns per call of `task`, over about 100 ms. */
function nsPerCall(task: () => unknown): number {
  let n = 1000;
  for (;;) {
    const begin = process.hrtime.bigint();
    for (let i = 0; i < n; i++) task();
    const ns = Number(process.hrtime.bigint() - begin);
    if (ns > 100e6) return ns / n;
    n *= 2;
  }
}

const ROUNDS = 5;

async function main(): Promise<void> {
  const markdown = process.argv.includes('--markdown');
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-codecs-'));
  try {
    const old = await loadOld(dir);
    const body: string[][] = [];
    for (const c of cases(old, new ResponseHeaders(identity))) {
      // Both decode to the same request and encode the same bytes, or the comparison says nothing.
      assert.deepStrictEqual(c.new(), c.old(), c.name);
      const olds: number[] = [];
      const news: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        olds.push(nsPerCall(c.old));
        news.push(nsPerCall(c.new));
      }
      const o = median(olds);
      const n = median(news);
      body.push([c.name, o.toFixed(0), n.toFixed(0), (n / o).toFixed(2)]);
    }
    console.log(table(['message', 'old ns', 'new ns', 'new/old'], body, markdown));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
