/**
 * Range as etcd's applier runs it: a limit is applied in the store only when
 * the request neither sorts nor filters; otherwise the whole range is read,
 * filtered by mod/create revision bounds, sorted, and cut to the limit.
 * `count` is always the number of keys in the range, before filters and limit.
 */
import type { KeyValue, RangeRequest, RangeResponse } from '../proto/types.js';
import {
  SORT_ASCEND,
  SORT_BY_CREATE,
  SORT_BY_KEY,
  SORT_BY_MOD,
  SORT_BY_VALUE,
  SORT_BY_VERSION,
  SORT_DESCEND,
  SORT_NONE,
} from '../proto/types.js';
import type { RangeResult } from '../mvcc/kvstore.js';
import { PRESENT_EMPTY } from '../proto/etcd.js';

/** What a Range reads from: a read view or a write txn. */
export interface RangeReader {
  range(
    key: Buffer,
    end: Buffer | null,
    opts: { limit: number; rev: number; count: boolean; keysOnly: boolean },
  ): RangeResult;
}

/** etcd's mkGteRange: range_end "\0" means every key from `key` on (an empty end); none means one key (null). */
export function gteRange(rangeEnd: Buffer): Buffer | null {
  if (rangeEnd === PRESENT_EMPTY) return Buffer.alloc(0);
  if (rangeEnd.length === 0) return null;
  if (rangeEnd.length === 1 && rangeEnd[0] === 0) return Buffer.alloc(0);
  return rangeEnd;
}

type Compare = (a: KeyValue, b: KeyValue) => number;

const BY: Record<number, Compare> = {
  [SORT_BY_KEY]: (a, b) => Buffer.compare(a.key, b.key),
  [SORT_BY_VERSION]: (a, b) => a.version - b.version,
  [SORT_BY_CREATE]: (a, b) => a.createRevision - b.createRevision,
  [SORT_BY_MOD]: (a, b) => a.modRevision - b.modRevision,
  [SORT_BY_VALUE]: (a, b) => Buffer.compare(a.value, b.value),
};

export function applyRange(reader: RangeReader, req: RangeRequest): RangeResponse {
  const filtered =
    req.minModRevision !== 0 || req.maxModRevision !== 0 || req.minCreateRevision !== 0 || req.maxCreateRevision !== 0;
  let limit = req.sortOrder !== SORT_NONE || filtered ? 0 : req.limit;
  if (limit > 0) limit++;
  const sortsByValue = req.sortTarget === SORT_BY_VALUE;
  const result = reader.range(req.key, gteRange(req.rangeEnd), {
    limit,
    rev: req.revision,
    count: req.countOnly,
    // Values are needed to sort by them even when the reply leaves them out.
    keysOnly: req.keysOnly && !sortsByValue,
  });
  let kvs = result.kvs;
  if (filtered) {
    kvs = kvs.filter(
      (kv) =>
        (req.maxModRevision === 0 || kv.modRevision <= req.maxModRevision) &&
        (req.minModRevision === 0 || kv.modRevision >= req.minModRevision) &&
        (req.maxCreateRevision === 0 || kv.createRevision <= req.maxCreateRevision) &&
        (req.minCreateRevision === 0 || kv.createRevision >= req.minCreateRevision),
    );
  }
  let order = req.sortOrder;
  if (req.sortTarget !== SORT_BY_KEY && order === SORT_NONE) order = SORT_ASCEND;
  const by = BY[req.sortTarget];
  if (by !== undefined && (order === SORT_ASCEND || order === SORT_DESCEND)) {
    // Stable, so equal elements keep key order (as Go's sort does for the small slices etcd usually sorts).
    if (order === SORT_ASCEND) kvs = kvs.slice().sort(by);
    else kvs = kvs.slice().sort((a, b) => by(b, a));
  }
  let more = false;
  if (req.limit > 0 && kvs.length > req.limit) {
    kvs = kvs.slice(0, req.limit);
    more = true;
  }
  return { revision: result.rev, kvs, more, count: result.count, keysOnly: req.keysOnly };
}
