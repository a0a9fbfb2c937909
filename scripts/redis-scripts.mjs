#!/usr/bin/env node
/**
 * Builds src/stores/redis/scripts.generated.ts from the Lua scripts in src/stores/redis/lua/,
 * so the package carries its scripts in code (tsc copies no .lua files) and
 * nothing is read from disk at run time.
 *
 *   node scripts/redis-scripts.mjs          rewrites the module
 *   node scripts/redis-scripts.mjs --check  exits 1 if the module is out of date
 *
 * Each script opens with a header: its first line is Redis 7's `#!lua`, with
 * `flags=no-writes` for read-only scripts and `flags=allow-oom` for those that
 * must run when Redis is out of memory (Redis refuses any other script then,
 * before it writes anything), then comment lines naming the
 * queue keys it takes (`-- KEYS:`, names from src/stores/redis/keys.ts, in the order
 * the store passes them), its ARGV and reply, and the helpers of lua/lib/ it
 * includes (`-- Include:`). Scripts and helpers name keys `K.name` (in Lua, '-'
 * becomes '_' and '?' is dropped). A call passes one key, the queue's base
 * (`<prefix>:{<queue>}:`, whose hash tag every key of the queue shares, so a
 * cluster routes the call by it): the command carries one key instead of forty,
 * which the client built and wrote (kilobytes of garbage per call) and Redis
 * parsed on every call.
 *
 * The generator checks the scripts (their headers, that a script uses no key it
 * does not take, that no two helpers define one name, that the Include lines
 * order the helpers without a cycle) and writes their parts, each once: every
 * included helper's text, in an order where each comes after those an Include
 * line names before it, and every script's name, flags, keys (its own and its
 * helpers'), helpers and body. src/stores/redis/script-sources.ts composes the two
 * forms the store sends from them at run time: the library of functions (FCALL)
 * and each script's own source with its helpers (EVALSHA).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LUA_DIR = join(ROOT, 'src/stores/redis/lua');
const OUTPUT = join(ROOT, 'src/stores/redis/scripts.generated.ts');

/** A key's or a script's name in Lua (script-sources.ts's luaName, for the checks here). */
function luaName(key) {
  return key.replace(/\?$/, '').replace(/[^A-Za-z0-9]/g, '_');
}

/** The `-- Name: value` lines of a header, continuation lines (`--   more`) joined. */
function headerFields(text, file) {
  const fields = new Map();
  let last = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('#!')) continue;
    if (!line.startsWith('--')) break;
    const field = /^-- ([A-Z][A-Za-z]*): ?(.*)$/.exec(line);
    if (field !== null) {
      last = field[1];
      fields.set(last, field[2].trim());
    } else if (last !== null && /^--\s{3,}\S/.test(line)) {
      fields.set(last, `${fields.get(last)} ${line.slice(2).trim()}`);
    } else {
      last = null;
    }
  }
  for (const required of file.includes('/lib/') ? ['KEYS'] : ['KEYS', 'ARGV', 'Reply']) {
    if (!fields.has(required)) throw new Error(`${file}: header lacks '-- ${required}:'`);
  }
  return fields;
}

function keyList(value) {
  return value === '(none of its own)' ? [] : value.split(/\s+/).filter(Boolean);
}

function readLib(name) {
  const file = join(LUA_DIR, 'lib', `${name}.lua`);
  const text = readFileSync(file, 'utf8');
  return { name, text: text.trimEnd(), keys: keyList(headerFields(text, file).get('KEYS')) };
}

