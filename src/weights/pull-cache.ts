// `pull` (the default target): a profile's files downloaded into the Hugging Face hub cache (HF_HUB_CACHE / HF_HOME,
// the layout huggingface_hub and @huggingface/hub share: blobs/<etag>, snapshots/<commit>/<path> links to them,
// refs/<branch>), so other tools see what Kiln fetched and Kiln reads it in place (state.ts) afterwards.
//   - What to fetch, exactly: @huggingface/hub's modelInfo pins a branch to its commit for the whole run, and its
//     pathsInfo lists each file's size, git oid and LFS sha256 at that commit (indexes first: their shards join the
//     list, the ones the model never reads (`reads`) only with --all). A manifest's own size or sha256 must agree.
//   - The bytes: Kiln's resumable downloader (download.ts: Range after a cut connection, retries, a .part kept for
//     the next run) into blobs/<etag>, checked against the listing: size, and sha256 for LFS files or the git blob
//     sha1 for small ones; only a checked blob is linked into the snapshot, so a half or wrong file is never read.
//   - Already there: a snapshot link whose blob exists is skipped; a blob another snapshot fetched is linked again.
// By-hand parts and checkpoints with no hub source are listed as unavailable, as the WEIGHTS_DIR pull does.
import { modelInfo, pathsInfo } from '@huggingface/hub';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, posix, relative } from 'node:path';
import { downloadFile, DownloadError, resolveUrl } from './download';
import { hubRepoFolder } from './hub-cache';
import { defaultCatalog, isCommit, ManifestError, type ManifestFile, type WeightsCatalog } from './manifest';
import { fmtBytes, Progress, type ProgressOut } from './progress';
import { DEFAULT_ENDPOINT, type PullSummary } from './pull';
import { checkProfile, indexShardUse } from './state';

export interface CachePullOptions {
  /** The hub cache folder written into. */
  hubCacheDir: string;
  /** WEIGHTS_DIR, for the state check afterwards (it still comes first). */
  weightsDir: string;
  endpoint?: string;
  token?: string;
  variant?: string;
  all?: boolean;
  out: ProgressOut;
  catalog?: WeightsCatalog;
  signal?: AbortSignal;
  retries?: number;
  retryDelayMs?: number;
  intervalMs?: number;
}

/** A small file's git blob id: the hub's oid for it, and its blob's name in the cache. */
export const gitBlobSha1 = (b: Buffer): string => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');

