// Weight manifests (weights/*.json): which Hugging Face repo, revision and files each profile needs, and where
// they live under WEIGHTS_DIR. One manifest per model family; checkpoint ids and profile names are unique across
// all of them. This file parses and validates them; state.ts says what is on disk, pull.ts fetches.
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { projectRoot } from '../paths';

export interface ManifestFile {
  /** Path inside the checkpoint folder, '/'-separated, as in the hub repo. */
  path: string;
  /** Bytes, when known. */
  size?: number;
  /** Lower-case hex sha256, when known (never guessed). */
  sha256?: string;
  /** Not needed to run: skipped by `pull` unless --all, ignored by the 'real' check. */
  optional?: boolean;
  /** A *.safetensors.index.json: the shards named in its weight_map are required files of the same folder. */
  shards?: boolean;
  /** With `shards`: what the model reads of that index, as regular expressions over tensor names. A shard holding
   * none of them is optional (not required, not pulled without --all): a text encoder read to layer 49 of 64 does
   * not need the shards of the layers after it. Absent: every shard is read. */
  reads?: string[];
  note?: string;
}

export interface ManifestComponent {
  files: ManifestFile[];
  /** File names not known: this folder (inside the checkpoint) must hold at least one file ending in `suffix`,
   * put there by hand; `pull` cannot fetch it and says so. */
  byHand?: { dir: string; suffix: string };
  /** Where a ComfyUI install keeps this part as one file: the model kind's folder ('diffusion_models', 'text_encoders',
   * 'vae'; unet and clip are the same folders) and regular expressions over the file's name. Found there (state.ts),
   * the component is that one file, read in place with ComfyUI's key names (src/engine/comfy-keys.ts). */
  comfyui?: { kind: string; names: string[] };
  note?: string;
}

export interface ManifestCheckpoint {
  /** Hub repo "owner/name", or null when no hub source is known. */
  repo: string | null;
  /** A 40-hex commit, or a branch (then `pull` pins every file of one run to the commit the first answer names). */
  revision: string | null;
  /** How the revision was chosen. */
  revisionNote: string;
  /** Folder under WEIGHTS_DIR. */
  folder: string;
  /** Named parts ('transformer', 'vae', ...): what a profile variant selects. */
  components: Record<string, ManifestComponent>;
  note?: string;
}

export interface ProfileUse {
  checkpoint: string;
  components: string[];
}

export interface ProfileVariant {
  name: string;
  uses: ProfileUse[];
  note?: string;
}

export interface ManifestProfile {
  /** The ensureDemoCheckpoint name of this profile's tiny random checkpoint. */
  demo: string;
  /** Alternatives in order of preference: the first complete one is used; `pull` fetches the first by default. */
  variants: ProfileVariant[];
  note?: string;
}

export interface Manifest {
  /** The manifest's file name. */
  file: string;
  model: string;
  notes: string[];
  checkpoints: Record<string, ManifestCheckpoint>;
  profiles: Record<string, ManifestProfile>;
}

/** A manifest is malformed; the message names the file and the field. */
export class ManifestError extends Error {
  override readonly name = 'ManifestError';
}

/** Every manifest of a folder, with profiles and checkpoints indexed across files. */
export class WeightsCatalog {
  readonly profiles = new Map<string, ManifestProfile>();
  readonly checkpoints = new Map<string, ManifestCheckpoint>();

  constructor(readonly manifests: Manifest[]) {
    for (const m of manifests) {
      for (const [id, c] of Object.entries(m.checkpoints)) {
        if (this.checkpoints.has(id)) throw new ManifestError(`${m.file}: checkpoint "${id}" is defined in two manifests`);
        this.checkpoints.set(id, c);
      }
    }
    for (const m of manifests) {
      for (const [name, p] of Object.entries(m.profiles)) {
        if (this.profiles.has(name)) throw new ManifestError(`${m.file}: profile "${name}" is defined in two manifests`);
        for (const v of p.variants) {
          const names = new Set<string>();
          for (const u of v.uses) {
            const c = this.checkpoints.get(u.checkpoint);
            if (!c) throw new ManifestError(`${m.file}: profile ${name} variant ${v.name} uses unknown checkpoint "${u.checkpoint}"`);
            for (const comp of u.components) {
              if (!c.components[comp]) throw new ManifestError(`${m.file}: profile ${name} variant ${v.name}: checkpoint ${u.checkpoint} has no component "${comp}"`);
              // Pipelines look components up by name (componentRoot), so a name means one folder per variant.
              if (names.has(comp)) throw new ManifestError(`${m.file}: profile ${name} variant ${v.name}: component "${comp}" comes from two checkpoints`);
              names.add(comp);
            }
          }
        }
        this.profiles.set(name, p);
      }
    }
  }

