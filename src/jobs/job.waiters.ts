/** Clients blocked in `wait=true`, woken by job events rather than polling the store: one timer and one
 * listener per waiter, removed when it resolves. */
export class JobWaiters {
  private readonly byJob = new Map<string, Set<() => void>>();
  /** Set by wakeAll at shutdown: a wait that starts after it returns at once. */
  private closed = false;

  wait(id: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.closed || signal?.aborted || timeoutMs <= 0) return resolve();
      let set = this.byJob.get(id);
      if (!set) this.byJob.set(id, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        set!.delete(done);
        if (set!.size === 0 && this.byJob.get(id) === set) this.byJob.delete(id);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      set.add(done);
    });
  }

  wake(id: string): void {
    for (const done of [...(this.byJob.get(id) ?? [])]) done();
  }

  /** Shutdown: every waiter answers now (with the job as it stands), and later waits do not block. */
  wakeAll(): void {
    this.closed = true;
    for (const id of [...this.byJob.keys()]) this.wake(id);
  }

  count(): number {
    let n = 0;
    for (const s of this.byJob.values()) n += s.size;
    return n;
  }
}
