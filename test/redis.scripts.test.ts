/**
 * The Lua scripts' parts are built into src/stores/redis/scripts.generated.ts; this fails
 * when that module is out of date with src/stores/redis/lua/*.lua, and checks each
 * script's declared interface and the two forms script-sources.ts composes of them.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KEY_NAMES, KEY_TYPES } from '../src/stores/redis/keys.js';
import { luaName, SCRIPT_FORMS } from '../src/stores/redis/script-sources.js';
import { HELPERS, SCRIPTS } from '../src/stores/redis/scripts.generated.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

void test('src/stores/redis/scripts.generated.ts is what npm run redis-scripts makes of the .lua files', () => {
  const run = spawnSync(process.execPath, ['scripts/redis-scripts.mjs', '--check'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(run.status, 0, `${run.stderr}${run.stdout}`);
});

void test('the generated module holds each helper and each script body once', () => {
  const module = readFileSync(`${ROOT}/src/stores/redis/scripts.generated.ts`, 'utf8');
  // The first line of each, as a template literal writes it: found once, not once per script that includes it.
  const count = (text: string): number => {
    const line = (text.split('\n')[0] ?? '').replaceAll('\\', '\\\\').replaceAll('`', '\\`').replaceAll('${', '\\${');
    return module.split(line).length - 1;
  };
  for (const helper of HELPERS) assert.equal(count(helper.text), 1, helper.name);
  for (const script of Object.values(SCRIPTS)) assert.equal(count(script.body), 1, script.name);
});

void test("the scripts check each key's type as keys.ts's KEY_TYPES gives it (channels hold no data)", () => {
  const table = /KEY_TYPES = \{ ([^}]*) \}/.exec(SCRIPT_FORMS.library().source)?.[1];
  assert.ok(table !== undefined, 'the library holds no KEY_TYPES table');
  const inLua = Object.fromEntries(
    table.split(', ').map((entry): [string, string] => {
      const [name = '', type = ''] = entry.split(" = '");
      return [name, type.replace(/'$/, '')];
    }),
  );
  const fromKeys = Object.entries(KEY_TYPES)
    .filter(([, type]) => type !== 'channel')
    .map(([key, type]) => [luaName(key), type]);
  assert.deepEqual(inLua, Object.fromEntries(fromKeys));
  for (const script of Object.values(SCRIPTS)) {
    const { source } = SCRIPT_FORMS.evalForm(script);
    assert.ok(!source.includes('KEY_TYPES_FROM_KEYS_TS'), script.name);
    if (source.includes('key_type(')) assert.ok(source.includes(`{ ${table} }`), script.name);
  }
});

void test('every script names known keys, carries its SHA1 and opens with a Redis 7 shebang', () => {
  const scripts = Object.values(SCRIPTS);
  assert.ok(scripts.length >= 10);
  for (const script of scripts) {
    const { source, sha } = SCRIPT_FORMS.evalForm(script);
    for (const key of script.keys) assert.ok(KEY_NAMES.includes(key), `${script.name}: unknown key ${key}`);
    assert.equal(createHash('sha1').update(source).digest('hex'), sha, script.name);
    assert.match(source, /^#!lua( flags=(no-writes|allow-oom))?\n/, script.name);
    assert.equal(source.startsWith('#!lua flags=no-writes'), script.flags.includes('no-writes'), script.name);
    // Its helpers come before its body, each once.
    for (const name of script.helpers) {
      const helper = HELPERS.find((h) => h.name === name);
      assert.ok(helper !== undefined, `${script.name}: no helper ${name}`);
      const opening = helper.text.split('\n')[0] ?? '';
      assert.equal(source.split(opening).length - 1, 1, `${script.name}: ${name}`);
    }
    // The keys are named from the one key the call passes, the queue's base.
    assert.doesNotMatch(source, /\bK\./, script.name);
  }
  // One library holds them all, named by its content: FCALL names each script's function in it.
  const library = SCRIPT_FORMS.library();
  assert.match(library.name, /^kvmq_[0-9a-f]{12}$/);
  assert.ok(library.source.startsWith(`#!lua name=${library.name}\n`));
  assert.equal(
    library.source.split('\nlocal function key_type(').length - 1,
    1,
    'the library defines each helper once',
  );
  for (const script of scripts) {
    const fn = SCRIPT_FORMS.functionName(script);
    assert.equal(fn, `${library.name}_${luaName(script.name)}`);
    assert.ok(library.source.includes(`function_name = '${fn}'`), script.name);
  }
  // Scripts that add data must be refused whole when Redis is out of memory.
  for (const name of ['enqueue', 'configure'] as const) {
    assert.ok(SCRIPT_FORMS.evalForm(SCRIPTS[name]).source.startsWith('#!lua\n'), `${name} must not run out of memory`);
  }
});
