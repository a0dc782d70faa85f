// The README's picture of what the trained demo draws (issue 18): 8 prompts of the demo grammar through the
// service's own imgmain pipeline (int8 transformer linears, default 25 steps) on assets/demo/qwen-image-2.1,
// tiled 4 x 2 with each prompt under its picture, into docs/images/demo-grid.png.
//   npx tsc -p tsconfig.test.json --outDir build/grid && node build/grid/scripts/demo-grid.js [out.png]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { Engine } from '../src/engine/engine';
import { QwenImage21Pipeline } from '../src/models/qwen_image21/pipeline';
import { TRAINED_DEMO_PATH } from '../src/models/qwen_image21/trained-demo';
import { projectRoot } from '../src/paths';
import { recordingContext } from '../test/models/run-context';

const PROMPTS = [
  'a red circle on a white background',
  'a blue square at the left on a yellow background',
  'a yellow triangle at the top on a purple background',
  'a green circle at the right on a black background',
  'a white square at the bottom on a blue background',
  'a orange triangle on a green background',
  'a purple circle at the top on a orange background',
  'a black triangle at the right on a white background',
]; // the grammar's own wording: always "a <color>"
const SIZE = 256;
const LABEL = 28;

async function main(out = join(projectRoot(), 'docs', 'images', 'demo-grid.png')): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'kiln-demo-grid-'));
  const e = await Engine.create({ allowSoftware: true });
  const pipeline = new QwenImage21Pipeline({ engine: async () => e, checkpoint: async () => join(projectRoot(), TRAINED_DEMO_PATH), int8: true });
  try {
    const tiles: sharp.OverlayOptions[] = [];
    for (const [i, prompt] of PROMPTS.entries()) {
      const png = join(scratch, `${i}.png`);
      await pipeline.run(
        { prompt, negative: '', cfg: 1, seed: i, steps: 25, width: SIZE, height: SIZE, references: [], referenceArea: SIZE * SIZE, outputPath: png, png: { prompt, profile: 'imgmain', seed: i, steps: 25 } },
        recordingContext(),
      );
      const x = (i % 4) * SIZE, y = Math.floor(i / 4) * (SIZE + LABEL);
      tiles.push({ input: png, left: x, top: y });
      const text = prompt.replace(/&/g, '&amp;').replace(/</g, '&lt;');
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${SIZE}" height="${LABEL}"><text x="4" y="18" font-family="sans-serif" font-size="10.5">${text}</text></svg>`;
      tiles.push({ input: Buffer.from(svg), left: x, top: y + SIZE });
      console.log(`${i + 1}/${PROMPTS.length} ${prompt}`);
    }
    await sharp({ create: { width: 4 * SIZE, height: 2 * (SIZE + LABEL), channels: 3, background: '#ffffff' } }).composite(tiles).png().toFile(out);
    console.log(`wrote ${out}`);
  } finally {
    await pipeline.unload();
    await e.shutdown();
    rmSync(scratch, { recursive: true, force: true });
  }
}

main(process.argv[2]).catch((err) => {
  console.error(err);
  process.exit(1);
});
