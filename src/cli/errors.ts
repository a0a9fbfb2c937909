/**
 * The CLI's exit codes and how an error becomes one. A user's mistake gets one
 * line that says what to fix, never a stack trace; only a bug shows its stack.
 */
import { KvmqError } from '../model/errors.js';

export const EXIT_OK = 0;
/** A runtime failure: bad store URL, filter refused, store unavailable, unreadable file, input too large. */
export const EXIT_FAILURE = 1;
/** The command line itself is wrong. */
export const EXIT_USAGE = 2;
/** A message was refused because its id exists. */
export const EXIT_REFUSED = 3;

/** A mistake on the command line: exit 2, with a pointer to the command's help. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A queue that has no messages, configuration or consumers: most likely a typo. Exit 1. */
export class UnknownQueueError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnknownQueueError';
  }
}

/**
 * Input read from stdin or a pipe is over what the command can use (a payload far over any store's limit, a
 * document over the CLI's cap): reading stopped there, so a stream without end cannot fill memory. Exit 1.
 */
export class InputTooLargeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InputTooLargeError';
  }
}

/** Writes what went wrong to stderr and returns the exit code for it. */
export function reportError(error: unknown, command: string | null): number {
  const help = command === null ? 'kvmq --help' : `kvmq ${command} --help`;
  if (error instanceof UsageError) {
    process.stderr.write(`kvmq: ${error.message}\nTry '${help}' for usage.\n`);
    return EXIT_USAGE;
  }
  if (
    error instanceof KvmqError ||
    error instanceof UnknownQueueError ||
    error instanceof InputTooLargeError ||
    isValidationError(error) ||
    isSystemError(error)
  ) {
    process.stderr.write(`kvmq: ${error.message}\n`);
    return EXIT_FAILURE;
  }
  process.stderr.write(
    `kvmq: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  return EXIT_FAILURE;
}

// Where kvmq's own checks throw: its model, client (src/client/), schedules, worker and events options.
const CHECK_FRAME =
  /[\\/](model[\\/]\w+|schedule[\\/]\w+|client([\\/][\w-]+)?|worker[\\/]options|events[\\/]options)\.[jt]s:/;

// What the JavaScript engine says of a bug (a property of undefined, a call of a non-function, ...): such a
// TypeError thrown in the client is a bug there, not one of its checks.
const ENGINE_MESSAGE =
  /^Cannot (read|set) propert|^Cannot (destructure|convert|access|create property|mix BigInt)|is not (a function|iterable|a constructor|defined)|^Class constructor |^Assignment to constant|^Converting circular structure|^Do not know how to serialize|^Reduce of empty array/;

/**
 * kvmq's API rejects a bad argument with a TypeError thrown by its own checks.
 * Told apart from a TypeError of a bug by where it was thrown (CHECK_FRAME) and what it says (ENGINE_MESSAGE).
 */
export function isValidationError(error: unknown): error is TypeError {
  if (!(error instanceof TypeError) || ENGINE_MESSAGE.test(error.message)) return false;
  const frame = error.stack?.split('\n').find((line) => line.trimStart().startsWith('at '));
  return frame !== undefined && CHECK_FRAME.test(frame);
}

/** An fs or spawn failure (ENOENT, EACCES, ...): its message names the file and the problem. */
function isSystemError(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).syscall === 'string';
}
