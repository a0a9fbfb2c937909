/** What a store brings to the conformance suite. */
import type { StoreCapabilities } from '../../src/stores/contract/contract.js';

export type Capabilities = StoreCapabilities;

/** The yes/no capabilities; a test that needs one is named after it and runs only on stores that have it. */
export type CapabilityFlag = {
  [K in keyof Capabilities]: Capabilities[K] extends boolean ? K : never;
}[keyof Capabilities];

export interface StoreFixture {
  /** Shown in test names, e.g. 'sqlite'. */
  readonly name: string;
  /** A store URL naming a fresh, isolated namespace (file, chroot, key prefix, db) on every call. */
  url(): Promise<string>;
  /**
   * The URL names one server as host:port, which a test may reach through a proxy of its own instead (to blackhole
   * the link). Absent: an embedded store.
   */
  readonly overNetwork?: boolean;
  /**
   * For a store whose claims end with its session (a ZooKeeper session, an etcd lease): the URL option that makes
   * the session end `ms` after the server last heard from it.
   */
  readonly shortSession?: { readonly option: string; readonly ms: number };
  /**
   * The nodes of the big tree the flows suite writes at once (a root, 9 parents and their leaves), where the store's
   * one atomic write holds fewer than the default 1,000 (ZooKeeper: a multi within jute.maxbuffer).
   */
  readonly flowNodes?: number;
  /**
   * The store's finish removes a plain success of a queue that keeps none (`keepDone: 0`) at once, where others
   * leave it to the next GC (the SQL stores).
   */
  readonly removesSuccessesAtFinish?: boolean;
  /** What the store is expected to declare; the suite checks the store says the same. */
  readonly capabilities?: Partial<Capabilities>;
}