  profile(name: string): ManifestProfile {
    const p = this.profiles.get(name);
    if (!p) throw new ManifestError(`no manifest names profile "${name}" (known: ${[...this.profiles.keys()].join(', ')})`);
    return p;
  }

  checkpoint(id: string): ManifestCheckpoint {
    const c = this.checkpoints.get(id);
    if (!c) throw new ManifestError(`no manifest defines checkpoint "${id}"`);
    return c;
  }
}

/** The repository's weights/ folder (manifests; by default also WEIGHTS_DIR). */
export function manifestsDir(): string {
  return join(projectRoot(), 'weights');
}

/** Reads and validates every *.json manifest in `dir`. */
export function loadCatalog(dir: string = manifestsDir()): WeightsCatalog {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  return new WeightsCatalog(files.map((f) => parseManifest(f, readFileSync(join(dir, f), 'utf8'))));
}

let cached: { dir: string; catalog: WeightsCatalog } | undefined;

/** loadCatalog, read once per process per folder (manifests are part of the install, they do not change at run time). */
export function defaultCatalog(dir: string = manifestsDir()): WeightsCatalog {
  if (!cached || cached.dir !== dir) cached = { dir, catalog: loadCatalog(dir) };
  return cached.catalog;
}

// ---- validation ----

const HEX64 = /^[0-9a-f]{64}$/;
const HEX40 = /^[0-9a-f]{40}$/;
const REPO = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function isCommit(revision: string): boolean {
  return HEX40.test(revision);
}

/** Parses one manifest's text; throws ManifestError naming `file` and the bad field. */
export function parseManifest(file: string, text: string): Manifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ManifestError(`${file}: not valid JSON (${(e as Error).message})`);
  }
  const at = (where: string, msg: string) => new ManifestError(`${file}: ${where}: ${msg}`);
  const obj = (v: unknown, where: string): Record<string, unknown> => {
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw at(where, 'expected an object');
    return v as Record<string, unknown>;
  };
  const str = (v: unknown, where: string): string => {
    if (typeof v !== 'string' || v === '') throw at(where, 'expected a non-empty string');
    return v;
  };
  const optStr = (v: unknown, where: string): string | undefined => (v === undefined ? undefined : str(v, where));
  const arr = (v: unknown, where: string): unknown[] => {
    if (!Array.isArray(v)) throw at(where, 'expected an array');
    return v;
  };

  const root = obj(raw, 'top level');
  const notes = root.notes === undefined ? [] : arr(root.notes, 'notes').map((n, i) => str(n, `notes[${i}]`));

  const checkpoints: Record<string, ManifestCheckpoint> = {};
  for (const [id, cv] of Object.entries(obj(root.checkpoints, 'checkpoints'))) {
    const w = `checkpoints.${id}`;
    if (!NAME.test(id)) throw at(w, 'id must be letters, digits, . _ -');
    const c = obj(cv, w);
    const repo = c.repo === null ? null : str(c.repo, `${w}.repo`);
    if (repo !== null && !REPO.test(repo)) throw at(`${w}.repo`, `"${repo}" is not owner/name`);
    const revision = c.revision === null ? null : str(c.revision, `${w}.revision`);
    if (repo !== null && revision === null) throw at(`${w}.revision`, 'a repo needs a revision (commit or branch)');
    if (revision !== null && !/^[A-Za-z0-9._/-]+$/.test(revision)) throw at(`${w}.revision`, `"${revision}" is not a commit or branch name`);
    const folder = str(c.folder, `${w}.folder`);
    if (!safeRelative(folder)) throw at(`${w}.folder`, `"${folder}" must be a plain relative path`);
    const components: Record<string, ManifestComponent> = {};
    for (const [name, compV] of Object.entries(obj(c.components, `${w}.components`))) {
      const cw = `${w}.components.${name}`;
      const comp = obj(compV, cw);
      const seen = new Set<string>();
      const files = arr(comp.files ?? [], `${cw}.files`).map((fv, i) => {
        const f = parseFile(obj(fv, `${cw}.files[${i}]`), `${cw}.files[${i}]`, at, str, optStr);
        if (seen.has(f.path)) throw at(`${cw}.files[${i}]`, `"${f.path}" is listed twice`);
        seen.add(f.path);
        return f;
      });
      let byHand: ManifestComponent['byHand'];
      if (comp.byHand !== undefined) {
        const b = obj(comp.byHand, `${cw}.byHand`);
        byHand = { dir: str(b.dir, `${cw}.byHand.dir`), suffix: str(b.suffix, `${cw}.byHand.suffix`) };
        if (!safeRelative(byHand.dir)) throw at(`${cw}.byHand.dir`, `"${byHand.dir}" must be a plain relative path`);
      }
      let comfyui: ManifestComponent['comfyui'];
      if (comp.comfyui !== undefined) {
        const c = obj(comp.comfyui, `${cw}.comfyui`);
        const kind = str(c.kind, `${cw}.comfyui.kind`);
        if (!NAME.test(kind)) throw at(`${cw}.comfyui.kind`, `"${kind}" is not a ComfyUI model folder name`);
        const names = arr(c.names, `${cw}.comfyui.names`).map((r, i) => {
          const src = str(r, `${cw}.comfyui.names[${i}]`);
          try {
            new RegExp(src);
          } catch (e) {
            throw at(`${cw}.comfyui.names[${i}]`, `not a regular expression (${(e as Error).message})`);
          }
          return src;
        });
        if (names.length === 0) throw at(`${cw}.comfyui.names`, 'expected at least one file name pattern');
        comfyui = { kind, names };
      }
      if (files.length === 0 && !byHand) throw at(cw, 'needs files or byHand');
      components[name] = { files, byHand, ...(comfyui ? { comfyui } : {}), note: optStr(comp.note, `${cw}.note`) };
    }
    checkpoints[id] = { repo, revision, revisionNote: str(c.revisionNote, `${w}.revisionNote`), folder, components, note: optStr(c.note, `${w}.note`) };
  }

  const profiles: Record<string, ManifestProfile> = {};
  for (const [name, pv] of Object.entries(obj(root.profiles, 'profiles'))) {
    const w = `profiles.${name}`;
    const p = obj(pv, w);
    const demo = str(p.demo, `${w}.demo`);
    if (!NAME.test(demo)) throw at(`${w}.demo`, 'must be letters, digits, . _ -');
    const variants = arr(p.variants, `${w}.variants`).map((vv, i) => {
      const vw = `${w}.variants[${i}]`;
      const v = obj(vv, vw);
      const uses = arr(v.uses, `${vw}.uses`).map((uv, j) => {
        const u = obj(uv, `${vw}.uses[${j}]`);
        return {
          checkpoint: str(u.checkpoint, `${vw}.uses[${j}].checkpoint`),
          components: arr(u.components, `${vw}.uses[${j}].components`).map((s, k) => str(s, `${vw}.uses[${j}].components[${k}]`)),
        };
      });
      return { name: str(v.name, `${vw}.name`), uses, note: optStr(v.note, `${vw}.note`) };
    });
    if (variants.length === 0) throw at(`${w}.variants`, 'needs at least one variant');
    profiles[name] = { demo, variants, note: optStr(p.note, `${w}.note`) };
  }
  return { file, model: str(root.model, 'model'), notes, checkpoints, profiles };
}

