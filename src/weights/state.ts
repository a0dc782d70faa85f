// What is on disk for a profile: every required file present with the right size ('real') or not ('missing'),
// and the folders a pipeline loads from. Synchronous (ServedEntry.weights() is: src/worker/registry.ts), and cheap: a stat per file plus
// one header read per .safetensors file whose size no manifest or pull record gives, cached by size and mtime.
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { findComfyFile, type ComfyFolders } from './comfyui';
import { hubSnapshot } from './hub-cache';
import { defaultCatalog, ManifestError, safeRelative, type ManifestCheckpoint, type ManifestComponent, type ManifestFile, type WeightsCatalog } from './manifest';

/** Where weights are looked for, in order: WEIGHTS_DIR's own layout, then the Hugging Face hub cache, then ComfyUI's
 * model folders (both read-only). */
export interface WeightsPlaces {
  weightsDir: string;
  /** The hub cache folder (settings' hubCacheDir); absent: not looked at. */
  hubCacheDir?: string;
  /** ComfyUI's model folders per kind (settings' comfyFolders: COMFYUI_MODELS_DIR, extra_model_paths.yaml); absent:
   * not looked at. */
  comfyFolders?: ComfyFolders;
}

/** Which place a component's files were found in. */
export type WeightsPlace = 'weights-dir' | 'hub-cache' | 'comfyui';

export type FileState = 'ok' | 'missing' | 'partial' | 'wrong-size';

export interface FileStatus {
  /** Path inside the checkpoint folder. */
  path: string;
  abs: string;
  state: FileState;
  optional: boolean;
  /** Bytes on disk (the .part file's for 'partial'). */
  actual?: number;
  /** Bytes expected, when known (manifest, pull record, or the safetensors header). */
  expected?: number;
}

export interface ComponentStatus {
  name: string;
  checkpoint: string;
  /** The checkpoint folder (absolute): the root its files' paths are relative to, like from_pretrained's path. In the
   * hub cache, the snapshot folder (its files are links into blobs/). */
  root: string;
  place: WeightsPlace;
  /** In ComfyUI's folders: the one file that is the whole part (ComfyUI's key names); componentPath returns it. */
  file?: string;
  complete: boolean;
  files: FileStatus[];
  /** Human lines for what is missing or wrong. */
  problems: string[];
}

export interface VariantStatus {
  name: string;
  complete: boolean;
  components: Record<string, ComponentStatus>;
  problems: string[];
}

export interface ProfileWeights {
  profile: string;
  state: 'real' | 'missing';
  /** The first complete variant, else the preferred (first) one. */
  variant: VariantStatus;
  variants: VariantStatus[];
  /** ensureDemoCheckpoint name of the profile's demo checkpoint. */
  demo: string;
}

// ---- pull record: what `pull` fetched and verified, kept beside the files ----

export const PULL_RECORD = '.kiln-pull.json';

export interface PullRecordFile {
  size: number;
  sha256?: string;
  /** Where the checked sha256 came from. */
  sha256From?: 'manifest' | 'hub';
  at: string;
}

export interface PullRecord {
  repo: string;
  revision: string;
  /** The commit the hub named (X-Repo-Commit) when the revision is a branch. */
  commit?: string;
  files: Record<string, PullRecordFile>;
}

export function readPullRecord(checkpointDir: string): PullRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(checkpointDir, PULL_RECORD), 'utf8')) as PullRecord;
    return r && typeof r.files === 'object' ? r : undefined;
  } catch {
    return undefined;
  }
}

/** Written through a temp file and a rename, so a crash never leaves half a record. */
export function writePullRecord(checkpointDir: string, rec: PullRecord): void {
  const tmp = join(checkpointDir, `${PULL_RECORD}.${process.pid}.tmp`);
  writeFileSync(tmp, JSON.stringify(rec, null, 1));
  renameSync(tmp, join(checkpointDir, PULL_RECORD));
}

// ---- files of a component ----

const shardCache = new Map<string, { key: string; map: Map<string, string[]> }>();

/** An index's weight_map as shard file name -> the tensor names it holds, sorted by shard; parsed once per size and
 * mtime, since /api/config asks for every profile's state and a text encoder's index is about 100 KB. */
