/** What the store's SQL runs on: a pool, a pooled client in a transaction, or a caller's own client. */
import type { ClientBase } from 'pg';

export type Queryable = Pick<ClientBase, 'query'>;
