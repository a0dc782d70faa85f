// Kiln's own cache folder (KILN_CACHE_DIR): the int8 profiles' quantised weights, one safetensors file per tensor
// under <dir>/int8/ (written and read by the worker's engine, src/engine/int8-cache.ts). Here: where it is, the
// rule that it is never inside a Hugging Face cache or a ComfyUI folder, and what `npm run weights -- list` and
// `-- clear-cache` show and remove. Entries are re-made from the checkpoints whenever they are missing, so clearing
// the folder loses nothing but the time of one quantising load.
import { readdirSync, statSync, unlinkSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, relative, resolve } from 'node:path';

/** The int8 entries' subfolder (engine/int8-cache.ts INT8_CACHE_SUBDIR: the engine and this folder share no import). */
export const INT8_SUBDIR = 'int8';

/** KILN_CACHE_DIR, else XDG_CACHE_HOME/kiln, else ~/.cache/kiln; `off` (any case): undefined, no cache. */
export function kilnCacheDirOf(env: Record<string, string | undefined>): string | undefined {
  const v = env.KILN_CACHE_DIR?.trim();
  if (v && v.toLowerCase() === 'off') return undefined;
  if (v) return resolve(v);
  return resolve(join(env.XDG_CACHE_HOME?.trim() || join(homedir(), '.cache'), 'kiln'));
}

/** Why `dir` may not hold Kiln's cache (it is or is inside one of `readOnly`: the hub cache, a ComfyUI folder), or
 * undefined when it may. */
export function kilnCacheDirProblem(dir: string, readOnly: { label: string; dir: string }[]): string | undefined {
  for (const r of readOnly) {
    const rel = relative(resolve(r.dir), resolve(dir));
    if (rel === '' || (!rel.startsWith('..') && !rel.startsWith('/'))) {
      return `KILN_CACHE_DIR=${dir} is inside ${r.label} ${r.dir}, which Kiln only reads: choose another folder (or off)`;
    }
  }
  return undefined;
}

/** Entries and bytes in the int8 cache (0 and 0 when the folder is absent). */
export function int8CacheUsage(dir: string): { entries: number; bytes: number } {
  let entries = 0;
  let bytes = 0;
  for (const f of int8Files(dir)) {
    try {
      bytes += statSync(f).size;
      if (f.endsWith('.safetensors')) entries++;
    } catch {
      /* removed meanwhile */
    }
  }
  return { entries, bytes };
}

/** Deletes the int8 cache's entries (and temporary files of writes cut off); returns how many files and bytes. Only
 * the files Kiln writes there are removed, never the folder's other contents. */
export function clearInt8Cache(dir: string): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const f of int8Files(dir)) {
    try {
      const size = statSync(f).size;
      unlinkSync(f);
      files++;
      bytes += size;
    } catch {
      /* removed meanwhile */
    }
  }
  return { files, bytes };
}

function int8Files(dir: string): string[] {
  const folder = join(dir, INT8_SUBDIR);
  try {
    return readdirSync(folder)
      .filter((n) => /^[0-9a-f]{40}\.safetensors(\.\d+\.[0-9a-z]+\.tmp)?$/.test(n))
      .map((n) => join(folder, n));
  } catch {
    return [];
  }
}
