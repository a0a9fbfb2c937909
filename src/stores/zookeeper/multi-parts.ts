/** A multi built from parts (each finish of a batch, each claim riding on it): which part put each operation there. */
import type { ZkOp } from './client.js';

export class MultiParts<Part extends object> {
  readonly ops: ZkOp[] = [];
  private readonly owners: (Part | undefined)[] = [];
  private readonly starts = new Map<Part, number>();

  /** Appends `ops` for `part` (undefined: ops the multi shares); returns the index of the first. */
  add(part: Part | undefined, ops: readonly ZkOp[]): number {
    const at = this.ops.length;
    this.ops.push(...ops);
    for (let k = 0; k < ops.length; k++) this.owners.push(part);
    if (part !== undefined && !this.starts.has(part)) this.starts.set(part, at);
    return at;
  }

  /** The part whose operation is at `index` (a failed multi's opIndex), or undefined for a shared one. */
  partAt(index: number): Part | undefined {
    return this.owners[index];
  }

  /** Where `part`'s operations begin (its first was added at this index). */
  startOf(part: Part): number {
    return this.starts.get(part) ?? 0;
  }
}
