// A lock file between processes: created with O_EXCL, holding the owner's pid and host. A lock whose owner is
// gone (same host, pid not alive) is taken over; a foreign host's lock only after `staleMs`.
import { hostname } from 'node:os';
import { open, readFile, stat, unlink } from 'node:fs/promises';

export interface LockOptions {
  /** Poll interval while another process holds the lock. Default 100 ms. */
  pollMs?: number;
  /** Age after which a lock that cannot be checked (other host, unreadable) counts as abandoned. Default 1 h. */
  staleMs?: number;
  signal?: AbortSignal;
}

interface LockBody {
  pid: number;
  host: string;
  at: string;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function abandoned(path: string, staleMs: number): Promise<boolean> {
  let body: LockBody | undefined;
  try {
    body = JSON.parse(await readFile(path, 'utf8')) as LockBody;
  } catch {
    body = undefined;
  }
  if (body && body.host === hostname() && Number.isInteger(body.pid)) return !alive(body.pid);
  try {
    // Unreadable (its writer may be between open and write) or another host's: judge by age.
    return Date.now() - (await stat(path)).mtimeMs > (body ? staleMs : Math.min(staleMs, 10_000));
  } catch {
    return false; // gone already: the next open decides
  }
}

/** Runs `fn` holding the lock file `path`; waits while another live process holds it. */
export async function withLock<T>(path: string, fn: () => Promise<T>, opts: LockOptions = {}): Promise<T> {
  const pollMs = opts.pollMs ?? 100;
  const staleMs = opts.staleMs ?? 3_600_000;
  const body = JSON.stringify({ pid: process.pid, host: hostname(), at: new Date().toISOString() } satisfies LockBody);
  for (;;) {
    opts.signal?.throwIfAborted();
    try {
      const h = await open(path, 'wx');
      try {
        await h.writeFile(body);
      } finally {
        await h.close();
      }
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (await abandoned(path, staleMs)) {
      await unlink(path).catch(() => undefined);
      continue;
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
  try {
    return await fn();
  } finally {
    // Remove it only if it is still ours (a stale-lock takeover elsewhere must not be undone).
    const now = await readFile(path, 'utf8').catch(() => '');
    if (now === body) await unlink(path).catch(() => undefined);
  }
}
