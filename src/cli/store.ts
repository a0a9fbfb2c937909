/** Which store a command uses (defaults < $KVMQ_STORE < --store) and a client's lifetime around a command. */
import type { Client, ConnectOptions } from '../index.js';
import { DEFAULT_STORE_URL } from '../stores/url.js';
import { reportError } from './errors.js';

export function storeUrl(flag: string | undefined): string {
  // An empty $KVMQ_STORE (as `KVMQ_STORE= kvmq ...` leaves it) means unset.
  return flag ?? (process.env.KVMQ_STORE || DEFAULT_STORE_URL);
}

/** Errors of background upkeep: reported on stderr, the command goes on. */
export function reportBackgroundError(error: unknown): void {
  reportError(error, null);
}

/**
 * A client on the command's store. The library loads here, on use: `kvmq --version` and help never pay for it,
 * and only a command that makes workers (`workers: true`) loads the worker.
 */
export async function openClient(
  flag: string | undefined,
  options: ConnectOptions = {},
  { workers = false }: { readonly workers?: boolean } = {},
): Promise<Client> {
  const { connect, connectWithoutWorkers } = await import('../client/client.js');
  const open = workers ? connect : connectWithoutWorkers;
  return open(storeUrl(flag), { onError: reportBackgroundError, ...options });
}

/** Connects, runs `body`, and closes the client whatever happens. */
export async function withClient<T>(
  flag: string | undefined,
  body: (client: Client) => Promise<T>,
  options: ConnectOptions = {},
  open: { readonly workers?: boolean } = {},
): Promise<T> {
  const client = await openClient(flag, options, open);
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}
