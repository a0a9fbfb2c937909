/**
 * Command-line parsing on top of `node:util` parseArgs: the options every
 * command takes, and turning strings into checked values. Every mistake here
 * is a UsageError (exit 2).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './errors.js';
import { didYouMean } from './suggest.js';

type OptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** Options every command takes. */
export const COMMON_OPTIONS = {
  store: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies OptionsConfig;

type ParsedCommandLine<O extends OptionsConfig> = ReturnType<
  typeof parseArgs<{ args: string[]; options: typeof COMMON_OPTIONS & O; strict: true; allowPositionals: true }>
>;

/** Parses a command's arguments (strict: unknown options are errors), with the common options added. */
export function parseCommandLine<O extends OptionsConfig>(argv: string[], options: O): ParsedCommandLine<O> {
  try {
    return parseArgs({
      args: argv,
      options: { ...COMMON_OPTIONS, ...options },
      strict: true,
      allowPositionals: true,
    });
  } catch (error) {
    if (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS')) {
      // Node's messages are sentences ("Unknown option '--x'. To specify..."): keep the first clause.
      const first = error.message.split('. ')[0] ?? error.message;
      const unknown = error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /'(-[^']*)'/.exec(first)?.[1] : undefined;
      const hint = unknown === undefined ? '' : didYouMean(unknown, optionNames({ ...COMMON_OPTIONS, ...options }));
      throw new UsageError(first.charAt(0).toLowerCase() + first.slice(1) + hint);
    }
    throw error;
  }
}

/** Parses a command on one queue (its only positional argument): the options and the queue. */
export function parseQueueCommandLine<O extends OptionsConfig>(
  argv: string[],
  options: O,
): { values: ParsedCommandLine<O>['values']; queue: string } {
  const { values, positionals } = parseCommandLine(argv, options);
  expectPositionals(positionals, 1, 1, '<queue>');
  return { values, queue: positionals[0] ?? '' };
}

/** `--name` for each option (and `-x` for its short form): what a mistyped option is compared with. */
function optionNames(options: OptionsConfig): string[] {
  return Object.entries(options).flatMap(([name, option]) =>
    option.short === undefined ? [`--${name}`] : [`--${name}`, `-${option.short}`],
  );
}

/** True when `--help` or `-h` comes before any `--`: help wins over every other mistake. */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/** Checks the number of positional arguments; `names` describes them for the error message. */
export function expectPositionals(positionals: readonly string[], min: number, max: number, names: string): void {
  if (positionals.length < min) throw new UsageError(`missing argument: ${names}`);
  if (positionals.length > max) {
    throw new UsageError(`unexpected argument '${positionals[max] ?? ''}' (expected ${names})`);
  }
}

/** A whole number given as text, e.g. `--concurrency 8`. */
export function parseWholeNumber(what: string, text: string, min = 0): number {
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`${what} must be a whole number${min > 0 ? ` of at least ${min}` : ''}, got '${text}'`);
  }
  return value;
}

export function optionalWholeNumber(what: string, text: string | undefined, min = 0): number | undefined {
  return text === undefined ? undefined : parseWholeNumber(what, text, min);
}

/** Splits `key=value` at the first '='. */
export function parseKeyValue(what: string, text: string): [key: string, value: string] {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new UsageError(`${what} must look like key=value, got '${text}'`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

/** `--filter k=v` pairs into filter values; a name given twice is a mistake. */
export function parseFilterPairs(pairs: readonly string[] | undefined): Record<string, string> | undefined {
  if (pairs === undefined || pairs.length === 0) return undefined;
  const filters = new Map<string, string>();
  for (const pair of pairs) {
    const [name, value] = parseKeyValue('--filter', pair);
    if (filters.has(name)) throw new UsageError(`--filter ${name} is given twice`);
    filters.set(name, value);
  }
  return Object.fromEntries(filters);
}

/** A JSON object given as text, e.g. `--metadata '{"by":"cron"}'`. */
export function parseJsonObject(what: string, text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${what} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(`${what} must be a JSON object, e.g. '{"key":"value"}'`);
  }
  return value as Record<string, unknown>;
}
