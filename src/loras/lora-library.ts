// The LoRA files a request can name (issue 46, docs/loras.md): every .safetensors under LORA_DIR, then under ComfyUI's
// loras/ folders (COMFYUI_MODELS_DIR, COMFYUI_EXTRA_MODEL_PATHS), named by their path below the folder without
// .safetensors ("style/ink" for LORA_DIR/style/ink.safetensors); a name two folders have is the first folder's. Then
// the Hugging Face cache, read in place: the files of a repo's `main` snapshot whose header holds LoRA pairs, named
// "<owner>/<repo>/<path without .safetensors>" (or "<owner>/<repo>" where the snapshot has one).
// A file is judged by its header alone (key names and shapes: catalog/loras.ts planLora, the rules the worker's reader
// applies), read once per path, size and modification time, against the model each image or video profile's worker reports
// (ServedSummary.lora). /api/config lists them with the profiles they fit; a job's LoRAs are checked here before it
// is queued, and the task carries each file's path.
import { Inject, Injectable } from '@nestjs/common';
import type { Dirent } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { loraModulesOf, planLora, type LoraChoice, type LoraModel, type LoraModelNames, type LoraParam } from '../catalog';
import { BadInputError } from '../common/errors';
import { SETTINGS, type Settings } from '../config/settings';
import { Scheduler } from '../scheduler/scheduler';
import { hubSnapshot } from '../weights/hub-cache';

/** A header larger than this is not a LoRA's (a LoRA of a 20B model at rank 128 has a few thousand keys: ~1 MB). */
const MAX_HEADER_BYTES = 64 * 2 ** 20;
/** Subfolder levels searched below each folder (people sort LoRAs into folders by model and kind). */
const DEPTH = 3;
/** A cached file larger than this is a model's weights, not a LoRA: its header is not read. */
const MAX_HUB_LORA_BYTES = 4 * 2 ** 30;
/** A key of a LoRA pair (catalog/loras.ts's key styles). */
const LORA_KEY = /\.lora_(A|B|down|up)\.weight$/;

export interface LoraFileEntry {
  name: string;
  path: string;
  bytes: number;
  mtimeMs: number;
}

type Header = { shapes: Map<string, readonly number[]> } | { error: string };

/** The header of a safetensors file: its tensors' shapes by key (the `__metadata__` entry left out). */
export async function readSafetensorsShapes(path: string): Promise<Map<string, readonly number[]>> {
  const f = await open(path, 'r');
  try {
    const size = (await f.stat()).size;
    const len = Buffer.alloc(8);
    if (size < 8 || (await f.read(len, 0, 8, 0)).bytesRead !== 8) throw new Error('shorter than a safetensors header');
    const n = Number(len.readBigUInt64LE(0));
    if (n < 2 || n > MAX_HEADER_BYTES || 8 + n > size) throw new Error(`header length ${n} does not fit a ${size}-byte safetensors file`);
    const head = Buffer.alloc(n);
    await f.read(head, 0, n, 8);
    const json = JSON.parse(head.toString('utf8')) as Record<string, { shape?: unknown }>;
    const shapes = new Map<string, readonly number[]>();
    for (const [k, v] of Object.entries(json)) {
      if (k === '__metadata__') continue;
      if (!v || !Array.isArray(v.shape)) throw new Error(`tensor ${k} has no shape`);
      shapes.set(k, v.shape as number[]);
    }
    return shapes;
  } finally {
    await f.close();
  }
}

@Injectable()
export class LoraLibrary {
  private readonly headers = new Map<string, { key: string; header: Header }>();
  private readonly tables = new Map<string, LoraModelNames>();

  constructor(
    @Inject(SETTINGS) private readonly settings: Settings,
    private readonly scheduler: Scheduler,
  ) {}

  /** LORA_DIR, then ComfyUI's loras/ folders. */
  folders(): string[] {
    return [...(this.settings.loraDir ? [this.settings.loraDir] : []), ...(this.settings.comfyFolders?.loras ?? [])];
  }

