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
 * cluster routes the call by it), and the generator writes each `K.name` as the
 * base joined to the key's name (or nil for a key the script does not take): the
 * command carries one key instead of forty, which the client built and wrote
 * (kilobytes of garbage per call) and Redis parsed on every call. `K[name]` and
 * `pairs(K)` read a table of the names, built when first asked. It prepends the
 * included helpers and checks that the script uses no key it does not take.
 *
 * The helpers' table of the type each key must hold is written in from
 * src/stores/redis/keys.ts's KEY_TYPES (for the name KEY_TYPES_FROM_KEYS_TS in
 * lib/common.lua), so the two cannot drift apart.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LUA_DIR = join(ROOT, 'src/stores/redis/lua');
const OUTPUT = join(ROOT, 'src/stores/redis/scripts.generated.ts');
const KEYS_TS = join(ROOT, 'src/stores/redis/keys.ts');

export function luaName(key) {
  return key.replace(/\?$/, '').replace(/[^A-Za-z0-9]/g, '_');
}

/**
 * keys.ts's KEY_TYPES as [name, type] pairs, read from its source (one `name: 'type',` a line, comments
 * aside): the generator runs without TypeScript.
 */
export function keyTypes() {
  const text = readFileSync(KEYS_TS, 'utf8');
  const body = /^export const KEY_TYPES = \{\n([\s\S]*?)^\} as const;/m.exec(text);
  if (body === null) throw new Error('src/stores/redis/keys.ts: no `export const KEY_TYPES = {...} as const;` found');
  const pairs = [];
  for (const line of body[1].split('\n')) {
    if (/^\s*(\/\/.*)?$/.test(line)) continue;
    const entry = /^\s*(?:'([^']+)'|([A-Za-z_][A-Za-z0-9_]*)): '([a-z]+)',(\s*\/\/.*)?$/.exec(line);
    if (entry === null) throw new Error(`src/stores/redis/keys.ts: KEY_TYPES line not understood: ${line.trim()}`);
    pairs.push([entry[1] ?? entry[2], entry[3]]);
  }
  return pairs;
}

/** The Lua table of the type each data key holds (channels hold none), by its name in Lua. */
export function luaKeyTypes() {
  const entries = keyTypes()
    .filter(([, type]) => type !== 'channel')
    .map(([key, type]) => `${luaName(key)} = '${type}'`);
  return `{ ${entries.join(', ')} }`;
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
  const text = readFileSync(file, 'utf8').replace(/\bKEY_TYPES_FROM_KEYS_TS\b/g, luaKeyTypes());
  return { name, text, keys: keyList(headerFields(text, file).get('KEYS')) };
}

