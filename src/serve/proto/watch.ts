/** The Watch service's messages between the generated codecs and the engine. */
import { asBuffer } from './buffer.js';
import { decodeMessage } from './decode-error.js';
import { encodeMessage, varintSize } from './encode.js';
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
 * it again each time. The bytes are appended as field 11, as the generated encoder would write them (the
 * events are the response's last field).
 */
const encodedEvents = new WeakMap<Event, Buffer>();

function eventBytes(ev: Event): Buffer {
  let encoded = encodedEvents.get(ev);
  if (encoded === undefined) {
    encoded = encodeMessage(mvccpb.Event, eventFields(ev));
    encodedEvents.set(ev, encoded);
  }
  return encoded;
}

function responseFields(h: ResponseHeaders, resp: WatchResponse): etcdserverpb.WatchResponse.$Properties {
  return {
    header: h.top(resp.revision),
    watch_id: resp.watchId,
    created: resp.created,
    canceled: resp.canceled,
    compact_revision: resp.compactRevision,
    cancel_reason: resp.cancelReason,
    fragment: resp.fragment,
  };
}

/** Size of the encoded response, used to split large ones into fragments. */
export function watchResponseSize(h: ResponseHeaders, resp: WatchResponse): number {
  let size = encodeMessage(etcdserverpb.WatchResponse, responseFields(h, resp)).length;
  for (const ev of resp.events) {
    const length = eventBytes(ev).length;
    size += 1 + varintSize(length) + length;
  }
  return size;
}

export function encodeWatchResponse(h: ResponseHeaders, resp: WatchResponse): Buffer {
  // Encoded before the response, which takes the shared Writer.
  const events = resp.events.map(eventBytes);
  return encodeMessage(etcdserverpb.WatchResponse, responseFields(h, resp), (writer) => {
    for (const ev of events) writer.uint32(EVENTS_TAG).bytes(ev);
  });
}
