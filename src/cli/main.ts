#!/usr/bin/env node
/** The `kvmq` executable. */
import { runCli } from './cli.js';

// A reader that went away (`kvmq status q | head -1`) is no error of ours.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(process.exitCode ?? 0);
});

process.exitCode = await runCli(process.argv.slice(2));
