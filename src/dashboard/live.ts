/**
 * Live counts by server-sent events. Each watched key (one queue, or '*' for the front page) has one poller
 * shared by every browser watching it, running only while someone watches. Connections are capped, and a
 * browser that stops reading is dropped before its unsent data grows.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { QueueStatus } from '../model/types.js';
import type { LiveQueue } from './wire.js';

/** Unsent bytes a live connection may hold before it counts as not reading. */
const MAX_UNSENT_BYTES = 64 * 1024;
/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

export type LiveSource = () => Promise<readonly LiveQueue[]>;

export function liveQueue(status: QueueStatus): LiveQueue {
  const { queue, counts, total, paused, consumers } = status;
  return { queue, counts, total, paused, consumers: consumers.length };
}

class Poller {
  readonly clients = new Set<ServerResponse>();
  private last: string | null = null;
  private lastSentAt = Date.now();
  private running = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly source: LiveSource,
    intervalMs: number,
    private readonly onIdle: () => void,
  ) {
    this.timer = setInterval(() => void this.poll(), intervalMs);
    this.timer.unref();
    void this.poll();
  }

  add(res: ServerResponse): void {
    this.clients.add(res);
    if (this.last !== null) write(res, `data: ${this.last}\n\n`);
  }

  remove(res: ServerResponse): void {
    this.clients.delete(res);
    if (this.clients.size === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.timer);
    this.onIdle();
  }

  private async poll(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const data = JSON.stringify(await this.source());
      if (data !== this.last) {
        this.last = data;
        this.broadcast(`data: ${data}\n\n`);
      } else if (Date.now() - this.lastSentAt >= KEEPALIVE_MS) this.broadcast(': keepalive\n\n');
    } catch (error) {
      this.broadcast(
        `event: problem\ndata: ${JSON.stringify(error instanceof Error ? error.message : String(error))}\n\n`,
      );
    } finally {
      this.running = false;
    }
  }

  private broadcast(text: string): void {
    this.lastSentAt = Date.now();
    for (const res of this.clients) write(res, text);
  }
}

/** Writes, or drops a reader that lets unsent data pile up. */
function write(res: ServerResponse, text: string): void {
  // An ended stream stays listed until its 'close' event; a poll that was under way when it ended skips it.
  if (res.writableEnded || res.destroyed) return;
  if (res.writableLength > MAX_UNSENT_BYTES) {
    res.destroy();
    return;
  }
  res.write(text);
}

export class LiveHub {
  private readonly pollers = new Map<string, Poller>();
  private connections = 0;

  constructor(
    private readonly maxClients: number,
    private readonly intervalMs: number,
  ) {}

  /** Opens an event stream on `key`; false (nothing sent) when the connection cap is reached. */
  open(req: IncomingMessage, res: ServerResponse, key: string, source: LiveSource): boolean {
    if (this.connections >= this.maxClients) return false;
    this.connections++;
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Accel-Buffering': 'no',
    });
    res.write('retry: 3000\n\n');
    let poller = this.pollers.get(key);
    if (poller === undefined) {
      poller = new Poller(source, this.intervalMs, () => this.pollers.delete(key));
      this.pollers.set(key, poller);
    }
    const watching = poller;
    watching.add(res);
    const done = (): void => {
      this.connections--;
      watching.remove(res);
    };
    res.once('close', done);
    req.socket.setTimeout(0);
    return true;
  }

  /** Pollers running now (one per watched key). */
  get watched(): number {
    return this.pollers.size;
  }

  get clients(): number {
    return this.connections;
  }

  /** Ends every stream: the server can then close. */
  close(): void {
    for (const poller of [...this.pollers.values()]) {
      for (const res of poller.clients) res.end();
      poller.stop();
    }
  }
}
