// `pull --weights-dir` for a profile: fetch every file its chosen variant lacks (index files first, so their
// shards join the list), record what was fetched and checked in <checkpoint>/.kiln-pull.json, which `verify`
// (verify.ts) re-hashes against. One pull at a time per checkpoint folder (a lock file), so two terminals never write one .part.
import { existsSync, statSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { DownloadError, downloadFile, resolveUrl } from './download';
import { withLock } from './lock';
import { defaultCatalog, isCommit, ManifestError, type ManifestFile, type WeightsCatalog } from './manifest';
import { fmtBytes, Progress, type ProgressOut } from './progress';
import { checkProfile, indexShardUse, readPullRecord, safetensorsDeclaredSize, writePullRecord, type ProfileWeights, type PullRecord } from './state';

export const DEFAULT_ENDPOINT = 'https://huggingface.co';

export interface PullOptions {
  weightsDir: string;
  /** HF_ENDPOINT, default https://huggingface.co. */
  endpoint?: string;
  /** HF_TOKEN. */
  token?: string;
  /** Variant name; default the profile's first (preferred) one. */
  variant?: string;
  /** Also fetch files marked optional. */
  all?: boolean;
  out: ProgressOut;
  signal?: AbortSignal;
  catalog?: WeightsCatalog;
  retries?: number;
  retryDelayMs?: number;
  stallMs?: number;
  /** Progress line interval off a TTY. */
  intervalMs?: number;
  now?: () => number;
}

export interface PullSummary {
  profile: string;
  variant: string;
  downloaded: string[];
  skipped: string[];
  /** What no hub source is known for, one line each. */
  unavailable: string[];
  /** The profile's weights after the pull. */
  weights: ProfileWeights;
}

function pickVariant(catalog: WeightsCatalog, profile: string, name: string | undefined) {
  const p = catalog.profile(profile);
  if (name === undefined) return p.variants[0]!;
  const v = p.variants.find((x) => x.name === name);
  if (!v) throw new ManifestError(`profile ${profile} has no variant "${name}" (has ${p.variants.map((x) => x.name).join(', ')})`);
  return v;
}

/** A present file that needs no download: its size matches what is known, or (nothing known) it is whole by
 * its own header / not empty. */
function alreadyThere(abs: string, f: ManifestFile, rec: PullRecord): { ok: boolean; why?: string } {
  let st;
  try {
    st = statSync(abs);
  } catch {
    return { ok: false };
  }
  let expected: number | undefined = f.size ?? rec.files[f.path]?.size;
  if (expected === undefined && f.path.endsWith('.safetensors')) expected = safetensorsDeclaredSize(abs, st.size, st.mtimeMs);
  if (expected === undefined) return { ok: st.size > 0, why: 'empty' };
  return st.size === expected ? { ok: true } : { ok: false, why: `${st.size} bytes, expected ${expected}` };
}

export async function pullProfile(profile: string, o: PullOptions): Promise<PullSummary> {
  const catalog = o.catalog ?? defaultCatalog();
  const variant = pickVariant(catalog, profile, o.variant);
  const summary: PullSummary = { profile, variant: variant.name, downloaded: [], skipped: [], unavailable: [], weights: undefined as unknown as ProfileWeights };
  const say = (s: string) => o.out.write(`${s}\n`);

  // Components grouped per checkpoint: one lock, one record, one pinned commit per checkpoint.
  const byCheckpoint = new Map<string, Set<string>>();
  for (const u of variant.uses) {
    const set = byCheckpoint.get(u.checkpoint) ?? new Set<string>();
    u.components.forEach((c) => set.add(c));
    byCheckpoint.set(u.checkpoint, set);
  }

  for (const [id, comps] of byCheckpoint) {
    const ck = catalog.checkpoint(id);
    const root = join(o.weightsDir, ck.folder);
    const names = [...comps];
    if (ck.repo === null || ck.revision === null) {
      summary.unavailable.push(`${names.join(', ')} (${ck.folder}/): no known hub source${ck.note ? `: ${ck.note}` : ''}`);
      continue;
    }
    const repo = ck.repo;
    const revision = ck.revision;
    await mkdir(root, { recursive: true });
    await withLock(join(root, '.kiln-pull.lock'), async () => {
      let rec = readPullRecord(root);
      if (!rec || rec.repo !== repo || rec.revision !== revision) rec = { repo, revision, files: {} };
      // A branch is pinned to the commit the hub names first, so one pull never mixes two commits; a record from
      // an interrupted run keeps its commit, so the .part files it left belong to the same bytes.
      let pinned = isCommit(revision) ? revision : rec.commit;

      const queue: ManifestFile[] = [];
      const listed = new Set<string>();
      for (const c of names) {
        const comp = ck.components[c]!;
        if (comp.byHand) summary.unavailable.push(`${c} (${ck.folder}/${comp.byHand.dir}/*${comp.byHand.suffix}): file names not known, place by hand${comp.note ? `: ${comp.note}` : ''}`);
        for (const f of comp.files) {
          if (listed.has(f.path) || (f.optional && !o.all)) continue;
          listed.add(f.path);
          queue.push(f);
        }
      }
      queue.sort((a, b) => Number(b.shards === true) - Number(a.shards === true)); // indexes first

      for (let i = 0; i < queue.length; i++) {
        const f = queue[i]!;
        const abs = join(root, f.path);
        const there = alreadyThere(abs, f, rec!);
        if (there.ok) {
          summary.skipped.push(`${ck.folder}/${f.path}`);
        } else {
          if (there.why && existsSync(abs)) {
            say(`${ck.folder}/${f.path}: ${there.why}; downloading it again`);
            await rm(abs, { force: true });
          }
          const rev = pinned ?? revision;
          const label = `${repo}@${rev.length === 40 ? rev.slice(0, 12) : rev}: ${f.path}`;
          const progress = new Progress(o.out, `${ck.folder}/${f.path}`, { intervalMs: o.intervalMs, now: o.now });
          let started = false;
          try {
            const r = await downloadFile({
              url: resolveUrl(o.endpoint ?? DEFAULT_ENDPOINT, repo, rev, f.path),
              dest: abs,
              label,
              size: f.size,
              sha256: f.sha256,
              token: o.token,
              retries: o.retries,
              retryDelayMs: o.retryDelayMs,
              stallMs: o.stallMs,
              signal: o.signal,
              onProbe: (p) => {
                if (!pinned && p.commit && isCommit(p.commit)) {
                  pinned = p.commit;
                  rec!.commit = p.commit;
                  say(`${repo}: revision ${revision} is commit ${p.commit}; this pull stays on it`);
                }
              },
              onProgress: (done, total) => {
                if (!started) {
                  started = true;
                  progress.start(done);
                }
                progress.update(done, total);
              },
              onEvent: say,
            });
            const check = r.sha256From ? `sha256 ok (${r.sha256From})` : 'no sha256 known to check';
            progress.end(`${fmtBytes(r.size)}, ${check}${r.resumedFrom > 0 ? `, resumed at ${fmtBytes(r.resumedFrom)}` : ''}`);
            rec!.files[f.path] = { size: r.size, sha256: r.sha256, sha256From: r.sha256From, at: new Date().toISOString() };
            writePullRecord(root, rec!);
            summary.downloaded.push(`${ck.folder}/${f.path}`);
          } catch (e) {
            if (f.optional && e instanceof DownloadError && e.kind === 'not-found') {
              say(`${label}: not on the hub (optional, skipped)`);
              continue;
            }
            throw e;
          }
        }
        if (f.shards && existsSync(abs)) {
          const folder = posix.dirname(f.path);
          for (const { shard, read } of indexShardUse(abs, f.reads)) {
            const path = folder === '.' ? shard : `${folder}/${shard}`;
            if (listed.has(path)) continue;
            listed.add(path);
            const optional = f.optional || !read; // a shard the model never reads: only with --all
            if (!optional || o.all) queue.push({ path, optional });
          }
        }
      }
      if (rec!.commit !== undefined || Object.keys(rec!.files).length > 0) writePullRecord(root, rec!);
    });
  }
  summary.weights = checkProfile(profile, o.weightsDir, catalog);
  return summary;
}
