/** Help texts, built the same way for every command. */
import type { Command } from './command.js';
import { table } from './output.js';

const COMMON_HELP: readonly (readonly [string, string])[] = [
  ['--store URL', 'store to use (default: $KVMQ_STORE, else sqlite:./kvmq.db)'],
  ['--json', 'machine-readable output'],
  ['-h, --help', 'show this help'],
];

/** `kvmq <name> --help`: synopsis, what it does, its options and the common ones. */
export function commandUsage(
  synopsis: string,
  description: string,
  options: readonly (readonly [string, string])[],
): string {
  return [
    `Usage: kvmq ${synopsis}`,
    '',
    description,
    '',
    'Options:',
    table([...options, ...COMMON_HELP], '  '),
    '',
  ].join('\n');
}

export function mainUsage(commands: readonly Command[]): string {
  return [
    'Usage: kvmq <command> [options]',
    '',
    'A durable message queue in the store you already run.',
    '',
    'Commands:',
    table(
      commands.map((command) => [command.name, command.summary]),
      '  ',
    ),
    '',
    'Options:',
    table(
      [
        ['-h, --help', 'show help (also: kvmq <command> --help)'],
        ['-V, --version', 'show the version'],
      ],
      '  ',
    ),
    '',
    'Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 message refused.',
    '',
  ].join('\n');
}
