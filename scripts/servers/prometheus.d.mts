/** Types of scripts/servers/prometheus.mjs, for the tests that scrape kvmq's metrics with a real Prometheus. */
export declare const packages: string[];
export declare const binary: string;

export interface PrometheusServer {
  /** http://127.0.0.1:PORT, its HTTP API's base. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

export declare function ensure(): void;
export declare function start(dir: string, targets: readonly string[]): Promise<PrometheusServer>;
