/** Who a session tells when its lease is lost (revoked, or expired while nothing renewed it). */
export class LeaseLostListeners {
  private readonly listeners = new Set<(leaseId: string) => void>();

  add(listener: (leaseId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  tell(leaseId: string): void {
    for (const listener of [...this.listeners]) listener(leaseId);
  }
}
