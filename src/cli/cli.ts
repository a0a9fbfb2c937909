/** The CLI's dispatcher: picks the command, prints help or version, turns errors into exit codes. */
import { wantsHelp } from './args.js';
import type { Command } from './command.js';
import { EXIT_OK, EXIT_USAGE, reportError, UsageError } from './errors.js';
import { mainUsage } from './help.js';
import { didYouMean } from './suggest.js';
import { version } from '../model/version.js';

/** A command by name; its module (and all it imports) loads only when the command runs or shows its help. */
export interface CommandEntry {
  readonly name: string;
  readonly load: () => Promise<Command>;
}

export const COMMANDS: readonly CommandEntry[] = [
  { name: 'enqueue', load: async () => (await import('./commands/enqueue.js')).enqueue },
  { name: 'work', load: async () => (await import('./commands/work.js')).work },
  { name: 'status', load: async () => (await import('./commands/status.js')).status },
  { name: 'list', load: async () => (await import('./commands/list.js')).list },
  { name: 'show', load: async () => (await import('./commands/show.js')).show },
  { name: 'events', load: async () => (await import('./commands/events.js')).events },
  { name: 'wait', load: async () => (await import('./commands/wait.js')).wait },
  { name: 'retry', load: async () => (await import('./commands/actions.js')).retry },
  { name: 'remove', load: async () => (await import('./commands/actions.js')).remove },
  { name: 'promote', load: async () => (await import('./commands/actions.js')).promote },
  { name: 'cancel', load: async () => (await import('./commands/cancel.js')).cancel },
  { name: 'update', load: async () => (await import('./commands/update.js')).update },
  { name: 'pause', load: async () => (await import('./commands/actions.js')).pause },
  { name: 'resume', load: async () => (await import('./commands/actions.js')).resume },
  { name: 'config', load: async () => (await import('./commands/config.js')).config },
  { name: 'flow', load: async () => (await import('./commands/flow.js')).flow },
  { name: 'schedule', load: async () => (await import('./commands/schedule.js')).schedule },
  { name: 'gc', load: async () => (await import('./commands/gc.js')).gc },
  { name: 'clear', load: async () => (await import('./commands/clear.js')).clear },
  { name: 'serve', load: async () => (await import('./commands/serve.js')).serve },
  { name: 'dashboard', load: async () => (await import('./commands/dashboard.js')).dashboard },
];

/** Every command, loaded: for the list in `kvmq --help`. */
async function allCommands(): Promise<Command[]> {
  return Promise.all(COMMANDS.map((entry) => entry.load()));
}

/** Runs one command line; resolves with the exit code. */
export async function runCli(argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined) {
    process.stderr.write(mainUsage(await allCommands()));
    return EXIT_USAGE;
  }
  if (first === '--help' || first === '-h') {
    process.stdout.write(mainUsage(await allCommands()));
    return EXIT_OK;
  }
  if (first === '--version' || first === '-V') {
    process.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  if (first === 'help') return help(rest[0]);
  const entry = COMMANDS.find((c) => c.name === first);
  if (entry === undefined) {
    return reportError(new UsageError(unknownWord(first)), null);
  }
  const command = await entry.load();
  if (wantsHelp(rest)) {
    process.stdout.write(command.usage);
    return EXIT_OK;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    return reportError(error, command.name);
  }
}

/** `kvmq help [command]`. */
async function help(name: string | undefined): Promise<number> {
  if (name === undefined) {
    process.stdout.write(mainUsage(await allCommands()));
    return EXIT_OK;
  }
  const entry = COMMANDS.find((c) => c.name === name);
  if (entry === undefined) return reportError(new UsageError(unknownWord(name)), null);
  process.stdout.write((await entry.load()).usage);
  return EXIT_OK;
}

/** An unknown command (or option before any command), with the nearest known one. */
function unknownWord(word: string): string {
  if (word.startsWith('-')) return `unknown option '${word}'${didYouMean(word, ['--help', '--version'])}`;
  return `unknown command '${word}'${didYouMean(word, ['help', ...COMMANDS.map((c) => c.name)])}`;
}
