// Reference pictures of an image task, read from their files and scaled to what the model takes: each cropped to
// cover the size `sizeOf` gives for its own width and height. Bad data is a BadInputError naming images[i].
import { readFile } from 'node:fs/promises';
import { loadImage, probeImage, type ImageTensor } from '../../media';

export async function loadReferenceImages(
  paths: readonly string[],
  sizeOf: (width: number, height: number) => { width: number; height: number },
  signal: AbortSignal,
): Promise<ImageTensor[]> {
  const out: ImageTensor[] = [];
  for (const [i, path] of paths.entries()) {
    const buf = await readFile(path);
    const label = `images[${i}]`;
    const src = await probeImage(buf, label, { signal });
    const img = await loadImage(buf, { label, fit: { mode: 'cover', ...sizeOf(src.width, src.height) }, signal });
    out.push({ data: img.data, shape: img.shape });
  }
  return out;
}
