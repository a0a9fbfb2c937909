/** The CLI's dispatcher: picks the command, prints help or version, turns errors into exit codes. */
import { wantsHelp } from './args.js';
import type { Command } from './command.js';
import { pause, promote, remove, resume, retry } from './commands/actions.js';
import { clear } from './commands/clear.js';
import { config } from './commands/config.js';
import { dashboard } from './commands/dashboard.js';
import { enqueue } from './commands/enqueue.js';
import { events } from './commands/events.js';
import { gc } from './commands/gc.js';
import { list } from './commands/list.js';
import { schedule } from './commands/schedule.js';
import { serve } from './commands/serve.js';
import { show } from './commands/show.js';
import { status } from './commands/status.js';
import { wait } from './commands/wait.js';
import { work } from './commands/work.js';
import { EXIT_OK, EXIT_USAGE, reportError, UsageError } from './errors.js';
import { mainUsage } from './help.js';
import { version } from './version.js';

const COMMANDS: readonly Command[] = [
  enqueue,
  work,
  status,
  list,
  show,
  events,
  wait,
  retry,
  remove,
  promote,
  pause,
  resume,
  config,
  schedule,
  gc,
  clear,
  serve,
  dashboard,
];

/** Runs one command line; resolves with the exit code. */
export async function runCli(argv: readonly string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined) {
    process.stderr.write(mainUsage(COMMANDS));
    return EXIT_USAGE;
  }
  if (first === '--help' || first === '-h') {
    process.stdout.write(mainUsage(COMMANDS));
    return EXIT_OK;
  }
  if (first === '--version' || first === '-V') {
    process.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  if (first === 'help') return help(rest[0]);
  const command = COMMANDS.find((c) => c.name === first);
  if (command === undefined) {
    const what = first.startsWith('-') ? `unknown option '${first}'` : `unknown command '${first}'`;
    return reportError(new UsageError(what), null);
  }
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
function help(name: string | undefined): number {
  if (name === undefined) {
    process.stdout.write(mainUsage(COMMANDS));
    return EXIT_OK;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) return reportError(new UsageError(`unknown command '${name}'`), null);
  process.stdout.write(command.usage);
  return EXIT_OK;
}
