// Weights found in the Hugging Face hub cache, read in place (issue 44). The cache is written by @huggingface/hub's
// own snapshotDownload from the local hub stand-in (hub-server.ts), so its layout is the library's: refs/main, a
// snapshot folder of relative links, blobs named by sha256 (LFS) or git sha1. The checks never write into it.
// `pull` writes the same layout by default (pull-cache.ts): checked against the hub's listing, resumable.
import assert from 'node:assert/strict';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { snapshotDownload } from '@huggingface/hub';
import { writeShardedSafetensors, type WriteTensor } from '../../src/engine/safetensors-writer';
import { runCli } from '../../src/weights/cli';
import { hubCacheDirOf, hubRepoFolder, hubSnapshot } from '../../src/weights/hub-cache';
import { parseManifest, WeightsCatalog } from '../../src/weights/manifest';
import { checkProfile, componentRoot, weightsNote } from '../../src/weights/state';
import { sha256, startHub, type Hub } from './hub-server';

const CONFIG = Buffer.from('{"hidden_size": 8, "num_layers": 2}\n');

function catalog(revision: string): WeightsCatalog {
  return new WeightsCatalog([parseManifest('test.json', JSON.stringify({
    model: 'tiny test model',
    checkpoints: {
      tiny: {
        repo: 'acme/tiny', revision, revisionNote: 'test', folder: 'Tiny',
        components: {
          config: { files: [{ path: 'config.json', size: CONFIG.length, sha256: sha256(CONFIG) }, { path: 'notes.txt', optional: true }] },
          transformer: { files: [{ path: 'transformer/config.json' }, { path: 'transformer/model.safetensors.index.json', shards: true }] },
        },
      },
    },
    profiles: { tiny: { demo: 'tiny-demo', variants: [{ name: 'main', uses: [{ checkpoint: 'tiny', components: ['config', 'transformer'] }] }] } },
  }))]);
}

