// LoRA files against the models' linears, by key names and shapes only (issue 46): the check of a file's tensors
// against one model's module table (lora-modules.ts: Krea 2, Qwen-Image-2.1, MiniMax H3). Pure, so both processes run
// the same rules: the API on a file's header before anything is queued (src/loras/), the worker when it reads the file
// to apply it (models/common/lora.ts readLora, whose messages these are). docs/loras.md.
//
// Key styles (one module stem, then its tensors):
//   diffusers / PEFT   <stem>.lora_A.weight [r, K], <stem>.lora_B.weight [N, r], optional <stem>.alpha
//                      stems behind a wrapper: transformer. (diffusers' save_lora_weights), diffusion_model.
//                      (ComfyUI / reference trainers), base_model.model. (PEFT / ai-toolkit)
//   kohya              lora_unet_<module path with _ for .>.lora_down.weight [r, K], .lora_up.weight [N, r], .alpha
//                      (also lora_transformer_<...>, the prefix kohya-style trainers write for DiT models)
import type { LoraFusedModule, LoraModelNames } from './lora-modules';

export type LoraKeyStyle = 'peft' | 'kohya';

// the module tables (lora-modules.ts), here for the callers that import them with the check
export * from './lora-modules';

const WRAPPERS = ['base_model.model.', 'diffusion_model.', 'model.diffusion_model.', 'transformer.'];
const KOHYA_PREFIXES = ['lora_unet_', 'lora_transformer_'];
const TEXT_ENCODER = /^(lora_te\d?_|text_encoder(_\d)?\.|te\d?\.|lora_te)/;
const ROLES: [suffix: string, role: 'down' | 'up' | 'alpha', style: LoraKeyStyle | null][] = [
  ['.lora_A.weight', 'down', 'peft'],
  ['.lora_B.weight', 'up', 'peft'],
  ['.lora_down.weight', 'down', 'kohya'],
  ['.lora_up.weight', 'up', 'kohya'],
  ['.alpha', 'alpha', null],
];

const few = (xs: string[], n = 4) => `${xs.slice(0, n).join(', ')}${xs.length > n ? `, ... (${xs.length} in all)` : ''}`;
export const underscored = (name: string) => name.replace(/\./g, '_');

/** What a stem of a file is in the model: one of Kiln's modules, or a fused module (LoraModelNames.fused). */
export type LoraTargetOf = { module: string } | { fused: LoraFusedModule };

/** Kiln's module (or fused module) for a stem as the file names it (wrappers stripped, kohya underscores resolved);
 * undefined if none. */
export function resolveTarget(names: LoraModelNames, stem: string): LoraTargetOf | undefined {
  let s: string | undefined = stem;
  const kohya = KOHYA_PREFIXES.find((p) => stem.startsWith(p));
  if (kohya) s = kohyaTable(names).get(stem.slice(kohya.length));
  else {
    for (let again = true; again; ) {
      again = false;
      for (const w of WRAPPERS) {
        if (s.startsWith(w)) {
          s = s.slice(w.length);
          again = true;
        }
      }
    }
  }
  if (s === undefined) return undefined;
  if (names.modules.has(s)) return { module: s };
  const f = names.fused?.(s);
  if (f) return { fused: f };
  const a = names.alias(s);
  return a === undefined ? undefined : { module: a };
}

/** Kiln's module for a stem as the file names it (wrappers stripped, kohya underscores resolved); undefined if none
 * (a fused stem is several modules: resolveTarget). */
export function resolveModule(names: LoraModelNames, stem: string): string | undefined {
  const t = resolveTarget(names, stem);
  return t && 'module' in t ? t.module : undefined;
}

const kohyaTables = new WeakMap<LoraModelNames, Map<string, string>>();

/** underscored name (Kiln's, any alias, any fused stem) -> Kiln module (or the fused stem); a name two modules share
 * would be ambiguous: refused. */
function kohyaTable(names: LoraModelNames): Map<string, string> {
  let t = kohyaTables.get(names);
  if (t) return t;
  t = new Map();
  const clash = new Set<string>();
  const put = (n: string, to: string) => {
    const u = underscored(n);
    if (t!.has(u) && t!.get(u) !== to) clash.add(u);
    t!.set(u, to);
  };
  for (const m of names.modules.keys()) for (const n of [m, ...names.aliasesOf(m)]) put(n, m);
  for (const f of names.fusedStems?.() ?? []) put(f, f);
  for (const u of clash) t.delete(u);
  kohyaTables.set(names, t);
  return t;
}

/** One low-rank pair of a file, mapped onto a Kiln module: the keys to read. */
export interface LoraPairPlan {
  /** Kiln module name (e.g. "blocks.3.attn.wq"). */
  module: string;
  /** The stem as the file names it. */
  source: string;
  down: string;
  up: string;
  alpha?: string;
  rank: number;
  /** A fused stem's part (LoraFusedModule): the file's up rows this module takes, in order; absent: all of them. */
  rows?: [number, number][];
}

export type LoraPlan = { style: LoraKeyStyle; pairs: LoraPairPlan[] } | { problem: string };

