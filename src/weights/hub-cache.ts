// The Hugging Face hub cache, read in place: the layout huggingface_hub (Python) and @huggingface/hub (JS) both write,
//   <cache>/models--<org>--<name>/refs/<branch>              the commit a branch named at the last download
//   <cache>/models--<org>--<name>/snapshots/<commit>/<path>  a relative link into blobs/ per file
//   <cache>/models--<org>--<name>/blobs/<sha256 | git sha1>  the bytes
// Kiln never writes here (checkProfile only stats, the loaders only read); a snapshot is used where the manifest's
// files are all in it, so a user's `huggingface-cli download` is found without a copy or a link made by hand.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const COMMIT = /^[0-9a-f]{40}$/;

/** The hub cache folder by the same rules as huggingface_hub and @huggingface/hub: HF_HUB_CACHE, then the legacy
 * HUGGINGFACE_HUB_CACHE, then HF_HOME/hub, then XDG_CACHE_HOME/huggingface/hub, then ~/.cache/huggingface/hub. */
export function hubCacheDirOf(env: Record<string, string | undefined>): string {
  const set = (v: string | undefined) => (v?.trim() ? v.trim() : undefined);
  return (
    set(env.HF_HUB_CACHE) ??
    set(env.HUGGINGFACE_HUB_CACHE) ??
    join(set(env.HF_HOME) ?? join(set(env.XDG_CACHE_HOME) ?? join(homedir(), '.cache'), 'huggingface'), 'hub')
  );
}

/** The cache's folder for a model repo "org/name". */
export function hubRepoFolder(cacheDir: string, repo: string): string {
  return join(cacheDir, `models--${repo.split('/').join('--')}`);
}

/** The snapshot folder of `repo` at `revision` (a commit, or a branch or tag resolved through refs/), or undefined
 * when the cache holds no such snapshot. A branch reads the commit its ref names now: a newer download moves it. */
export function hubSnapshot(cacheDir: string, repo: string, revision: string): string | undefined {
  const folder = hubRepoFolder(cacheDir, repo);
  let commit = revision;
  if (!COMMIT.test(revision)) {
    try {
      commit = readFileSync(join(folder, 'refs', revision), 'utf8').trim();
    } catch {
      return undefined;
    }
    if (!COMMIT.test(commit)) return undefined;
  }
  const snap = join(folder, 'snapshots', commit);
  return existsSync(snap) ? snap : undefined;
}
