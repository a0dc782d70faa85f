// What a checkpoint tensor's values depend on, for the int8 cache (int8-cache.ts): a file's identity, and the
// (where, what) pair a source states for one tensor (ChunkSource.sourceIdentity). A leaf: safetensors.ts and the
// model folders' views import it without importing the cache.
import { realpathSync, statSync } from 'node:fs';
import { basename } from 'node:path';

/** A tensor's place and content, as a source states them (ChunkSource.sourceIdentity). */
export interface SourceIdentity {
  /** Stable for the same tensor of the same file or recipe: names the cache entry. */
  where: string;
  /** Everything the tensor's values depend on: an entry is used only when this matches. */
  what: string;
}

/**
 * A file's identity: `blob:<name>:<size>` for a Hugging Face hub cache blob (its real path ends in blobs/<sha256 or
 * git sha1>: content-addressed, so a re-download or a touched mtime keeps it), else `<real path>:<size>:<mtimeMs>`.
 */
export function fileIdentity(path: string): string {
  const real = realpathSync(path);
  const st = statSync(real);
  const blob = /[\\/]blobs[\\/][0-9a-f]{40}([0-9a-f]{24})?$/.test(real);
  return blob ? `blob:${basename(real)}:${st.size}` : `${real}:${st.size}:${st.mtimeMs}`;
}
