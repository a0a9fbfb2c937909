/**
 * The random token of an enqueue (record.ts `nonce`): 6 random bytes, base64url. Taken from a pool filled
 * 1,536 tokens at a time: one randomBytes call per message cost more than the rest of the token's work.
 */
import { randomBytes } from 'node:crypto';

const TOKEN_BYTES = 6;
const POOL_TOKENS = 1536;

let pool = Buffer.alloc(0);
let at = 0;

export function newNonce(): string {
  if (at + TOKEN_BYTES > pool.length) {
    pool = randomBytes(TOKEN_BYTES * POOL_TOKENS);
    at = 0;
  }
  const token = pool.toString('base64url', at, at + TOKEN_BYTES);
  at += TOKEN_BYTES;
  return token;
}