/** Every path under `dir` with its kind, size and mtime (links not followed): what a read-only check must leave. */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d).sort()) {
      const p = join(d, n);
      const st = lstatSync(p);
      out.push(`${relative(dir, p)} ${st.isSymbolicLink() ? `-> ${readlinkSync(p)}` : st.isDirectory() ? 'dir' : st.size} ${st.mtimeMs}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

test('the hub cache folder follows huggingface_hub: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME, ~/.cache', () => {
  assert.equal(hubCacheDirOf({ HF_HUB_CACHE: '/a', HUGGINGFACE_HUB_CACHE: '/b', HF_HOME: '/c' }), '/a');
  assert.equal(hubCacheDirOf({ HUGGINGFACE_HUB_CACHE: '/b', HF_HOME: '/c' }), '/b');
  assert.equal(hubCacheDirOf({ HF_HUB_CACHE: ' ', HF_HOME: '/c', XDG_CACHE_HOME: '/x' }), '/c/hub');
  assert.equal(hubCacheDirOf({ XDG_CACHE_HOME: '/x' }), '/x/huggingface/hub');
  assert.match(hubCacheDirOf({}), /\/\.cache\/huggingface\/hub$/);
});

describe('a profile whose repo is in the Hugging Face cache', () => {
  let hub: Hub;
  let root: string;
  let cache: string;
  let empty: string;

  before(async () => {
    hub = await startHub();
    root = mkdtempSync(join(tmpdir(), 'kiln-hubcache-'));
    cache = join(root, 'hub');
    empty = join(root, 'weights');
    mkdirSync(empty);
    const src = join(root, 'src');
    const t: Record<string, WriteTensor> = {};
    for (let i = 0; i < 6; i++) t[`blocks.${i}.weight`] = { dtype: 'F32', shape: [64, 64], data: Float32Array.from({ length: 4096 }, () => Math.random() - 0.5) };
    await writeShardedSafetensors(src, t, 40_000);
    for (const f of readdirSync(src)) hub.files.set(`acme/tiny/transformer/${f}`, { data: readFileSync(join(src, f)) });
    hub.files.set('acme/tiny/transformer/config.json', { data: Buffer.from('{"_class_name": "Tiny"}') });
    hub.files.set('acme/tiny/config.json', { data: CONFIG });
    // what a user's `huggingface-cli download acme/tiny` leaves, written by the JS library
    await snapshotDownload({ repo: 'acme/tiny', cacheDir: cache, hubUrl: hub.endpoint });
  });
  after(async () => {
    await hub.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('the library wrote the hub layout: refs/main names the commit, the snapshot holds relative links into blobs/', () => {
    const folder = hubRepoFolder(cache, 'acme/tiny');
    assert.equal(readFileSync(join(folder, 'refs', 'main'), 'utf8'), hub.commit);
    const snap = hubSnapshot(cache, 'acme/tiny', 'main');
    assert.equal(snap, join(folder, 'snapshots', hub.commit));
    const link = join(snap!, 'transformer', 'config.json');
    assert.ok(lstatSync(link).isSymbolicLink());
    assert.match(readlinkSync(link), /^\.\.\/\.\.\/\.\.\/blobs\/[0-9a-f]{40}$/);
    assert.equal(hubSnapshot(cache, 'acme/tiny', hub.commit), snap, 'a pinned commit reads its snapshot without refs');
    assert.equal(hubSnapshot(cache, 'acme/tiny', 'dev'), undefined, 'a branch never downloaded');
    assert.equal(hubSnapshot(cache, 'acme/other', 'main'), undefined);
  });

  test('found in place with an empty WEIGHTS_DIR: real, rooted at the snapshot, no file written or copied', () => {
    const before = listing(cache);
    for (const rev of ['main', hub.commit]) {
      const w = checkProfile('tiny', { weightsDir: empty, hubCacheDir: cache }, catalog(rev));
      assert.equal(w.state, 'real', w.variant.problems.join('; '));
      const snap = join(hubRepoFolder(cache, 'acme/tiny'), 'snapshots', hub.commit);
      assert.equal(componentRoot(w, 'transformer'), snap);
      assert.deepEqual(Object.values(w.variant.components).map((c) => c.place), ['hub-cache', 'hub-cache']);
      const shards = w.variant.components.transformer!.files.filter((f) => f.path.endsWith('.safetensors'));
      assert.ok(shards.length >= 2, 'the index\'s shards are read from the snapshot');
      for (const f of shards) assert.ok(lstatSync(f.abs).isSymbolicLink() && f.state === 'ok', f.abs);
      assert.match(weightsNote(w), new RegExp(`^main: ${snap} \\(Hugging Face cache\\)$`));
    }
    assert.deepEqual(listing(cache), before, 'the cache is untouched');
    assert.deepEqual(readdirSync(empty), [], 'nothing copied into WEIGHTS_DIR');
    assert.equal(checkProfile('tiny', empty, catalog('main')).state, 'missing', 'without a cache folder, WEIGHTS_DIR only');
  });

  test('verify reads the cache as its own record: each file hashed against the blob its link names (sha256 for LFS, git blob id for small files), the manifest\'s sha256 first; a flipped byte of the right size is a mismatch; nothing written', async () => {
    const run = async (cacheDir: string) => {
      const out: string[] = [];
      const code = await runCli(['verify', 'tiny'], {
        env: { WEIGHTS_DIR: empty, DATA_DIR: join(root, 'data'), HF_HUB_CACHE: cacheDir },
        stdout: { write: (s: string) => out.push(s), isTTY: false }, stderr: { write: (s: string) => out.push(s) }, catalog: catalog('main'), intervalMs: 0,
      });
      return { code, out: out.join('') };
    };
    const at = `hub cache acme/tiny@${hub.commit.slice(0, 8)}`;
    const before = listing(cache);
    const ok = await run(cache);
    assert.equal(ok.code, 0, ok.out);
    assert.match(ok.out, new RegExp(`${at}/config\\.json: ok \\(sha256 from the manifest\\)`));
    assert.match(ok.out, new RegExp(`${at}/transformer/config\\.json: ok \\(git blob id named by its hub cache blob\\)`));
    const shards = [...ok.out.matchAll(new RegExp(`${at}/transformer/(\\S+\\.safetensors): ok \\(sha256 named by its hub cache blob\\)`, 'g'))].map((m) => m[1]);
    assert.ok(shards.length >= 2, ok.out);
    assert.match(ok.out, /tiny \(main\): all files check out/);
    assert.deepEqual(listing(cache), before, 'verify writes nothing into the cache');
    // a copy of the cache (links kept relative) with one byte flipped in a shard's blob and in a small file's
    const copy = join(root, 'hub-flipped');
    cpSync(cache, copy, { recursive: true, verbatimSymlinks: true });
    const snap = hubSnapshot(copy, 'acme/tiny', 'main')!;
    for (const f of [`transformer/${shards[0]}`, 'transformer/config.json']) {
      const blob = join(dirname(join(snap, f)), readlinkSync(join(snap, f)));
      const b = readFileSync(blob);
      b[b.length - 2] ^= 0x21;
      writeFileSync(blob, b);
    }
    const bad = await run(copy);
    assert.equal(bad.code, 1, bad.out);
    assert.match(bad.out, new RegExp(`${at}/transformer/${shards[0]!.replace(/\./g, '\\.')}: sha256 MISMATCH: [0-9a-f]{64}, expected [0-9a-f]{64} \\(sha256 named by its hub cache blob\\)`));
    assert.match(bad.out, new RegExp(`${at}/transformer/config\\.json: git blob id MISMATCH: [0-9a-f]{40}, expected [0-9a-f]{40}`));
    assert.match(bad.out, /tiny \(main\): NOT OK/);
  });

  test('pull (the default target now): into the hub cache with the listing\'s names, sizes and hashes; the same layout snapshotDownload writes; a second pull downloads nothing; WEIGHTS_DIR untouched', async () => {
    const fresh = join(root, 'hub-pulled');
    const run = async (args: string[]) => {
      const out: string[] = [];
      const code = await runCli(args, {
        env: { WEIGHTS_DIR: empty, DATA_DIR: join(root, 'data'), HF_HUB_CACHE: fresh, HF_ENDPOINT: hub.endpoint, HF_TOKEN: 'hf_test' },
        stdout: { write: (s: string) => out.push(s), isTTY: false }, stderr: { write: (s: string) => out.push(s) }, catalog: catalog('main'), retryDelayMs: 5, intervalMs: 0,
      });
      return { code, out: out.join('') };
    };
    hub.log.length = 0;
    const r = await run(['pull', 'tiny']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /tiny \(main\): 6 downloaded, 0 already there/);
    assert.match(r.out, /tiny: weights complete/);
    assert.match(r.out, /sha256 ok \(hub listing\)/);
    assert.match(r.out, /git oid ok \(hub listing\)/);
    assert.ok(hub.log.some((l) => l.url.includes('/paths-info/') && l.auth === 'Bearer hf_test'), 'the listing is asked with HF_TOKEN');
    const folder = hubRepoFolder(fresh, 'acme/tiny');
    assert.equal(readFileSync(join(folder, 'refs', 'main'), 'utf8'), hub.commit);
    // blobs and links as @huggingface/hub's snapshotDownload wrote them into `cache` (less the optional notes.txt)
    const layout = (c: string) => listing(hubRepoFolder(c, 'acme/tiny')).map((l) => l.split(' ').slice(0, -1).join(' ')).filter((l) => !l.startsWith('refs') && !l.includes('.part'));
    assert.deepEqual(layout(fresh), layout(cache));
    const snap = join(folder, 'snapshots', hub.commit);
    for (const n of readdirSync(join(snap, 'transformer'))) assert.ok(lstatSync(join(snap, 'transformer', n)).isSymbolicLink(), n);
    assert.ok(!readdirSync(snap).includes('notes.txt'), 'an optional file only with --all');
    const w = checkProfile('tiny', { weightsDir: empty, hubCacheDir: fresh }, catalog('main'));
    assert.equal(w.state, 'real');
    assert.deepEqual(Object.values(w.variant.components).map((c) => c.place), ['hub-cache', 'hub-cache']);
    assert.deepEqual(readdirSync(empty), [], 'nothing written into WEIGHTS_DIR');
    const again = await run(['pull', 'tiny', '--cache']); // --cache: the old spelling of the default, still taken
    assert.equal(again.code, 0, again.out);
    assert.match(again.out, /tiny \(main\): 0 downloaded, 6 already there/);
  });

  test('pull into the cache resumes (a cut connection with Range; a .part left by an interrupted run) and refuses bytes that do not match the listing, linking nothing', async () => {
    const shards = [...hub.files.keys()].filter((k) => k.startsWith('acme/tiny/transformer/') && k.endsWith('.safetensors')).sort();
    const first = hub.files.get(shards[0]!)!;
    const run = async (cacheDir: string) => {
      const out: string[] = [];
      const code = await runCli(['pull', 'tiny'], {
        env: { WEIGHTS_DIR: empty, DATA_DIR: join(root, 'data'), HF_HUB_CACHE: cacheDir, HF_ENDPOINT: hub.endpoint },
        stdout: { write: (s: string) => out.push(s), isTTY: false }, stderr: { write: (s: string) => out.push(s) }, catalog: catalog('main'), retryDelayMs: 5, intervalMs: 0,
      });
      return { code, out: out.join('') };
    };
    const blob = (c: string) => join(hubRepoFolder(c, 'acme/tiny'), 'blobs', sha256(first.data));
    try {
      // a connection cut mid-shard: the same run continues where it stopped (a fresh entry: the stand-in counts GETs per entry)
      hub.files.set(shards[0]!, { data: first.data, cutAfter: 10_000 });
      hub.log.length = 0;
      const cut = join(root, 'hub-cut');
      const r = await run(cut);
      assert.equal(r.code, 0, r.out);
      assert.ok(hub.log.some((l) => l.server === 'cdn' && l.range === 'bytes=10000-'), JSON.stringify(hub.log.filter((l) => l.server === 'cdn')));
      assert.match(r.out, /resumed at/);
      assert.equal(sha256(readFileSync(blob(cut))), sha256(first.data));
      hub.files.set(shards[0]!, first);
      // an interrupted run's .part: the next run asks for the rest only
      const part = join(root, 'hub-part');
      mkdirSync(dirname(blob(part)), { recursive: true });
      writeFileSync(`${blob(part)}.part`, first.data.subarray(0, 5000));
      hub.log.length = 0;
      assert.equal((await run(part)).code, 0);
      assert.ok(hub.log.some((l) => l.server === 'cdn' && l.range === 'bytes=5000-'));
      assert.ok(readFileSync(blob(part)).equals(first.data));
      // other bytes than the listing's sha256 (an LFS shard) or git oid (a small file): refused, nothing linked
      for (const [key, label] of [[shards[0]!, /sha256/], ['acme/tiny/transformer/config.json', /git blob id [0-9a-f]{40}, the hub's listing says/]] as const) {
        const f = hub.files.get(key)!;
        const bad = Buffer.from(f.data);
        bad[bad.length - 2] ^= 0xff;
        hub.files.set(key, { ...f, serve: bad });
        const c = join(root, `hub-bad-${label.source.length}`);
        const b = await run(c);
        hub.files.set(key, f);
        assert.equal(b.code, 1, b.out);
        assert.match(b.out, label);
        assert.match(b.out, new RegExp(key.slice('acme/tiny/'.length).replace(/\./g, '\\.')));
        assert.ok(!existsSync(join(hubRepoFolder(c, 'acme/tiny'), 'snapshots', hub.commit, ...key.slice('acme/tiny/'.length).split('/'))), 'no link to a bad blob');
      }
    } finally {
      hub.files.set(shards[0]!, first);
    }
  });

  test('WEIGHTS_DIR\'s own complete copy wins over the cache', () => {
    const own = join(root, 'own');
    const snap = hubSnapshot(cache, 'acme/tiny', 'main')!;
    mkdirSync(join(own, 'Tiny', 'transformer'), { recursive: true });
    for (const f of readdirSync(join(snap, 'transformer'))) writeFileSync(join(own, 'Tiny', 'transformer', f), readFileSync(join(snap, 'transformer', f)));
    writeFileSync(join(own, 'Tiny', 'config.json'), CONFIG);
    const w = checkProfile('tiny', { weightsDir: own, hubCacheDir: cache }, catalog('main'));
    assert.equal(w.state, 'real');
    assert.equal(componentRoot(w, 'transformer'), join(own, 'Tiny'));
    assert.equal(w.variant.components.transformer!.place, 'weights-dir');
  });

  test('a half-downloaded snapshot (a blob gone) is not real, and its problems name the cache; `list` says where', async () => {
    const copy = join(root, 'hub-partial');
    mkdirSync(copy);
    await snapshotDownload({ repo: 'acme/tiny', cacheDir: copy, hubUrl: hub.endpoint });
    const snap = hubSnapshot(copy, 'acme/tiny', 'main')!;
    const shard = readdirSync(join(snap, 'transformer')).find((n) => n.endsWith('.safetensors'))!;
    unlinkSync(join(snap, 'transformer', readlinkSync(join(snap, 'transformer', shard)))); // the link dangles
    const w = checkProfile('tiny', { weightsDir: empty, hubCacheDir: copy }, catalog('main'));
    assert.equal(w.state, 'missing');
    const t = w.variant.components.transformer!;
    assert.equal(t.place, 'hub-cache', 'the snapshot has more than the empty WEIGHTS_DIR: its status is shown');
    assert.deepEqual(t.problems, [`hub cache acme/tiny@${hub.commit.slice(0, 8)}/transformer/${shard}: missing`]);
    assert.equal(w.variant.components.config!.complete, true);

    const out: string[] = [];
    const code = await runCli(['list'], {
      env: { WEIGHTS_DIR: empty, DATA_DIR: join(root, 'data'), HF_HUB_CACHE: cache },
      stdout: { write: (s: string) => out.push(s), isTTY: false }, stderr: { write: () => true }, catalog: catalog('main'),
    });
    assert.equal(code, 0);
    assert.match(out.join(''), new RegExp(`Hugging Face cache ${cache} \\(read in place\\)`));
    assert.match(out.join(''), new RegExp(`tiny\\s+real\\s+main: ${join(hubRepoFolder(cache, 'acme/tiny'), 'snapshots', hub.commit)} \\(Hugging Face cache\\)`));
  });

  test('refs/main moved to a commit whose snapshot is not here: not found, WEIGHTS_DIR\'s problems shown', () => {
    const moved = join(root, 'hub-moved');
    const folder = hubRepoFolder(moved, 'acme/tiny');
    mkdirSync(join(folder, 'refs'), { recursive: true });
    writeFileSync(join(folder, 'refs', 'main'), 'f'.repeat(40));
    assert.equal(hubSnapshot(moved, 'acme/tiny', 'main'), undefined);
    const w = checkProfile('tiny', { weightsDir: empty, hubCacheDir: moved }, catalog('main'));
    assert.equal(w.state, 'missing');
    assert.equal(w.variant.components.config!.place, 'weights-dir');
    assert.match(w.variant.problems[0]!, /^Tiny\/config\.json: missing$/);
    assert.ok(statSync(folder).isDirectory());
  });
});
