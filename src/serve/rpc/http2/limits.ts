/**
 * The bounds of the gRPC transport: nghttp2's own (passed to node:http2's createServer) and the ones kvmq
 * keeps around it. docs/serve.md lists each with its reason; change both together.
 */
import type { SecureServerOptions, ServerOptions } from 'node:http2';

const KiB = 1024;
const MiB = 1024 * KiB;

/** Streams a client may have open at once on one connection (etcd's grpc-go allows 2^32-1). */
export const MAX_CONCURRENT_STREAMS = 128;
/** Receive window of each stream: what a client may send before the server has read it. */
export const STREAM_WINDOW_BYTES = 512 * KiB;
/** Receive window of the connection, above the 64 KiB HTTP/2 starts with, so large puts need few round trips. */
export const CONNECTION_WINDOW_BYTES = 4 * MiB;

/** Options for node:http2; every one is set on purpose (docs/serve.md, "Limits"). */
export const NGHTTP2_OPTIONS = {
  // nghttp2's memory per session (header tables, frames queued to send), in MB; past it new streams are refused.
  maxSessionMemory: 32,
  // A header block that decodes to more than this (an HPACK bomb) resets its stream.
  maxHeaderListPairs: 64,
  // Pings the server itself may have unanswered (it sends none); a client's pings are bounded by nghttp2's
  // queue of unsent acknowledgements and by Node not reading while a write is pending.
  maxOutstandingPings: 2,
  // Entries in one SETTINGS frame; HTTP/2 defines seven.
  maxSettings: 16,
  // Frames that break the protocol before the connection is closed.
  maxSessionInvalidFrames: 32,
  // Streams nghttp2 refuses (over the concurrency limit, out of session memory) before the connection is closed.
  maxSessionRejectedStreams: 64,
  // A TLS socket that negotiated no known protocol is closed after this long if nothing takes it.
  unknownProtocolTimeout: 2000,
  // Streams the server may open towards the client before its SETTINGS arrive; the server opens none.
  peerMaxConcurrentStreams: 100,
  settings: {
    maxConcurrentStreams: MAX_CONCURRENT_STREAMS,
    initialWindowSize: STREAM_WINDOW_BYTES,
    // gRPC metadata is a few short headers; etcd's token is under 100 bytes.
    maxHeaderListSize: 16 * KiB,
    enablePush: false,
  },
} as const satisfies ServerOptions & SecureServerOptions;

/** Handlers running at once for one connection, counting those whose stream the client already reset. */
export const MAX_CALLS_IN_FLIGHT = 256;
/** Bytes of requests not yet complete that one connection may hold; beyond it the call is refused. */
export const MAX_BUFFERED_REQUEST_BYTES = 32 * MiB;
/**
 * Responses not yet taken by the client, per connection: past the soft bound, the connection's new streams
 * are refused and its streams stop being read until it falls under half of it; past the hard bound it is closed.
 */
export const OUTPUT_SOFT_BYTES = 32 * MiB;
export const OUTPUT_HARD_BYTES = 128 * MiB;
/** How often a paused connection is checked for having drained. */
export const DRAIN_CHECK_MS = 50;
/** A new plaintext connection must show whether it speaks HTTP/2 or HTTP/1 within this time. */
export const SNIFF_TIMEOUT_MS = 10_000;
/** Time running calls get at shutdown before their connections are cut. */
export const SHUTDOWN_GRACE_MS = 1000;
