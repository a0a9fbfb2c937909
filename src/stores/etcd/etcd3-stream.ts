/**
 * Closing a stream of the npm `etcd3` client (a watch, a lease keep-alive) when kvmq is done with it. The client
 * takes any error on a stream that is still writable for a fault of its member, and answers by closing every
 * connection to that member; a cancel ends the stream with such an error. Half-closed first, the stream is no
 * longer writable when the cancel's error comes, so the connection stays for the calls that share it.
 */
export function closeStream(stream: { end(): unknown; cancel(): void }): void {
  try {
    stream.end();
    stream.cancel();
  } catch {
    // Already gone.
  }
}
