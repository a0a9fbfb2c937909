/**
 * Users, roles and tokens, with etcd's rules: auth can be enabled only once a
 * `root` user holding the `root` role exists; while it is enabled every
 * request needs a token from Authenticate, `root` may do anything, and other
 * users may touch only the key ranges their roles grant. Every change bumps
 * the auth revision, and a request checked against an older revision is
 * refused, so a revoked permission cannot be used by a request in flight.
 * Tokens live in memory (a restart asks clients to authenticate again, which
 * etcd clients do on their own) and lapse after 5 minutes unused.
 */
import { randomInt } from 'node:crypto';
import type BetterSqlite3 from 'better-sqlite3';
import { Errors } from '../errors.js';
import { PRESENT_EMPTY } from '../proto/etcd.js';
import type { Backend } from '../storage/backend.js';
import { PERM_WRITE, RangePermissions, type Permission, PERM_READ } from './permissions.js';

export const ROOT = 'root';
const FROM_KEY = Buffer.from([0]);
const TOKEN_TTL_MS = 300_000;
const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

export interface User {
  name: string;
  password: string;
  noPassword: boolean;
  /** Sorted. */
  roles: string[];
}

export interface Role {
  name: string;
  /** Sorted by key. */
  perms: Permission[];
}

/** Who a request comes from: the token's user and the auth revision when the token was read. */
export interface AuthInfo {
  readonly username: string;
  readonly revision: number;
}

export const NO_AUTH: AuthInfo = { username: '', revision: 0 };

/** The server's own requests (its queue dispatcher): never refused by auth. */
export const SYSTEM_AUTH: AuthInfo = { username: '', revision: Number.MAX_SAFE_INTEGER };

interface StoredPerm {
  t: number;
  k: string;
  e: string;
}

export class AuthStore {
  enabled = false;
  revision = 1;
  private readonly users = new Map<string, User>();
  private readonly roles = new Map<string, Role>();
  private readonly permCache = new Map<string, RangePermissions>();
  private readonly tokens = new Map<string, { user: string; expires: number }>();
  private tokenIndex = 0;
  private readonly sql: {
    putUser: BetterSqlite3.Statement;
    delUser: BetterSqlite3.Statement;
    putRole: BetterSqlite3.Statement;
    delRole: BetterSqlite3.Statement;
  };

  constructor(
    private readonly backend: Backend,
    private readonly now: () => number = Date.now,
  ) {
    const db = backend.db;
    this.sql = {
      putUser: db.prepare(
        'INSERT INTO auth_user (name, password, no_password, roles) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (name) DO UPDATE SET password = excluded.password, no_password = excluded.no_password, ' +
          'roles = excluded.roles',
      ),
      delUser: db.prepare('DELETE FROM auth_user WHERE name = ?'),
      putRole: db.prepare(
        'INSERT INTO auth_role (name, perms) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET perms = excluded.perms',
      ),
      delRole: db.prepare('DELETE FROM auth_role WHERE name = ?'),
    };
  }

  load(): void {
    this.users.clear();
    this.roles.clear();
    this.tokens.clear();
    const db = this.backend.db;
    const users = db.prepare('SELECT name, password, no_password, roles FROM auth_user').raw(true).all() as [
      string,
      string,
      number,
      string,
    ][];
    for (const [name, password, noPassword, roles] of users) {
      this.users.set(name, { name, password, noPassword: noPassword !== 0, roles: JSON.parse(roles) as string[] });
    }
    const roles = db.prepare('SELECT name, perms FROM auth_role').raw(true).all() as [string, string][];
    for (const [name, perms] of roles) {
      this.roles.set(name, {
        name,
        perms: (JSON.parse(perms) as StoredPerm[]).map((p) => ({
          permType: p.t,
          key: Buffer.from(p.k, 'base64'),
          rangeEnd: Buffer.from(p.e, 'base64'),
        })),
      });
    }
    this.enabled = this.backend.meta('auth_enabled') === '1';
    this.revision = Number(this.backend.meta('auth_revision') ?? '1');
    this.refreshPermissions();
  }

  private bump(): void {
    this.revision++;
    this.backend.setMetaValue('auth_revision', String(this.revision));
    this.refreshPermissions();
  }

