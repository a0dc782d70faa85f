// `pull --cache`: a profile's files downloaded into the Hugging Face hub cache (HF_HUB_CACHE / HF_HOME, the layout
// huggingface_hub and @huggingface/hub share: blobs/, snapshots/<commit>/ links, refs/<branch>) by @huggingface/hub's
// own downloadFileToCacheDir, so other tools see what Kiln fetched and Kiln reads it in place (state.ts) afterwards.
// Indexes first: their shards join the list, the ones the model never reads (`reads`) only with --all. By-hand
// parts and checkpoints with no hub source are listed as unavailable, as `pull` does.
import { downloadFileToCacheDir, modelInfo } from '@huggingface/hub';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { hubRepoFolder } from './hub-cache';
import { isCommit } from './manifest';
import { DownloadError } from './download';
import { defaultCatalog, ManifestError, type WeightsCatalog } from './manifest';
import type { ProgressOut } from './progress';
import { checkProfile, indexShardUse } from './state';
import type { PullSummary } from './pull';

export interface CachePullOptions {
  /** The hub cache folder written into. */
  hubCacheDir: string;
  /** WEIGHTS_DIR, for the state check afterwards (it still comes first). */
  weightsDir: string;
  endpoint: string;
  token?: string;
  variant?: string;
  all?: boolean;
  out: ProgressOut;
  catalog?: WeightsCatalog;
}

export async function pullProfileToCache(profile: string, o: CachePullOptions): Promise<PullSummary> {
  const catalog = o.catalog ?? defaultCatalog();
  const p = catalog.profile(profile);
  const variant = o.variant === undefined ? p.variants[0]! : p.variants.find((v) => v.name === o.variant);
  if (!variant) throw new ManifestError(`profile ${profile} has no variant "${o.variant}" (has ${p.variants.map((v) => v.name).join(', ')})`);
  const summary: PullSummary = { profile, variant: variant.name, downloaded: [], skipped: [], unavailable: [], weights: undefined as unknown as PullSummary['weights'] };
  const byCheckpoint = new Map<string, Set<string>>();
  for (const u of variant.uses) byCheckpoint.set(u.checkpoint, new Set([...(byCheckpoint.get(u.checkpoint) ?? []), ...u.components]));
  for (const [id, comps] of byCheckpoint) {
    const ck = catalog.checkpoint(id);
    if (ck.repo === null || ck.revision === null) {
      summary.unavailable.push(`${[...comps].join(', ')}: no known hub source${ck.note ? `: ${ck.note}` : ''}`);
      continue;
    }
    const auth = o.token ? { accessToken: o.token } : {};
    // A branch is pinned to the commit the hub names now, for every file of this run, and refs/<branch> records it
    // as snapshotDownload does (downloadFileToCacheDir alone writes no ref), so the cache's readers find the snapshot.
    let commit = ck.revision;
    if (!isCommit(commit)) {
      try {
        commit = (await modelInfo({ name: ck.repo, revision: ck.revision, hubUrl: o.endpoint, additionalFields: ['sha'], ...auth })).sha;
      } catch (e) {
        throw new DownloadError('http', `${ck.repo}@${ck.revision}: cannot resolve the revision (${(e as Error).message})`);
      }
      const ref = join(hubRepoFolder(o.hubCacheDir, ck.repo), 'refs', ck.revision);
      await mkdir(dirname(ref), { recursive: true });
      await writeFile(ref, commit);
    }
    const fetchOne = async (path: string): Promise<string> => {
      try {
        const at = await downloadFileToCacheDir({ repo: ck.repo!, path, revision: commit, hubUrl: o.endpoint, cacheDir: o.hubCacheDir, ...auth });
        summary.downloaded.push(`${ck.repo}: ${path}`);
        o.out.write(`${ck.repo}@${ck.revision}: ${path} -> ${at}\n`);
        return at;
      } catch (e) {
        throw new DownloadError('http', `${ck.repo}@${ck.revision}: ${path}: ${(e as Error).message}`);
      }
    };
    for (const c of comps) {
      const comp = ck.components[c]!;
      if (comp.byHand) summary.unavailable.push(`${c} (${ck.folder}/${comp.byHand.dir}/*${comp.byHand.suffix}): file names not known, place by hand${comp.note ? `: ${comp.note}` : ''}`);
      const files = comp.files.filter((f) => o.all || !f.optional).sort((a, b) => Number(b.shards === true) - Number(a.shards === true));
      for (const f of files) {
        const at = await fetchOne(f.path);
        if (!f.shards) continue;
        const folder = posix.dirname(f.path);
        for (const { shard, read } of indexShardUse(at, f.reads)) {
          if (read || o.all) await fetchOne(folder === '.' ? shard : `${folder}/${shard}`);
        }
      }
    }
  }
  summary.weights = checkProfile(profile, { weightsDir: o.weightsDir, hubCacheDir: o.hubCacheDir }, catalog);
  return summary;
}

/** For tests: where a repo's snapshot of `path` lies once pulled. */
export const cachePathOf = (hubCacheDir: string, repo: string, commit: string, path: string) => join(hubCacheDir, `models--${repo.split('/').join('--')}`, 'snapshots', commit, path);
