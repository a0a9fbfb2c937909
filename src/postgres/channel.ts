/**
 * The one LISTEN/NOTIFY channel of a schema: a payload of a queue's name says messages may be ready there,
 * `events:` and the name that the queue has new events (queue names cannot hold a ':').
 */
export function wakeChannel(schema: string): string {
  return `${schema}.wake`;
}

export function eventsPayload(queue: string): string {
  return `events:${queue}`;
}
