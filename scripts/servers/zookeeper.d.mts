/** Types for scripts/servers/zookeeper.mjs, for the TypeScript tests and benchmarks that start their own servers. */
export declare const packages: string[];
export declare const binary: string;
export declare const zkCli: string;
export declare function classpath(extra?: string[]): string;
export declare function fourLetterWord(port: number, word: string): Promise<string>;

export interface ZookeeperNode {
  readonly id: number;
  readonly dataDir: string;
  readonly clientPort: number;
}

export interface StartOptions {
  readonly tickTime?: number;
  readonly heap?: string;
  readonly snapCount?: number;
}

export interface Ensemble {
  /** zookeeper://host:port,... (no path) */
  readonly url: string;
  readonly hosts: string;
  readonly nodes: readonly ZookeeperNode[];
  killNode(i: number): Promise<void>;
  stopNode(i: number): Promise<void>;
  startNode(i: number): Promise<void>;
  stop(): Promise<void>;
}

export declare function startEnsemble(dir: string, n?: number, options?: StartOptions): Promise<Ensemble>;

export declare function start(
  dir: string,
  options?: StartOptions,
): Promise<{ url: string; port: number; dir: string; ensemble: Ensemble; stop(): Promise<void> }>;
