/**
 * node-zookeeper-client parses one reply per call and then copies the rest
 * of the chunk (Buffer.concat) to parse the next: a 64 KiB chunk of small
 * replies costs megabytes of copying and garbage. Handed exactly one whole
 * reply frame per call, it never copies. This splits the socket's chunks into
 * frames (a 4-byte big-endian length, then the body) before the client sees
 * them, and lets kvmq take the replies to its own requests (direct.ts).
 * Its internals are checked first; if they differ, nothing changes.
 */
import type * as Zk from 'node-zookeeper-client';

interface ConnectionManager {
  socket?: unknown;
  onSocketData?: (chunk: Buffer) => void;
}

/**
 * Call before `client.connect()`: the client binds its data handler when it opens each socket.
 * `intercept` sees each frame first; a frame it takes (returns true for) never reaches the client.
 */
export function parseWholeFrames(client: Zk.Client, intercept: (frame: Buffer) => boolean): void {
  const manager = (client as unknown as { connectionManager?: ConnectionManager }).connectionManager;
  const original = manager?.onSocketData;
  if (manager === undefined || typeof original !== 'function') return;
  let pending: Buffer | null = null;
  let socket: unknown = null;
  manager.onSocketData = function (this: ConnectionManager, chunk: Buffer): void {
    // A new connection starts a new stream: a partial frame of the old one is dropped.
    if (this.socket !== socket) {
      socket = this.socket;
      pending = null;
    }
    const data: Buffer = pending === null ? chunk : Buffer.concat([pending, chunk]);
    pending = null;
    let offset = 0;
    while (data.length - offset >= 4) {
      const end = offset + 4 + data.readInt32BE(offset);
      if (end > data.length) break;
      const frame = data.subarray(offset, end);
      if (!intercept(frame)) original.call(this, frame);
      // The reply may have closed the connection; the rest belongs to no one.
      if (this.socket !== socket) return;
      offset = end;
    }
    if (offset < data.length) pending = data.subarray(offset);
  };
}