  /** Every LoRA file, by name (the first folder's where two have one; the folders' before the cache's), sorted. */
  async files(): Promise<LoraFileEntry[]> {
    const found = new Map<string, LoraFileEntry>();
    await this.folderFiles(found);
    for (const f of await this.hubFiles()) if (!found.has(f.name)) found.set(f.name, f);
    return [...found.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The LoRAs of the Hugging Face cache: in each model repo's `main` snapshot, the files (up to 4 GiB) whose header
   * has LoRA pairs; one such file in a repo is named by the repo alone. */
  private async hubFiles(): Promise<LoraFileEntry[]> {
    const cache = this.settings.hubCacheDir;
    let repos: string[];
    try {
      repos = (await readdir(cache)).filter((d) => d.startsWith('models--'));
    } catch {
      return [];
    }
    const out: LoraFileEntry[] = [];
    for (const folder of repos.sort()) {
      const repo = folder.slice('models--'.length).split('--').join('/');
      const snap = hubSnapshot(cache, repo, 'main');
      if (!snap) continue;
      const mine: LoraFileEntry[] = [];
      for (const rel of await listSafetensors(snap, DEPTH)) {
        const path = join(snap, rel);
        const st = await stat(path).catch(() => undefined);
        if (!st || st.size > MAX_HUB_LORA_BYTES) continue;
        const f = { name: `${repo}/${rel.slice(0, -'.safetensors'.length)}`, path, bytes: st.size, mtimeMs: st.mtimeMs };
        const h = await this.header(f);
        if ('shapes' in h && [...h.shapes.keys()].some((k) => LORA_KEY.test(k))) mine.push(f);
      }
      if (mine.length === 1) mine[0]!.name = repo;
      out.push(...mine);
    }
    return out;
  }

  private async folderFiles(found: Map<string, LoraFileEntry>): Promise<void> {
    for (const folder of this.folders()) {
      for (const rel of await listSafetensors(folder, DEPTH)) {
        const name = rel.slice(0, -'.safetensors'.length);
        if (found.has(name)) continue;
        const path = join(folder, rel);
        try {
          const st = await stat(path);
          found.set(name, { name, path, bytes: st.size, mtimeMs: st.mtimeMs });
        } catch {
          /* gone meanwhile */
        }
      }
    }
  }

  /** /api/config's `loras`: each file with the image and video profiles whose model it fits (by the workers' reports). */
  async listing(): Promise<{ name: string; bytes: number; profiles: string[]; error?: string }[]> {
    const out = [];
    for (const f of await this.files()) {
      const header = await this.header(f);
      if ('error' in header) {
        out.push({ name: f.name, bytes: f.bytes, profiles: [], error: header.error });
        continue;
      }
      const profiles = this.loraProfiles().filter(({ model }) => !('problem' in planLora(f.name, header.shapes, this.table(model)))).map((p) => p.profile);
      out.push({ name: f.name, bytes: f.bytes, profiles });
    }
    return out;
  }

  /**
   * A job's LoRAs (drafted: names and scales) checked against the files and the profile's model: each name must be
   * a file, and the file must fit the model the profile's worker would load. 400s name the problem. While no worker
   * has said what it serves (none on this host, or it is starting), the files are found but not matched; the worker
   * checks them when it reads them.
   */
  async resolve(profile: string, loras: readonly LoraChoice[], kind: 'image' | 'video' = 'image'): Promise<LoraParam[]> {
    if (loras.length === 0) return [];
    const served = this.scheduler.served(kind, profile);
    if (served && !served.lora) throw new BadInputError(`loras: profile ${profile} takes no LoRAs on the worker that serves it`);
    const files = new Map((await this.files()).map((f) => [f.name, f]));
    const out: LoraParam[] = [];
    for (const [i, { name, scale }] of loras.entries()) {
      const f = files.get(name);
      if (!f) throw new BadInputError(`loras[${i}]: no LoRA named ${JSON.stringify(name)}; ${this.known([...files.keys()], name)}`);
      if (served?.lora) {
        const header = await this.header(f);
        if ('error' in header) throw new BadInputError(`loras[${i}]: ${name} cannot be read as a safetensors LoRA (${header.error})`);
        const others = this.loraProfiles().filter((p) => p.model.model !== served.lora!.model).map((p) => this.table(p.model));
        const plan = planLora(`LoRA ${name}`, header.shapes, this.table(served.lora), others);
        if ('problem' in plan) throw new BadInputError(`loras[${i}]: ${plan.problem} (profile ${profile})`);
      }
      out.push({ name, scale, path: f.path });
    }
    return out;
  }

  /** "known: a, b, c (LORA_DIR=..., ...)" or where to put files when there are none. */
  private known(names: string[], asked: string): string {
    const folders = [...this.folders(), `the Hugging Face cache ${this.settings.hubCacheDir}`];
    const where = `looked in ${folders.join(', ')}${this.folders().length ? '' : '; no LoRA folder is set (LORA_DIR, or COMFYUI_MODELS_DIR for ComfyUI\'s models/loras)'}`;
    if (names.length === 0) return `there are no LoRA files (${where})`;
    const stem = asked.toLowerCase();
    const near = names.filter((n) => n.toLowerCase().includes(stem) || stem.includes(n.toLowerCase().split('/').pop()!));
    const shown = [...new Set([...near, ...names])].slice(0, 5);
    return `known: ${shown.join(', ')}${names.length > shown.length ? `, ... (${names.length} in all, GET /api/config lists them)` : ''} (${where})`;
  }

  /** The image and video profiles whose worker reports a LoRA model. */
  private loraProfiles(): { profile: string; model: LoraModel }[] {
    return this.scheduler.profiles().filter((s) => (s.kind === 'image' || s.kind === 'video') && s.lora).map((s) => ({ profile: s.profile, model: s.lora! }));
  }

  private table(m: LoraModel): LoraModelNames {
    const key = JSON.stringify(m);
    let t = this.tables.get(key);
    if (!t) this.tables.set(key, (t = loraModulesOf(m)));
    return t;
  }

  private async header(f: LoraFileEntry): Promise<Header> {
    const key = `${f.bytes}:${f.mtimeMs}`;
    const hit = this.headers.get(f.path);
    if (hit && hit.key === key) return hit.header;
    let header: Header;
    try {
      header = { shapes: await readSafetensorsShapes(f.path) };
    } catch (e) {
      header = { error: (e as Error).message };
    }
    this.headers.set(f.path, { key, header });
    return header;
  }
}

/** .safetensors files below `dir`, '/'-separated, hidden ones left out; an absent folder has none. */
async function listSafetensors(dir: string, depth: number, prefix = ''): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const d of entries) {
    if (d.name.startsWith('.')) continue;
    const abs = join(dir, d.name);
    let isDir = d.isDirectory();
    if (d.isSymbolicLink()) isDir = await stat(abs).then((s) => s.isDirectory(), () => false);
    if (isDir) {
      if (depth > 0) out.push(...(await listSafetensors(abs, depth - 1, `${prefix}${d.name}/`)));
    } else if (d.name.endsWith('.safetensors')) out.push(`${prefix}${d.name}`);
  }
  return out;
}
