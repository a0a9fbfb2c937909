/** Types of scripts/servers/redis.mjs, for the TypeScript tests that start their own Redis. */
export declare const packages: string[];
export declare const binary: string;

export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. ['--maxmemory', '2mb']. */
  readonly args?: readonly string[];
  /** Sets --requirepass. */
  readonly password?: string;
  /** PEM files: the server also listens for TLS, at `tlsUrl`. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly ca: string };
}

export interface RedisServer {
  /** redis://127.0.0.1:PORT, without credentials. */
  readonly url: string;
  readonly port: number;
  /** rediss://127.0.0.1:PORT when started with `tls`, else null. */
  readonly tlsUrl: string | null;
  readonly dir: string;
  stop(): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  restart(signal?: NodeJS.Signals): Promise<void>;
}

export declare function start(dir: string, options?: RedisServerOptions): Promise<RedisServer>;

export interface RedisCluster {
  /** redis://HOST:PORT,HOST:PORT,...?cluster=true */
  readonly url: string;
  readonly nodes: readonly RedisServer[];
  stop(): Promise<unknown>;
}

export declare function startCluster(
  dir: string,
  options?: { readonly nodes?: number; readonly args?: readonly string[] },
): Promise<RedisCluster>;
