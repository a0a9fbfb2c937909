/**
 * Differential test of `kvmq serve` against a real etcd 3.4: seeded random
 * sequences of puts, deletes, ranges, Txns (nested, with every compare target
 * and result), leases, compactions, hashes and watches from past revisions
 * are sent to both, and every response is compared field by field, except
 * the cluster and member IDs. Any difference fails with the seed and the
 * request that produced it.
 *
 * SERVE_DIFF_SEEDS=5,6,7 runs other seeds; SERVE_DIFF_DEBUG=1 prints every
 * request with both answers.
 */
import assert from 'node:assert/strict';
import { connect as connectHttp2, type IncomingHttpHeaders } from 'node:http2';
import { describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { grpcMessage, PUT_PATH, putRequest } from './fixtures/h2-attack.js';
import { b64, etcdBesideServe, RawClient, type Outcome, type WatchHandle } from './fixtures/serve-support.js';
import { waitFor } from './support/wait.js';

const SEEDS =
  process.env.SERVE_DIFF_SEEDS === undefined ? [1, 2, 3, 4] : process.env.SERVE_DIFF_SEEDS.split(',').map(Number);
const OPS = 260;
// Twelve keys at most in any range: Go sorts up to 12 elements stably, so ties come back in the same order.
const KEYS = ['a/0', 'a/1', 'a/2', 'a/3', 'b/0', 'b/1', 'b/2', 'b/3', 'c', 'd', 'e', 'f'];
const PREFIXES = ['a/', 'b/'];

/** mulberry32: small, fast, seedable. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Model {
  rev: number;
  compactRev: number;
  leases: string[];
  nextLease: number;
}

class Gen {
  constructor(
    readonly r: () => number,
    readonly m: Model,
  ) {}

  int(n: number): number {
    return Math.floor(this.r() * n);
  }

  chance(p: number): boolean {
    return this.r() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }

  key(): string {
    return this.pick(KEYS);
  }

  value(): string {
    return this.chance(0.1) ? '' : `v${this.int(50)}`;
  }

  /** A key with a range_end: one key, a prefix, from a key on, or a span. */
  range(): { key: string; range_end: string } {
    switch (this.int(5)) {
      case 0: {
        const prefix = this.pick(PREFIXES);
        return { key: b64(prefix), range_end: b64(String.fromCharCode(...Buffer.from(prefix).subarray(0, -1), 0x30)) };
      }
      case 1:
        return { key: b64(this.key()), range_end: Buffer.from([0]).toString('base64') };
      case 2: {
        const [x, y] = [this.key(), this.key()].sort();
        return { key: b64(x ?? 'a'), range_end: b64(y ?? 'z') };
      }
      default:
        return { key: b64(this.key()), range_end: '' };
    }
  }

  revision(): string {
    if (!this.chance(0.3)) return '0';
    const low = Math.max(1, this.m.compactRev - 2);
    return String(low + this.int(this.m.rev + 3 - low));
  }

  lease(): string {
    if (this.m.leases.length === 0 || this.chance(0.15)) return this.chance(0.5) ? '0' : '987654321';
    return this.pick(this.m.leases);
  }

  rangeRequest(): Record<string, unknown> {
    return {
      ...this.range(),
      limit: String(this.chance(0.3) ? this.int(4) : 0),
      revision: this.revision(),
      sort_order: this.chance(0.4) ? this.int(3) : 0,
      sort_target: this.chance(0.4) ? this.int(5) : 0,
      keys_only: this.chance(0.2),
      count_only: this.chance(0.1),
      min_mod_revision: this.chance(0.1) ? String(this.int(this.m.rev + 1)) : '0',
      max_mod_revision: this.chance(0.1) ? String(this.int(this.m.rev + 1)) : '0',
      min_create_revision: this.chance(0.1) ? String(this.int(this.m.rev + 1)) : '0',
      max_create_revision: this.chance(0.1) ? String(this.int(this.m.rev + 1)) : '0',
    };
  }

  putRequest(): Record<string, unknown> {
    const ignoreValue = this.chance(0.08);
    const ignoreLease = this.chance(0.08);
    return {
      key: this.chance(0.02) ? '' : b64(this.key()),
      value: ignoreValue && !this.chance(0.2) ? '' : b64(this.value()),
      lease: ignoreLease && !this.chance(0.2) ? '0' : this.chance(0.3) ? this.lease() : '0',
      prev_kv: this.chance(0.3),
      ignore_value: ignoreValue,
      ignore_lease: ignoreLease,
    };
  }

  deleteRequest(): Record<string, unknown> {
    return { ...this.range(), prev_kv: this.chance(0.4) };
  }

  compare(): Record<string, unknown> {
    const target = this.int(5);
    const cmp: Record<string, unknown> = {
      result: this.int(4),
      target,
      key: b64(this.key()),
      range_end: this.chance(0.15) ? this.range().range_end : '',
    };
    const union = this.chance(0.9) ? target : this.int(5);
    const rev = String(this.int(this.m.rev + 2));
    if (union === 0) cmp.version = String(this.int(4));
    else if (union === 1) cmp.create_revision = rev;
    else if (union === 2) cmp.mod_revision = rev;
    else if (union === 3) cmp.value = b64(this.value());
    else cmp.lease = this.lease();
    return cmp;
  }

  op(depth: number): Record<string, unknown> {
    const kind = this.int(depth > 0 ? 4 : 3);
    if (kind === 0) return { request_range: this.rangeRequest() };
    if (kind === 1) return { request_put: this.putRequest() };
    if (kind === 2) return { request_delete_range: this.deleteRequest() };
    return { request_txn: this.txnRequest(depth - 1) };
  }

  txnRequest(depth = 2): Record<string, unknown> {
    const ops = (): Record<string, unknown>[] => Array.from({ length: this.int(4) }, () => this.op(depth));
    return { compare: Array.from({ length: this.int(3) }, () => this.compare()), success: ops(), failure: ops() };
  }
}

