// The row builder of the packed sequences laid out block by block (keyframes.ts buildGuideSequence, references.ts
// buildReferenceSequence): rows appended in packed order, each with its (t, h, w) position and modality tag, the
// stream that owns it noted as conditioning or target. packed-sequence.ts buildPackedSequence keeps its fixed offsets.
import { AUDIO_CHANNELS, AUDIO_TAG, TEXT_TAG, VIDEO_TAG, type PackedSequence } from './packed-sequence';

/** Conditioning rows (keyframes, guides, references) lead their stream; target rows are the ones denoised. */
export type RowRole = 'condition' | 'target';

export class PackedRows {
  private readonly positions: number[] = [];
  private readonly tags: number[] = [];
  private readonly textRows: number;
  private readonly video = { condition: [] as number[], target: [] as number[] };
  private readonly audio = { condition: [] as number[], target: [] as number[] };

  /** The text rows come first: t = i, (h, w) = 0, TEXT_TAG or VIDEO_TAG (a keyframe's vision tokens). */
  constructor(textTags: ArrayLike<number>) {
    this.textRows = textTags.length;
    for (let i = 0; i < this.textRows; i++) {
      const tag = textTags[i]!;
      if (tag !== TEXT_TAG && tag !== VIDEO_TAG) throw new RangeError(`text row ${i} has tag ${tag} (text rows are ${TEXT_TAG}, vision tokens ${VIDEO_TAG})`);
      this.push(i, 0, 0, tag);
    }
  }

  /** n audio latents per stereo channel, channel-major: t = time + k, w the width axis' first (left) / last value. */
  audioRows(n: number, time: number, widthGrid: Float64Array, role: RowRole): void {
    for (let c = 0; c < AUDIO_CHANNELS; c++) {
      for (let k = 0; k < n; k++) {
        this.audio[role].push(this.tags.length);
        this.push(time + k, 0, c === 0 ? widthGrid[0]! : widthGrid[widthGrid.length - 1]!, AUDIO_TAG);
      }
    }
  }

  /** One latent frame's rows per entry of `times`, (h, w) from the frame grid (row-major over patches). */
  videoRows(times: ArrayLike<number>, grid: { h: Float64Array; w: Float64Array }, role: RowRole): void {
    for (let f = 0; f < times.length; f++) {
      for (let j = 0; j < grid.h.length; j++) {
        this.video[role].push(this.tags.length);
        this.push(times[f]!, grid.h[j]!, grid.w[j]!, VIDEO_TAG);
      }
    }
  }

  /** The sequence: text rows, then each stream's conditioning rows before its target rows. */
  sequence(): PackedSequence {
    return {
      length: this.tags.length,
      positions: Float64Array.from(this.positions),
      tags: Uint8Array.from(this.tags),
      textIndices: Int32Array.from({ length: this.textRows }, (_, i) => i),
      videoIndices: Int32Array.from([...this.video.condition, ...this.video.target]),
      audioIndices: Int32Array.from([...this.audio.condition, ...this.audio.target]),
      numConditionVideoRows: this.video.condition.length,
      numConditionAudioRows: this.audio.condition.length,
    };
  }

  private push(t: number, h: number, w: number, tag: number): void {
    this.positions.push(t, h, w);
    this.tags.push(tag);
  }
}
