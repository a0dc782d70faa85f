// The `//#include "<path>"` directive of KernelCache (expandIncludes) and the line mapping of compile errors.
// Text tests, then one compile through Dawn (an error inside an include). The shaders that include common/*.wgsl are checked by their own kernel tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expandIncludes, KernelCache, KernelError, sourceLine, uninitialisedInBlock, withHeader } from '../../src/engine/kernels';
import { projectRoot } from '../../src/paths';
import { testEngine } from './helpers';

/** A reader over an in-memory file table that counts reads per path. */
function files(table: Record<string, string>): { read: (p: string) => string; reads: Map<string, number> } {
  const reads = new Map<string, number>();
  const read = (p: string): string => {
    reads.set(p, (reads.get(p) ?? 0) + 1);
    const t = table[p];
    if (t === undefined) throw new Error(`ENOENT: no such file ${p}`);
    return t;
  };
  return { read, reads };
}

test('an include line is replaced by the file text; the rest keeps its lines', () => {
  const { read } = files({ 'common/a.wgsl': 'fn fa() {}\nfn fb() {}\n' });
  const src = 'const X = 1u;\n//#include "common/a.wgsl"\nfn main() {}';
  const { text, lines } = expandIncludes(src, 'k', read);
  const want = ['const X = 1u;', '// (included: common/a.wgsl)', 'fn fa() {}', 'fn fb() {}', 'fn main() {}'];
  assert.deepEqual(text.split('\n'), want);
  assert.deepEqual(lines, [
    { file: '', line: 1 },
    { file: '', line: 2 },
    { file: 'common/a.wgsl', line: 1 },
    { file: 'common/a.wgsl', line: 2 },
    { file: '', line: 3 },
  ]);
});

test('a file is included once even when named twice or by a nested include; cycles stop', () => {
  const { read, reads } = files({
    'common/a.wgsl': '//#include "common/b.wgsl"\nfn fa() {}',
    'common/b.wgsl': '//#include "common/a.wgsl"\nfn fb() {}',
  });
  const src = '//#include "common/a.wgsl"\n  //#include "common/b.wgsl"  \nfn main() {}';
  const { text, lines } = expandIncludes(src, 'k', read);
  const body = text.split('\n').filter((l) => !l.startsWith('//'));
  assert.deepEqual(body, ['fn fb() {}', 'fn fa() {}', 'fn main() {}']); // b nested in a, expanded where a names it
  assert.equal(reads.get('common/a.wgsl'), 1);
  assert.equal(reads.get('common/b.wgsl'), 1);
  assert.equal(text.split('\n').length, lines.length);
  const fb = text.split('\n').indexOf('fn fb() {}');
  assert.deepEqual(lines[fb], { file: 'common/b.wgsl', line: 2 });
  assert.deepEqual(lines[lines.length - 1], { file: '', line: 3 });
});

test('text without includes passes unchanged', () => {
  const src = '// #include "not/a/directive.wgsl" (space after //)\nfn main() {}\n';
  const { text, lines } = expandIncludes(src, 'k', () => assert.fail('nothing to read'));
  assert.equal(text, src);
  assert.deepEqual(lines.map((l) => l.line), [1, 2, 3]);
});

test('a missing include is a KernelError naming the including file, line and path', () => {
  const { read } = files({ 'common/a.wgsl': 'fn fa() {}\n//#include "common/gone.wgsl"' });
  assert.throws(
    () => expandIncludes('fn x() {}\n//#include "common/a.wgsl"', 'gemv.wgsl:main<f32>', read),
    (e: Error) =>
      e instanceof KernelError && /^common\/a\.wgsl line 2: #include "common\/gone\.wgsl": ENOENT/.test(e.message),
  );
  assert.throws(
    () => expandIncludes('//#include "nope.wgsl"', 'gemv.wgsl:main<f32>', read),
    (e: Error) => e instanceof KernelError && /^gemv\.wgsl:main<f32> line 1: #include "nope\.wgsl"/.test(e.message),
  );
});

test('compiled line numbers map back to the shader or the include (header is line 1)', () => {
  const { read } = files({ 'common/a.wgsl': 'fn fa() {}\nfn fb() {}' });
  const { lines } = expandIncludes('const X = 1u;\n//#include "common/a.wgsl"\nfn main() {}', 'k', read);
  assert.equal(sourceLine(lines, 2), 'line 1');
  assert.equal(sourceLine(lines, 5), 'common/a.wgsl line 2');
  assert.equal(sourceLine(lines, 6), 'line 3');
  assert.equal(sourceLine(lines, 1), 'line 0'); // the header itself
});

