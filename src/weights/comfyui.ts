// ComfyUI's model folders, read in place: a ComfyUI `models/` folder (COMFYUI_MODELS_DIR: diffusion_models/, unet/,
// text_encoders/, clip/, vae/, loras/, ...) and the folders a ComfyUI `extra_model_paths.yaml` adds
// (COMFYUI_EXTRA_MODEL_PATHS names the file). The YAML is ComfyUI's own format (utils/extra_config.py): top-level
// sections, each with an optional `base_path` and `is_default`, and per model kind one folder or several (one per
// line of a `|` block), relative to base_path, else to the YAML file's folder. The legacy kind names are ComfyUI's
// aliases (folder_paths.map_legacy): unet is diffusion_models, clip is text_encoders. Kiln only lists and reads
// these folders (state.ts stats, the loaders open); nothing is ever written into them.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { load as loadYaml } from 'js-yaml';

/** Folders per model kind ('diffusion_models', 'text_encoders', 'vae', ...), in search order. */
export type ComfyFolders = Record<string, string[]>;

/** ComfyUI's legacy kind names and the kind each stands for (folder_paths.map_legacy). */
export const COMFY_LEGACY_KINDS: Readonly<Record<string, string>> = { unet: 'diffusion_models', clip: 'text_encoders' };

/** The folders of a ComfyUI models/ folder Kiln has files for. */
const COMFY_KINDS = ['diffusion_models', 'unet', 'text_encoders', 'clip', 'vae', 'loras', 'checkpoints'];

/** The kind a folder name or YAML key stands for. */
export const comfyKind = (name: string): string => COMFY_LEGACY_KINDS[name] ?? name;

/** extra_model_paths.yaml is unreadable or not ComfyUI's format; the message names the file and the key. */
export class ComfyConfigError extends Error {
  override readonly name = 'ComfyConfigError';
}

function addFolder(out: ComfyFolders, kind: string, folder: string): void {
  const k = comfyKind(kind);
  const list = (out[k] ??= []);
  if (!list.includes(folder)) list.push(folder);
}

/** A ComfyUI `models/` folder: each subfolder is a kind's folder (unet/ and clip/ under their modern kinds, after
 * diffusion_models/ and text_encoders/). */
export function comfyModelsDirFolders(modelsDir: string, out: ComfyFolders = {}): ComfyFolders {
  // the kinds Kiln reads, whether their folders exist yet or not (one made later is found without a restart)
  const names = [...COMFY_KINDS];
  try {
    for (const d of readdirSync(modelsDir, { withFileTypes: true })) if ((d.isDirectory() || d.isSymbolicLink()) && !names.includes(d.name)) names.push(d.name);
  } catch {
    /* absent: only the standard kinds, found empty */
  }
  // modern names first, so diffusion_models/ is searched before unet/
  names.sort((a, b) => Number(a in COMFY_LEGACY_KINDS) - Number(b in COMFY_LEGACY_KINDS) || (a < b ? -1 : a > b ? 1 : 0));
  for (const n of names) addFolder(out, n, join(modelsDir, n));
  return out;
}

const expand = (p: string, env: Record<string, string | undefined>): string =>
  p.replace(/^~(?=$|\/)/, homedir()).replace(/\$\{(\w+)\}|\$(\w+)/g, (m, a: string | undefined, b: string | undefined) => env[(a ?? b)!] ?? m);