function indexMap(indexAbs: string): Map<string, string[]> {
  let map: unknown;
  let key = '';
  try {
    const st = statSync(indexAbs);
    key = `${st.size}:${st.mtimeMs}`;
    const hit = shardCache.get(indexAbs);
    if (hit && hit.key === key) return hit.map;
    map = (JSON.parse(readFileSync(indexAbs, 'utf8')) as { weight_map?: unknown }).weight_map;
  } catch (e) {
    throw new ManifestError(`${indexAbs}: unreadable index (${(e as Error).message})`);
  }
  if (!map || typeof map !== 'object') throw new ManifestError(`${indexAbs}: no weight_map`);
  const byShard = new Map<string, string[]>();
  for (const [tensor, s] of Object.entries(map as Record<string, unknown>)) {
    if (typeof s !== 'string' || !safeRelative(s) || s.includes('/')) throw new ManifestError(`${indexAbs}: weight_map names a bad shard ${JSON.stringify(s)}`);
    byShard.set(s, [...(byShard.get(s) ?? []), tensor]);
  }
  const sorted = new Map([...byShard].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  shardCache.set(indexAbs, { key, map: sorted });
  return sorted;
}

/** Shard file names in an index's weight_map (same folder as the index), sorted. */
export function indexShards(indexAbs: string): string[] {
  return [...indexMap(indexAbs).keys()];
}

/** Each shard of an index and whether the model reads it: it holds a tensor matching one of `reads` (every shard
 * when `reads` is absent). */
export function indexShardUse(indexAbs: string, reads?: string[]): { shard: string; read: boolean }[] {
  const res = reads?.map((r) => new RegExp(r));
  return [...indexMap(indexAbs)].map(([shard, tensors]) => ({ shard, read: !res || tensors.some((t) => res.some((re) => re.test(t))) }));
}

/** The component's files, shards of present indexes included (an explicit entry for a shard wins over the
 * index's, so a manifest can mark a shard optional or give its size); a shard the model never reads (the index's
 * `reads`) is optional. */
export function componentFiles(comp: ManifestComponent, root: string): ManifestFile[] {
  const out = [...comp.files];
  const listed = new Set(out.map((f) => f.path));
  for (const f of comp.files) {
    if (!f.shards) continue;
    const abs = join(root, f.path);
    if (!existsSync(abs)) continue;
    const folder = posix.dirname(f.path);
    for (const { shard, read } of indexShardUse(abs, f.reads)) {
      const path = folder === '.' ? shard : `${folder}/${shard}`;
      if (!listed.has(path)) {
        listed.add(path);
        out.push({ path, optional: f.optional || !read });
      }
    }
  }
  return out;
}

// ---- checks ----

const headerCache = new Map<string, { key: string; total: number | undefined }>();

/** The size a .safetensors file must have by its own header (8 + header + largest data end), or undefined when
 * the header is unreadable. Catches truncated shards whose size no manifest gives. */
export function safetensorsDeclaredSize(abs: string, size: number, mtimeMs: number): number | undefined {
  const key = `${size}:${mtimeMs}`;
  const hit = headerCache.get(abs);
  if (hit && hit.key === key) return hit.total;
  let total: number | undefined;
  let fd: number | undefined;
  try {
    fd = openSync(abs, 'r');
    const lenBuf = Buffer.alloc(8);
    if (readSync(fd, lenBuf, 0, 8, 0) === 8) {
      const n = Number(lenBuf.readBigUInt64LE(0));
      if (n <= 100 * 2 ** 20 && 8 + n <= size) {
        const head = Buffer.alloc(n);
        readSync(fd, head, 0, n, 8);
        let end = 0;
        for (const [k, v] of Object.entries(JSON.parse(head.toString('utf8')) as Record<string, { data_offsets?: number[] }>)) {
          if (k !== '__metadata__' && Array.isArray(v?.data_offsets)) end = Math.max(end, Number(v.data_offsets[1]));
        }
        total = 8 + n + end;
      } else {
        total = 8 + n; // header alone does not fit: certainly truncated
      }
    }
  } catch {
    total = undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  headerCache.set(abs, { key, total });
  return total;
}

function checkFile(root: string, f: ManifestFile, rec: PullRecord | undefined): FileStatus {
  const abs = join(root, f.path);
  const base = { path: f.path, abs, optional: f.optional === true };
  let st;
  try {
    st = statSync(abs);
  } catch {
    try {
      return { ...base, state: 'partial', actual: statSync(`${abs}.part`).size, expected: f.size ?? rec?.files[f.path]?.size };
    } catch {
      return { ...base, state: 'missing', expected: f.size ?? rec?.files[f.path]?.size };
    }
  }
  if (!st.isFile()) return { ...base, state: 'missing' };
  let expected = f.size ?? rec?.files[f.path]?.size;
  if (expected === undefined && f.path.endsWith('.safetensors')) expected = safetensorsDeclaredSize(abs, st.size, st.mtimeMs);
  const ok = expected === undefined ? st.size > 0 : st.size === expected;
  return { ...base, state: ok ? 'ok' : 'wrong-size', actual: st.size, expected };
}

function fmtProblem(folder: string, s: FileStatus): string {
  const p = `${folder}/${s.path}`;
  if (s.state === 'missing') return `${p}: missing`;
  if (s.state === 'partial') return `${p}: partly downloaded (${s.actual} bytes in .part${s.expected !== undefined ? ` of ${s.expected}` : ''})`;
  return `${p}: ${s.actual} bytes, expected ${s.expected ?? 'a non-empty file'}`;
}

/** A component's files under one root; `label` prefixes its problem lines. */
function checkComponentAt(ck: ManifestCheckpoint, checkpointId: string, name: string, root: string, place: WeightsPlace, label: string): ComponentStatus {
  const comp = ck.components[name]!;
  const rec = place === 'weights-dir' ? readPullRecord(root) : undefined;
  const files = componentFiles(comp, root).map((f) => checkFile(root, f, rec));
  const problems = files.filter((s) => !s.optional && s.state !== 'ok').map((s) => fmtProblem(label, s));
  if (comp.byHand) {
    const dir = join(root, comp.byHand.dir);
    let found: string[] = [];
    try {
      found = readdirSync(dir).filter((n) => n.endsWith(comp.byHand!.suffix) && !n.startsWith('.'));
    } catch {
      /* folder absent */
    }
    const placed = found.map((n) => checkFile(root, { path: `${comp.byHand!.dir}/${n}` }, rec));
    files.push(...placed);
    if (placed.length === 0) problems.push(`${label}/${comp.byHand.dir}/: no *${comp.byHand.suffix} file (no known download: place it by hand${comp.note ? `; ${comp.note}` : ''})`);
    for (const s of placed) if (s.state !== 'ok') problems.push(fmtProblem(label, s));
  }
  return { name, checkpoint: checkpointId, root, place, complete: problems.length === 0, files, problems };
}

/** A component in WEIGHTS_DIR/<folder>, else in the hub cache's snapshot of the checkpoint's repo and revision
 * (branch or commit; no revision: main) when that one is complete, else as one file in ComfyUI's folders (the
 * manifest's `comfyui` kind and names; a truncated one is named as such). None found: the one with fewer problems of
 * WEIGHTS_DIR and the cache (WEIGHTS_DIR on a tie), so a half-downloaded cache snapshot says what it lacks. */
export function checkComponent(catalog: WeightsCatalog, checkpointId: string, name: string, places: string | WeightsPlaces): ComponentStatus {
  const { weightsDir, hubCacheDir, comfyFolders } = typeof places === 'string' ? { weightsDir: places, hubCacheDir: undefined, comfyFolders: undefined } : places;
  const ck = catalog.checkpoint(checkpointId);
  let best = checkComponentAt(ck, checkpointId, name, join(weightsDir, ck.folder), 'weights-dir', ck.folder);
  if (best.complete) return best;
  const snap = hubCacheDir && ck.repo ? hubSnapshot(hubCacheDir, ck.repo, ck.revision ?? 'main') : undefined;
  if (snap) {
    const cached = checkComponentAt(ck, checkpointId, name, snap, 'hub-cache', `hub cache ${ck.repo}@${snap.slice(-40, -32)}`);
    if (cached.complete) return cached;
    if (cached.problems.length < best.problems.length) best = cached;
  }
  const comfy = ck.components[name]!.comfyui;
  if (comfy && comfyFolders) {
    const found = findComfyFile(comfyFolders, comfy.kind, comfy.names.map((r) => new RegExp(r)));
    if (found) {
      const st = checkFile(found.folder, { path: found.name }, undefined);
      const problems = st.state === 'ok' ? [] : [fmtProblem(`ComfyUI ${comfy.kind}`, st)];
      // a broken file there (truncated: its own header says how long it must be) is named rather than passed over
      return { name, checkpoint: checkpointId, root: found.folder, place: 'comfyui', file: found.abs, complete: problems.length === 0, files: [st], problems };
    }
  }
  return best;
}

/** checkProfile for a pipeline entry: /api/config and /api/health ask weights() and note() on every request, so one
 * folder check serves them for `maxAgeMs` (a finished pull shows within that); a load calls checkProfile afresh. */
export function profileChecker(profile: string, places: string | WeightsPlaces, maxAgeMs = 1000): () => ProfileWeights {
  let checked: { at: number; w: ProfileWeights } | undefined;
  return () => {
    const now = Date.now();
    if (!checked || now - checked.at > maxAgeMs) checked = { at: now, w: checkProfile(profile, places) };
    return checked.w;
  };
}

/** Where a profile's weights stand: under WEIGHTS_DIR, or in the hub cache when `places` names one. */
export function checkProfile(profile: string, places: string | WeightsPlaces, catalog: WeightsCatalog = defaultCatalog()): ProfileWeights {
  const p = catalog.profile(profile);
  const variants = p.variants.map((v): VariantStatus => {
    const components: Record<string, ComponentStatus> = {};
    for (const u of v.uses) for (const c of u.components) components[c] = checkComponent(catalog, u.checkpoint, c, places);
    const problems = Object.values(components).flatMap((c) => c.problems);
    return { name: v.name, complete: problems.length === 0, components, problems };
  });
  const done = variants.find((v) => v.complete);
  return { profile, state: done ? 'real' : 'missing', variant: done ?? variants[0]!, variants, demo: p.demo };
}

/** The ServedEntry.weights() answer: real weights, else the demo checkpoint when the pipeline has one. */
export function weightsState(w: ProfileWeights, demoAvailable: boolean): 'real' | 'demo' | 'missing' {
  return w.state === 'real' ? 'real' : demoAvailable ? 'demo' : 'missing';
}

/** One line for /api/config's note: the folders in use, or the first few things missing. */
export function weightsNote(w: ProfileWeights, max = 3): string {
  if (w.state === 'real') {
    const roots = [...new Set(Object.values(w.variant.components).map(placeLabel))];
    return `${w.variant.name}: ${roots.join(', ')}`;
  }
  const pr = w.variant.problems;
  const more = pr.length > max ? ` (+${pr.length - max} more)` : '';
  return `${pr.slice(0, max).join('; ')}${more}; run: npm run weights -- pull ${w.profile}`;
}

/** Where a component was found, in short: its folder, "(Hugging Face cache)" after a snapshot, "(ComfyUI)" after a file
 * of ComfyUI's folders. */
export function placeLabel(c: ComponentStatus): string {
  if (c.place === 'comfyui') return `${c.file} (ComfyUI)`;
  return c.place === 'hub-cache' ? `${c.root} (Hugging Face cache)` : c.root;
}

/** The path a pipeline opens for `component`: `<root>/<sub>` (a diffusers or native folder), or, where the part was
 * found in ComfyUI's folders, its one file. */
export function componentPath(w: ProfileWeights, component: string, sub: string): string {
  const c = w.variant.components[component];
  if (!c) throw new ManifestError(`profile ${w.profile} variant ${w.variant.name} has no component "${component}" (has ${Object.keys(w.variant.components).join(', ')})`);
  return c.file ?? join(c.root, sub);
}

/** The folder a component's files are relative to, e.g. componentRoot(w, 'transformer') + '/transformer'. */
export function componentRoot(w: ProfileWeights, component: string): string {
  const c = w.variant.components[component];
  if (!c) throw new ManifestError(`profile ${w.profile} variant ${w.variant.name} has no component "${component}" (has ${Object.keys(w.variant.components).join(', ')})`);
  return c.root;
}
