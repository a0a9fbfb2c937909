/**
 * Runs the store's Lua scripts and commands. The scripts are the functions of
 * one library (script-sources.ts composes it from scripts.generated.ts's parts),
 * loaded once per server (each master of a cluster) with FUNCTION LOAD and
 * called by FCALL: its helpers are defined once, where a script defines them on
 * every call. A server without the library (FUNCTION FLUSH, a new node) answers
 * that the function is not found, and the library is loaded and the call made
 * again. Where the server or the user's ACL refuses FCALL or FUNCTION, the same
 * scripts go by EVALSHA, each as its own source with its helpers (composed the
 * first time it goes so): loaded with SCRIPT LOAD, and a server that lost its
 * script cache answers NOSCRIPT, so the call is made once with EVAL, which
 * loads it again.
 *
 * A call whose connection drops before its reply arrives fails with a
 * transient error (it may or may not have been applied): ioredis would
 * otherwise resend it after reconnecting, or, with resending off, leave it
 * waiting forever.
 */
import { StoreUnavailableError } from '../../model/errors.js';
import { queueBase } from './keys.js';
import { translate, type RedisConnection } from './connection.js';
import { SCRIPT_FORMS, type ScriptForms } from './script-sources.js';
import { SCRIPTS, type LuaScript } from './scripts.generated.js';
import type { Cluster, Command, Redis } from 'ioredis';

export type ScriptArg = string | number | Buffer;

/** ioredis's Command class, handed in by the store once ioredis is loaded (it is imported only for Redis URLs). */
export type CommandClass = typeof Command;

// Queues whose key base is kept (Scripts.baseOf).
const KEY_CACHE_QUEUES = 1000;

interface Pending {
  /** The connection generation the command travels on. */
  readonly generation: number;
  readonly fail: (error: Error) => void;
}

