import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { writeSafetensors, writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { runCli } from '../../src/weights/cli';
import { ensureDemoCheckpoint } from '../../src/weights/demo';
import { parseManifest, WeightsCatalog } from '../../src/weights/manifest';
import { Progress } from '../../src/weights/progress';
import { checkProfile, componentRoot, PULL_RECORD, readPullRecord, weightsNote, weightsState } from '../../src/weights/state';
import { sha256, startHub, type Hub } from './hub-server';

const CONFIG = Buffer.from('{"hidden_size": 8, "num_layers": 2}\n');

/** A tiny manifest over the local hub: a config with known size and sha256, an index whose shards come from the
 * hub, an optional file, and a checkpoint with no hub source whose file names are unknown. */
function catalog(extraProfiles: Record<string, unknown> = {}): WeightsCatalog {
  return new WeightsCatalog([parseManifest('test.json', JSON.stringify({
    model: 'tiny test model',
    checkpoints: {
      tiny: {
        repo: 'acme/tiny', revision: 'main', revisionNote: 'test', folder: 'Tiny',
        components: {
          config: { files: [{ path: 'config.json', size: CONFIG.length, sha256: sha256(CONFIG) }, { path: 'notes.txt', optional: true }] },
          transformer: { files: [{ path: 'transformer/config.json' }, { path: 'transformer/model.safetensors.index.json', shards: true }] },
          absent: { files: [{ path: 'not/on/the/hub.json' }] },
        },
      },
      hand: { repo: null, revision: null, revisionNote: 'none', folder: 'Hand', note: 'nobody publishes it', components: { adapter: { files: [], byHand: { dir: 'lora', suffix: '.safetensors' } } } },
    },
    profiles: {
      tiny: { demo: 'tiny-demo', variants: [{ name: 'main', uses: [{ checkpoint: 'tiny', components: ['config', 'transformer'] }] }] },
      tiny_lora: { demo: 'tiny-demo', variants: [{ name: 'lora', uses: [{ checkpoint: 'tiny', components: ['config', 'transformer'] }, { checkpoint: 'hand', components: ['adapter'] }] }] },
      broken: { demo: 'tiny-demo', variants: [{ name: 'main', uses: [{ checkpoint: 'tiny', components: ['absent'] }] }] },
      ...extraProfiles,
    },
  }))]);
}

function capture(isTTY = false) {
  const chunks: string[] = [];
  return { out: { write: (s: string) => chunks.push(s), isTTY }, text: () => chunks.join('') };
}

function tensors(n: number): Record<string, WriteTensor> {
  const t: Record<string, WriteTensor> = {};
  for (let i = 0; i < n; i++) t[`blocks.${i}.weight`] = { dtype: 'F32', shape: [64, 64], data: Float32Array.from({ length: 4096 }, () => Math.random() - 0.5) };
  return t;
}

describe('pull, list, verify and the weights state of a profile', () => {
  let hub: Hub;
  let root: string;
  let env: Record<string, string>;
  const cat = catalog();
  const shardNames: string[] = [];

  before(async () => {
    hub = await startHub();
    root = mkdtempSync(join(tmpdir(), 'kiln-pull-'));
    env = { WEIGHTS_DIR: join(root, 'weights'), DATA_DIR: join(root, 'data'), HF_ENDPOINT: hub.endpoint };
    // The hub's files, generated with the engine's writer: 3 shards of 16 KiB tensors + index.
    const src = join(root, 'src');
    await writeShardedSafetensors(src, tensors(6), 40_000);
    for (const f of readdirSync(src)) {
      hub.files.set(`acme/tiny/transformer/${f}`, { data: readFileSync(join(src, f)) });
      if (f.endsWith('.safetensors')) shardNames.push(f);
    }
    hub.files.set('acme/tiny/transformer/config.json', { data: Buffer.from('{"_class_name": "Tiny"}') });
    hub.files.set('acme/tiny/config.json', { data: CONFIG });
    hub.files.set('acme/tiny/notes.txt', { data: Buffer.from('optional') });
  });
  after(() => hub.close());

  const cli = (args: string[], tty = false) => {
    const o = capture(tty);
    const e = capture();
    // this file tests the pull into WEIGHTS_DIR's own layout (--weights-dir; the default target is the hub cache: hub-cache.test.ts)
    const a = args[0] === 'pull' ? [...args, '--weights-dir'] : args;
    return runCli(a, { env, stdout: o.out, stderr: e.out, catalog: cat, retryDelayMs: 5, intervalMs: 0 }).then((code) => ({ code, out: o.text(), err: e.text() }));
  };

  test('before any pull: missing, and list says what is not downloaded', async () => {
    const w = checkProfile('tiny', env.WEIGHTS_DIR!, cat);
    assert.equal(w.state, 'missing');
    assert.equal(weightsState(w, false), 'missing');
    assert.equal(weightsState(w, true), 'demo');
    assert.match(weightsNote(w), /Tiny\/config\.json: missing; .*run: npm run weights -- pull tiny/);
    const r = await cli(['list']);
    assert.equal(r.code, 0);
    assert.match(r.out, /^tiny +missing +real weights, variant main:\n +not downloaded: config, transformer \(3\+ files; Tiny\/ from acme\/tiny\)$/m);
  });

  test('pull fetches the index first, then its shards, pinned to the commit the hub names; progress lines off a TTY', async () => {
    const before = hub.log.length;
    const r = await cli(['pull', 'tiny']);
    assert.equal(r.code, 0, r.err + r.out);
    assert.match(r.out, /tiny \(main\): 6 downloaded, 0 already there\ntiny: weights complete\n$/);
    assert.match(r.out, new RegExp(`acme/tiny: revision main is commit ${hub.commit}; this pull stays on it`));
    for (const s of shardNames) assert.match(r.out, new RegExp(`Tiny/transformer/${s}: .*(of|,) .*MiB/s|Tiny/transformer/${s}: [0-9.]+ KiB, sha256 ok \\(hub\\)`));
    assert.match(r.out, /Tiny\/config\.json: 36 B, sha256 ok \(manifest\)/);
    assert.doesNotMatch(r.out, /notes\.txt/); // optional: only with --all
    // Shards were unknown until the index came: it must be fetched before them.
    const heads = hub.log.slice(before).filter((q) => q.method === 'HEAD').map((q) => q.url);
    assert.match(heads[0]!, /\/acme\/tiny\/resolve\/main\/transformer\/model\.safetensors\.index\.json$/);
    assert.ok(heads.slice(1).every((u) => u.includes(`/resolve/${hub.commit}/`)), heads.join('\n'));
    const w = checkProfile('tiny', env.WEIGHTS_DIR!, cat);
    assert.equal(w.state, 'real');
    assert.equal(componentRoot(w, 'transformer'), join(env.WEIGHTS_DIR!, 'Tiny'));
    assert.equal(weightsNote(w), `main: ${join(env.WEIGHTS_DIR!, 'Tiny')}`);
    const rec = readPullRecord(join(env.WEIGHTS_DIR!, 'Tiny'))!;
    assert.equal(rec.commit, hub.commit);
    assert.equal(rec.files[`transformer/${shardNames[0]}`]!.sha256From, 'hub');
    assert.equal(rec.files['config.json']!.sha256From, 'manifest');
    assert.equal(existsSync(join(env.WEIGHTS_DIR!, 'Tiny', '.kiln-pull.lock')), false);
  });

  test('a second pull downloads nothing; --all adds the optional file', async () => {
    const before = hub.log.length;
    const r = await cli(['pull', 'tiny']);
    assert.equal(r.code, 0);
    assert.match(r.out, /0 downloaded, 6 already there/);
    assert.equal(hub.log.length, before);
    const all = await cli(['pull', 'tiny', '--all']);
    assert.match(all.out, /1 downloaded, 6 already there/);
    assert.equal(readFileSync(join(env.WEIGHTS_DIR!, 'Tiny', 'notes.txt'), 'utf8'), 'optional');
  });

  test('verify re-hashes: ok, then a flipped byte of the right size is a mismatch', async () => {
    const ok = await cli(['verify', 'tiny']);
    assert.equal(ok.code, 0, ok.out);
    assert.match(ok.out, /Tiny\/config\.json: ok \(sha256 from the manifest\)/);
    assert.match(ok.out, new RegExp(`Tiny/transformer/${shardNames[1]}: ok \\(sha256 from the hub, recorded at pull\\)`));
    assert.match(ok.out, /Tiny\/transformer\/config\.json: ok \(sha256 recorded at pull, when no expected value was known\)/);
    const shard = join(env.WEIGHTS_DIR!, 'Tiny', 'transformer', shardNames[1]!);
    const b = readFileSync(shard);
    b[b.length - 3] ^= 0x55;
    writeFileSync(shard, b);
    const bad = await cli(['verify', 'tiny']);
    assert.equal(bad.code, 1);
    assert.match(bad.out, new RegExp(`Tiny/transformer/${shardNames[1]}: sha256 MISMATCH: [0-9a-f]{64}, expected ${sha256(hub.files.get(`acme/tiny/transformer/${shardNames[1]}`)!.data)} \\(sha256 from the hub`));
    assert.match(bad.out, /tiny \(main\): NOT OK/);
    writeFileSync(shard, hub.files.get(`acme/tiny/transformer/${shardNames[1]}`)!.data);
  });

  test('state: a truncated shard is wrong-size (by the pull record, and by its own header without one); a .part is partial', async () => {
    const dir = join(env.WEIGHTS_DIR!, 'Tiny');
    const shard = join(dir, 'transformer', shardNames[0]!);
    const full = readFileSync(shard);
    truncateSync(shard, full.length - 100);
    let w = checkProfile('tiny', env.WEIGHTS_DIR!, cat);
    assert.equal(w.state, 'missing');
    assert.deepEqual(w.variant.problems, [`Tiny/transformer/${shardNames[0]}: ${full.length - 100} bytes, expected ${full.length}`]);

    renameSync(join(dir, PULL_RECORD), join(dir, 'record.bak'));
    w = checkProfile('tiny', env.WEIGHTS_DIR!, cat);
    assert.deepEqual(w.variant.problems, [`Tiny/transformer/${shardNames[0]}: ${full.length - 100} bytes, expected ${full.length}`], 'the safetensors header alone gives the size');
    renameSync(join(dir, 'record.bak'), join(dir, PULL_RECORD));

    renameSync(shard, `${shard}.part`);
    w = checkProfile('tiny', env.WEIGHTS_DIR!, cat);
    assert.match(w.variant.problems[0]!, /partly downloaded \(\d+ bytes in \.part of \d+\)/);
    const list = await cli(['list']);
    assert.match(list.out, /transformer: 1 partly downloaded \(Tiny\/ from acme\/tiny\)/);

    // pull resumes the .part and the profile is whole again.
    const r = await cli(['pull', 'tiny']);
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /resuming at/);
    assert.deepEqual(readFileSync(shard), full);
    assert.equal(checkProfile('tiny', env.WEIGHTS_DIR!, cat).state, 'real');
  });

  test('pull replaces a file of the wrong size', async () => {
    const cfg = join(env.WEIGHTS_DIR!, 'Tiny', 'config.json');
    writeFileSync(cfg, '{}');
    const r = await cli(['pull', 'tiny']);
    assert.equal(r.code, 0);
    assert.match(r.out, /Tiny\/config\.json: 2 bytes, expected 36; downloading it again/);
    assert.deepEqual(readFileSync(cfg), CONFIG);
  });

  test('list: real, demo (a generated demo checkpoint) and missing', async () => {
    await ensureDemoCheckpoint({
      name: 'tiny-demo', version: 1, root: join(env.DATA_DIR!, 'demo-weights'),
      generate: (dir) => writeSafetensors(join(dir, 'model.safetensors'), tensors(1)),
    });
    const r = await cli(['list']);
    assert.match(r.out, new RegExp(`^tiny +real +main: ${join(env.WEIGHTS_DIR!, 'Tiny')}$`, 'm'));
    assert.match(r.out, /^tiny_lora +demo +demo checkpoint .*demo-weights\/tiny-demo \(version 1\); real weights, variant lora:\n +adapter: no \*\.safetensors file in lora\/ \(names not known: place by hand\) \(Hand\/, no known hub source: place by hand\)$/m);
  });

  test('a component with no hub source: pull says so and exits 1; placed by hand, the profile is real', async () => {
    const r = await cli(['pull', 'tiny_lora']);
    assert.equal(r.code, 1);
    assert.match(r.out, /cannot download: adapter \(Hand\/\): no known hub source: nobody publishes it/);
    assert.match(r.out, /tiny_lora: still incomplete:\n  Hand\/lora\/: no \*\.safetensors file/);
    mkdirSync(join(env.WEIGHTS_DIR!, 'Hand', 'lora'), { recursive: true });
    await writeSafetensors(join(env.WEIGHTS_DIR!, 'Hand', 'lora', 'turbo.safetensors'), tensors(1));
    const w = checkProfile('tiny_lora', env.WEIGHTS_DIR!, cat);
    assert.equal(w.state, 'real');
    assert.equal(componentRoot(w, 'adapter'), join(env.WEIGHTS_DIR!, 'Hand'));
    // A truncated hand-placed file is caught by its header.
    truncateSync(join(env.WEIGHTS_DIR!, 'Hand', 'lora', 'turbo.safetensors'), 100);
    assert.equal(checkProfile('tiny_lora', env.WEIGHTS_DIR!, cat).state, 'missing');
  });

  test('a file the hub does not have: pull exits 1 with the 404 naming file and revision', async () => {
    const r = await cli(['pull', 'broken']);
    assert.equal(r.code, 1);
    assert.match(r.err, new RegExp(`^acme/tiny@${hub.commit.slice(0, 12)}: not/on/the/hub\\.json: 404 Not Found: the file is not in the repo at this revision`));
  });

  test('usage errors', async () => {
    assert.equal((await cli([])).code, 2);
    assert.match((await cli(['pull'])).err, /pull: which profile\? \(tiny, tiny_lora, broken\)/);
    assert.match((await cli(['pull', 'nope'])).err, /no manifest names profile "nope"/);
    assert.match((await cli(['pull', 'tiny', '--variant', 'x'])).err, /profile tiny has no variant "x" \(has main\)/);
  });

  after(() => rmSync(root, { recursive: true, force: true }));
});