  private refreshPermissions(): void {
    this.permCache.clear();
    for (const user of this.users.values()) {
      const perms = user.roles.flatMap((name) => this.roles.get(name)?.perms ?? []);
      this.permCache.set(user.name, new RangePermissions(perms));
    }
  }

  private saveUser(user: User): void {
    this.users.set(user.name, user);
    this.sql.putUser.run(user.name, user.password, user.noPassword ? 1 : 0, JSON.stringify(user.roles));
  }

  private saveRole(role: Role): void {
    this.roles.set(role.name, role);
    const stored: StoredPerm[] = role.perms.map((p) => ({
      t: p.permType,
      k: p.key.toString('base64'),
      e: p.rangeEnd.toString('base64'),
    }));
    this.sql.putRole.run(role.name, JSON.stringify(stored));
  }

  // ---- changes, applied inside a write batch ----

  enable(): void {
    if (this.enabled) return;
    const root = this.users.get(ROOT);
    if (root === undefined) throw Errors.rootUserNotExist();
    if (!root.roles.includes(ROOT)) throw Errors.rootRoleNotExist();
    this.enabled = true;
    this.backend.setMetaValue('auth_enabled', '1');
  }

  disable(): void {
    if (!this.enabled) return;
    this.enabled = false;
    this.backend.setMetaValue('auth_enabled', '0');
    this.bump();
    this.tokens.clear();
  }

  userAdd(name: string, passwordHash: string, noPassword: boolean): void {
    if (name === '') throw Errors.userEmpty();
    if (this.users.has(name)) throw Errors.userAlreadyExist();
    this.saveUser({ name, password: noPassword ? '' : passwordHash, noPassword, roles: [] });
    this.bump();
  }

  userDelete(name: string): void {
    if (this.enabled && name === ROOT) throw Errors.invalidAuthMgmt();
    if (!this.users.has(name)) throw Errors.userNotFound();
    this.users.delete(name);
    this.sql.delUser.run(name);
    this.bump();
    this.invalidateUser(name);
  }

  userChangePassword(name: string, passwordHash: string): void {
    const user = this.users.get(name);
    if (user === undefined) throw Errors.userNotFound();
    this.saveUser({ ...user, password: passwordHash });
    this.bump();
    this.invalidateUser(name);
  }

  userGrantRole(name: string, role: string): void {
    const user = this.users.get(name);
    if (user === undefined) throw Errors.userNotFound();
    if (role !== ROOT && !this.roles.has(role)) throw Errors.roleNotFound();
    if (user.roles.includes(role)) return;
    this.saveUser({ ...user, roles: [...user.roles, role].sort() });
    this.bump();
  }

  userRevokeRole(name: string, role: string): void {
    if (this.enabled && name === ROOT && role === ROOT) throw Errors.invalidAuthMgmt();
    const user = this.users.get(name);
    if (user === undefined) throw Errors.userNotFound();
    if (!user.roles.includes(role)) throw Errors.roleNotGranted();
    this.saveUser({ ...user, roles: user.roles.filter((r) => r !== role) });
    this.bump();
  }

  roleAdd(name: string): void {
    if (name === '') throw Errors.roleEmpty();
    if (this.roles.has(name)) throw Errors.roleAlreadyExist();
    this.saveRole({ name, perms: [] });
    // etcd counts a new role as a change without refreshing users' ranges (no user has it yet).
    this.revision++;
    this.backend.setMetaValue('auth_revision', String(this.revision));
  }

  roleDelete(name: string): void {
    if (this.enabled && name === ROOT) throw Errors.invalidAuthMgmt();
    if (!this.roles.has(name)) throw Errors.roleNotFound();
    this.roles.delete(name);
    this.sql.delRole.run(name);
    for (const user of [...this.users.values()]) {
      if (user.roles.includes(name)) this.saveUser({ ...user, roles: user.roles.filter((r) => r !== name) });
    }
    this.bump();
  }

  roleGrantPermission(name: string, perm: Permission): void {
    const role = this.roles.get(name);
    if (role === undefined) throw Errors.roleNotFound();
    const perms = role.perms.map((p) => ({ ...p }));
    const same = perms.find((p) => p.key.equals(perm.key) && p.rangeEnd.equals(perm.rangeEnd));
    if (same !== undefined) same.permType = perm.permType;
    else {
      perms.push({ permType: perm.permType, key: perm.key, rangeEnd: perm.rangeEnd });
      perms.sort((a, b) => Buffer.compare(a.key, b.key));
    }
    this.saveRole({ name, perms });
    this.bump();
  }