function parseFile(
  f: Record<string, unknown>,
  w: string,
  at: (where: string, msg: string) => ManifestError,
  str: (v: unknown, where: string) => string,
  optStr: (v: unknown, where: string) => string | undefined,
): ManifestFile {
  const path = str(f.path, `${w}.path`);
  if (!safeRelative(path)) throw at(`${w}.path`, `"${path}" must be a plain relative path`);
  const out: ManifestFile = { path };
  if (f.size !== undefined && f.size !== null) {
    if (typeof f.size !== 'number' || !Number.isSafeInteger(f.size) || f.size < 0) throw at(`${w}.size`, 'expected a whole number of bytes');
    out.size = f.size;
  }
  if (f.sha256 !== undefined && f.sha256 !== null) {
    if (typeof f.sha256 !== 'string' || !HEX64.test(f.sha256)) throw at(`${w}.sha256`, 'expected 64 lower-case hex digits');
    out.sha256 = f.sha256;
  }
  if (f.optional !== undefined) out.optional = f.optional === true;
  if (f.shards !== undefined) {
    out.shards = f.shards === true;
    if (out.shards && !path.endsWith('.index.json')) throw at(`${w}.shards`, 'only an *.index.json names shards');
  }
  if (f.reads !== undefined) {
    if (!out.shards) throw at(`${w}.reads`, 'only an index with shards: true has reads');
    if (!Array.isArray(f.reads) || f.reads.length === 0) throw at(`${w}.reads`, 'expected a non-empty array of regular expressions');
    out.reads = f.reads.map((r, i) => {
      const src = str(r, `${w}.reads[${i}]`);
      try {
        new RegExp(src);
      } catch (e) {
        throw at(`${w}.reads[${i}]`, `not a regular expression (${(e as Error).message})`);
      }
      return src;
    });
  }
  out.note = optStr(f.note, `${w}.note`);
  if (out.note === undefined) delete out.note;
  return out;
}

/** A relative '/'-path with no '..', no absolute start, no empty or '.' segments. */
export function safeRelative(p: string): boolean {
  if (p.startsWith('/') || p.includes('\\')) return false;
  const parts = p.split('/');
  return parts.every((s) => s !== '' && s !== '.' && s !== '..') && posix.normalize(p) === p;
}