test('every include in shaders/ names an existing file under shaders/', () => {
  const dir = join(projectRoot(), 'shaders');
  for (const f of ['matmul.wgsl', 'gemv.wgsl', 'matmul_subgroup.wgsl']) {
    const { text } = expandIncludes(readFileSync(join(dir, f), 'utf8'), f, (p) => {
      assert.ok(existsSync(join(dir, p)), `${f}: ${p}`);
      return readFileSync(join(dir, p), 'utf8');
    });
    assert.match(text, /fn act\(x: f32\) -> f32/);
    assert.match(text, /fn dot3\(/);
  }
});

test('a WGSL error inside an included file names that file and its line', async () => {
  const e = await testEngine();
  const dir = mkdtempSync(join(tmpdir(), 'kiln-include-'));
  try {
    mkdirSync(join(dir, 'common'));
    writeFileSync(join(dir, 'common', 'bad.wgsl'), 'fn ok() {}\nfn bad() -> u32 { return 1.5; }\n');
    writeFileSync(join(dir, 'uses.wgsl'), '//#include "common/bad.wgsl"\n@compute @workgroup_size(1)\nfn main() {}\n');
    const cache = new KernelCache(e.gpu.device, true, dir);
    await assert.rejects(cache.compile({ shader: 'uses', dtype: 'f32' }), (err: Error) => {
      assert.ok(err instanceof KernelError, String(err));
      assert.match(err.message, /^uses\.wgsl:main<f32>: common\/bad\.wgsl line 2:\d+: /);
      return true;
    });
    assert.throws(() => cache.get({ shader: 'uses', dtype: 'f16', source: '//#include "common/none.wgsl"' }), KernelError);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('enable and diagnostic directives are hoisted above the header alias; the body keeps its line count', async () => {
  const src = 'diagnostic(off, derivative_uniformity);\nenable subgroups;\nconst X = 1u;\n@compute @workgroup_size(1)\nfn main() {}';
  const text = withHeader(src, 'f16');
  const [header, ...body] = text.split('\n');
  assert.equal(header, 'diagnostic(off, derivative_uniformity); enable f16; enable subgroups; alias T = f16;');
  assert.equal(body.length, src.split('\n').length);
  assert.deepEqual(body.slice(0, 2), ['// (diagnostic hoisted into the header)', '// (enable hoisted into the header)']);
  // WGSL refuses a directive after a declaration, so the hoisted text must compile where the unhoisted would not
  const e = await testEngine();
  const cache = new KernelCache(e.gpu.device, true);
  await cache.compile({ shader: 'hoist', dtype: 'f32', source: src.replace('enable subgroups;\n', '') });
});

// A variable declared without an initializer inside a block is not re-zeroed per loop iteration by Dawn here
// (kernels.ts, uninitialisedInBlock): the cache refuses such a kernel, whatever made its text (a file, an include,
// a generator), and no shader file has one.
test('no shader declares a variable without an initializer inside a block', () => {
  const dir = join(projectRoot(), 'shaders');
  const walk = (d: string): string[] => readdirSync(d, { withFileTypes: true })
    .flatMap((x) => (x.isDirectory() ? walk(join(d, x.name)) : x.name.endsWith('.wgsl') ? [join(d, x.name)] : []));
  const bad: string[] = [];
  for (const f of walk(dir)) {
    const lines = readFileSync(f, 'utf8').split('\n');
    for (const i of uninitialisedInBlock(lines.join('\n'))) bad.push(`${f.slice(dir.length + 1)} line ${i + 1}: ${lines[i]!.trim()}`);
  }
  assert.deepEqual(bad, []);
});

test('the kernel cache refuses a variable without an initializer inside a block, naming its line', async () => {
  const e = await testEngine();
  const cache = new KernelCache(e.gpu.device, true);
  const body = (decl: string) => `@compute @workgroup_size(1)\nfn main() {\n  for (var i = 0u; i < 2u; i++) {\n    ${decl}\n  }\n}`;
  assert.throws(() => cache.get({ shader: 'uninit', dtype: 'f32', source: body('var s: f32;') }),
    (err: Error) => err instanceof KernelError && /^uninit\.wgsl:main<f32>: line 4: `var s: f32;`: a variable declared inside a block needs an initializer/.test(err.message));
  assert.throws(() => cache.get({ shader: 'uninit2', dtype: 'f32', source: body('var acc: array<f32, 4>;') }), KernelError);
  await cache.compile({ shader: 'init', dtype: 'f32', source: body('var s = 0.0;') });
  assert.deepEqual(uninitialisedInBlock('fn f() {\n  var top: f32;\n  if (true) {\n    var x: vec2<f32>;\n    var y: f32 = 1.0;\n  }\n}'), [3]);
});
