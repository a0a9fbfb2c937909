/** Password hashes: scrypt with a random salt, checked in constant time, computed off the event loop. */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

const KEY_LENGTH = 32;
const COST = 16384;

function derive(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, { N: COST, r: 8, p: 1 }, (error, key) => {
      if (error) reject(error);
      else resolve(key);
    });
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt);
  return `scrypt:${salt.toString('base64')}:${key.toString('base64')}`;
}

export async function checkPassword(password: string, hash: string): Promise<boolean> {
  const [scheme, salt, expected] = hash.split(':');
  if (scheme !== 'scrypt' || salt === undefined || expected === undefined) return false;
  const key = await derive(password, Buffer.from(salt, 'base64'));
  const want = Buffer.from(expected, 'base64');
  return want.length === key.length && timingSafeEqual(key, want);
}