/** A response with the IDs that differ between any two clusters removed, at every depth. */
function normalize(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalize);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (k === 'cluster_id' || k === 'member_id') continue;
    out[k] = normalize(v);
  }
  return out;
}

function headerRevision(outcome: Outcome): number | null {
  if (!('ok' in outcome)) return null;
  const header = outcome.ok.header as { revision?: string } | null | undefined;
  return header?.revision === undefined ? null : Number(header.revision);
}

interface WatchPair {
  readonly request: Record<string, unknown>;
  readonly etcd: WatchHandle;
  readonly kvmq: WatchHandle;
}

/** A watch stream's responses as compared: events flattened (their batching depends on timing). */
function watchView(handle: WatchHandle): { control: unknown[]; events: unknown[] } {
  const control: unknown[] = [];
  const events: unknown[] = [];
  for (const resp of handle.responses) {
    const evs = resp.events as unknown[];
    if (evs.length > 0) events.push(...evs.map(normalize));
    else control.push(normalize(resp));
  }
  return { control, events };
}

describe('kvmq serve answers like etcd 3.4', () => {
  const servers = etcdBesideServe();

  // Every client decodes each header of every call: kvmq serve sends the ones grpc-go sends, and no other
  // (node:http2 would add a date to each response). grpc-go's trailers also carry an empty grpc-message,
  // which says nothing: kvmq serve's carry the status only.
  test('a call is answered with the header and trailer names etcd sends', async () => {
    const [etcd, kvmq] = await Promise.all([headerNames(servers.etcd.endpoint), headerNames(servers.kvmq.endpoint)]);
    assert.deepEqual(etcd, { headers: [':status', 'content-type'], trailers: ['grpc-message', 'grpc-status'] });
    assert.deepEqual(kvmq, { headers: etcd.headers, trailers: ['grpc-status'] });
  });

  for (const seed of SEEDS) {
    test(
      `random sequence, seed ${seed}: both servers answer and notify watches alike`,
      { timeout: 120_000 },
      async () => {
        // Each seed uses its own keys, so the two servers start each sequence from the same state.
        const a = new RawClient(servers.etcd.endpoint);
        const b = new RawClient(servers.kvmq.endpoint);
        const watches: WatchPair[] = [];
        try {
          await runSequence(seed, a, b, watches);
        } finally {
          for (const w of watches) {
            w.etcd.close();
            w.kvmq.close();
          }
          a.close();
          b.close();
        }
      },
    );
  }

  async function runSequence(seed: number, a: RawClient, b: RawClient, watches: WatchPair[]): Promise<void> {
    // Start both from an empty key space at the same revision distance: clear, then read the revision.
    const wipe = { key: Buffer.from([0]).toString('base64'), range_end: Buffer.from([0]).toString('base64') };
    await Promise.all([a.call('KV', 'DeleteRange', wipe), b.call('KV', 'DeleteRange', wipe)]);
    const [sa, sb] = await Promise.all([a.call('KV', 'Range', wipe), b.call('KV', 'Range', wipe)]);
    const base = [headerRevision(sa), headerRevision(sb)];
    // Revisions differ between the servers by what earlier seeds did: align them with puts on a scratch key.
    const align = async (client: RawClient, from: number, to: number): Promise<void> => {
      for (let r = from; r < to; r++) await client.call('KV', 'Put', { key: b64('~align'), value: b64(String(r)) });
      await client.call('KV', 'DeleteRange', { key: b64('~align') });
    };
    const target = Math.max(base[0] ?? 0, base[1] ?? 0) + 1;
    await Promise.all([align(a, base[0] ?? 0, target), align(b, base[1] ?? 0, target)]);
    const [ra, rb] = await Promise.all([a.call('KV', 'Range', wipe), b.call('KV', 'Range', wipe)]);
    assert.equal(headerRevision(ra), headerRevision(rb), 'both servers at one revision before the sequence');
    // Compactions of earlier seeds differ in timing only; compact both to the common start.
    const start = headerRevision(ra) ?? 1;
    await Promise.all([
      a.call('KV', 'Compact', { revision: String(start), physical: true }),
      b.call('KV', 'Compact', { revision: String(start), physical: true }),
    ]);

    const model: Model = { rev: start, compactRev: start, leases: [], nextLease: seed * 1_000_000 };
    const g = new Gen(rng(seed), model);
    const same = (what: string, x: Outcome, y: Outcome): void => {
      assert.deepEqual(normalize(y), normalize(x), `seed ${seed}: ${what} differs (etcd first, kvmq second)`);
    };

    for (let i = 0; i < OPS; i++) {
      const choice = g.int(100);
      let service = 'KV';
      let method: string;
      let request: Record<string, unknown>;
      if (choice < 22) [method, request] = ['Put', g.putRequest()];
      else if (choice < 32) [method, request] = ['DeleteRange', g.deleteRequest()];
      else if (choice < 52) [method, request] = ['Range', g.rangeRequest()];
      else if (choice < 72) [method, request] = ['Txn', g.txnRequest()];
      else if (choice < 78) {
        service = 'Lease';
        const id = g.chance(0.1) && model.leases.length > 0 ? g.pick(model.leases) : String(++model.nextLease);
        const ttl = g.chance(0.05) ? '9000000001' : String(300 + g.int(300));
        [method, request] = ['LeaseGrant', { ID: id, TTL: ttl }];
      } else if (choice < 81) {
        service = 'Lease';
        [method, request] = ['LeaseRevoke', { ID: g.lease() }];
      } else if (choice < 84) {
        service = 'Lease';
        [method, request] = ['LeaseTimeToLive', { ID: g.lease(), keys: true }];
      } else if (choice < 87) {
        const ahead = g.chance(0.1) ? 3 : -g.int(6);
        [method, request] = ['Compact', { revision: String(model.rev + ahead), physical: true }];
      } else if (choice < 90) {
        service = 'Maintenance';
        [method, request] = ['HashKV', { revision: g.chance(0.5) ? '0' : g.revision() }];
      } else if (choice < 93) {
        service = 'Lease';
        [method, request] = ['LeaseLeases', {}];
      } else {
        const w = openWatch(g, a, b, watches);
        // etcd catches a watcher up in a loop that runs every 100 ms: let it, before the next write or compaction.
        const opened = Date.now();
        await waitFor(
          () =>
            Date.now() - opened > 300 &&
            w.etcd.responses.length > 0 &&
            isDeepStrictEqual(watchView(w.kvmq), watchView(w.etcd)),
          { timeoutMs: 5000, what: 'the new watch to catch up' },
        ).catch(() => undefined);
        continue;
      }
      const [x, y] = await Promise.all([a.call(service, method, request), b.call(service, method, request)]);
      const what = `op ${i} ${method} ${JSON.stringify(request)}`;
      if (process.env.SERVE_DIFF_DEBUG !== undefined)
        console.log(what, '\n  etcd', JSON.stringify(x), '\n  kvmq', JSON.stringify(y));
      if (method === 'LeaseTimeToLive' && 'ok' in x && 'ok' in y) {
        // Seconds left depend on when each server answered.
        assert.ok(
          Math.abs(Number(x.ok.TTL) - Number(y.ok.TTL)) <= 1,
          `${what}: TTL ${String(x.ok.TTL)} vs ${String(y.ok.TTL)}`,
        );
        x.ok.TTL = y.ok.TTL;
        (x.ok.keys as string[]).sort();
        (y.ok.keys as string[]).sort();
      }
      if (method === 'LeaseLeases' && 'ok' in x && 'ok' in y) {
        for (const resp of [x.ok, y.ok]) (resp.leases as { ID: string }[]).sort((p, q) => p.ID.localeCompare(q.ID));
      }
      same(what, x, y);
      const rev = headerRevision(x);
      if (rev !== null && rev > model.rev) model.rev = rev;
      if ('ok' in x) {
        if (method === 'LeaseGrant') model.leases.push(String(x.ok.ID));
        if (method === 'LeaseRevoke') model.leases = model.leases.filter((l) => l !== request.ID);
        if (method === 'Compact') model.compactRev = Number(request.revision);
      }
    }

    // Every watch sees the same events and control responses once both servers have sent them all.
    const views = (): string => JSON.stringify(watches.map((w) => watchView(w.etcd)));
    let last = views();
    let stableSince = Date.now();
    await waitFor(
      () => {
        const now = views();
        if (now !== last) {
          last = now;
          stableSince = Date.now();
        }
        return (
          Date.now() - stableSince > 400 &&
          watches.every((w) => isDeepStrictEqual(watchView(w.kvmq), watchView(w.etcd)))
        );
      },
      { timeoutMs: 10_000, what: 'every watch to match' },
    ).catch(() => undefined);
    for (const [n, w] of watches.entries()) {
      assert.deepEqual(
        watchView(w.kvmq),
        watchView(w.etcd),
        `seed ${seed}: watch ${n} ${JSON.stringify(w.request)} differs (kvmq first, etcd second)`,
      );
    }
  }
});

