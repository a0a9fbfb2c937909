/**
 * The text a queue's events are kept in since schema 7, in the queue row's buffer and in kvmq_events rows:
 * records one after another, each saying where it ends.
 *
 * - `@<ms, base 36>;`: the time of the events after it, until the next one. A transaction writes one before its
 *   events, so each event keeps its own time and a row's list needs no other.
 * - An event: its type as a letter (`a` + its code in QUEUE_EVENT_TYPES, upper case when an error follows),
 *   the attempt in base 36, the id, then the error if any.
 * - An id: `~` and 22 characters for a lower-case UUID's 16 bytes (base64url, two characters per three hex
 *   digits), or `'`, its length in base 36, `:` and the id as given. An error: its length, `:` and the text.
 *
 * An event of a kvmq id takes 25 characters where a JSON item took 46 (63 with its time): ids are the bulk of
 * the bytes events add to a commit, and so of the pages it writes.
 */

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
// Two characters as 12 bits; 12 bits as three hex digits.
const B64_VALUE = new Int16Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) B64_VALUE[B64.charCodeAt(i)] = i;
const HEX3 = Array.from({ length: 4096 }, (_, v) => v.toString(16).padStart(3, '0'));

const AT = 64; // '@'
const UUID_MARK = 126; // '~'
const RAW_MARK = 39; // "'"
const DASH = 45;

/** A decoded event: type code, id, attempt, the error or null, when it was written. */
export type DecodedEvent = readonly [code: number, id: string, attempt: number, error: string | null, at: number];

/** The record that times the events after it. */
export function timeRecord(now: number): string {
  return `@${now.toString(36)};`;
}

/** The time of a list's first events (its oldest, as writers append), or null if it does not start with one. */
export function firstTime(text: string): number | null {
  if (text.charCodeAt(0) !== AT) return null;
  const end = text.indexOf(';');
  return end < 0 ? null : parseInt(text.slice(1, end), 36);
}

/** One event's record. */
export function eventRecord(code: number, id: string, attempt: number, error: string | null): string {
  const head = String.fromCharCode((error === null ? 97 : 65) + code) + attempt.toString(36);
  const idText = compactUuid(id) ?? `'${id.length.toString(36)}:${id}`;
  return error === null ? head + idText : `${head}${idText}${error.length.toString(36)}:${error}`;
}

/** A list's events, in order. Throws on text this module did not write. */
export function decodeEvents(text: string): DecodedEvent[] {
  const events: DecodedEvent[] = [];
  let at = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === AT) {
      const end = text.indexOf(';', i);
      if (end < 0) break;
      at = parseInt(text.slice(i + 1, end), 36);
      i = end + 1;
      continue;
    }
    const withError = c < 97;
    const code = c - (withError ? 65 : 97);
    let j = i + 1;
    while (j < text.length && text.charCodeAt(j) !== UUID_MARK && text.charCodeAt(j) !== RAW_MARK) j++;
    if (j >= text.length) throw new Error('a queue event list ends inside an event');
    const attempt = parseInt(text.slice(i + 1, j), 36);
    let id: string;
    if (text.charCodeAt(j) === UUID_MARK) {
      id = expandUuid(text, j + 1);
      i = j + 23;
    } else {
      [id, i] = counted(text, j + 1);
    }
    let error: string | null = null;
    if (withError) [error, i] = counted(text, i);
    events.push([code, id, attempt, error, at]);
  }
  return events;
}

/** `<length, base 36>:<text>` at `from`: the text and where the next record starts. */
function counted(text: string, from: number): [string, number] {
  const colon = text.indexOf(':', from);
  const start = colon + 1;
  const end = start + parseInt(text.slice(from, colon), 36);
  if (colon < 0 || !(end <= text.length)) throw new Error('a queue event list ends inside an event');
  return [text.slice(start, end), end];
}

// A UUID's hex digits, by position, and the scratch its 22 characters are made in.
const DIGIT_AT = Uint8Array.from([
  0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17, 19, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,
]);
const B64_CODE = Uint8Array.from(B64, (c) => c.charCodeAt(0));
// Every UTF-16 code unit's hex digit value, -1 for all but 0-9 and a-f: no range check per character.
const DIGIT = new Int8Array(65536).fill(-1);
for (let i = 0; i < 16; i++) DIGIT['0123456789abcdef'.charCodeAt(i)] = i;
const out = new Uint16Array(22);

/**
 * `~` and 22 characters for a lower-case UUID (the ids kvmq makes); null for any other id. Made with one
 * fromCharCode rather than eleven concatenations: half the time, and this runs for every event written.
 */
function compactUuid(id: string): string | null {
  if (id.length !== 36) return null;
  if (id.charCodeAt(8) !== DASH || id.charCodeAt(13) !== DASH || id.charCodeAt(18) !== DASH) return null;
  if (id.charCodeAt(23) !== DASH) return null;
  // A digit's value, -1 for anything else (any code unit): any -1 makes a group negative, and so `bad`.
  let bad = 0;
  let o = 0;
  // 32 digits: ten groups of three, two characters each, and two digits left over, two characters.
  for (let k = 0; k < 30; k += 3) {
    const bits =
      ((DIGIT[id.charCodeAt(DIGIT_AT[k] ?? 0)] ?? -1) << 8) |
      ((DIGIT[id.charCodeAt(DIGIT_AT[k + 1] ?? 0)] ?? -1) << 4) |
      (DIGIT[id.charCodeAt(DIGIT_AT[k + 2] ?? 0)] ?? -1);
    bad |= bits;
    out[o++] = B64_CODE[(bits >> 6) & 63] ?? 0;
    out[o++] = B64_CODE[bits & 63] ?? 0;
  }
  const last = ((DIGIT[id.charCodeAt(34)] ?? -1) << 4) | (DIGIT[id.charCodeAt(35)] ?? -1);
  bad |= last;
  out[20] = B64_CODE[(last >> 6) & 63] ?? 0;
  out[21] = B64_CODE[last & 63] ?? 0;
  if (bad < 0) return null;
  const c = out;
  return `~${String.fromCharCode(
    c[0] ?? 0,
    c[1] ?? 0,
    c[2] ?? 0,
    c[3] ?? 0,
    c[4] ?? 0,
    c[5] ?? 0,
    c[6] ?? 0,
    c[7] ?? 0,
    c[8] ?? 0,
    c[9] ?? 0,
    c[10] ?? 0,
    c[11] ?? 0,
    c[12] ?? 0,
    c[13] ?? 0,
    c[14] ?? 0,
    c[15] ?? 0,
    c[16] ?? 0,
    c[17] ?? 0,
    c[18] ?? 0,
    c[19] ?? 0,
    c[20] ?? 0,
    c[21] ?? 0,
  )}`;
}

/** The UUID whose 22 characters start at `from`. */
function expandUuid(text: string, from: number): string {
  let hex = '';
  for (let k = 0; k < 11; k++) {
    const high = B64_VALUE[text.charCodeAt(from + 2 * k)] ?? 0;
    const low = B64_VALUE[text.charCodeAt(from + 2 * k + 1)] ?? 0;
    const three = HEX3[(high << 6) | low] ?? '000';
    hex += k < 10 ? three : three.slice(1);
  }
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
