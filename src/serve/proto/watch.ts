/** The Watch service's messages between the generated codecs and the engine. */
import type protobuf from 'protobufjs/minimal.js';
import { asBuffer } from './buffer.js';
import { decodeMessage } from './decode-error.js';
import { etcdserverpb, mvccpb } from './etcd.js';
import type { ResponseHeaders } from './header.js';
import { toNumber } from './int64.js';
import { eventFields } from './kv.js';
import type { Event, WatchCreateRequest, WatchRequest, WatchResponse } from './types.js';

function createRequest(m: etcdserverpb.WatchCreateRequest.$Properties): WatchCreateRequest {
  return {
    key: asBuffer(m.key),
    rangeEnd: asBuffer(m.range_end),
    startRevision: toNumber(m.start_revision),
    progressNotify: m.progress_notify === true,
    filters: m.filters ?? [],
    prevKv: m.prev_kv === true,
    watchId: toNumber(m.watch_id),
    fragment: m.fragment === true,
  };
}

export function decodeWatchRequest(buf: Buffer): WatchRequest {
  const m = decodeMessage(etcdserverpb.WatchRequest, buf);
  switch (m.request_union) {
    case 'create_request':
      return { kind: 'create', create: createRequest(m.create_request) };
    case 'cancel_request':
      return { kind: 'cancel', watchId: toNumber(m.cancel_request.watch_id) };
    case 'progress_request':
      return { kind: 'progress' };
    default:
      return { kind: 'none' };
  }
}

/** WatchResponse.events: field 11, length-delimited. */
const EVENTS_TAG = (11 << 3) | 2;

/**
 * Each event encoded once: the same event goes to every watcher of its key, and fan-out should not encode
 * it again each time. The bytes are appended as field 11, as the generated encoder would write them.
 */
const encodedEvents = new WeakMap<Event, Buffer>();

function eventBytes(ev: Event): Buffer {
  let encoded = encodedEvents.get(ev);
  if (encoded === undefined) {
    encoded = mvccpb.Event.encode(eventFields(ev)).finish() as Buffer;
    encodedEvents.set(ev, encoded);
  }
  return encoded;
}

function writeResponse(h: ResponseHeaders, resp: WatchResponse): protobuf.Writer {
  const writer = etcdserverpb.WatchResponse.encode({
    header: h.top(resp.revision),
    watch_id: resp.watchId,
    created: resp.created,
    canceled: resp.canceled,
    compact_revision: resp.compactRevision,
    cancel_reason: resp.cancelReason,
    fragment: resp.fragment,
  });
  for (const ev of resp.events) writer.uint32(EVENTS_TAG).bytes(eventBytes(ev));
  return writer;
}

/** Size of the encoded response, used to split large ones into fragments. */
export function watchResponseSize(h: ResponseHeaders, resp: WatchResponse): number {
  return writeResponse(h, resp).pos;
}

export function encodeWatchResponse(h: ResponseHeaders, resp: WatchResponse): Buffer {
  return writeResponse(h, resp).finish() as Buffer;
}
