/**
 * When the ZooKeeper server last heard from this session, as far as the client can prove it: ZooKeeper ends a
 * session (and drops its ephemeral `claim` nodes) once it has heard nothing for the session timeout, so a claim
 * held under it lasts at least until the send time of the last request it answered plus that timeout.
 *
 * A session answers its requests in the order they were sent (pings, connect and auth included); only watch
 * notifications come unasked. So each request frame written to the socket records its send time, and each reply
 * frame takes the oldest: the server heard that request no sooner than it was sent. Nothing is sent for this; it
 * reads what the client and kvmq send anyway (the client pings when idle).
 */

// The xid of a watch notification: a frame that answers no request.
const XID_NOTIFICATION = -1;

interface Manager {
  socket?: unknown;
  onSocketConnected?: () => void;
}

interface WritableSocket {
  write: (chunk: unknown, ...rest: unknown[]) => boolean;
}

export class SessionHeard {
  /** Send times (performance.now()) of the requests on the current socket that await their reply, oldest first. */
  private sent: number[] = [];
  private head = 0;
  /** The send time of the last request answered: the server heard from the session no sooner. */
  heardAt = -Infinity;

  /** Call before `client.connect()`: from then on every socket the client opens is followed. */
  follow(manager: Manager): void {
    const connected = manager.onSocketConnected;
    if (typeof connected !== 'function') return;
    const watch = (socket: unknown): void => this.watch(socket);
    // The client binds this handler to each socket it opens.
    manager.onSocketConnected = function (this: Manager): void {
      watch(this.socket);
      connected.call(this);
    };
  }

  /** A new socket: its requests start afresh, each write counted before it goes. */
  private watch(socket: unknown): void {
    this.sent = [];
    this.head = 0;
    const writable = socket as WritableSocket | undefined;
    if (writable === undefined || typeof writable.write !== 'function') return;
    const write = writable.write;
    const sending = (chunk: unknown): void => {
      if (Buffer.isBuffer(chunk)) this.sending(chunk);
    };
    writable.write = function (this: WritableSocket, chunk: unknown, ...rest: unknown[]): boolean {
      sending(chunk);
      return write.call(this, chunk, ...rest);
    };
  }

  /** One whole frame the server sent (frames.ts splits them). */
  replied(frame: Buffer): void {
    // The connect reply's first field (the protocol version, 0) sits where a reply's xid would.
    if (frame.length >= 8 && frame.readInt32BE(4) === XID_NOTIFICATION) return;
    if (this.head >= this.sent.length) return;
    const at = this.sent[this.head] ?? -Infinity;
    this.head += 1;
    if (this.head > 1024 && this.head * 2 > this.sent.length) {
      this.sent = this.sent.slice(this.head);
      this.head = 0;
    }
    if (at > this.heardAt) this.heardAt = at;
  }

  /** A chunk written to the socket: one send time per request frame in it (each is a length, then the body). */
  private sending(chunk: Buffer): void {
    const now = performance.now();
    for (let at = 0; at + 4 <= chunk.length; at += 4 + chunk.readInt32BE(at)) this.sent.push(now);
  }
}