  roleRevokePermission(name: string, key: Buffer, rangeEnd: Buffer): void {
    const role = this.roles.get(name);
    if (role === undefined) throw Errors.roleNotFound();
    const perms = role.perms.filter((p) => !p.key.equals(key) || !p.rangeEnd.equals(rangeEnd));
    if (perms.length === role.perms.length) throw Errors.permissionNotGranted();
    this.saveRole({ name, perms });
    this.bump();
  }

  // ---- reads ----

  /** Whether auth is on now (a method, so callers re-read it after an await). */
  isEnabled(): boolean {
    return this.enabled;
  }

  user(name: string): User | undefined {
    return this.users.get(name);
  }

  role(name: string): Role | undefined {
    return this.roles.get(name);
  }

  /** Names in byte order, as etcd's bucket lists them. */
  userNames(): string[] {
    return [...this.users.keys()].sort(byBytes);
  }

  roleNames(): string[] {
    return [...this.roles.keys()].sort(byBytes);
  }

  hasRole(user: string, role: string): boolean {
    return this.users.get(user)?.roles.includes(role) ?? false;
  }

  // ---- tokens ----

  /** A new simple token for a user whose password was checked. */
  assignToken(user: string): string {
    let prefix = '';
    for (let i = 0; i < 16; i++) prefix += LETTERS.charAt(randomInt(LETTERS.length));
    const token = `${prefix}.${++this.tokenIndex}`;
    this.tokens.set(token, { user, expires: this.now() + TOKEN_TTL_MS });
    return token;
  }

  /** Who a request's token names; no token is anonymous, an unknown one is refused. */
  authInfo(token: string | undefined): AuthInfo {
    if (token === undefined) return NO_AUTH;
    const entry = this.tokens.get(token);
    const now = this.now();
    if (entry === undefined || entry.expires < now) {
      if (entry !== undefined) this.tokens.delete(token);
      throw Errors.invalidAuthToken();
    }
    entry.expires = now + TOKEN_TTL_MS;
    return { username: entry.user, revision: this.revision };
  }

  private invalidateUser(name: string): void {
    for (const [token, entry] of this.tokens) if (entry.user === name) this.tokens.delete(token);
  }

  // ---- checks ----

  private checkOp(ai: AuthInfo, key: Buffer, rangeEnd: Buffer, permType: number): void {
    if (!this.enabled || ai === SYSTEM_AUTH) return;
    if (ai.revision === 0) throw Errors.userEmpty();
    if (ai.revision < this.revision) throw Errors.authOldRevision();
    const user = this.users.get(ai.username);
    if (user === undefined) throw Errors.permissionDenied();
    if (user.roles.includes(ROOT)) return;
    // An explicitly empty range_end reads every key from `key` on, so it needs that whole range.
    const end = rangeEnd === PRESENT_EMPTY ? FROM_KEY : rangeEnd;
    if (this.permCache.get(ai.username)?.permits(key, end, permType) !== true) throw Errors.permissionDenied();
  }

  checkRange(ai: AuthInfo, key: Buffer, rangeEnd: Buffer): void {
    this.checkOp(ai, key, rangeEnd, PERM_READ);
  }

  checkPut(ai: AuthInfo, key: Buffer): void {
    this.checkOp(ai, key, Buffer.alloc(0), PERM_WRITE);
  }

  checkDeleteRange(ai: AuthInfo, key: Buffer, rangeEnd: Buffer): void {
    this.checkOp(ai, key, rangeEnd, PERM_WRITE);
  }

  checkAdmin(ai: AuthInfo): void {
    if (!this.enabled || ai === SYSTEM_AUTH) return;
    if (ai.username === '') throw Errors.userEmpty();
    const user = this.users.get(ai.username);
    if (user === undefined) throw Errors.userNotFound();
    if (!user.roles.includes(ROOT)) throw Errors.permissionDenied();
  }

  /** Whether the admin check passes, without throwing. */
  isAdmin(ai: AuthInfo): boolean {
    try {
      this.checkAdmin(ai);
      return true;
    } catch {
      return false;
    }
  }
}

function byBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
