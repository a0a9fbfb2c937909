/**
 * Physical compaction: after Compact(rev) the history below `rev` is removed
 * except each live key's value at `rev` (what a read at `rev` still needs).
 * It runs in chunks, each in its own write batch, so writes keep flowing, and
 * records how far it got so that a restart finishes it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { logId } from '../storage/schema.js';

/** Log rows examined per chunk. */
const CHUNK_ROWS = 2000;

export class CompactionStatements {
  private readonly chunkEnd: BetterSqlite3.Statement;
  private readonly purge: BetterSqlite3.Statement;

  constructor(db: BetterSqlite3.Database) {
    this.chunkEnd = db
      .prepare(`SELECT max(id) FROM (SELECT id FROM log WHERE id >= ? AND id < ? ORDER BY id LIMIT ${CHUNK_ROWS})`)
      .pluck();
    // A row goes when it is a tombstone, or when a later row of its key at or below the compacted revision exists.
    this.purge = db.prepare(
      'DELETE FROM log WHERE id >= @from AND id <= @last AND (version = 0 OR EXISTS ' +
        '(SELECT 1 FROM log n WHERE n.key = log.key AND n.id > log.id AND n.id < @until))',
    );
  }

  /**
   * Compacts the rows from log ID `from` on, one chunk; returns where the next
   * chunk starts, or null when the compaction of `rev` is complete.
   */
  step(rev: number, from: number): number | null {
    const until = logId(rev + 1, 0);
    const last = this.chunkEnd.get(from, until) as number | null;
    if (last === null) return null;
    this.purge.run({ from, last, until });
    return last + 1;
  }
}
