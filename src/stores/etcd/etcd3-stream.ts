/**
 * The two ways kvmq ends a stream of the npm `etcd3` client (a watch, a lease keep-alive). The client takes any
 * error on a stream that is still writable for a fault of its member, and answers by closing every connection
 * to that member; a cancel ends the stream with such an error.
 */
interface EtcdStream {
  end(): unknown;
  cancel(): void;
}

/**
 * Done with the stream: half-closed first, it is no longer writable when the cancel's error comes, so the
 * connection stays for the calls that share it.
 */
export function closeStream(stream: EtcdStream): void {
  try {
    stream.end();
    stream.cancel();
  } catch {
    // Already gone.
  }
}

/** The stream's member is failing: cancelled while writable, so the client drops that member's connections. */
export function failStream(stream: Pick<EtcdStream, 'cancel'>): void {
  try {
    stream.cancel();
  } catch {
    // Already gone.
  }
}
