/**
 * The Lua the store sends, composed from the scripts' parts (scripts.generated.ts, which holds each helper
 * and each script body once) when first needed, then kept:
 *
 * - the library: every script as a function of one Redis Functions library, `kvmq_<hash>`, built once per
 *   process on first use. Loaded once per server, its helpers are defined once, where a script defines all
 *   of its helpers on every call (about 5 µs of the server's time a call, 15 µs when it sat idle before).
 *   Functions are named `kvmq_<hash>_<script>` (names are server-wide: two kvmq versions keep two libraries
 *   side by side). KEYS, ARGV and the queue's keys are the library's, set at each call: `K` names a key on
 *   first use, from the keys the script declares (nil for another, as in the script), and the state helpers
 *   keep within one call is reset first (each helper file's `reset_<name>`).
 * - a script's own source, for EVALSHA where FCALL is refused: the included helpers written before its
 *   body, each `K.name` written as the base joined to the key's name (or nil for a key the script does not
 *   take); `K[name]` and `pairs(K)` read a table of the names, built when first asked. Built for a script
 *   the first time the store falls back to it.
 *
 * Both hold src/stores/redis/keys.ts's KEY_TYPES, the type each data key holds, as a Lua table in place of
 * lib/common.lua's KEY_TYPES_FROM_KEYS_TS, so the two cannot drift apart.
 */
import { createHash } from 'node:crypto';
import { KEY_TYPES } from './keys.js';
import { HELPERS, SCRIPTS, type HelperName, type LuaScript } from './scripts.generated.js';

/** A script as one source (SCRIPT LOAD, EVAL) and the SHA1 EVALSHA names it by. */
export interface EvalForm {
  readonly source: string;
  readonly sha: string;
}

/** The library of every script's function (FUNCTION LOAD), named by its content. */
export interface Library {
  readonly name: string;
  readonly source: string;
}

/** What a call sends for a script: its function in the library (FCALL), or its own source (EVALSHA). */
export interface ScriptForms {
  library(): Library;
  /** The script's function in the library, as FCALL names it. */
  functionName(script: LuaScript): string;
  evalForm(script: LuaScript): EvalForm;
}

/** A key's or a script's name in Lua: '-' becomes '_' and a final '?' is dropped. */
export function luaName(name: string): string {
  return name.replace(/\?$/, '').replace(/[^A-Za-z0-9]/g, '_');
}

/** The Lua table of the type each data key holds (channels hold none), by its name in Lua. */
function luaKeyTypes(): string {
  const entries = Object.entries(KEY_TYPES)
    .filter(([, type]) => type !== 'channel')
    .map(([key, type]) => `${luaName(key)} = '${type}'`);
  return `{ ${entries.join(', ')} }`;
}

let helperTexts: ReadonlyMap<HelperName, string> | undefined;

/** Each helper's text with the key types written in, in the library's order. */
function helpers(): ReadonlyMap<HelperName, string> {
  if (helperTexts === undefined) {
    const types = luaKeyTypes();
    helperTexts = new Map(HELPERS.map((h) => [h.name, h.text.replace(/\bKEY_TYPES_FROM_KEYS_TS\b/g, types)]));
  }
  return helperTexts;
}

function helperText(name: HelperName): string {
  const text = helpers().get(name);
  if (text === undefined) throw new Error(`the Redis scripts have no helper '${name}'`);
  return text;
}

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

function buildEvalForm(script: LuaScript): EvalForm {
  const shebang = script.flags.length === 0 ? '#!lua' : `#!lua flags=${script.flags.join(',')}`;
  const named = new Map(script.keys.map((key) => [luaName(key), `(KEY_BASE .. '${key}')`]));
  const direct = (text: string): string =>
    text
      .replace(/\bK\.([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => named.get(name) ?? 'nil')
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
  const parts = [prelude, ...script.helpers.map(helperText), script.body].map(direct);
  const source = [shebang, ...parts, ''].join('\n');
  return { source, sha: sha1(source) };
}

const LIBRARY_HEAD = [
  '#!lua name=kvmq_HASH',
  "-- kvmq's scripts as one library (src/stores/redis/script-sources.ts builds it from src/stores/redis/lua/).",
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

function buildLibrary(scripts: readonly LuaScript[]): Library {
  const texts = [...helpers().values()];
  const resets = texts.flatMap((text) =>
    [...text.matchAll(/^local function (reset_[a-z_]+)\(\)/gm)].map((m) => m[1] ?? ''),
  );
  const shared = (text: string): string => text.replace(/\bpairs\(K\)/g, 'pairs(key_table())');
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
      shared(script.body),
      'end })',
      'end',
    ].join('\n'),
  );
  const template = [LIBRARY_HEAD, ...texts.map(shared), begin, ...functions, ''].join('\n');
  const name = `kvmq_${sha1(template).slice(0, 12)}`;
  return { name, source: template.replaceAll('kvmq_HASH', name) };
}

let library: Library | undefined;
const functionNames = new Map<string, string>();
const evalForms = new Map<string, EvalForm>();

/** The forms of the scripts of scripts.generated.ts. */
export const SCRIPT_FORMS: ScriptForms = {
  library: () => (library ??= buildLibrary(Object.values(SCRIPTS))),
  functionName(script) {
    let name = functionNames.get(script.name);
    if (name === undefined) {
      name = `${SCRIPT_FORMS.library().name}_${luaName(script.name)}`;
      functionNames.set(script.name, name);
    }
    return name;
  },
  evalForm(script) {
    let form = evalForms.get(script.name);
    if (form === undefined) {
      form = buildEvalForm(script);
      evalForms.set(script.name, form);
    }
    return form;
  },
};