export class Scripts {
  /** Counts connections: one more each time the client is ready again after a reconnect. */
  private generation = 0;
  private readonly pending = new Set<Pending>();
  private readonly baseCache = new Map<string, string>();
  /** Calls go to the library's functions (FCALL), unless the server or the user's ACL refuses them. */
  private functions = true;

  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
    private readonly where: string,
    private readonly Command: CommandClass,
    /** What a call sends for each script (a bench hands in another tree's). */
    private readonly forms: ScriptForms = SCRIPT_FORMS,
  ) {
    redis.on('ready', () => (this.generation += 1));
    const lost = (): void => {
      for (const call of this.pending) {
        if (call.generation > this.generation) continue;
        this.pending.delete(call);
        call.fail(
          new StoreUnavailableError(
            `the connection to Redis at ${where} was lost before the reply; the call may or may not ` +
              'have been applied: check before trying again',
          ),
        );
      }
    };
    redis.on('close', lost);
    // A cluster's nodes come and go one by one; a call in flight on one that closes is lost too.
    if (isCluster(redis)) redis.on('+node', (node: Redis) => node.on('close', lost));
  }

  /**
   * Loads the library of functions on every server (each master of a cluster), so even the first call is an
   * FCALL; where it cannot be loaded, loads every script for EVALSHA instead.
   */
  async loadAll(): Promise<void> {
    if (await this.loadLibrary()) return;
    for (const server of this.servers()) {
      const pipeline = server.pipeline();
      for (const script of Object.values(SCRIPTS)) pipeline.script('LOAD', this.forms.evalForm(script).source);
      const results = (await pipeline.exec()) ?? [];
      for (const [error] of results) if (error !== null) throw translate(error, this.where);
    }
  }

  /** Runs `script` on `queue`'s keys; bulk replies come back as Buffers. */
  run(script: LuaScript, queue: string, args: readonly ScriptArg[]): Promise<unknown> {
    const all: ScriptArg[] = [this.forms.functionName(script), 1, this.baseOf(queue)];
    for (const arg of args) all.push(arg);
    return this.call(async (redis) => {
      if (this.functions) {
        try {
          return await redis.sendCommand(this.command('fcall', all));
        } catch (error) {
          if (missingFunction(error)) {
            // A server restarted without its data, a new cluster node, FUNCTION FLUSH: load it there again.
            if (await this.loadLibrary()) return await redis.sendCommand(this.command('fcall', all));
          } else if (refusesFunctions(error)) {
            this.functions = false;
          } else {
            throw error;
          }
        }
      }
      const { sha, source } = this.forms.evalForm(script);
      all[0] = sha;
      try {
        return await redis.sendCommand(this.command('evalsha', all));
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        all[0] = source;
        return await redis.sendCommand(this.command('eval', all));
      }
    });
  }

  /**
   * FUNCTION LOAD on every server (one that has the library already, loaded by another client, is fine).
   * False when it could not be loaded: the server or the ACL refuses functions (calls go by EVALSHA from
   * now on), or Redis is out of memory (this call goes by EVALSHA, the next tries again).
   */
  private async loadLibrary(): Promise<boolean> {
    for (const server of this.servers()) {
      try {
        await server.call('FUNCTION', 'LOAD', this.forms.library().source);
      } catch (error) {
        if (error instanceof Error && /already exists/.test(error.message)) continue;
        if (refusesFunctions(error)) {
          this.functions = false;
          return false;
        }
        if (error instanceof Error && error.message.startsWith('OOM')) return false;
        throw translate(error, this.where);
      }
    }
    return true;
  }

  private servers(): Redis[] {
    return isCluster(this.redis) ? this.redis.nodes('master') : [this.redis];
  }

  /**
   * A command of flat arguments whose bulk replies stay Buffers (as `callBuffer`'s). Built here rather than by
   * `callBuffer`, whose `args.flat()` over a batch's thousand-odd arguments cost more than building them.
   */
  private command(name: string, args: ScriptArg[]): Command {
    const command = new this.Command(name, [], { replyEncoding: null });
    command.args = args;
    // Numbers become strings, and a Buffer switches the command to writing Buffers, as for any ioredis command.
    command.stringifyArguments();
    return command;
  }

  /**
   * The one key a script call passes: the queue's base, from which the script builds its keys' names (see
   * script-sources.ts). Kept for at most KEY_CACHE_QUEUES queues; past that the cache starts again.
   */
  private baseOf(queue: string): string {
    let base = this.baseCache.get(queue);
    if (base === undefined) {
      if (this.baseCache.size >= KEY_CACHE_QUEUES) this.baseCache.clear();
      base = queueBase(this.prefix, queue);
      this.baseCache.set(queue, base);
    }
    return base;
  }

  /** Runs a plain command (a read) with the same failure handling. */
  call<T>(send: (redis: RedisConnection) => Promise<T>): Promise<T> {
    // Sent now if connected; else queued by ioredis and sent on the next connection.
    const generation = this.redis.status === 'ready' ? this.generation : this.generation + 1;
    return new Promise<T>((resolve, reject) => {
      const call: Pending = { generation, fail: reject };
      this.pending.add(call);
      send(this.redis).then(
        (value) => {
          this.pending.delete(call);
          resolve(value);
        },
        (error: unknown) => {
          this.pending.delete(call);
          reject(translate(error, this.where));
        },
      );
    });
  }
}

function isCluster(redis: RedisConnection): redis is Cluster {
  return redis.isCluster;
}

function missingFunction(error: unknown): boolean {
  return error instanceof Error && /^ERR Function not found/.test(error.message);
}

/**
 * A server without functions (before Redis 7), or an ACL that does not allow FCALL or FUNCTION LOAD: the
 * command itself refused, never an error from within a function (its writes so far stand, and running the
 * script again by EVALSHA would repeat them).
 */
function refusesFunctions(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return /^(NOPERM .*'(fcall|function\|load)' command|ERR unknown command .(fcall|function).)/i.test(error.message);
}
