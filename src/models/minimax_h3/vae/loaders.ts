// Loading the two VAE decoders of a MiniMax H3 checkpoint from their published folders (vae/, audio_vae/).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from '../../../engine/engine';
import { Checkpoint } from '../../../engine/safetensors';
import type { ComputeDType } from '../../common/weights';
import { AudioVaeDecoder, parseAudioVaeConfig } from './audio';
import { openVideoVaeCheckpoint, parseVideoVaeConfig, VideoVaeDecoder } from './video';

export async function loadVideoVae(e: Engine, dir: string, dtype: ComputeDType): Promise<VideoVaeDecoder> {
  const cfg = parseVideoVaeConfig(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>, join(dir, 'config.json'));
  const ckpt = await openVideoVaeCheckpoint(dir);
  try {
    return await VideoVaeDecoder.load(e, ckpt, cfg, { dtype });
  } finally {
    await ckpt.close();
  }
}

export async function loadAudioVae(e: Engine, dir: string): Promise<AudioVaeDecoder> {
  const cfg = parseAudioVaeConfig(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')), join(dir, 'config.json'));
  const ckpt = await Checkpoint.open(join(dir, 'diffusion_pytorch_model.safetensors'));
  try {
    // f32 as upstream (bf16 decodes are audibly worse); the audio VAE is small
    return await AudioVaeDecoder.load(e, ckpt, cfg, { dtype: 'f32' });
  } finally {
    await ckpt.close();
  }
}
