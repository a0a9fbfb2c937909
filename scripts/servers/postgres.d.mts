/** Types of scripts/servers/postgres.mjs, for the TypeScript tests that start their own PostgreSQL. */
export declare const packages: string[];
export declare const binary: string;
/** The superuser's password in every cluster these start. */
export declare const PASSWORD: string;

/** The newest installed server's bin dir, e.g. /usr/lib/postgresql/15/bin. */
export declare function binDir(): string;

export interface PostgresServerOptions {
  /** Extra server settings (`-c name=value`), e.g. { max_connections: '20' }. */
  readonly settings?: Readonly<Record<string, string>>;
}

export interface PostgresServer {
  /** postgres://postgres:PASSWORD@127.0.0.1:PORT/postgres */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** The cluster's data directory. */
  readonly data: string;
  stop(): Promise<void>;
  /** Ends the postmaster and every backend with the signal (default SIGKILL). */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** `pg_ctl stop -m immediate`. */
  stopImmediate(): Promise<void>;
  /** Stops it (a signal, or 'immediate') and starts it again on the same port and data dir. */
  restart(signal?: NodeJS.Signals | 'immediate'): Promise<void>;
}

export declare function start(dir: string, options?: PostgresServerOptions): Promise<PostgresServer>;

/** A hot standby of `primary` in `dir` (an empty dir the caller made), streaming its WAL; reads only. */
export declare function startReplica(primary: PostgresServer, dir: string): Promise<PostgresServer>;
