/** The dashboard's URLs, built in one place so pages and the router agree. */
export function queuePath(base: string, queue: string): string {
  return `${base}/queues/${encodeURIComponent(queue)}`;
}

export function messagePath(base: string, queue: string, id: string): string {
  return `${queuePath(base, queue)}/messages/${encodeURIComponent(id)}`;
}