/** The folders of an extra_model_paths.yaml text, as ComfyUI reads them; `yamlPath` resolves relative paths. */
export function parseExtraModelPaths(text: string, yamlPath: string, env: Record<string, string | undefined> = process.env, out: ComfyFolders = {}): ComfyFolders {
  let doc: unknown;
  if (!text.replace(/#.*$/gm, '').trim()) return out; // nothing but comments: no folders
  try {
    doc = loadYaml(text);
  } catch (e) {
    throw new ComfyConfigError(`${yamlPath}: not valid YAML (${(e as Error).message.split('\n')[0]})`);
  }
  if (doc === null || doc === undefined) return out;
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ComfyConfigError(`${yamlPath}: expected sections (comfyui:, a111:, ...) at the top level`);
  const yamlDir = dirname(resolve(yamlPath));
  for (const [section, conf] of Object.entries(doc as Record<string, unknown>)) {
    if (conf === null || conf === undefined) continue;
    if (typeof conf !== 'object' || Array.isArray(conf)) throw new ComfyConfigError(`${yamlPath}: ${section}: expected base_path and model kinds`);
    const c = conf as Record<string, unknown>;
    let base: string | undefined;
    if (c.base_path !== undefined && c.base_path !== null) {
      if (typeof c.base_path !== 'string') throw new ComfyConfigError(`${yamlPath}: ${section}.base_path: expected a path`);
      const b = expand(c.base_path, env);
      base = isAbsolute(b) ? b : resolve(yamlDir, b);
    }
    for (const [kind, v] of Object.entries(c)) {
      if (kind === 'base_path' || kind === 'is_default' || v === null || v === undefined) continue;
      if (typeof v !== 'string') throw new ComfyConfigError(`${yamlPath}: ${section}.${kind}: expected a folder, or one folder per line`);
      for (const line of v.split('\n')) {
        const p = expand(line.trim(), env);
        if (!p) continue;
        addFolder(out, kind, isAbsolute(p) ? p : resolve(base ?? yamlDir, p));
      }
    }
  }
  return out;
}

/** ComfyUI's folders from the environment: COMFYUI_MODELS_DIR's subfolders, then COMFYUI_EXTRA_MODEL_PATHS' (an
 * extra_model_paths.yaml). Undefined when neither is set. A set YAML path that cannot be read is an error. */
export function comfyFoldersOf(env: Record<string, string | undefined>): ComfyFolders | undefined {
  const modelsDir = env.COMFYUI_MODELS_DIR?.trim();
  const yaml = env.COMFYUI_EXTRA_MODEL_PATHS?.trim();
  if (!modelsDir && !yaml) return undefined;
  const out: ComfyFolders = {};
  if (modelsDir) comfyModelsDirFolders(resolve(modelsDir), out);
  if (yaml) {
    let text: string;
    try {
      text = readFileSync(yaml, 'utf8');
    } catch (e) {
      throw new ComfyConfigError(`COMFYUI_EXTRA_MODEL_PATHS=${yaml}: cannot read it (${(e as Error).message})`);
    }
    parseExtraModelPaths(text, yaml, env, out);
  }
  return out;
}

/** A file of `kind` whose name (path below the kind's folder, '/'-separated: ComfyUI lists subfolders too) matches
 * one of `names`, from the first folder that has one; the first match in name order. */
export function findComfyFile(folders: ComfyFolders, kind: string, names: RegExp[]): { folder: string; name: string; abs: string } | undefined {
  for (const folder of folders[comfyKind(kind)] ?? []) {
    const found = listFiles(folder).filter((n) => names.some((re) => re.test(n))).sort();
    if (found.length) return { folder, name: found[0]!, abs: join(folder, found[0]!) };
  }
  return undefined;
}

/** Files below `dir` (two levels of subfolders, as people sort models into folders), '/'-separated, hidden ones left out. */
function listFiles(dir: string, depth = 2, prefix = ''): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const d of entries) {
    if (d.name.startsWith('.')) continue;
    const abs = join(dir, d.name);
    let isDir = d.isDirectory();
    if (d.isSymbolicLink()) isDir = existsSync(abs) && statSync(abs).isDirectory();
    if (isDir) {
      if (depth > 0) out.push(...listFiles(abs, depth - 1, `${prefix}${d.name}/`));
    } else {
      out.push(`${prefix}${d.name}`);
    }
  }
  return out;
}
