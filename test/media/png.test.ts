import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import sharp from 'sharp';
import { BadInputError, CancelledError } from '../../src/common/errors';
import { encodePng, formatParameters, readPngParameters, readPngText, writePng, type PngParameters } from '../../src/media/png';
import { listDir, tempDir } from './helpers';

const W = 48;
const H = 32;

/** CHW tensor in [-1, 1]: red channel ramps with x, green with y, blue constant -1. */
function tensor() {
  const n = W * H;
  const data = new Float32Array(3 * n).fill(-1);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      data[y * W + x] = (x / (W - 1)) * 2 - 1;
      data[n + y * W + x] = (y / (H - 1)) * 2 - 1;
    }
  return { data, shape: [3, H, W] as [3, number, number] };
}

const params: PngParameters = {
  prompt: '一只猫, sitting on a "red" chair',
  negative_prompt: 'blurry',
  profile: 'imgmain',
  seed: 1234567,
  steps: 25,
  cfg: 1,
  mode: 't2i',
};

describe('png out', () => {
  test('a CHW tensor becomes an RGB png with the parameters in text chunks', async () => {
    const dir = tempDir();
    const path = join(dir, 'img.png');
    await writePng(path, tensor(), params);
    assert.deepEqual(listDir(dir), ['img.png']);
    const file = readFileSync(path);

    const { data, info } = await sharp(file).raw().toBuffer({ resolveWithObject: true });
    assert.equal(info.format, 'raw');
    assert.equal(info.width, W);
    assert.equal(info.height, H);
    assert.equal(info.channels, 3);
    assert.deepEqual([...data.subarray(0, 3)], [0, 0, 0]); // (x=0, y=0): -1 everywhere
    const last = (H * W - 1) * 3;
    assert.deepEqual([...data.subarray(last, last + 3)], [255, 255, 0]);

    const text = readPngText(file);
    assert.deepEqual(Object.keys(text).sort(), ['Software', 'kiln', 'parameters']);
    assert.equal(text.Software, 'Kiln');
    assert.equal(
      text.parameters,
      '一只猫, sitting on a "red" chair\nNegative prompt: blurry\nSteps: 25, CFG scale: 1, Seed: 1234567, Size: 48x32, Model: imgmain, mode: t2i',
    );
    assert.deepEqual(readPngParameters(file), { ...params, size: '48x32' });

    // libpng (through sharp) reads the same chunks back, so their layout and CRCs are valid
    const comments = (await sharp(file).metadata()).comments ?? [];
    const byKey = Object.fromEntries(comments.map((c) => [c.keyword, c.text]));
    assert.equal(byKey.parameters, text.parameters);
    assert.equal(byKey.kiln, text.kiln);
  });

  test('8-bit RGB input, ASCII values in tEXt, [0, 1] tensors', async () => {
    const rgb = { data: new Uint8Array(W * H * 3).fill(200), width: W, height: H };
    const ascii = { prompt: 'a cat', profile: 'imgart_turbo', seed: 1, steps: 8 };
    const png = await encodePng(rgb, ascii);
    assert.ok(png.includes(Buffer.from('tEXtparameters\0a cat\nSteps: 8, Seed: 1, Size: 48x32, Model: imgart_turbo', 'latin1')));
    assert.ok(!png.includes(Buffer.from('iTXt', 'latin1')));
    const { data } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    assert.equal(data[0], 200);

    const unit = { data: new Float32Array(3 * W * H).fill(0.5), shape: [3, H, W] as [3, number, number] };
    const { data: u } = await sharp(await encodePng(unit, ascii, { floatRange: 'unit' })).raw().toBuffer({ resolveWithObject: true });
    assert.equal(u[0], 128);
  });

  test('A1111 values with separators are quoted', () => {
    const s = formatParameters({ prompt: 'p', profile: 'imgmain', seed: 3, steps: 4, size: '64x64', note: 'a, b' }, '1x1');
    assert.equal(s, 'p\nSteps: 4, Seed: 3, Size: 64x64, Model: imgmain, note: "a, b"');
  });

  test('readPngText rejects non-png and broken chunk structure', async () => {
    assert.throws(() => readPngText(Buffer.from('GIF89a....')), (e) => e instanceof BadInputError && /not a png/.test(e.message));
    const png = await encodePng({ data: new Uint8Array(12), width: 2, height: 2 }, params);
    assert.throws(() => readPngText(png.subarray(0, 60), 'images[0]'), /images\[0\]: png chunk \w+ runs past the end/);
  });

  test('an aborted write leaves nothing behind', async () => {
    const dir = tempDir();
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(writePng(join(dir, 'x.png'), tensor(), params, { signal: ac.signal }), CancelledError);
    assert.deepEqual(listDir(dir), []);
  });
});
