import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import sharp from 'sharp';
import { BadInputError, CancelledError } from '../../src/common/errors';
import { decodeImageRgb8, loadImage, MAX_IMAGE_BYTES, probeImage, RES_TIER_AREAS, tierSize } from '../../src/media/image-input';
import { crc32 } from '../../src/media/png';
import { near, tensorPixel } from './helpers';

const RED = [255, 0, 0];
const GREEN = [0, 255, 0];
const BLUE = [0, 0, 255];

/** Raw RGB image of vertical bands, left to right. */
function bands(width: number, height: number, colours: number[][]): Buffer {
  const b = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) b.set(colours[Math.floor((x * colours.length) / width)], (y * width + x) * 3);
  return b;
}

const raw = (buf: Buffer, width: number, height: number, channels: 3 | 4 = 3, pageHeight?: number) =>
  sharp(buf, { raw: { width, height, channels, ...(pageHeight ? { pageHeight } : {}) } });

const isBad = (re: RegExp) => (e: unknown) => e instanceof BadInputError && re.test(e.message);

describe('probeImage / loadImage', () => {
  test('png, jpeg, webp and gif decode to [3, H, W] in [-1, 1] with the centre crop', async () => {
    // 300x100, bands red | green | blue; cover 100x100 keeps the middle third plus a sliver of each side
    const src = raw(bands(300, 100, [RED, GREEN, BLUE]), 300, 100);
    const files = {
      png: await src.clone().png().toBuffer(),
      jpeg: await src.clone().jpeg({ quality: 95 }).toBuffer(),
      webp: await src.clone().webp({ quality: 95 }).toBuffer(),
      gif: await src.clone().gif().toBuffer(),
    };
    for (const [format, buf] of Object.entries(files)) {
      const p = await probeImage(buf, 'images[0]');
      assert.deepEqual({ format: p.format, width: p.width, height: p.height, pages: p.pages }, { format, width: 300, height: 100, pages: 1 });
      const t = await loadImage(buf, { label: 'images[0]', fit: { mode: 'cover', width: 150, height: 50 } });
      assert.deepEqual(t.shape, [3, 50, 150]);
      assert.equal(t.data.length, 3 * 50 * 150);
      assert.ok(t.data.every((v) => v >= -1 && v <= 1), format);
      assert.ok(near(tensorPixel(t, 75, 25), GREEN, 12), `${format} centre ${tensorPixel(t, 75, 25)}`);
      // cover to 60x60: scaled to 180x60, columns 60..120 kept, i.e. only green
      const sq = await loadImage(buf, { label: 'images[0]', fit: { mode: 'cover', width: 60, height: 60 } });
      assert.ok(near(tensorPixel(sq, 30, 30), GREEN, 12));
      // cover to 120x60 keeps a red edge on the left and a blue edge on the right
      const wide = await loadImage(buf, { label: 'images[0]', fit: { mode: 'cover', width: 240, height: 60 } });
      assert.ok(near(tensorPixel(wide, 5, 30), RED, 16), `${format} left ${tensorPixel(wide, 5, 30)}`);
      assert.ok(near(tensorPixel(wide, 234, 30), BLUE, 16), `${format} right ${tensorPixel(wide, 234, 30)}`);
    }
  });

  test('EXIF orientation is applied', async () => {
    // stored 60x40 with red on the left, blue on the right; orientation 6 = rotate 90° clockwise to display,
    // so the display is 40x60 with red on top and blue at the bottom
    const jpeg = await raw(bands(60, 40, [RED, BLUE]), 60, 40).jpeg({ quality: 95 }).withMetadata({ orientation: 6 }).toBuffer();
    assert.equal((await sharp(jpeg).metadata()).orientation, 6);
    const p = await probeImage(jpeg);
    assert.deepEqual([p.width, p.height], [40, 60]);
    const t = await loadImage(jpeg, { label: 'images[0]', fit: { mode: 'cover', width: 40, height: 60 } });
    assert.ok(near(tensorPixel(t, 20, 5), RED, 20), `top ${tensorPixel(t, 20, 5)}`);
    assert.ok(near(tensorPixel(t, 20, 55), BLUE, 20), `bottom ${tensorPixel(t, 20, 55)}`);
  });

  test('alpha is flattened on white by default, black on request', async () => {
    // left half transparent, right half opaque red
    const rgba = Buffer.alloc(32 * 32 * 4);
    for (let i = 0; i < 32 * 32; i++) if (i % 32 >= 16) rgba.set([255, 0, 0, 255], i * 4);
    for (const fmt of ['png', 'webp'] as const) {
      const buf = await raw(rgba, 32, 32, 4)[fmt]({ lossless: true }).toBuffer();
      assert.equal((await probeImage(buf)).hasAlpha, true);
      const white = await loadImage(buf, { label: 'x', fit: { mode: 'cover', width: 32, height: 32 } });
      assert.deepEqual(tensorPixel(white, 4, 16), [255, 255, 255]);
      assert.ok(near(tensorPixel(white, 28, 16), RED, 2));
      const black = await loadImage(buf, { label: 'x', fit: { mode: 'cover', width: 32, height: 32 }, background: 'black' });
      assert.deepEqual(tensorPixel(black, 4, 16), [0, 0, 0]);
    }
  });

  test('decodeImageRgb8: the original pixels at the displayed size (no resize), EXIF orientation applied, alpha on white', async () => {
    const png = await raw(bands(30, 10, [RED, GREEN, BLUE]), 30, 10).png().toBuffer();
    const d = await decodeImageRgb8(png, { label: 'images[0]' });
    assert.deepEqual([d.width, d.height, d.channels, d.data.length], [30, 10, 3, 900]);
    assert.deepEqual(Buffer.from(d.data), bands(30, 10, [RED, GREEN, BLUE]), 'every pixel as stored (lossless, no resampling)');
    const jpeg = await raw(bands(60, 40, [RED, BLUE]), 60, 40).jpeg({ quality: 95 }).withMetadata({ orientation: 6 }).toBuffer();
    const o = await decodeImageRgb8(jpeg, { label: 'images[0]' });
    assert.deepEqual([o.width, o.height], [40, 60]);
    assert.ok(near([...o.data.subarray((5 * 40 + 20) * 3, (5 * 40 + 20) * 3 + 3)], RED, 20), 'red on top');
    assert.ok(near([...o.data.subarray((55 * 40 + 20) * 3, (55 * 40 + 20) * 3 + 3)], BLUE, 20), 'blue at the bottom');
    const rgba = Buffer.alloc(8 * 8 * 4);
    for (let i = 0; i < 64; i++) if (i % 8 >= 4) rgba.set([255, 0, 0, 255], i * 4);
    const a = await decodeImageRgb8(await raw(rgba, 8, 8, 4).png().toBuffer(), { label: 'x' });
    assert.deepEqual([...a.data.subarray(0, 3)], [255, 255, 255]);
    assert.deepEqual([...a.data.subarray(5 * 3, 5 * 3 + 3)], RED);
    await assert.rejects(decodeImageRgb8(Buffer.from('not an image at all'), { label: 'images[2]' }), isBad(/^images\[2\]/));
  });

  test('animated gif and webp use the first frame', async () => {
    // three 32x32 frames stacked: red, green, blue
    const frames = Buffer.concat([RED, GREEN, BLUE].map((c) => bands(32, 32, [c])));
    for (const fmt of ['gif', 'webp'] as const) {
      const buf = await raw(frames, 32, 96, 3, 32)[fmt]().toBuffer();
      const p = await probeImage(buf);
      assert.deepEqual([p.format, p.width, p.height, p.pages], [fmt, 32, 32, 3]);
      const t = await loadImage(buf, { label: 'x', fit: { mode: 'cover', width: 16, height: 16 } });
      assert.deepEqual(t.shape, [3, 16, 16]);
      assert.ok(near(tensorPixel(t, 8, 8), RED, 16), `${fmt} ${tensorPixel(t, 8, 8)}`);
    }
  });

  test('grey, 16-bit and CMYK inputs come out as 8-bit sRGB', async () => {
    const grey = await sharp(Buffer.alloc(16 * 16, 128), { raw: { width: 16, height: 16, channels: 1 } }).png().toBuffer();
    const g = await loadImage(grey, { label: 'x', fit: { mode: 'cover', width: 16, height: 16 } });
    assert.ok(near(tensorPixel(g, 8, 8), [128, 128, 128], 1));
    const deep = await raw(bands(16, 16, [RED]), 16, 16).toColourspace('rgb16').png().toBuffer();
    assert.equal((await sharp(deep).metadata()).depth, 'ushort');
    assert.ok(near(tensorPixel(await loadImage(deep, { label: 'x', fit: { mode: 'cover', width: 16, height: 16 } }), 8, 8), RED, 1));
    // a muted colour inside the CMYK gamut survives the round trip through sharp's default CMYK profile
    const muted = [90, 120, 150];
    const cmyk = await raw(bands(16, 16, [muted]), 16, 16).toColourspace('cmyk').jpeg({ quality: 100 }).toBuffer();
    assert.equal((await sharp(cmyk).metadata()).space, 'cmyk');
    const c = await loadImage(cmyk, { label: 'x', fit: { mode: 'cover', width: 16, height: 16 } });
    assert.equal(c.shape[0], 3);
    assert.ok(near(tensorPixel(c, 8, 8), muted, 24), `cmyk ${tensorPixel(c, 8, 8)}`);
  });

  test('tier sizes keep the aspect ratio, with sides multiples of 32 (or 16)', async () => {
    const k1 = RES_TIER_AREAS['1K'];
    // the spec's 1K table
    assert.deepEqual(tierSize(1000, 1000, k1), { width: 1024, height: 1024 });
    assert.deepEqual(tierSize(1920, 1080, k1), { width: 1344, height: 768 });
    assert.deepEqual(tierSize(1080, 1920, k1), { width: 768, height: 1344 });
    assert.deepEqual(tierSize(4000, 3000, k1), { width: 1152, height: 864 });
    assert.deepEqual(tierSize(3000, 4000, k1), { width: 864, height: 1152 });
    assert.deepEqual(tierSize(1000, 1000, RES_TIER_AREAS['2K']), { width: 2048, height: 2048 });
    assert.deepEqual(tierSize(300, 200, k1, { multiple: 16 }), { width: 1248, height: 832 });
    // extreme panorama: clamped to the spec's 256..4096 sides
    assert.deepEqual(tierSize(10000, 100, k1), { width: 4096, height: 256 });

    const png = await raw(bands(300, 200, [RED, GREEN]), 300, 200).png().toBuffer();
    // 300x200 at 65536 px: sqrt(65536 * 1.5) = 313.5 -> 288, sqrt(65536 / 1.5) = 209 -> 192
    const t = await loadImage(png, { label: 'images[2]', fit: { mode: 'tier', area: 256 * 256, minSide: 32 } });
    assert.deepEqual(t.shape, [3, 192, 288]);
    assert.deepEqual([t.source.width, t.source.height], [300, 200]);
  });

  test('bad inputs become BadInputError naming the input', async () => {
    const png = await raw(bands(64, 64, [RED, BLUE]), 64, 64).png().toBuffer();
    const jpeg = await raw(bands(64, 64, [RED, BLUE]), 64, 64).jpeg().toBuffer();
    const webp = await raw(bands(64, 64, [RED, BLUE]), 64, 64).webp().toBuffer();
    const fit = { mode: 'cover', width: 32, height: 32 } as const;
    await assert.rejects(loadImage(Buffer.alloc(0), { label: 'images[0]', fit }), isBad(/^images\[0\]: the file is empty$/));
    await assert.rejects(loadImage(Buffer.from('definitely not an image'), { label: 'images[1]', fit }), isBad(/^images\[1\]: not a png, jpeg, webp or gif image$/));
    for (const [name, buf] of Object.entries({ png, jpeg, webp })) {
      const cut = buf.subarray(0, Math.floor(buf.length * 0.6));
      await assert.rejects(loadImage(cut, { label: 'images[2]', fit }), isBad(/^images\[2\]: .*(damaged or truncated|not a png)/), name);
    }
    // a truncated png passes the header-only probe but not verify
    const cut = png.subarray(0, png.length - 40);
    await probeImage(cut, 'images[3]');
    await assert.rejects(probeImage(cut, 'images[3]', { verify: true }), isBad(/^images\[3\]: the png data is damaged or truncated/));
    // flipped bytes in the middle of the compressed data
    const corrupt = Buffer.from(png);
    for (let i = 100; i < corrupt.length - 20; i += 7) corrupt[i] ^= 0x5a;
    await assert.rejects(loadImage(corrupt, { label: 'images[4]', fit }), isBad(/^images\[4\]: /));
    // formats sharp reads but the service does not accept
    const tiff = await raw(bands(8, 8, [RED]), 8, 8).tiff().toBuffer();
    await assert.rejects(probeImage(tiff, 'images[5]'), isBad(/^images\[5\]: tiff images are not accepted; use png, jpeg, webp or gif \(the first frame of an animated one\)$/));
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>');
    await assert.rejects(probeImage(svg, 'images[6]'), isBad(/svg images are not accepted/));
    // over the byte cap: refused before parsing
    await assert.rejects(probeImage(Buffer.alloc(MAX_IMAGE_BYTES + 1), 'images[7]'), isBad(/^images\[7\]: image is 25\.0 MB; at most 25 MB is accepted$/));
  });

  test('a decompression bomb (tiny png declaring 100000x100000) is refused from its header', async () => {
    const png = Buffer.from(await raw(bands(8, 8, [RED]), 8, 8).png().toBuffer());
    // IHDR data starts at byte 16: width, height; then fix the chunk's CRC
    png.writeUInt32BE(100000, 16);
    png.writeUInt32BE(100000, 20);
    png.writeUInt32BE(crc32(png.subarray(12, 29)), 29);
    assert.ok(png.length < 200);
    const t0 = Date.now();
    await assert.rejects(probeImage(png, 'images[0]'), isBad(/^images\[0\]: image is 100000x100000 \(10000 megapixels\); at most 67 megapixels are accepted$/));
    await assert.rejects(loadImage(png, { label: 'images[0]', fit: { mode: 'cover', width: 64, height: 64 } }), isBad(/megapixels/));
    assert.ok(Date.now() - t0 < 1000);
  });

  test('an aborted signal gives CancelledError', async () => {
    const png = await raw(bands(8, 8, [RED]), 8, 8).png().toBuffer();
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(loadImage(png, { label: 'x', fit: { mode: 'cover', width: 8, height: 8 }, signal: ac.signal }), CancelledError);
  });
});
