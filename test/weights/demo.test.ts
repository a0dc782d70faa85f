import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Checkpoint } from '../../src/engine/safetensors';
import { writeShardedSafetensors } from '../../src/engine/safetensors-writer';
import { demoCheckpointVersion, ensureDemoCheckpoint } from '../../src/weights/demo';

/** A tiny random checkpoint in the sharded layout, as a model's generator would write one; counts its calls. */
function generator(calls: string[], delayMs = 0) {
  return async (dir: string) => {
    calls.push(dir);
    const t = (shape: number[]) => ({ dtype: 'F32' as const, shape, data: Float32Array.from({ length: shape[0]! * shape[1]! }, () => Math.random()) });
    await writeShardedSafetensors(join(dir, 'transformer'), { 'blocks.0.attn.to_q.weight': t([8, 8]), 'blocks.0.attn.to_k.weight': t([8, 8]), 'proj_out.weight': t([4, 8]) }, 300);
    writeFileSync(join(dir, 'transformer', 'config.json'), JSON.stringify({ hidden_size: 8, num_layers: 1 }));
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
  };
}

const tmp = () => mkdtempSync(join(tmpdir(), 'kiln-demo-'));

describe('ensureDemoCheckpoint', () => {
  test('generates once; the result loads as a checkpoint; later calls return the same folder untouched', async () => {
    const root = tmp();
    const calls: string[] = [];
    const spec = { name: 'tiny-image', version: 1, root, generate: generator(calls) };
    const dir = await ensureDemoCheckpoint(spec);
    assert.equal(dir, join(root, 'tiny-image'));
    assert.equal(calls.length, 1);
    assert.notEqual(calls[0], dir, 'generate writes into a temp folder, renamed into place after');
    const ck = await Checkpoint.open(join(dir, 'transformer'));
    assert.deepEqual(ck.entry('proj_out.weight').shape, [4, 8]);
    await ck.close();
    assert.equal(demoCheckpointVersion(root, 'tiny-image'), '1');
    assert.equal(await ensureDemoCheckpoint(spec), dir);
    assert.equal(calls.length, 1);
    assert.deepEqual(readdirSync(root).sort(), ['tiny-image'], 'no temp folder or lock left');
  });

  test('concurrent calls in one process share one generation', async () => {
    const root = tmp();
    const calls: string[] = [];
    const spec = { name: 'tts', version: 'a', root, generate: generator(calls, 50) };
    const dirs = await Promise.all([ensureDemoCheckpoint(spec), ensureDemoCheckpoint(spec), ensureDemoCheckpoint(spec)]);
    assert.equal(calls.length, 1);
    assert.deepEqual(new Set(dirs), new Set([join(root, 'tts')]));
  });

  test('a new version regenerates and replaces the old checkpoint', async () => {
    const root = tmp();
    const calls: string[] = [];
    await ensureDemoCheckpoint({ name: 'h3', version: 1, root, generate: async (d) => { calls.push(d); writeFileSync(join(d, 'v1.txt'), '1'); } });
    const dir = await ensureDemoCheckpoint({ name: 'h3', version: 2, root, generate: async (d) => { calls.push(d); writeFileSync(join(d, 'v2.txt'), '2'); } });
    assert.equal(calls.length, 2);
    assert.deepEqual(readdirSync(dir).sort(), ['.kiln-demo.json', 'v2.txt']);
    assert.equal(demoCheckpointVersion(root, 'h3'), '2');
    assert.deepEqual(readdirSync(root), ['h3']);
  });

  test('a failing generator leaves nothing behind, and the next call can succeed', async () => {
    const root = tmp();
    await assert.rejects(ensureDemoCheckpoint({ name: 'x', version: 1, root, generate: async (d) => { writeFileSync(join(d, 'half'), '...'); throw new Error('generator broke'); } }), /generator broke/);
    assert.deepEqual(readdirSync(root), []);
    assert.equal(demoCheckpointVersion(root, 'x'), undefined);
    const calls: string[] = [];
    await ensureDemoCheckpoint({ name: 'x', version: 1, root, generate: generator(calls) });
    assert.equal(calls.length, 1);
  });

  test('leftovers of a crashed generator (temp folder, lock of a dead process) are cleared', async () => {
    const root = tmp();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    writeFileSync(join(root, 'y.lock'), JSON.stringify({ pid: Number(dead), host: hostname(), at: new Date().toISOString() }));
    mkdirSync(join(root, `.y.tmp-${dead}-deadbeef`));
    writeFileSync(join(root, `.y.tmp-${dead}-deadbeef`, 'half.safetensors'), 'x');
    const calls: string[] = [];
    const dir = await ensureDemoCheckpoint({ name: 'y', version: 1, root, generate: generator(calls) });
    assert.equal(calls.length, 1);
    assert.deepEqual(readdirSync(root), ['y']);
    assert.ok(existsSync(join(dir, 'transformer', 'model.safetensors.index.json')));
  });

  test('names that could leave the folder are refused', async () => {
    await assert.rejects(ensureDemoCheckpoint({ name: '../evil', version: 1, root: tmp(), generate: async () => undefined }), /letters, digits/);
  });

  test('three processes at once: one generates, all get the finished folder', async () => {
    const root = tmp();
    const log = join(root, 'generations.log');
    // Each child calls the compiled module with a generator that logs, writes a checkpoint, and takes 300 ms.
    const script = `
      const { ensureDemoCheckpoint } = require(${JSON.stringify(join(__dirname, '../../src/weights/demo.js'))});
      const { writeSafetensors } = require(${JSON.stringify(join(__dirname, '../../src/engine/safetensors-writer.js'))});
      const fs = require('node:fs'), path = require('node:path');
      ensureDemoCheckpoint({ name: 'shared', version: 3, root: ${JSON.stringify(root)}, generate: async (dir) => {
        fs.appendFileSync(${JSON.stringify(log)}, process.pid + '\\n');
        await writeSafetensors(path.join(dir, 'model.safetensors'), { w: { dtype: 'F32', shape: [2, 2], data: [1, 2, 3, 4] } });
        await new Promise((r) => setTimeout(r, 300));
      } }).then((p) => process.stdout.write(p), (e) => { console.error(e); process.exit(1); });`;
    const run = () => new Promise<string>((resolve, reject) => {
      const c = spawn(process.execPath, ['-e', script]);
      let out = '';
      let err = '';
      c.stdout.on('data', (d) => (out += d));
      c.stderr.on('data', (d) => (err += d));
      c.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited ${code}: ${err}`))));
    });
    const paths = await Promise.all([run(), run(), run()]);
    assert.deepEqual(paths, [join(root, 'shared'), join(root, 'shared'), join(root, 'shared')]);
    assert.equal(readFileSync(log, 'utf8').trim().split('\n').length, 1);
    assert.deepEqual(readdirSync(root).sort(), ['generations.log', 'shared']);
    const ck = await Checkpoint.open(join(root, 'shared', 'model.safetensors'));
    assert.deepEqual(ck.entry('w').shape, [2, 2]);
    await ck.close();
  });
});
