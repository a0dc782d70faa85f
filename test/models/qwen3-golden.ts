// Shared by the Qwen3 golden tests: fixture inputs -> Qwen3Model forward inputs, and the comparisons.
import type { Engine } from '../../src/engine/engine';
import { parseQwen3Config, Qwen3Model, type Qwen3Config, type Qwen3ForwardInput, type Qwen3Positions } from '../../src/models/qwen3';
import type { ComputeDType } from '../../src/models/common/weights';
import { expectShape, selectRows, WEIGHT_PREFIX, type GoldenCase } from './golden';

/** How a case is run: compute dtype, int8 linears, and the tolerance key in the fixture's metadata. */
export interface Variant {
  name: string;
  dtype: ComputeDType;
  int8: boolean;
}
export const VARIANTS: readonly Variant[] = [
  { name: 'f32', dtype: 'f32', int8: false },
  { name: 'f16', dtype: 'f16', int8: false },
  { name: 'int8', dtype: 'f32', int8: true },
];

export function caseConfig(c: GoldenCase): Qwen3Config {
  return parseQwen3Config(c.config, undefined, `${c.path} config`);
}

export async function loadCaseModel(e: Engine, c: GoldenCase, v: Variant, extra: { layers?: number; norm?: boolean } = {}): Promise<Qwen3Model> {
  const config = caseConfig(c);
  return Qwen3Model.load(e, c.ckpt, config, { dtype: v.dtype, int8: v.int8, prefix: WEIGHT_PREFIX + config.keyPrefix, ...extra });
}

/** input.position_ids (B=1, L) or (3, 1, L) -> positions of tokens a..b-1. */
export async function casePositions(c: GoldenCase, a = 0, b?: number): Promise<Qwen3Positions | undefined> {
  if (!c.has('input', 'position_ids')) return undefined;
  const p = await c.ints('position_ids');
  const L = p.shape[p.shape.length - 1]!;
  const rows = p.data.length / L;
  if (p.shape.length === 3 && p.shape[1] !== 1) throw new Error(`${c.name}: per-batch position rows ${JSON.stringify(p.shape)} are not supported`);
  if (p.shape.length === 2 && p.shape[0] !== 1) throw new Error(`${c.name}: per-batch positions ${JSON.stringify(p.shape)} are not supported`);
  const row = (r: number) => p.data.slice(r * L + a, r * L + (b ?? L));
  return rows === 3 ? [row(0), row(1), row(2)] : row(0);
}

/** The decoder fixture's inputs as a forward call asking for every hidden state and the final norm. */
export async function decoderInput(e: Engine, c: GoldenCase, model: Qwen3Model, temps: { free(): void }[]): Promise<Qwen3ForwardInput> {
  const cfg = model.config;
  const input: Qwen3ForwardInput = { hiddenStates: Array.from({ length: cfg.numLayers + 1 }, (_, i) => i), final: true, positions: await casePositions(c) };
  if (c.has('input', 'inputs_embeds')) {
    const x = await c.input('inputs_embeds');
    const t = e.upload(x.data, x.shape, model.dtype);
    temps.push(t);
    input.embeds = t;
  } else {
    const ids = await c.ints('ids');
    input.ids = ids.data;
    input.batch = ids.shape[0];
  }
  if (c.has('input', 'attention_mask')) {
    const m = await c.ints('attention_mask');
    if (m.shape[0] !== 1) throw new Error(`${c.name}: attention_mask for batch ${m.shape[0]}: only a shared mask is supported`);
    input.padMask = m.data;
  }
  if (c.has('input', 'visual_pos_mask')) {
    const m = await c.ints('visual_pos_mask');
    const rows = m.data.flatMap((f, i) => (f ? [i] : []));
    const embeds = [];
    for (let i = 0; c.has('input', `deepstack.${i}`); i++) {
      const d = await c.input(`deepstack.${i}`);
      const t = e.upload(d.data, d.shape, model.dtype);
      temps.push(t);
      embeds.push(t);
    }
    input.deepstack = { rows, embeds };
  }
  return input;
}

/** The tolerance key of a variant: 'int8' for int8 linears, else the compute dtype (f16: the float16 rule). */
export const variantKey = (v: Variant): 'f32' | 'f16' | 'int8' => (v.int8 ? 'int8' : v.dtype === 'f16' ? 'f16' : 'f32');

/** Compares a (B, L, hidden) result with output.<name>, on the real (unpadded) tokens only. */
export async function compareOutput(e: Engine, c: GoldenCase, got: Float32Array, name: string, v: Variant): Promise<void> {
  const want = await c.output(name);
  if (c.has('input', 'attention_mask')) {
    // the whole tensors first: a result of another length would be cut into rows of another width below
    expectShape(got, want, `${name} (${v.name})`);
    const keep = (await c.ints('attention_mask')).data;
    c.expect(variantKey(v), selectRows(got, want.shape, keep).data, selectRows(want.data, want.shape, keep), name, `${name} (${v.name})`);
  } else c.expect(variantKey(v), got, want, name, `${name} (${v.name})`);
}
