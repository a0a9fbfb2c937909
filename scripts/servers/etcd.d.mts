/** Types of scripts/servers/etcd.mjs, for the TypeScript tests and benchmarks that start their own etcd. */
export declare const packages: string[];
export declare const binary: string;
export declare const ETCDCTL: string;

export interface EtcdOptions {
  /** --auto-compaction-retention (periodic), e.g. '1m'. */
  readonly compactionRetention?: string;
  /** --quota-backend-bytes. */
  readonly quotaBytes?: number;
  readonly extraArgs?: readonly string[];
  /**
   * startCluster only: the host:port the other members reach member `name` at, e.g. a proxy in front of its
   * `peerPort` that a test can cut; by default the member's own peer port.
   */
  readonly peerAddress?: (name: string, peerPort: number) => Promise<string>;
}

export interface EtcdMember {
  readonly name: string;
  /** 127.0.0.1:PORT of its client URL. */
  readonly endpoint: string;
  readonly pid: number | undefined;
  readonly dataDir: string;
  stop(): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same data dir and ports. */
  restart(): Promise<void>;
}

export interface EtcdServer {
  /** etcd://127.0.0.1:PORT */
  readonly url: string;
  readonly endpoints: string;
  readonly dir: string;
  readonly member: EtcdMember;
  stop(): Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  restart(): Promise<void>;
}

export declare function start(dir: string, options?: EtcdOptions): Promise<EtcdServer>;

export interface EtcdCluster {
  /** etcd://HOST:PORT,HOST:PORT,... */
  readonly url: string;
  readonly endpoints: string;
  readonly members: readonly EtcdMember[];
  /** The member leading now. */
  leader(): Promise<EtcdMember>;
  stop(): Promise<void>;
}

export declare function startCluster(dir: string, size?: number, options?: EtcdOptions): Promise<EtcdCluster>;

export interface EtcdctlResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export declare function etcdctl(
  endpoints: string,
  args: readonly string[],
  options?: { input?: string; timeoutMs?: number; env?: Record<string, string> },
): Promise<EtcdctlResult>;