describe('progress output', () => {
  test('off a TTY: one line per interval with size, percent, speed and time left; nothing in between', () => {
    let now = 0;
    const c = capture(false);
    const p = new Progress(c.out, 'X/model.safetensors', { intervalMs: 10_000, now: () => now });
    p.start(0);
    for (let s = 1; s <= 25; s++) {
      now = s * 1000;
      p.update(s * 2 ** 20, 50 * 2 ** 20);
    }
    p.end('done');
    assert.equal(c.text(), [
      'X/model.safetensors: 10.0 MiB of 50.0 MiB (20%), 1.0 MiB/s, about 40 s left',
      'X/model.safetensors: 20.0 MiB of 50.0 MiB (40%), 1.0 MiB/s, about 30 s left',
      'X/model.safetensors: done',
      '',
    ].join('\n'));
  });

  test('on a TTY: a bar redrawn in place at most every 100 ms, cleared before the final line', () => {
    let now = 0;
    const c = capture(true);
    const p = new Progress(c.out, 'model.safetensors', { now: () => now });
    p.start(0);
    for (let ms = 10; ms <= 1000; ms += 10) {
      now = ms;
      p.update(ms * 1000, 1_000_000);
    }
    p.end('1.0 MiB');
    const frames = c.text().split('\r\x1b[K').filter(Boolean);
    assert.equal(frames.length, 11); // ten redraws (every 100 ms, the last at 100%) and the final line
    assert.match(frames[4]!, /^\[#{12}-{12}\]  50% 488\.3 KiB\/976\.6 KiB 976\.6 KiB\/s 1 s model\.safetensors$/);
    assert.match(frames[9]!, /^\[#{24}\] 100% /);
    assert.equal(frames[10], 'model.safetensors: 1.0 MiB\n');
  });
});
