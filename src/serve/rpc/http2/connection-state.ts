/**
 * What the transport counts for one HTTP/2 connection: the calls open on it, the handlers running for it,
 * the request bytes it holds, and the responses it has not taken yet. Over the output bound it stops taking
 * requests (new streams refused, open ones no longer read) until it drains; far over it, it is closed.
 */
import { constants, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { DRAIN_CHECK_MS, OUTPUT_HARD_BYTES, OUTPUT_SOFT_BYTES } from './limits.js';

export class ConnectionState {
  /** The streams of the calls open on this connection. */
  readonly streams = new Set<ServerHttp2Stream>();
  /** Handlers running, including those whose stream has been reset since. */
  inFlight = 0;
  /** Bytes of requests received but not yet complete. */
  bufferedRequestBytes = 0;
  private readonly paused = new Set<ServerHttp2Stream>();
  private drainTimer: NodeJS.Timeout | null = null;

  constructor(private readonly session: ServerHttp2Session) {}

  /** Response bytes written but not yet sent: held by flow control or a client that does not read. */
  backlog(): number {
    let bytes = 0;
    for (const stream of this.streams) bytes += stream.writableLength;
    return bytes;
  }

  /** Whether the connection may take a new request now; closes it when far over its output bound. */
  accepting(): boolean {
    if (this.drainTimer !== null) return false;
    const backlog = this.backlog();
    if (backlog > OUTPUT_HARD_BYTES) {
      this.session.destroy(undefined, constants.NGHTTP2_ENHANCE_YOUR_CALM);
      return false;
    }
    if (backlog <= OUTPUT_SOFT_BYTES) return true;
    this.startDraining();
    return false;
  }

  /** Stops reading a stream until the connection drains (its flow-control window then holds the client back). */
  hold(stream: ServerHttp2Stream): void {
    stream.pause();
    this.paused.add(stream);
    this.startDraining();
  }

  forget(stream: ServerHttp2Stream): void {
    this.streams.delete(stream);
    this.paused.delete(stream);
  }

  private startDraining(): void {
    if (this.drainTimer !== null) return;
    this.drainTimer = setInterval(() => {
      const backlog = this.backlog();
      if (backlog > OUTPUT_HARD_BYTES || this.session.destroyed) {
        this.stop();
        this.session.destroy(undefined, constants.NGHTTP2_ENHANCE_YOUR_CALM);
        return;
      }
      if (backlog > OUTPUT_SOFT_BYTES / 2) return;
      this.stop();
      for (const stream of this.paused) stream.resume();
      this.paused.clear();
    }, DRAIN_CHECK_MS);
  }

  stop(): void {
    if (this.drainTimer !== null) clearInterval(this.drainTimer);
    this.drainTimer = null;
  }
}