export async function pullProfileToCache(profile: string, o: CachePullOptions): Promise<PullSummary> {
  const catalog = o.catalog ?? defaultCatalog();
  const endpoint = o.endpoint ?? DEFAULT_ENDPOINT;
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
    const repo = ck.repo;
    const auth = o.token ? { accessToken: o.token } : {};
    const folder = hubRepoFolder(o.hubCacheDir, repo);
    // A branch is pinned to the commit the hub names now, for every file of this run, and refs/<branch> records it
    // as snapshotDownload does, so the cache's readers find the snapshot.
    let commit = ck.revision;
    if (!isCommit(commit)) {
      try {
        commit = (await modelInfo({ name: repo, revision: ck.revision, hubUrl: endpoint, additionalFields: ['sha'], ...auth })).sha;
      } catch (e) {
        throw new DownloadError('http', `${repo}@${ck.revision}: cannot resolve the revision (${(e as Error).message})`);
      }
      await mkdir(join(folder, 'refs'), { recursive: true });
      await writeFile(join(folder, 'refs', ck.revision), commit);
    }
    const at = (path: string) => `${repo}@${commit.slice(0, 12)}: ${path}`;
    /** The listing's entries for `files` (absent from it: not on the hub at this commit). */
    const list = async (files: ManifestFile[]) => {
      try {
        const got = await pathsInfo({ repo, paths: files.map((f) => f.path), revision: commit, hubUrl: endpoint, expand: true, ...auth });
        return new Map(got.filter((g) => g.type === 'file').map((g) => [g.path, g]));
      } catch (e) {
        throw new DownloadError('http', `${repo}@${commit}: cannot list ${files.map((f) => f.path).join(', ')} (${(e as Error).message})`);
      }
    };
    const fetchAll = async (files: ManifestFile[]): Promise<void> => {
      const listing = await list(files);
      for (const f of files) {
        const info = listing.get(f.path);
        if (!info) {
          if (f.optional) {
            o.out.write(`${at(f.path)}: not on the hub (optional, skipped)\n`);
            continue;
          }
          throw new DownloadError('not-found', `${at(f.path)}: not in the hub's listing of ${repo} at ${commit}`);
        }
        const sha256 = info.lfs?.oid;
        if (f.size !== undefined && f.size !== info.size) throw new DownloadError('conflict', `${at(f.path)}: the manifest says ${f.size} bytes, the hub's listing ${info.size}`);
        if (f.sha256 && sha256 && f.sha256 !== sha256) throw new DownloadError('conflict', `${at(f.path)}: the manifest's sha256 ${f.sha256} differs from the hub's ${sha256}`);
        const etag = sha256 ?? info.oid;
        if (!etag) throw new DownloadError('http', `${at(f.path)}: the hub's listing gives no oid`);
        const blob = join(folder, 'blobs', etag);
        const link = join(folder, 'snapshots', commit, ...f.path.split('/'));
        if (existsSync(link) && existsSync(blob)) {
          summary.skipped.push(`${repo}: ${f.path}`);
          continue;
        }
        if (!existsSync(blob)) {
          await mkdir(dirname(blob), { recursive: true });
          const progress = new Progress(o.out, `${repo}/${f.path}`, { intervalMs: o.intervalMs });
          let started = false;
          const r = await downloadFile({
            url: resolveUrl(endpoint, repo, commit, f.path), dest: blob, label: at(f.path), size: info.size, sha256: sha256 ?? f.sha256,
            token: o.token, retries: o.retries, retryDelayMs: o.retryDelayMs, signal: o.signal,
            onProgress: (done, total) => {
              if (!started) {
                started = true;
                progress.start(done);
              }
              progress.update(done, total);
            },
            onEvent: (line) => o.out.write(`${line}\n`),
          });
          // a small file's only id is its git oid: checked here (download.ts checked the LFS files' sha256)
          if (!sha256 && info.oid) {
            const got = gitBlobSha1(await readFile(blob));
            if (got !== info.oid) {
              await rm(blob, { force: true });
              throw new DownloadError('checksum', `${at(f.path)}: git blob id ${got}, the hub's listing says ${info.oid}; deleted, run again`);
            }
          }
          const check = sha256 ? 'sha256 ok (hub listing)' : 'git oid ok (hub listing)';
          progress.end(`${fmtBytes(r.size)}, ${check}${r.resumedFrom > 0 ? `, resumed at ${fmtBytes(r.resumedFrom)}` : ''}`);
          summary.downloaded.push(`${repo}: ${f.path}`);
        } else {
          summary.skipped.push(`${repo}: ${f.path}`);
        }
        await mkdir(dirname(link), { recursive: true });
        await rm(link, { force: true });
        await symlink(relative(dirname(link), blob), link); // relative, as huggingface_hub links them
        o.out.write(`${at(f.path)} -> ${link}\n`);
      }
    };
    for (const c of comps) {
      const comp = ck.components[c]!;
      if (comp.byHand) summary.unavailable.push(`${c} (${ck.folder}/${comp.byHand.dir}/*${comp.byHand.suffix}): file names not known, place by hand${comp.note ? `: ${comp.note}` : ''}`);
      const files = comp.files.filter((f) => o.all || !f.optional);
      const indexes = files.filter((f) => f.shards);
      await fetchAll([...indexes, ...files.filter((f) => !f.shards)]);
      for (const f of indexes) {
        const abs = join(folder, 'snapshots', commit, ...f.path.split('/'));
        if (!existsSync(abs)) continue; // an optional index the hub lacks
        const dir = posix.dirname(f.path);
        const shards = indexShardUse(abs, f.reads).filter((s) => s.read || o.all).map((s) => ({ path: dir === '.' ? s.shard : `${dir}/${s.shard}` }));
        if (shards.length) await fetchAll(shards);
      }
    }
  }
  summary.weights = checkProfile(profile, { weightsDir: o.weightsDir, hubCacheDir: o.hubCacheDir }, catalog);
  return summary;
}

/** For tests: where a repo's snapshot of `path` lies once pulled. */
export const cachePathOf = (hubCacheDir: string, repo: string, commit: string, path: string) => join(hubCacheDir, `models--${repo.split('/').join('--')}`, 'snapshots', commit, path);
