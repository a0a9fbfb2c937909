/**
 * HashKV as etcd computes it, so that `etcdctl endpoint hashkv` agrees with
 * an etcd holding the same history: a CRC-32C (Castagnoli) over the bucket
 * name "key", then each stored revision's key (8-byte main revision, '_',
 * 8-byte sub revision, and 't' for a tombstone) and its KeyValue encoding.
 * Revisions above the hash revision are left out, and so are those at or
 * below the compacted revision that are not a key's live value at the hash
 * revision.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { encodeKv } from '../proto/kv.js';
import { logId, revisionOf, SUB_LIMIT } from '../storage/schema.js';
import { rowToKv } from './kvstore.js';
import type { KvRow } from './statements.js';

const TABLE = new Int32Array(256);
for (let i = 0; i < 256; i++) {
  let c = i;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
  TABLE[i] = c;
}

export class Crc32c {
  private crc = 0xffffffff;

  update(data: Uint8Array): void {
    let crc = this.crc;
    for (let i = 0; i < data.length; i++) {
      crc = (TABLE[(crc ^ (data[i] as number)) & 0xff] as number) ^ (crc >>> 8);
    }
    this.crc = crc;
  }

  digest(): number {
    return (this.crc ^ 0xffffffff) >>> 0;
  }
}

const BUCKET = Buffer.from('key');
const PAGE = 10_000;

function revisionKey(id: number, tombstone: boolean): Buffer {
  const buf = Buffer.alloc(tombstone ? 18 : 17);
  buf.writeBigUInt64BE(BigInt(revisionOf(id)), 0);
  buf[8] = 0x5f; // '_'
  buf.writeBigUInt64BE(BigInt(id % SUB_LIMIT), 9);
  if (tombstone) buf[17] = 0x74; // 't'
  return buf;
}

export function hashKv(db: BetterSqlite3.Database, rev: number, compactRev: number): number {
  const rows = db
    .prepare(
      'SELECT l.key, l.create_rev, l.id, l.version, CASE l.lease WHEN 0 THEN NULL ELSE CAST(l.lease AS TEXT) END, ' +
        'l.value, (l.version > 0 AND NOT EXISTS (SELECT 1 FROM log n WHERE n.key = l.key AND n.id > l.id AND n.id < @until)) ' +
        'FROM log l WHERE l.id >= @from AND l.id < @until ORDER BY l.id LIMIT ' +
        String(PAGE),
    )
    .raw(true);
  const liveKeys = db
    .prepare(
      'SELECT count(*) FROM log l JOIN (SELECT max(id) AS mid FROM log WHERE id < @until GROUP BY key) g ' +
        'ON l.id = g.mid WHERE l.version > 0',
    )
    .pluck();
  const until = logId(rev + 1, 0);
  // etcd keeps every old revision in the hash when no key is live (its "keep" set is empty).
  const anyLive = (liveKeys.get({ until }) as number) > 0;
  const crc = new Crc32c();
  crc.update(BUCKET);
  let from = 0;
  for (;;) {
    const page = rows.all({ from, until }) as [...KvRow, number][];
    for (const row of page) {
      const id = row[2];
      if (revisionOf(id) <= compactRev && anyLive && row[6] !== 1) continue;
      const tombstone = row[3] === 0;
      crc.update(revisionKey(id, tombstone));
      const kv = rowToKv(row as unknown as KvRow);
      crc.update(
        tombstone ? encodeKv({ ...kv, createRevision: 0, modRevision: 0, version: 0, lease: 0n }) : encodeKv(kv),
      );
    }
    if (page.length < PAGE) return crc.digest();
    from = (page[page.length - 1] as [...KvRow, number])[2] + 1;
  }
}
