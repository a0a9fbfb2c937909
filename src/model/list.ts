/**
 * Listing messages by state: the options a caller gives, checked, and the
 * cursor that carries a store's position from one page to the next.
 */
import { checkBoolean, checkCount, checkKnownKeys, checkPlainObject } from './validate.js';
import { MESSAGE_STATES, type ListOptions, type MessageState, type Outcome } from './types.js';

export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1000;
const OUTCOMES: readonly Outcome[] = ['success', 'error', 'retry'];
const LIST_KEYS = ['state', 'states', 'outcome', 'limit', 'cursor', 'payload'] as const;
const MAX_CURSOR_CHARS = 4096;

/** A listing as a store receives it: every field checked and present. */
export interface ListQuery {
  /** Not empty, no duplicates, in MESSAGE_STATES order. */
  readonly states: readonly MessageState[];
  readonly outcome: Outcome | null;
  readonly limit: number;
  readonly cursor: string | null;
  readonly payload: boolean;
}

/**
 * `available`: the states the store has (a store without flows has no `waiting-children`); the query keeps only
 * those, so it may have none, and a cursor is checked against what is kept.
 */
export function checkListOptions(value: unknown, available: readonly MessageState[] = MESSAGE_STATES): ListQuery {
  const options = checkPlainObject('list options', value) as ListOptions;
  checkKnownKeys('list', options, LIST_KEYS);
  if (options.state !== undefined && options.states !== undefined) {
    throw new TypeError("list takes 'state' or 'states', not both");
  }
  let wanted: readonly unknown[] = MESSAGE_STATES;
  if (options.state !== undefined) wanted = [options.state];
  else if (options.states !== undefined) {
    const states: unknown = options.states;
    if (!Array.isArray(states) || states.length === 0) {
      throw new TypeError(`states must be a non-empty array of states: ${MESSAGE_STATES.join(', ')}`);
    }
    wanted = states;
  }
  for (const state of wanted) checkState(state);
  const outcome: unknown = options.outcome;
  if (outcome !== undefined && !OUTCOMES.includes(outcome as Outcome)) {
    throw new TypeError(`outcome ${JSON.stringify(outcome)} is not one of ${OUTCOMES.join(', ')}`);
  }
  const cursor: unknown = options.cursor;
  if (cursor !== undefined && (typeof cursor !== 'string' || !/^[A-Za-z0-9_-]{1,4096}$/.test(cursor))) {
    throw new TypeError('cursor must be the cursor string of a previous page of the same listing');
  }
  const query: ListQuery = {
    states: available.filter((state) => wanted.includes(state)),
    outcome: (outcome as Outcome | undefined) ?? null,
    limit: options.limit === undefined ? DEFAULT_LIST_LIMIT : checkCount('limit', options.limit, 1, MAX_LIST_LIMIT),
    cursor: cursor ?? null,
    payload: options.payload === undefined ? false : checkBoolean('payload', options.payload),
  };
  // Every store refuses a foreign cursor the same way, before it reads anything.
  cursorParts(query);
  return query;
}

export function checkState(state: unknown): MessageState {
  if (typeof state !== 'string' || !MESSAGE_STATES.includes(state as MessageState)) {
    throw new TypeError(`state ${JSON.stringify(state)} is not one of ${MESSAGE_STATES.join(', ')}`);
  }
  return state as MessageState;
}

/**
 * A cursor: the store's position (a few strings), bound to the listing it came
 * from, so a cursor handed to another listing is refused rather than misread.
 */
export function makeCursor(query: ListQuery, position: readonly string[]): string {
  const cursor = Buffer.from(JSON.stringify([listingKey(query), ...position])).toString('base64url');
  if (cursor.length > MAX_CURSOR_CHARS) throw new Error('list cursor too long');
  return cursor;
}

/** The position a cursor carries; a TypeError when it is not this listing's (or has the wrong shape). */
export function readCursor(query: ListQuery, size: number): string[] | null {
  const parts = cursorParts(query);
  if (parts !== null && parts.length !== size) throw foreignCursor();
  return parts;
}

function cursorParts(query: ListQuery): string[] | null {
  if (query.cursor === null) return null;
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(query.cursor, 'base64url').toString('utf8'));
  } catch {
    parts = null;
  }
  if (!Array.isArray(parts) || parts[0] !== listingKey(query) || !parts.every((part) => typeof part === 'string')) {
    throw foreignCursor();
  }
  return parts.slice(1);
}

function foreignCursor(): TypeError {
  return new TypeError('cursor is not one a previous page of this listing returned (same states and outcome)');
}

function listingKey(query: ListQuery): string {
  return `${query.states.join(',')}|${query.outcome ?? ''}`;
}
