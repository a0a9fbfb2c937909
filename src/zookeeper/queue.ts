/**
 * What a store knows about one queue: its paths, its sub-queues and done list
 * (with their cached bucket listings), the task buckets known to exist, and
 * the check that the queue's dir is kvmq's.
 */
import { StoreLayoutError } from '../errors.js';
import { BucketedList } from './buckets.js';
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { QUEUE_MARKER, QueuePaths, classNode } from './layout.js';

export class QueueContext {
  readonly paths: QueuePaths;
  readonly done: BucketedList;
  private readonly classes = new Map<string, BucketedList>();
  private readonly taskBuckets = new Set<string>();
  private ensured: Promise<void> | null = null;

  constructor(
    private readonly zk: ZkSession,
    readonly name: string,
  ) {
    this.paths = new QueuePaths(name);
    this.done = new BucketedList(zk, this.paths.done);
  }

  /** The sub-queue of one filter class. */
  sub(filterClass: string): BucketedList {
    let list = this.classes.get(filterClass);
    if (list === undefined) {
      list = new BucketedList(this.zk, this.paths.classDir(filterClass));
      this.classes.set(filterClass, list);
    }
    return list;
  }

  knowsTaskBucket(path: string): boolean {
    return this.taskBuckets.has(path);
  }

  async makeTaskBucket(path: string): Promise<void> {
    await this.zk.ensure(path);
    this.taskBuckets.add(path);
  }

  noteTaskBucket(path: string): void {
    this.taskBuckets.add(path);
  }

  /** Forgets everything cached (after clear()). */
  reset(): void {
    for (const list of this.classes.values()) list.reset();
    this.done.reset();
    this.taskBuckets.clear();
  }

  /** Makes the queue's skeleton unless it exists; refuses a dir that is not a kvmq queue. */
  ensure(): Promise<void> {
    this.ensured ??= this.create().catch((error: unknown) => {
      this.ensured = null;
      throw error;
    });
    return this.ensured;
  }

  /** True when the queue's dir exists (and is kvmq's); reads never create it. */
  async exists(): Promise<boolean> {
    if (this.ensured !== null) {
      await this.ensured;
      return true;
    }
    try {
      const { data } = await this.zk.get(this.paths.dir);
      this.checkMarker(data);
      return true;
    } catch (error) {
      if (isZkError(error, ZkCode.NoNode)) return false;
      throw error;
    }
  }

  private async create(): Promise<void> {
    for (;;) {
      try {
        const { data } = await this.zk.get(this.paths.dir);
        this.checkMarker(data);
        // A queue made by an older run may lack nodes added since; make any missing.
        const { children } = await this.zk.children(this.paths.dir);
        for (const node of this.paths.skeleton().slice(1)) {
          const name = node.path.slice(this.paths.dir.length + 1);
          if (!name.includes('/') && !children.includes(name)) {
            await this.zk.ensure(node.path, Buffer.from(node.data));
          }
        }
        return;
      } catch (error) {
        if (!isZkError(error, ZkCode.NoNode)) throw error;
      }
      try {
        await this.zk.multi(
          this.paths.skeleton().map((n) => ({ op: 'create', path: n.path, data: Buffer.from(n.data) })),
        );
        return;
      } catch (error) {
        // Another process made it first: read it again.
        if (!isZkError(error, ZkCode.NodeExists)) throw error;
      }
    }
  }

  private checkMarker(data: Buffer): void {
    if (data.toString('utf8') !== QUEUE_MARKER) {
      throw new StoreLayoutError(
        `ZooKeeper node ${this.paths.dir} exists but is not a kvmq queue (its data is not kvmq's marker); ` +
          'use another queue name, or another dir in the store URL',
      );
    }
  }
}

export { classNode };
