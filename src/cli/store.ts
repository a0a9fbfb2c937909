/** Which store a command uses (defaults < $KVMQ_STORE < --store) and a client's lifetime around a command. */
import { connect, DEFAULT_STORE_URL, type Client, type ConnectOptions } from '../index.js';
import { reportError } from './errors.js';

export function storeUrl(flag: string | undefined): string {
  // An empty $KVMQ_STORE (as `KVMQ_STORE= kvmq ...` leaves it) means unset.
  return flag ?? (process.env.KVMQ_STORE || DEFAULT_STORE_URL);
}

/** Errors of background upkeep: reported on stderr, the command goes on. */
export function reportBackgroundError(error: unknown): void {
  reportError(error, null);
}

/** Connects, runs `body`, and closes the client whatever happens. */
export async function withClient<T>(
  flag: string | undefined,
  body: (client: Client) => Promise<T>,
  options: ConnectOptions = {},
): Promise<T> {
  const client = await connect(storeUrl(flag), { onError: reportBackgroundError, ...options });
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}
