// MiniMax H3's text encoder on a keyframe (FL2VA) or reference (Ref2VA) presentation with pictures: diffusers'
// get_qwen3vl_prompt_embeds with vision inputs (encoders.py at 58eb52c0). The presentation's ids (presentation.ts, the
// <|image_pad|> runs already expanded to each picture's merged-token count) go through the Qwen3-VL-32B decoder with
// the vision tower's merged tokens written over the pad rows, its deepstack features added to those rows after the
// first decoder layers, and 3-D MRoPE positions (get_rope_index); the result is hidden_states[50] as for T2VA.
// Pictures only: a video reference's <|video_pad|> blocks are not handled yet. Not wired into the service yet
// (issue 15, docs/models/minimax-h3.md "Part 2 status").
import type { Engine } from '../../../engine/engine';
import { copyInto } from '../../../engine/ops/layout';
import type { Checkpoint } from '../../../engine/safetensors';
import type { Tensor } from '../../../engine/tensor';
import type { ComputeDType } from '../../common/weights';
import { parseQwen3Config } from '../../qwen3';
import { parseQwen3VlVisionConfig, qwen3VlRopeIndex, Qwen3VlVisionModel, type Qwen3VlVisionConfig, type VisionInput } from '../../qwen3_vl_vision';
import { H3_TEXT_ENCODER_LAYER, H3TextEncoder } from './encoder';

export interface H3VisionTextEncoderOptions {
  dtype?: ComputeDType;
  int8?: boolean;
  /** Key prefixes (defaults: the config's, "model.language_model." and "model.visual."). */
  prefix?: string;
  visionPrefix?: string;
  layer?: number;
}

export class H3VisionTextEncoder {
  private constructor(readonly e: Engine, readonly text: H3TextEncoder, readonly tower: Qwen3VlVisionModel, readonly vision: Qwen3VlVisionConfig) {}

  /** `configJson`: text_encoder/config.json (qwen3_vl: text_config and vision_config). */
  static async load(e: Engine, ckpt: Checkpoint, configJson: Record<string, unknown>, o: H3VisionTextEncoderOptions = {}): Promise<H3VisionTextEncoder> {
    const config = parseQwen3Config(configJson, 'text', `${ckpt.path} config`);
    const vision = parseQwen3VlVisionConfig(configJson, `${ckpt.path} config`);
    const text = await H3TextEncoder.load(e, ckpt, config, { dtype: o.dtype, int8: o.int8, prefix: o.prefix, layer: o.layer ?? H3_TEXT_ENCODER_LAYER });
    try {
      const tower = await Qwen3VlVisionModel.load(e, ckpt, vision, { dtype: o.dtype ?? 'f16', int8: o.int8, prefix: o.visionPrefix ?? vision.keyPrefix });
      return new H3VisionTextEncoder(e, text, tower, vision);
    } catch (err) {
      text.free();
      throw err;
    }
  }

  /**
   * The tower loaded from `ckpt` beside an already loaded decoder (H3TextEncoderHost's, so a keyframe job reuses the
   * host copy of the 50 layers and reads only the tower's tensors). The result owns both: free() frees the decoder's
   * GPU weights too.
   */
  static async withText(e: Engine, text: H3TextEncoder, ckpt: Checkpoint, configJson: Record<string, unknown>, o: Pick<H3VisionTextEncoderOptions, 'dtype' | 'int8' | 'visionPrefix'> = {}): Promise<H3VisionTextEncoder> {
    const vision = parseQwen3VlVisionConfig(configJson, `${ckpt.path} config`);
    const tower = await Qwen3VlVisionModel.load(e, ckpt, vision, { dtype: o.dtype ?? 'f16', int8: o.int8, prefix: o.visionPrefix ?? vision.keyPrefix });
    return new H3VisionTextEncoder(e, text, tower, vision);
  }

  /** prompt_embeds (1, L, hidden): hidden_states[layer] of the presentation `ids` with `images` in pad order. */
  encode(ids: readonly number[], images: readonly VisionInput[]): Tensor {
    if (images.length === 0) return this.text.encode(ids);
    const v = this.vision;
    const m = v.spatialMergeSize;
    const rows: number[] = [];
    ids.forEach((id, i) => id === v.imageTokenId && rows.push(i));
    const want = images.reduce((n, im) => n + (im.grid[0] * im.grid[1] * im.grid[2]) / (m * m), 0);
    if (rows.length !== want) throw new RangeError(`H3VisionTextEncoder: ${rows.length} <|image_pad|> rows for ${want} merged tokens of ${images.length} pictures`);
    const positions = qwen3VlRopeIndex(ids, v.imageTokenId, images.map((im) => im.grid), m);
    const model = this.text.model;
    const vis = this.tower.forward(images);
    let x: Tensor | null = null;
    try {
      x = this.text.embed(ids); // (1, L, hidden)
      const flat = x.reshape([ids.length, x.shape[2]!]);
      let j = 0;
      while (j < rows.length) {
        let n = 1;
        while (j + n < rows.length && rows[j + n] === rows[j]! + n) n++;
        copyInto(this.e, vis.embeds.slice(0, j, j + n), flat.slice(0, rows[j]!, rows[j]! + n));
        j += n;
      }
      const layer = this.text.layer;
      const { hidden } = model.forward({ embeds: x, positions, deepstack: { rows, embeds: vis.deepstack }, hiddenStates: [layer], final: false });
      return hidden.get(layer)!;
    } finally {
      x?.free();
      vis.embeds.free();
      for (const d of vis.deepstack) d.free();
    }
  }

  free(): void {
    this.text.free();
    this.tower.free();
  }
}
