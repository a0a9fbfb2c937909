/**
 * The Auth service. User and role changes need the root role once auth is
 * enabled (anyone may make them before, as in etcd); a user may read their
 * own user and the roles they hold.
 */
import { checkPassword, hashPassword } from '../auth/password.js';
import type { AuthInfo } from '../auth/store.js';
import type { Engine } from '../engine.js';
import { Code, EtcdError, Errors } from '../errors.js';
import { asBuffer } from '../proto/buffer.js';
import { type authpb, etcdserverpb as pb } from '../proto/etcd.js';
import type { Encoder } from '../proto/encode.js';
import type { HeaderFields } from '../proto/header.js';
import type { Method } from './method.js';
import { messageMethod, type RequestType } from './message-method.js';

type Changed = pb.AuthEnableResponse.$Properties;

/** The method builders every Auth method is made with. */
interface Builders {
  readonly header: () => HeaderFields;
  /** A method that reads: any caller with a valid token (or none while auth is off), then `handle`. */
  readonly read: <Q, R>(
    request: RequestType<Q>,
    response: Encoder<R>,
    handle: (req: Q, ai: AuthInfo) => R | Promise<R>,
  ) => Method;
  /** A change: root only (when enabled), checked again when applied; all answers are a header alone. */
  readonly change: <Q extends object>(
    request: RequestType<Q>,
    apply: (req: Q) => void,
    prepare?: (req: Q) => Promise<void>,
  ) => Method;
}

function builders(engine: Engine): Builders {
  const auth = engine.auth;
  const read = <Q, R>(
    request: RequestType<Q>,
    response: Encoder<R>,
    handle: (req: Q, ai: AuthInfo) => R | Promise<R>,
  ): Method => messageMethod(request, response, (req, call) => handle(req, auth.authInfo(call.token)));
  return {
    header: () => engine.header.top(engine.currentRev),
    read,
    change: (request, apply, prepare) =>
      read(request, pb.AuthEnableResponse, async (req, ai): Promise<Changed> => {
        auth.checkAdmin(ai);
        if (prepare !== undefined) await prepare(req);
        await engine.write(() => {
          auth.checkAdmin(ai);
          apply(req);
        });
        return { header: engine.header.top(engine.durableRev) };
      }),
  };
}

export function authMethods(engine: Engine): Record<string, Method> {
  const b = builders(engine);
  return { ...stateMethods(engine, b), ...userMethods(engine, b), ...roleMethods(engine, b) };
}

/** Turning auth on and off, asking whether it is on, and logging in. */
function stateMethods(engine: Engine, { header, read, change }: Builders): Record<string, Method> {
  const auth = engine.auth;
  return {
    AuthEnable: change(pb.AuthEnableRequest, () => auth.enable()),
    AuthDisable: change(pb.AuthDisableRequest, () => auth.disable()),
    AuthStatus: read(pb.AuthStatusRequest, pb.AuthStatusResponse, () => ({
      header: header(),
      enabled: auth.enabled,
      authRevision: auth.revision,
    })),
    Authenticate: read(pb.AuthenticateRequest, pb.AuthenticateResponse, async (req) => {
      const name = req.name;
      if (!auth.enabled) throw Errors.authNotEnabled();
      const user = auth.user(name);
      if (user === undefined) throw Errors.authFailed();
      if (user.noPassword) {
        throw new EtcdError(Code.UNKNOWN, 'auth: authentication failed, password was given for no password user');
      }
      if (!(await checkPassword(req.password, user.password))) throw Errors.authFailed();
      // The user may have changed while the password was checked.
      return engine.readDurably(() => {
        if (!auth.isEnabled()) throw Errors.authNotEnabled();
        if (auth.user(name)?.password !== user.password) throw Errors.authFailed();
        return { header: header(), token: auth.assignToken(name) };
      });
    }),
  };
}

function userMethods(engine: Engine, { header, read, change }: Builders): Record<string, Method> {
  const auth = engine.auth;
  // Passwords are hashed before the write (slowly, off the write path) and applied from here.
  const hashes = new WeakMap<object, string>();
  const hashInto = async (req: { password: string; options?: authpb.UserAddOptions.$Properties | null }) => {
    if (req.options?.no_password === true) return;
    hashes.set(req, await hashPassword(req.password));
  };
  return {
    UserAdd: change(
      pb.AuthUserAddRequest,
      (req) => auth.userAdd(req.name, hashes.get(req) ?? '', req.options?.no_password === true),
      async (req) => {
        if (req.name === '') throw Errors.userEmpty();
        await hashInto(req);
      },
    ),
    UserGet: read(pb.AuthUserGetRequest, pb.AuthUserGetResponse, (req, ai) => {
      if (!auth.isAdmin(ai) && req.name !== ai.username) auth.checkAdmin(ai);
      const user = auth.user(req.name);
      if (user === undefined) throw Errors.userNotFound();
      return { header: header(), roles: user.roles };
    }),
    UserList: read(pb.AuthUserListRequest, pb.AuthUserListResponse, (_req, ai) => {
      auth.checkAdmin(ai);
      return { header: header(), users: auth.userNames() };
    }),
    UserDelete: change(pb.AuthUserDeleteRequest, (req) => auth.userDelete(req.name)),
    UserChangePassword: change(
      pb.AuthUserChangePasswordRequest,
      (req) => auth.userChangePassword(req.name, hashes.get(req) ?? ''),
      hashInto,
    ),
    UserGrantRole: change(pb.AuthUserGrantRoleRequest, (req) => auth.userGrantRole(req.user, req.role)),
    UserRevokeRole: change(pb.AuthUserRevokeRoleRequest, (req) => auth.userRevokeRole(req.name, req.role)),
  };
}

function roleMethods(engine: Engine, { header, read, change }: Builders): Record<string, Method> {
  const auth = engine.auth;
  return {
    RoleAdd: change(pb.AuthRoleAddRequest, (req) => auth.roleAdd(req.name)),
    RoleGet: read(pb.AuthRoleGetRequest, pb.AuthRoleGetResponse, (req, ai) => {
      if (!auth.isAdmin(ai) && !auth.hasRole(ai.username, req.role)) auth.checkAdmin(ai);
      const role = auth.role(req.role);
      if (role === undefined) throw Errors.roleNotFound();
      return {
        header: header(),
        perm: role.perms.map((p) => ({ permType: p.permType, key: p.key, range_end: p.rangeEnd })),
      };
    }),
    RoleList: read(pb.AuthRoleListRequest, pb.AuthRoleListResponse, (_req, ai) => {
      auth.checkAdmin(ai);
      return { header: header(), roles: auth.roleNames() };
    }),
    RoleDelete: change(pb.AuthRoleDeleteRequest, (req) => auth.roleDelete(req.role)),
    RoleGrantPermission: change(pb.AuthRoleGrantPermissionRequest, (req) => {
      const perm = req.perm ?? {};
      auth.roleGrantPermission(req.name, {
        permType: perm.permType ?? 0,
        key: asBuffer(perm.key),
        rangeEnd: asBuffer(perm.range_end),
      });
    }),
    RoleRevokePermission: change(pb.AuthRoleRevokePermissionRequest, (req) =>
      auth.roleRevokePermission(req.role, asBuffer(req.key), asBuffer(req.range_end)),
    ),
  };
}