/** The names of the headers and trailers a server answers one put with, sorted. */
async function headerNames(endpoint: string): Promise<{ headers: string[]; trailers: string[] }> {
  const session = connectHttp2(endpoint.includes('://') ? endpoint : `http://${endpoint}`);
  try {
    const req = session.request({
      ':method': 'POST',
      ':path': PUT_PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    const names = (h: IncomingHttpHeaders): string[] => Object.keys(h).sort();
    const headers = new Promise<string[]>((resolve) => req.once('response', (h) => resolve(names(h))));
    const trailers = new Promise<string[]>((resolve) =>
      req.once('trailers', (h: IncomingHttpHeaders) => resolve(names(h))),
    );
    req.resume();
    req.end(grpcMessage(putRequest('headers', Buffer.from('v'))));
    return { headers: await headers, trailers: await trailers };
  } finally {
    session.close();
  }
}

function openWatch(g: Gen, a: RawClient, b: RawClient, watches: WatchPair[]): WatchPair {
  const m = g.m;
  const low = Math.max(1, m.compactRev - 2);
  const create: Record<string, unknown> = {
    ...g.range(),
    start_revision: String(g.chance(0.2) ? 0 : low + g.int(m.rev + 2 - low)),
    filters: g.chance(0.2) ? [g.int(2)] : [],
    prev_kv: g.chance(0.5),
    progress_notify: false,
  };
  const request = { create_request: create };
  const etcdStream = a.stream('Watch', 'Watch');
  const kvmqStream = b.stream('Watch', 'Watch');
  etcdStream.send(request);
  kvmqStream.send(request);
  const pair = { request: create, etcd: etcdStream, kvmq: kvmqStream };
  watches.push(pair);
  return pair;
}
