/**
 * The server's SQLite file, in WAL mode with `synchronous=NORMAL`: a COMMIT
 * writes the WAL without waiting for the disk, and group commit
 * (group-commit.ts) makes the commits durable with an fdatasync of the WAL
 * on libuv's thread pool before it answers them. SQLite itself still syncs
 * around checkpoints (the WAL before its pages are copied back, the database
 * after, and the WAL header when the WAL starts over), so a synced commit
 * stays on disk through later checkpoints: an acknowledged write survives
 * `kill -9` and power loss.
 */
import { closeSync, existsSync, fdatasync, fdatasyncSync, mkdirSync, openSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { migrate } from './schema.js';

export const DB_FILE = 'mvcc.db';

export class Backend {
  private readonly getMeta: BetterSqlite3.Statement<[string], string>;
  private readonly setMeta: BetterSqlite3.Statement<[string, string]>;
  private readonly beginStmt: BetterSqlite3.Statement;
  private readonly commitStmt: BetterSqlite3.Statement;
  private readonly rollbackStmt: BetterSqlite3.Statement;
  private wal: number | null = null;

  private constructor(
    readonly db: BetterSqlite3.Database,
    readonly path: string,
    /** Whether the file was created by this open. */
    readonly created: boolean,
  ) {
    this.getMeta = db.prepare<[string], string>('SELECT value FROM meta WHERE name = ?').pluck();
    this.setMeta = db.prepare<[string, string]>(
      'INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value',
    );
    this.beginStmt = db.prepare('BEGIN IMMEDIATE');
    this.commitStmt = db.prepare('COMMIT');
    this.rollbackStmt = db.prepare('ROLLBACK');
  }

  /** Opens (creating when missing) the data directory's database. */
  static open(dir: string): Backend {
    const absolute = resolve(dir);
    if (existsSync(absolute)) {
      if (!statSync(absolute).isDirectory()) throw new Error(`${dir} is a file, not a directory`);
    } else mkdirSync(absolute, { recursive: true });
    const path = join(absolute, DB_FILE);
    // better-sqlite3 is CommonJS; load it only when the server starts.
    const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
    const db = new Database(path, { timeout: 0 });
    try {
      // One server per file: its in-memory state (revision, leases, watchers) is only right if no other
      // process writes. The lock is taken by the first write below and held until close.
      db.pragma('locking_mode = EXCLUSIVE');
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('cache_size = -65536'); // 64 MiB of page cache
      // Checkpoint the WAL into the main file every ~16 MiB rather than every 4 MiB.
      db.pragma('wal_autocheckpoint = 4096');
      const { created } = migrate(db, path);
      db.exec('BEGIN IMMEDIATE; COMMIT');
      return new Backend(db, path, created);
    } catch (error) {
      db.close();
      if (
        error instanceof Error &&
        /database is locked|SQLITE_BUSY/.test(`${error.message} ${String((error as { code?: unknown }).code)}`)
      ) {
        throw new Error(`${path} is in use by another kvmq serve; give each server its own --data directory`);
      }
      throw error;
    }
  }

  meta(name: string): string | undefined {
    return this.getMeta.get(name);
  }

  setMetaValue(name: string, value: string): void {
    this.setMeta.run(name, value);
  }

  begin(): void {
    this.beginStmt.run();
  }

  /** Commits; returns once the WAL is on disk. */
  commit(): void {
    this.commitStmt.run();
  }

  rollback(): void {
    if (this.db.inTransaction) this.rollbackStmt.run();
  }

  /** The WAL file, opened for syncing once a commit has created it. */
  private walFd(): number {
    this.wal ??= openSync(`${this.path}-wal`, 'r');
    return this.wal;
  }

  /** Syncs what is committed so far to disk, on the thread pool; `done` gets null or the error. */
  syncWal(done: (error: Error | null) => void): void {
    let fd: number;
    try {
      fd = this.walFd();
    } catch (error) {
      done(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    fdatasync(fd, done);
  }

  /** Syncs what is committed so far to disk, now (at start, before any request). */
  syncWalNow(): void {
    fdatasyncSync(this.walFd());
  }

  /** Bytes the file takes, and bytes its live pages take (etcd's dbSize and dbSizeInUse). */
  sizes(): { size: number; inUse: number } {
    const pageSize = this.db.pragma('page_size', { simple: true }) as number;
    const pages = this.db.pragma('page_count', { simple: true }) as number;
    const free = this.db.pragma('freelist_count', { simple: true }) as number;
    return { size: pages * pageSize, inUse: (pages - free) * pageSize };
  }

  close(): void {
    if (this.db.open) this.db.close();
    if (this.wal !== null) closeSync(this.wal);
    this.wal = null;
  }
}
