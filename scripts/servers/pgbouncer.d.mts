/** Types of scripts/servers/pgbouncer.mjs, for the tests that put PgBouncer in front of PostgreSQL. */
export declare const packages: string[];
export declare const binary: string;

export interface PgBouncerOptions {
  /** The PostgreSQL server's port on 127.0.0.1. */
  readonly port: number;
  /** The password of its `postgres` user. */
  readonly password: string;
  /** Server connections per database and user. @defaultValue 20 */
  readonly poolSize?: number;
}

export interface PgBouncer {
  /** postgres://postgres:PASSWORD@127.0.0.1:PORT/postgres, through PgBouncer. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

export declare function start(dir: string, options: PgBouncerOptions): Promise<PgBouncer>;
