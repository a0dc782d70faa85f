// Reference mode (image_mode reference, audio voices; the Ref2VA partition): the packed sequence with one block per
// reference, exactly as diffusers' MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence lays it out.
// The service's image references (image_mode reference) run on it (pipeline.ts; docs/models/minimax-h3.md "References in
// the service"); video and audio blocks are built here but not wired yet.
//
//   rows  [ text | reference blocks, in request order | target audio (2 x Na) | target video ]
//   clock t starts at text_len; each block advances it:
//     image   its latent frame's rows, t = clock, (h, w) the image's own latent grid;              clock += 1
//     audio   2 x T rows channel-major, t = clock + k, w = the *target* grid's first / last value;  clock += T
//     video   its soundtrack's 2 x T rows (w = the video's own grid's extremes), then its latent frames at
//             clock + 5/3 x cumsum(1, 4, 4, 4, 4, ...) on its own grid;   clock += max(T, Python's sum() of the spans)
//   the target audio and video start at the final clock
// Tags: reference video rows 0, reference audio rows 2; timesteps max(t_v, 0.999) and 1.0 (sampler.ts
// rowTimestepPlan's conditioning defaults), the references being the leading video / audio rows.
import { PackedRows } from './packed-rows';
import { frameGrid, temporalGrid, type PackedSequence } from './packed-sequence';

const FRAME_RESCALE = 5.0 / 3.0;
const FRAMES_PER_LATENT = [1, 4, 4, 4, 4] as const;

/** One reference's latent geometry (what its encoder produced). */
export type ReferenceBlock =
  | { kind: 'image'; latentHeight: number; latentWidth: number }
  | { kind: 'audio'; audioLatents: number }
  | { kind: 'video'; latentFrames: number; latentHeight: number; latentWidth: number; /** 0: no soundtrack */ audioLatents: number };

export interface ReferenceSequenceRequest {
  textTags: ArrayLike<number>;
  numLatentFrames: number;
  latentHeight: number;
  latentWidth: number;
  numAudioLatents: number;
  patchSize?: readonly [number, number, number];
  references: readonly ReferenceBlock[];
}

export function buildReferenceSequence(r: ReferenceSequenceRequest): PackedSequence {
  const [, ph, pw] = r.patchSize ?? [1, 2, 2];
  const grid = (h: number, w: number, what: string) => {
    if (!(Number.isInteger(h) && Number.isInteger(w) && h > 0 && w > 0) || h % ph || w % pw) throw new RangeError(`${what}: latent ${h}x${w} is not divisible by the patch ${ph}x${pw}`);
    return frameGrid(h, w, ph, pw);
  };
  const target = grid(r.latentHeight, r.latentWidth, 'target');
  const rows = new PackedRows(r.textTags);
  let clock = r.textTags.length;
  for (const [i, ref] of r.references.entries()) {
    if (ref.kind === 'image') {
      rows.videoRows(temporalGrid(1, clock), grid(ref.latentHeight, ref.latentWidth, `reference ${i} (image)`), 'condition');
      clock += 1.0;
    } else if (ref.kind === 'audio') {
      if (!Number.isInteger(ref.audioLatents) || ref.audioLatents < 1) throw new RangeError(`reference ${i} (audio): ${ref.audioLatents} latent frames`);
      rows.audioRows(ref.audioLatents, clock, target.widthGrid, 'condition');
      clock += ref.audioLatents;
    } else if (ref.kind === 'video') {
      if (!Number.isInteger(ref.latentFrames) || ref.latentFrames < 1 || !Number.isInteger(ref.audioLatents) || ref.audioLatents < 0) {
        throw new RangeError(`reference ${i} (video): ${ref.latentFrames} latent frames, ${ref.audioLatents} audio latents`);
      }
      const g = grid(ref.latentHeight, ref.latentWidth, `reference ${i} (video)`);
      rows.audioRows(ref.audioLatents, clock, g.widthGrid, 'condition');
      rows.videoRows(temporalGrid(ref.latentFrames, clock), g, 'condition');
      // upstream sums the spans with Python's sum() here (numpy's pairwise sum for a last keyframe)
      const spans = Array.from({ length: ref.latentFrames }, (_, k) => FRAME_RESCALE * FRAMES_PER_LATENT[k % FRAMES_PER_LATENT.length]!);
      clock += Math.max(ref.audioLatents, pythonFloatSum(spans));
    } else {
      throw new RangeError(`reference ${i}: kind ${JSON.stringify((ref as { kind: unknown }).kind)} is not image, audio or video`);
    }
  }
  rows.audioRows(r.numAudioLatents, clock, target.widthGrid, 'target');
  rows.videoRows(temporalGrid(r.numLatentFrames, clock), target, 'target');
  return rows.sequence();
}

/**
 * Python's sum() of floats (CPython 3.12 and later: Neumaier-compensated, the compensation added at the end; the
 * reference lab runs 3.14). Python 3.11 and earlier add sequentially, which can differ in the last bit of a float64
 * from 16 or so terms on; the RoPE angle takes float32(position), where the two agree.
 */
export function pythonFloatSum(values: readonly number[]): number {
  if (values.length === 0) return 0;
  let sum = values[0]!;
  let c = 0;
  for (let i = 1; i < values.length; i++) {
    const x = values[i]!;
    const t = sum + x;
    c += Math.abs(sum) >= Math.abs(x) ? sum - t + x : x - t + sum;
    sum = t;
  }
  return c !== 0 && Number.isFinite(c) ? sum + c : sum;
}
