/** The Watch service's messages. */
import type { HeaderCodec } from './header.js';
import { eventSize, writeEvent } from './kv.js';
import type { Event, WatchCreateRequest, WatchRequest, WatchResponse } from './types.js';
import { lenFieldSize, Reader, varintSize, WIRE_LEN, WIRE_VARINT, Writer } from './wire.js';

const EMPTY = Buffer.alloc(0);

function readCreate(r: Reader): WatchCreateRequest {
  const req: WatchCreateRequest = {
    key: EMPTY,
    rangeEnd: EMPTY,
    startRevision: 0,
    progressNotify: false,
    filters: [],
    prevKv: false,
    watchId: 0,
    fragment: false,
  };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        req.key = r.bytes();
        break;
      case (2 << 3) | WIRE_LEN:
        req.rangeEnd = r.bytes();
        break;
      case (3 << 3) | WIRE_VARINT:
        req.startRevision = r.int64();
        break;
      case (4 << 3) | WIRE_VARINT:
        req.progressNotify = r.bool();
        break;
      case (5 << 3) | WIRE_VARINT:
      case (5 << 3) | WIRE_LEN:
        r.enums(tag & 7, req.filters);
        break;
      case (6 << 3) | WIRE_VARINT:
        req.prevKv = r.bool();
        break;
      case (7 << 3) | WIRE_VARINT:
        req.watchId = r.int64();
        break;
      case (8 << 3) | WIRE_VARINT:
        req.fragment = r.bool();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return req;
}

function readWatchId(r: Reader): number {
  let id = 0;
  while (!r.done) {
    const tag = r.tag();
    if (tag === ((1 << 3) | WIRE_VARINT)) id = r.int64();
    else r.skip(tag & 7);
  }
  return id;
}

export function decodeWatchRequest(buf: Buffer): WatchRequest {
  const r = new Reader(buf);
  let req: WatchRequest = { kind: 'none' };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        req = { kind: 'create', create: readCreate(r.message()) };
        break;
      case (2 << 3) | WIRE_LEN:
        req = { kind: 'cancel', watchId: readWatchId(r.message()) };
        break;
      case (3 << 3) | WIRE_LEN:
        r.message();
        req = { kind: 'progress' };
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return req;
}

function sizeOf(h: HeaderCodec, resp: WatchResponse): number {
  let size = h.fieldSize(resp.revision, true);
  if (resp.watchId !== 0) size += 1 + varintSize(resp.watchId);
  if (resp.created) size += 2;
  if (resp.canceled) size += 2;
  if (resp.compactRevision !== 0) size += 1 + varintSize(resp.compactRevision);
  if (resp.cancelReason !== '') size += lenFieldSize(Buffer.byteLength(resp.cancelReason));
  if (resp.fragment) size += 2;
  for (const ev of resp.events) size += eventField(ev).length;
  return size;
}

/**
 * An event as field 11 of a WatchResponse, encoded once: the same event goes
 * to every watcher of its key, and fan-out should not encode it again each time.
 */
const encodedEvents = new WeakMap<Event, Buffer>();

function eventField(ev: Event): Buffer {
  let field = encodedEvents.get(ev);
  if (field === undefined) {
    const inner = eventSize(ev);
    const w = new Writer(1 + varintSize(inner) + inner);
    w.tag(11, WIRE_LEN);
    w.uint(inner);
    writeEvent(w, ev);
    field = w.finish();
    encodedEvents.set(ev, field);
  }
  return field;
}

/** Size of the encoded response, used to split large ones into fragments. */
export function watchResponseSize(h: HeaderCodec, resp: WatchResponse): number {
  return sizeOf(h, resp);
}

export function encodeWatchResponse(h: HeaderCodec, resp: WatchResponse): Buffer {
  const w = new Writer(sizeOf(h, resp));
  h.write(w, resp.revision, true);
  if (resp.watchId !== 0) {
    w.tag(2, WIRE_VARINT);
    w.uint(resp.watchId);
  }
  if (resp.created) {
    w.tag(3, WIRE_VARINT);
    w.uint(1);
  }
  if (resp.canceled) {
    w.tag(4, WIRE_VARINT);
    w.uint(1);
  }
  if (resp.compactRevision !== 0) {
    w.tag(5, WIRE_VARINT);
    w.uint(resp.compactRevision);
  }
  if (resp.cancelReason !== '') {
    w.tag(6, WIRE_LEN);
    w.bytes(Buffer.from(resp.cancelReason));
  }
  if (resp.fragment) {
    w.tag(7, WIRE_VARINT);
    w.uint(1);
  }
  for (const ev of resp.events) w.raw(eventField(ev));
  return w.finish();
}
