// Output files appear atomically: everything is written to a hidden temporary sibling in the
// target folder (same filesystem, so rename is atomic), flushed, then renamed over the final name.
// A reader of /out/ therefore sees either no file or a complete one, never half an mp4.
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { CancelledError } from '../common/errors';
import { abortReason } from './ffmpeg';

/** Temp files are `.<final name>.<16 hex>.part`: dot-prefixed so static serving (dotfiles ignored) never exposes them. */
const TEMP_RE = /^\..+\.[0-9a-f]{16}\.part$/;

export function tempSibling(target: string): string {
  return join(dirname(target), `.${basename(target)}.${randomBytes(8).toString('hex')}.part`);
}

/** Flushes `tmp` to disk and renames it to `target` (replacing any file there). */
export async function commitFile(tmp: string, target: string): Promise<void> {
  const fh = await open(tmp, 'r+');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, target);
}

/** Removes files, ignoring ones already gone; used on every failure path. */
export async function removeQuietly(...paths: (string | undefined)[]): Promise<void> {
  await Promise.all(paths.map((p) => (p ? unlink(p).catch(() => undefined) : undefined)));
}

/** Writes bytes to `target` through a temp sibling. Throws CancelledError (and leaves nothing) if `signal` fires first. */
export async function writeFileAtomic(target: string, chunks: Uint8Array[], signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) throw new CancelledError(abortReason(signal));
  const tmp = tempSibling(target);
  try {
    const fh = await open(tmp, 'wx');
    try {
      for (const c of chunks) {
        if (signal?.aborted) throw new CancelledError(abortReason(signal));
        await fh.write(c);
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    if (signal?.aborted) throw new CancelledError(abortReason(signal));
    await rename(tmp, target);
  } catch (err) {
    await removeQuietly(tmp);
    throw err;
  }
}

/** Runs `fn` with a private directory under the OS temp dir, removed afterwards whatever happens. */
export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-media-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Deletes temp files left in `dir` by a crash (older than `olderThanMs`, so live writers are untouched). Returns how many. */
export async function removeStaleTemps(dir: string, olderThanMs = 60 * 60 * 1000): Promise<number> {
  let removed = 0;
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    if (!TEMP_RE.test(name)) continue;
    const p = join(dir, name);
    const st = await stat(p).catch(() => undefined);
    if (st && st.isFile() && Date.now() - st.mtimeMs > olderThanMs) {
      await removeQuietly(p);
      removed++;
    }
  }
  return removed;
}

export function isTempName(name: string): boolean {
  return TEMP_RE.test(name);
}
