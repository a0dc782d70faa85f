import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { TTS_PROFILE, VIDEO_PROFILES } from '../../src/catalog';
import { loadCatalog, manifestsDir, parseManifest, WeightsCatalog } from '../../src/weights/manifest';
import { checkProfile } from '../../src/weights/state';

describe('the committed manifests (weights/*.json)', () => {
  const cat = loadCatalog(manifestsDir());

  test('cover the speech, imgmain and all six video profiles', () => {
    const want = [TTS_PROFILE, 'imgmain', 'imgmain_bf16', ...VIDEO_PROFILES.map((p) => p.profile)];
    for (const p of want) assert.ok(cat.profiles.has(p), `no manifest for profile ${p}`);
  });

  test('every hub checkpoint says how its revision was chosen; every listed checksum is a sha256', () => {
    for (const [id, c] of cat.checkpoints) {
      if (c.repo) assert.ok(c.revision && c.revisionNote.length > 20, `${id}: revision and revisionNote`);
      else assert.ok(c.note && /place|hand/.test(c.note), `${id}: a checkpoint with no hub source must say what to do`);
      for (const comp of Object.values(c.components)) {
        for (const f of comp.files) if (f.sha256) assert.match(f.sha256, /^[0-9a-f]{64}$/);
      }
    }
  });

  test('the tts profile prefers 1.7B and accepts 0.6B; the 0.6B and 1.7B configs differ, the tokenizer files do not', () => {
    const tts = cat.profile('tts');
    assert.deepEqual(tts.variants.map((v) => v.name), ['1.7b', '0.6b']);
    const file = (ck: string, path: string) => cat.checkpoint(ck).components.model!.files.find((f) => f.path === path)!;
    assert.notEqual(file('qwen3-tts-1.7b-base', 'config.json').sha256, file('qwen3-tts-0.6b-base', 'config.json').sha256);
    assert.equal(file('qwen3-tts-1.7b-base', 'vocab.json').sha256, file('qwen3-tts-0.6b-base', 'vocab.json').sha256);
  });

  test('on an empty WEIGHTS_DIR every profile is missing, with its problems named', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-w-'));
    for (const p of cat.profiles.keys()) {
      const w = checkProfile(p, dir, cat);
      assert.equal(w.state, 'missing');
      assert.ok(w.variant.problems.length > 0);
    }
  });
});

describe('manifest validation', () => {
  const base = () => ({
    model: 'm',
    checkpoints: { ck: { repo: 'a/b', revision: 'main', revisionNote: 'n', folder: 'F', components: { x: { files: [{ path: 'x.json' }] }, y: { files: [{ path: 'y.json' }] } } } },
    profiles: { p: { demo: 'd', variants: [{ name: 'v', uses: [{ checkpoint: 'ck', components: ['x'] }] }] } },
  });
  const parse = (m: unknown) => new WeightsCatalog([parseManifest('t.json', JSON.stringify(m))]);

  test('a valid one parses', () => {
    assert.equal(parse(base()).profile('p').variants[0]!.uses[0]!.components[0], 'x');
  });

  test('bad paths, checksums, references and duplicates are refused with file and field', () => {
    const cases: [(m: ReturnType<typeof base>) => void, RegExp][] = [
      [(m) => (m.checkpoints.ck.components.x.files[0]!.path = '../escape.json'), /t\.json: checkpoints\.ck\.components\.x\.files\[0\]\.path: "\.\.\/escape\.json" must be a plain relative path/],
      [(m) => (m.checkpoints.ck.folder = '/abs'), /checkpoints\.ck\.folder/],
      [(m) => Object.assign(m.checkpoints.ck.components.x.files[0]!, { sha256: 'ABC' }), /files\[0\]\.sha256: expected 64 lower-case hex digits/],
      [(m) => Object.assign(m.checkpoints.ck.components.x.files[0]!, { size: -1 }), /files\[0\]\.size/],
      [(m) => Object.assign(m.checkpoints.ck.components.x.files[0]!, { shards: true }), /only an \*\.index\.json names shards/],
      [(m) => (m.profiles.p.variants[0]!.uses[0]!.checkpoint = 'nope'), /uses unknown checkpoint "nope"/],
      [(m) => (m.profiles.p.variants[0]!.uses[0]!.components = ['z']), /has no component "z"/],
      [(m) => m.profiles.p.variants[0]!.uses.push({ checkpoint: 'ck', components: ['x'] }), /component "x" comes from two checkpoints/],
      [(m) => (m.checkpoints.ck.repo = 'no-slash'), /"no-slash" is not owner\/name/],
      [(m) => ((m.checkpoints.ck as { revision: string | null }).revision = null), /a repo needs a revision/],
      [(m) => (m.checkpoints.ck.components.x.files = [{ path: 'a' }, { path: 'a' }]), /"a" is listed twice/],
    ];
    for (const [mutate, re] of cases) {
      const m = base();
      mutate(m);
      assert.throws(() => parse(m), re);
    }
  });

  test('a profile or checkpoint defined in two manifests is refused', () => {
    const m = base();
    const one = parseManifest('a.json', JSON.stringify(m));
    const two = parseManifest('b.json', JSON.stringify(m));
    assert.throws(() => new WeightsCatalog([one, two]), /b\.json: checkpoint "ck" is defined in two manifests/);
  });
});
