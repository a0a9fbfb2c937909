/**
 * The Auth service. User and role changes need the root role once auth is
 * enabled (anyone may make them before, as in etcd); a user may read their
 * own user and the roles they hold.
 */
import { checkPassword, hashPassword } from '../auth/password.js';
import type { AuthInfo } from '../auth/store.js';
import type { Engine } from '../engine.js';
import { Code, EtcdError, Errors } from '../errors.js';
import type { Method } from './method.js';
import type { MethodInfo } from './protos.js';
import { buf, headerObject, num, obj, str } from './objects.js';

export function authMethods(engine: Engine, methods: Map<string, MethodInfo>): Record<string, Method> {
  const auth = engine.auth;
  const unary = (
    name: string,
    handle: (req: Record<string, unknown>, ai: AuthInfo) => object | Promise<object>,
  ): Method => {
    const info = methods.get(`/etcdserverpb.Auth/${name}`);
    if (info === undefined) throw new Error(`etcd proto definition lacks Auth/${name}`);
    return {
      kind: 'unary',
      async handle(request, call) {
        const ai = auth.authInfo(call.token);
        return info.encode(await handle(info.decode(request), ai));
      },
    };
  };
  /** A change: root only (when enabled), checked again when applied. */
  const change = (
    name: string,
    apply: (req: Record<string, unknown>) => void,
    prepare?: (req: Record<string, unknown>) => Promise<void>,
  ): Method =>
    unary(name, async (req, ai) => {
      auth.checkAdmin(ai);
      if (prepare !== undefined) await prepare(req);
      await engine.write(() => {
        auth.checkAdmin(ai);
        apply(req);
      });
      return { header: headerObject(engine, engine.durableRev) };
    });

  const hashes = new WeakMap<object, string>();
  const hashInto = async (req: Record<string, unknown>): Promise<void> => {
    if (obj(req.options).no_password === true) return;
    hashes.set(req, await hashPassword(str(req.password)));
  };

  return {
    AuthEnable: change('AuthEnable', () => auth.enable()),
    AuthDisable: change('AuthDisable', () => auth.disable()),
    AuthStatus: unary('AuthStatus', () => ({
      header: headerObject(engine),
      enabled: auth.enabled,
      authRevision: String(auth.revision),
    })),
    Authenticate: unary('Authenticate', async (req) => {
      const name = str(req.name);
      if (!auth.enabled) throw Errors.authNotEnabled();
      const user = auth.user(name);
      if (user === undefined) throw Errors.authFailed();
      if (user.noPassword) {
        throw new EtcdError(Code.UNKNOWN, 'auth: authentication failed, password was given for no password user');
      }
      if (!(await checkPassword(str(req.password), user.password))) throw Errors.authFailed();
      // The user may have changed while the password was checked.
      return engine.readDurably(() => {
        if (!auth.isEnabled()) throw Errors.authNotEnabled();
        if (auth.user(name)?.password !== user.password) throw Errors.authFailed();
        return { header: headerObject(engine), token: auth.assignToken(name) };
      });
    }),
    UserAdd: change(
      'UserAdd',
      (req) => {
        const noPassword = obj(req.options).no_password === true;
        auth.userAdd(str(req.name), hashes.get(req) ?? '', noPassword);
      },
      async (req) => {
        if (str(req.name) === '') throw Errors.userEmpty();
        await hashInto(req);
      },
    ),
    UserGet: unary('UserGet', (req, ai) => {
      const name = str(req.name);
      if (!auth.isAdmin(ai) && name !== ai.username) auth.checkAdmin(ai);
      const user = auth.user(name);
      if (user === undefined) throw Errors.userNotFound();
      return { header: headerObject(engine), roles: user.roles };
    }),
    UserList: unary('UserList', (_req, ai) => {
      auth.checkAdmin(ai);
      return { header: headerObject(engine), users: auth.userNames() };
    }),
    UserDelete: change('UserDelete', (req) => auth.userDelete(str(req.name))),
    UserChangePassword: change(
      'UserChangePassword',
      (req) => auth.userChangePassword(str(req.name), hashes.get(req) ?? ''),
      hashInto,
    ),
    UserGrantRole: change('UserGrantRole', (req) => auth.userGrantRole(str(req.user), str(req.role))),
    UserRevokeRole: change('UserRevokeRole', (req) => auth.userRevokeRole(str(req.name), str(req.role))),
    RoleAdd: change('RoleAdd', (req) => auth.roleAdd(str(req.name))),
    RoleGet: unary('RoleGet', (req, ai) => {
      const name = str(req.role);
      if (!auth.isAdmin(ai) && !auth.hasRole(ai.username, name)) auth.checkAdmin(ai);
      const role = auth.role(name);
      if (role === undefined) throw Errors.roleNotFound();
      return {
        header: headerObject(engine),
        perm: role.perms.map((p) => ({ permType: p.permType, key: p.key, range_end: p.rangeEnd })),
      };
    }),
    RoleList: unary('RoleList', (_req, ai) => {
      auth.checkAdmin(ai);
      return { header: headerObject(engine), roles: auth.roleNames() };
    }),
    RoleDelete: change('RoleDelete', (req) => auth.roleDelete(str(req.role))),
    RoleGrantPermission: change('RoleGrantPermission', (req) => {
      const perm = obj(req.perm);
      auth.roleGrantPermission(str(req.name), {
        permType: num(perm.permType),
        key: buf(perm.key),
        rangeEnd: buf(perm.range_end),
      });
    }),
    RoleRevokePermission: change('RoleRevokePermission', (req) =>
      auth.roleRevokePermission(str(req.role), buf(req.key), buf(req.range_end)),
    ),
  };
}