function buildScript(file) {
  const text = readFileSync(file, 'utf8');
  const [shebang, ...rest] = text.split('\n');
  if (!/^#!lua( flags=[a-z,-]+)?$/.test(shebang)) throw new Error(`${file}: first line must be #!lua [flags=...]`);
  const fields = headerFields(text, file);
  const libs = (fields.get('Include') ?? '').split(/\s+/).filter(Boolean).map(readLib);
  const keys = [...new Set([...keyList(fields.get('KEYS')), ...libs.flatMap((lib) => lib.keys)])];
  const body = rest.join('\n');
  const declared = new Set(keys.map(luaName));
  for (const [, used] of body.matchAll(/\bK\.([A-Za-z_][A-Za-z0-9_]*)/g)) {
    if (!declared.has(used)) throw new Error(`${file}: uses K.${used} but its KEYS do not name it`);
  }
  const named = new Map(keys.map((key) => [luaName(key), `(KEY_BASE .. '${key}')`]));
  const direct = (text) =>
    text
      .replace(/\bK\.([A-Za-z_][A-Za-z0-9_]*)/g, (_, name) => named.get(name) ?? 'nil')
      .replace(/\bpairs\(K\)/g, 'pairs(key_table())')
      .replace(/\bK\[/g, 'key_table()[');
  const prelude = [
    "-- The queue's keys are its base (the one key the call passes) and their names.",
    'local KEY_BASE = KEYS[1]',
    '-- The keys by name, for the helpers that look a key up by a name they hold.',
    'local K_TABLE = nil',
    'local function key_table()',
    `  if K_TABLE == nil then K_TABLE = { ${[...named].map(([name, key]) => `${name} = ${key}`).join(', ')} } end`,
    '  return K_TABLE',
    'end',
  ].join('\n');
  const parts = [prelude, ...libs.map((lib) => lib.text.trimEnd()), body.trimEnd()].map(direct);
  const source = [shebang, ...parts, ''].join('\n');
  return {
    name: basename(file, '.lua'),
    keys,
    readOnly: shebang.includes('no-writes'),
    sha: createHash('sha1').update(source).digest('hex'),
    source,
    // For the library: the flags, the included helpers, and the body with its keys named.
    flags: (/flags=([a-z,-]+)/.exec(shebang)?.[1] ?? '').split(',').filter(Boolean),
    libs: libs.map((lib) => lib.name),
    rawBody: body.trimEnd(),
  };
}

/** The helpers in an order where each comes after every helper named before it in some script's Include. */
function libraryOrder(scripts) {
  const after = new Map();
  for (const { libs } of scripts) {
    for (const [i, name] of libs.entries()) {
      if (!after.has(name)) after.set(name, new Set());
      for (const before of libs.slice(0, i)) after.get(name).add(before);
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
 * Every script as a function of one Redis Functions library, `kvmq_<hash>`: loaded once per server, its
 * helpers are defined once, where a script defines all of its helpers on every call (about 5 µs of the
 * server's time a call, 15 µs when it sat idle before). Functions are named `kvmq_<hash>_<script>` (names are
 * server-wide: two kvmq versions keep two libraries side by side). KEYS, ARGV and the queue's keys are the
 * library's, set at each call: `K` names a key on first use, from the keys the script declares (nil for
 * another, as in the script), and the state helpers keep within one call is reset first (each helper file's
 * `reset_<name>`).
 */
function buildLibrary(scripts) {
  const libs = libraryOrder(scripts).map(readLib);
  checkUniqueNames(libs);
  const resets = libs.flatMap((lib) =>
    [...lib.text.matchAll(/^local function (reset_[a-z_]+)\(\)/gm)].map((m) => m[1]),
  );
  const shared = (text) => text.replace(/\bpairs\(K\)/g, 'pairs(key_table())');
  const head = [
    '#!lua name=kvmq_HASH',
    "-- kvmq's scripts as one library (scripts/redis-scripts.mjs builds it from src/stores/redis/lua/).",
    'local KEYS, ARGV, KEY_BASE, KEY_NAMES = {}, {}, nil, {}',
    "-- The running script's keys by name, each joined to the base when first used.",
    'local K = {}',
    'local K_META = {',
    '  __index = function(keys, name)',
    '    local suffix = KEY_NAMES[name]',
    '    if suffix == nil then return nil end',
    '    local key = KEY_BASE .. suffix',
    '    rawset(keys, name, key)',
    '    return key',
    '  end,',
    '}',
    'local function key_table()',
    '  for name in pairs(KEY_NAMES) do local _ = K[name] end',
    '  return K',
    'end',
  ].join('\n');
  const begin = [
    'local function begin_call(keys, args, names)',
    '  KEYS, ARGV, KEY_BASE, KEY_NAMES = keys, args, keys[1], names',
    '  K = setmetatable({}, K_META)',
    ...resets.map((reset) => `  ${reset}()`),
    'end',
  ].join('\n');
  const functions = scripts.map((script) =>
    [
      'do',
      `  local names = { ${script.keys.map((key) => `${luaName(key)} = '${key}'`).join(', ')} }`,
      '  redis.register_function({',
      `    function_name = 'kvmq_HASH_${luaName(script.name)}',`,
      `    flags = { ${script.flags.map((f) => `'${f}'`).join(', ')} },`,
      '    callback = function(keys, args)',
      'begin_call(keys, args, names)',
      shared(script.rawBody),
      'end })',
      'end',
    ].join('\n'),
  );
  const template = [head, ...libs.map((lib) => shared(lib.text.trimEnd())), begin, ...functions, ''].join('\n');
  const hash = createHash('sha1').update(template).digest('hex').slice(0, 12);
  return { name: `kvmq_${hash}`, source: template.replaceAll('kvmq_HASH', `kvmq_${hash}`) };
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

/** A template literal that reads as the Lua it holds. */
function literal(text) {
  return '`' + text.replaceAll('\\', '\\\\').replaceAll('`', '\\`').replaceAll('${', '\\${') + '`';
}

function camel(name) {
  return name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
}

export async function generate() {
  const files = readdirSync(LUA_DIR)
    .filter((f) => f.endsWith('.lua'))
    .sort();
  const scripts = files.map((f) => buildScript(join(LUA_DIR, f)));
  const library = buildLibrary(scripts);
  const entries = scripts.map(
    (s) => `  ${camel(s.name)}: {
    name: '${s.name}',
    keys: [${s.keys.map((k) => `'${k}'`).join(', ')}],
    readOnly: ${s.readOnly},
    sha: '${s.sha}',
    fn: '${library.name}_${luaName(s.name)}',
    source: ${literal(s.source)},
  },`,
  );
  const code = `// Generated by scripts/redis-scripts.mjs from src/stores/redis/lua/*.lua: edit those and run it again.
import type { KeyName } from './keys.js';

export interface LuaScript {
  readonly name: string;
  /** The queue keys the script uses; a call passes their base, and the script names them from it. */
  readonly keys: readonly KeyName[];
  /** Declared \`no-writes\`: it runs even when Redis is out of memory. */
  readonly readOnly: boolean;
  /** SHA1 of the source, as EVALSHA names it. */
  readonly sha: string;
  /** Its function in LIBRARY, as FCALL names it. */
  readonly fn: string;
  readonly source: string;
}

export type ScriptName = ${scripts.map((s) => `'${camel(s.name)}'`).join(' | ')};

// Typed rather than \`as const\`: the declarations the build emits then hold no copy of every source.
export const SCRIPTS: { readonly [Name in ScriptName]: LuaScript } = {
${entries.join('\n')}
};

/** Every script as a function of one Redis Functions library (FUNCTION LOAD), named by its content. */
export const LIBRARY: { readonly name: string; readonly source: string } = {
  name: '${library.name}',
  source: ${literal(library.source)},
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