/** A script's parts, checked: the keys it and its helpers take cover every `K.name` its body uses. */
function readScript(file, libs) {
  const text = readFileSync(file, 'utf8');
  const [shebang, ...rest] = text.split('\n');
  if (!/^#!lua( flags=[a-z,-]+)?$/.test(shebang)) throw new Error(`${file}: first line must be #!lua [flags=...]`);
  const fields = headerFields(text, file);
  const helpers = (fields.get('Include') ?? '').split(/\s+/).filter(Boolean);
  const included = helpers.map((name) => {
    if (!libs.has(name)) libs.set(name, readLib(name));
    return libs.get(name);
  });
  const keys = [...new Set([...keyList(fields.get('KEYS')), ...included.flatMap((lib) => lib.keys)])];
  const body = rest.join('\n').trimEnd();
  const declared = new Set(keys.map(luaName));
  for (const [, used] of body.matchAll(/\bK\.([A-Za-z_][A-Za-z0-9_]*)/g)) {
    if (!declared.has(used)) throw new Error(`${file}: uses K.${used} but its KEYS do not name it`);
  }
  return {
    name: basename(file, '.lua'),
    flags: (/flags=([a-z,-]+)/.exec(shebang)?.[1] ?? '').split(',').filter(Boolean),
    keys,
    helpers,
    body,
  };
}

/** The helpers in an order where each comes after every helper named before it in some script's Include. */
function libraryOrder(scripts) {
  const after = new Map();
  for (const { helpers } of scripts) {
    for (const [i, name] of helpers.entries()) {
      if (!after.has(name)) after.set(name, new Set());
      for (const before of helpers.slice(0, i)) after.get(name).add(before);
    }
  }
  const order = [];
  const placed = new Set();
  while (order.length < after.size) {
    const next = [...after.keys()].find(
      (name) => !placed.has(name) && [...after.get(name)].every((b) => placed.has(b)),
    );
    if (next === undefined) throw new Error('the Include lines of the scripts order their helpers in a cycle');
    order.push(next);
    placed.add(next);
  }
  return order;
}

/**
 * The helpers share one chunk (the library, and a script's concatenation): a helper file's top-level local
 * named as another's would shadow it for every file after, so two files may not define one name.
 */
function checkUniqueNames(libs) {
  const owner = new Map();
  for (const lib of libs) {
    for (const [, names] of lib.text.matchAll(/^local (?:function )?([A-Za-z_][A-Za-z0-9_, ]*)/gm)) {
      for (const name of names.split(',').map((n) => n.trim())) {
        const first = owner.get(name);
        if (first !== undefined && first !== lib.name) {
          throw new Error(`lib/${lib.name}.lua defines '${name}', which lib/${first}.lua defines too`);
        }
        owner.set(name, lib.name);
      }
    }
  }
}

/**
 * The scripts' parts, checked, as the generated module holds them: `helpers`, each included helper in the
 * library's order, and `scripts`, by the name the store uses (camel case).
 */
export function parts() {
  const libs = new Map();
  const scripts = readdirSync(LUA_DIR)
    .filter((f) => f.endsWith('.lua'))
    .sort()
    .map((f) => readScript(join(LUA_DIR, f), libs));
  const helpers = libraryOrder(scripts).map((name) => libs.get(name));
  checkUniqueNames(helpers);
  return {
    helpers: helpers.map(({ name, text }) => ({ name, text })),
    scripts: Object.fromEntries(scripts.map((script) => [camel(script.name), script])),
  };
}

/** A template literal that reads as the Lua it holds. */
function literal(text) {
  return '`' + text.replaceAll('\\', '\\\\').replaceAll('`', '\\`').replaceAll('${', '\\${') + '`';
}

function camel(name) {
  return name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
}

const strings = (list) => `[${list.map((item) => `'${item}'`).join(', ')}]`;

export async function generate() {
  const { helpers, scripts } = parts();
  const helperEntries = helpers.map((h) => `  { name: '${h.name}', text: ${literal(h.text)} },`);
  const scriptEntries = Object.entries(scripts).map(
    ([key, s]) => `  ${key}: {
    name: '${s.name}',
    flags: ${strings(s.flags)},
    keys: ${strings(s.keys)},
    helpers: ${strings(s.helpers)},
    body: ${literal(s.body)},
  },`,
  );
  const code = `// Generated by scripts/redis-scripts.mjs from src/stores/redis/lua/*.lua: edit those and run it again.
// The parts of the scripts, each once; script-sources.ts composes what the store sends from them.
import type { KeyName } from './keys.js';

export type HelperName = ${helpers.map((h) => `'${h.name}'`).join(' | ')};

/** A helper file of lua/lib/, included by the scripts whose \`-- Include:\` line names it. */
export interface LuaHelper {
  readonly name: HelperName;
  readonly text: string;
}

export interface LuaScript {
  readonly name: string;
  /** Its shebang's flags: \`no-writes\` (read-only), \`allow-oom\` (runs when Redis is out of memory). */
  readonly flags: readonly string[];
  /** The queue keys the script and its helpers use; a call passes their base, and the script names them from it. */
  readonly keys: readonly KeyName[];
  /** The helpers it includes, in its Include line's order. */
  readonly helpers: readonly HelperName[];
  /** Its text after the shebang line. */
  readonly body: string;
}

export type ScriptName = ${Object.keys(scripts)
    .map((key) => `'${key}'`)
    .join(' | ')};

/** Every included helper, each after those an Include line names before it: the library's order. */
export const HELPERS: readonly LuaHelper[] = [
${helperEntries.join('\n')}
];

// Typed rather than \`as const\`: the declarations the build emits then hold no copy of every body.
export const SCRIPTS: { readonly [Name in ScriptName]: LuaScript } = {
${scriptEntries.join('\n')}
};
`;
  const prettier = await import('prettier');
  const options = (await prettier.resolveConfig(OUTPUT)) ?? {};
  return prettier.format(code, { ...options, filepath: OUTPUT });
}

async function main() {
  const code = await generate();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(OUTPUT, 'utf8');
    } catch {
      // missing: out of date
    }
    if (current !== code) {
      console.error('src/stores/redis/scripts.generated.ts is out of date: run node scripts/redis-scripts.mjs');
      process.exit(1);
    }
    return;
  }
  writeFileSync(OUTPUT, code);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error) => {
    console.error(`redis-scripts: ${error.message}`);
    process.exit(1);
  });
}