/**
 * A LoRA file's tensors (key -> shape, as its header says) checked against `names`' modules: the pairs to read, or
 * the problem, naming the file (`path`). `others`: the other models Kiln knows, named when the file's modules are
 * theirs. Refused: tensors that are not low-rank pairs (DoRA magnitudes, full "diff" patches, LoCon mid tensors,
 * biases), text-encoder parts, a module no linear of the model has, half a pair, two pairs for one module, a pair whose
 * shape does not fit its linear. Alpha values (stored data) are the reader's to check.
 */
export function planLora(path: string, shapes: ReadonlyMap<string, readonly number[]>, names: LoraModelNames, others: readonly LoraModelNames[] = []): LoraPlan {
  const groups = new Map<string, { down?: string; up?: string; alpha?: string; style?: LoraKeyStyle }>();
  const strange: string[] = [];
  const textEncoder: string[] = [];
  for (const key of shapes.keys()) {
    const role = ROLES.find(([s]) => key.endsWith(s));
    if (!role) {
      strange.push(key);
      continue;
    }
    const stem = key.slice(0, -role[0].length);
    if (TEXT_ENCODER.test(stem)) {
      textEncoder.push(key);
      continue;
    }
    const g = groups.get(stem) ?? {};
    g[role[1]] = key;
    if (role[2]) g.style = role[2];
    groups.set(stem, g);
  }
  if (strange.length) {
    return { problem: `${path}: ${strange.length} tensors are not low-rank LoRA pairs (${few(strange)}); Kiln applies lora_A/lora_B or lora_down/lora_up pairs (with alpha) only` };
  }
  if (textEncoder.length) return { problem: `${path}: has text-encoder tensors (${few(textEncoder)}); Kiln applies LoRAs to the ${names.label} transformer only` };
  if (groups.size === 0) return { problem: `${path}: no LoRA tensors` };
  const styles = new Set([...groups.values()].map((g) => g.style));
  const unmatched: string[] = [];
  const stems = new Map<string, LoraTargetOf>();
  for (const stem of groups.keys()) {
    const t = resolveTarget(names, stem);
    if (t === undefined) unmatched.push(stem);
    else stems.set(stem, t);
  }
  if (unmatched.length) {
    const fits = others.filter((o) => o.model !== names.model && unmatched.every((s) => resolveTarget(o, s) !== undefined));
    const whose = fits.length ? `: they are ${fits.map((o) => o.label).join(' / ')} modules, a LoRA for another model` : '';
    const what = unmatched.length === groups.size ? `none of its ${groups.size} modules is` : `${unmatched.length} of its ${groups.size} modules are not`;
    return { problem: `${path}: ${what} a ${names.label} linear (${few(unmatched)})${whose}` };
  }
  const pairs: LoraPairPlan[] = [];
  const byModule = new Map<string, string>();
  for (const [stem, g] of groups) {
    const target = stems.get(stem)!;
    const parts = 'module' in target ? [{ module: target.module, rows: undefined }] : target.fused.parts;
    if (!g.down || !g.up) return { problem: `${path}: ${stem} has ${g.down ? 'no up (lora_B / lora_up)' : 'no down (lora_A / lora_down)'} matrix` };
    const ds = shapes.get(g.down)!;
    const us = shapes.get(g.up)!;
    const [N, K] = 'module' in target ? names.modules.get(target.module)! : target.fused.shape;
    const what = 'module' in target ? target.module : `${parts.map((p) => p.module).join(' / ')} (fused)`;
    const rank = ds[0]!;
    if (ds.length !== 2 || us.length !== 2 || us[1] !== rank || !(rank >= 1)) {
      return { problem: `${path}: ${stem}: down [${ds}] and up [${us}] are not a rank-r pair` };
    }
    if (ds[1] !== K || us[0] !== N) {
      return { problem: `${path}: ${stem}: the pair is [${us[0]}, ${ds[1]}] (out, in), ${names.label}'s ${what} is [${N}, ${K}]: a LoRA for another size or model` };
    }
    for (const { module, rows } of parts) {
      if (byModule.has(module)) return { problem: `${path}: two pairs for ${names.label}'s ${module} (${byModule.get(module)}, ${stem})` };
      byModule.set(module, stem);
      pairs.push({ module, source: stem, down: g.down, up: g.up, ...(g.alpha ? { alpha: g.alpha } : {}), rank, ...(rows ? { rows } : {}) });
    }
  }
  return { style: styles.has('kohya') ? 'kohya' : 'peft', pairs };
}

/** What a request may ask of LoRAs on an image profile (the capability table's `loras`). Scale: ComfyUI's LoraLoader
 * and diffusers' set_adapters take any number, but the strengths LoRAs are published and used at lie within about
 * -2..2; beyond +-4 a term outweighs the base weight it sits beside and the picture is noise, so that is refused as
 * a mistake rather than run. Count: each LoRA adds two thin GEMMs per adapted linear per step; six covers the stacks
 * (a style, a character, a step distillation, ...) people combine. */
export const LORA_LIMITS = { max: 6, scale: { min: -4, max: 4, default: 1 } } as const;

/** A LoRA as a request names it, and as a job keeps it: its name in the LoRA folders (src/loras/) and its scale. */
export interface LoraChoice {
  name: string;
  scale: number;
}

/** A job's LoRA as the worker gets it (catalog/tasks.ts ImageParams.loras): the file the API checked, by path. */
export interface LoraParam extends LoraChoice {
  path: string;
}
