/**
 * Key-range permissions, checked as etcd checks them: a request's range must
 * be covered, without gaps, by the union of the ranges the user's roles grant
 * (a single key only needs to fall in one of them). An empty byte string as a
 * range bound means "past every key", which is how a range_end of "\0" reads.
 */

export const PERM_READ = 0;
export const PERM_WRITE = 1;
export const PERM_READWRITE = 2;

export interface Permission {
  permType: number;
  key: Buffer;
  rangeEnd: Buffer;
}

interface Interval {
  begin: Buffer;
  end: Buffer;
}

/** Byte-string order where the empty string is greater than every other. */
function affine(a: Buffer, b: Buffer): number {
  if (a.length === 0) return b.length === 0 ? 0 : 1;
  if (b.length === 0) return -1;
  return Buffer.compare(a, b);
}

function point(key: Buffer): Interval {
  return { begin: key, end: Buffer.concat([key, Buffer.from([0])]) };
}

/** The interval a permission grants. */
function permInterval(perm: Permission): Interval {
  if (perm.rangeEnd.length === 0) return point(perm.key);
  const end = perm.rangeEnd.length === 1 && perm.rangeEnd[0] === 0 ? Buffer.alloc(0) : perm.rangeEnd;
  return { begin: perm.key, end };
}

function overlaps(a: Interval, b: Interval): boolean {
  if (affine(a.begin, b.begin) < 0 && affine(a.end, b.begin) <= 0) return false;
  return affine(a.begin, b.end) < 0;
}

/** A user's merged read and write ranges. */
export class RangePermissions {
  private readonly read: Interval[] = [];
  private readonly write: Interval[] = [];

  constructor(perms: Iterable<Permission>) {
    for (const perm of perms) {
      const ivl = permInterval(perm);
      if (perm.permType === PERM_READ || perm.permType === PERM_READWRITE) this.read.push(ivl);
      if (perm.permType === PERM_WRITE || perm.permType === PERM_READWRITE) this.write.push(ivl);
    }
    const byBegin = (a: Interval, b: Interval): number => affine(a.begin, b.begin);
    this.read.sort(byBegin);
    this.write.sort(byBegin);
  }

  permits(key: Buffer, rangeEnd: Buffer, permType: number): boolean {
    const granted = permType === PERM_READ ? this.read : this.write;
    if (rangeEnd.length === 0) {
      const p = point(key);
      return granted.some((ivl) => overlaps(p, ivl));
    }
    const end = rangeEnd.length === 1 && rangeEnd[0] === 0 ? Buffer.alloc(0) : rangeEnd;
    return covers(granted, { begin: key, end });
  }
}

/** Whether the sorted intervals that overlap `want` cover it without a gap. */
function covers(granted: Interval[], want: Interval): boolean {
  let minBegin: Buffer | null = null;
  let maxEnd: Buffer | null = null;
  for (const ivl of granted) {
    if (!overlaps(want, ivl)) continue;
    if (minBegin === null || maxEnd === null) {
      minBegin = ivl.begin;
      maxEnd = ivl.end;
      continue;
    }
    if (affine(maxEnd, ivl.begin) < 0) return false;
    if (affine(ivl.end, maxEnd) > 0) maxEnd = ivl.end;
  }
  return minBegin !== null && maxEnd !== null && affine(maxEnd, want.end) >= 0 && affine(minBegin, want.begin) <= 0;
}
