// `pull` and `verify` for a profile: fetch every file its chosen variant lacks (index files first, so their
// shards join the list), record what was fetched and checked in <checkpoint>/.kiln-pull.json, and re-hash on
// `verify`. One pull at a time per checkpoint folder (a lock file), so two terminals never write one .part.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
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

export interface VerifyOptions {
  weightsDir: string;
  variant?: string;
  out: ProgressOut;
  signal?: AbortSignal;
  catalog?: WeightsCatalog;
  intervalMs?: number;
  now?: () => number;
}

export interface VerifyResult {
  ok: boolean;
  variant: string;
  /** One line per file. */
  lines: string[];
}

async function sha256Of(path: string, size: number, progress: Progress, signal?: AbortSignal): Promise<string> {
  const h = createHash('sha256');
  let done = 0;
  progress.start(0);
  for await (const chunk of createReadStream(path, { signal, highWaterMark: 4 << 20 })) {
    h.update(chunk as Buffer);
    done += (chunk as Buffer).length;
    progress.update(done, size);
  }
  return h.digest('hex');
}

/** Re-checks sizes and hashes every present file of the variant (the first complete one unless named) against
 * the manifest's sha256, else the one recorded by `pull` (the hub's). */
export async function verifyProfile(profile: string, o: VerifyOptions): Promise<VerifyResult> {
  const catalog = o.catalog ?? defaultCatalog();
  const w = checkProfile(profile, o.weightsDir, catalog);
  const v = o.variant === undefined ? w.variant : w.variants.find((x) => x.name === o.variant);
  if (!v) throw new ManifestError(`profile ${profile} has no variant "${o.variant}" (has ${w.variants.map((x) => x.name).join(', ')})`);
  const lines: string[] = [];
  let ok = true;
  const say = (s: string) => {
    lines.push(s);
    o.out.write(`${s}\n`);
  };
  for (const comp of Object.values(v.components)) {
    const ck = catalog.checkpoint(comp.checkpoint);
    const rec = readPullRecord(comp.root);
    const manifestSha = new Map(Object.values(ck.components).flatMap((c) => c.files).map((f) => [f.path, f.sha256] as const));
    for (const f of comp.files) {
      const name = `${ck.folder}/${f.path}`;
      if (f.state !== 'ok') {
        if (f.optional) continue;
        ok = false;
        say(`${name}: ${f.state === 'missing' ? 'missing' : f.state === 'partial' ? `partly downloaded (${f.actual} bytes)` : `${f.actual} bytes, expected ${f.expected}`}`);
        continue;
      }
      const fromManifest = manifestSha.get(f.path);
      const want = fromManifest ?? rec?.files[f.path]?.sha256;
      const from = fromManifest ? 'sha256 from the manifest'
        : rec?.files[f.path]?.sha256From === 'hub' ? 'sha256 from the hub, recorded at pull'
        : 'sha256 recorded at pull, when no expected value was known';
      const got = await sha256Of(f.abs, f.actual ?? 0, new Progress(o.out, name, { intervalMs: o.intervalMs, now: o.now }), o.signal);
      if (!want) {
        say(`${name}: size ok, no sha256 known (now ${got})`);
      } else if (got === want) {
        say(`${name}: ok (${from})`);
      } else {
        ok = false;
        say(`${name}: sha256 MISMATCH: ${got}, expected ${want} (${from})`);
      }
    }
  }
  for (const p of v.problems.filter((x) => x.includes('place it by hand'))) {
    ok = false;
    say(p);
  }
  return { ok, variant: v.name, lines };
}
