// Fixture readers shared by the Qwen3-VL vision tests (tools/golden/qwen3_vl_vision.py, qwen_image21_text.py).
import { rgb8ToTensor } from '../../src/media/pixels';
import type { ImageTensor } from '../../src/media/types';
import { QWEN3_VL_IMAGE_PROCESSOR, type Qwen3VlImageProcessorConfig } from '../../src/models/qwen3_vl_vision';
import type { GoldenCase } from './golden';

/** input.image_<i> (H, W, 3) 8-bit values -> the media module's image tensor. */
export async function goldenImages(c: GoldenCase): Promise<ImageTensor[]> {
  const out: ImageTensor[] = [];
  for (let i = 0; c.has('input', `image_${i}`); i++) {
    const t = await c.input(`image_${i}`);
    const [h, w] = t.shape as [number, number, number];
    out.push(rgb8ToTensor(Uint8Array.from(t.data), w, h));
  }
  return out;
}

export async function goldenProcessor(c: GoldenCase): Promise<Qwen3VlImageProcessorConfig> {
  return { ...QWEN3_VL_IMAGE_PROCESSOR, minPixels: (await c.ints('min_pixels')).data[0]!, maxPixels: (await c.ints('max_pixels')).data[0]! };
}
