// The process split and the layering rules (docs/architecture.md), checked on the code itself:
// - at run time, the API process (main.js) loads nothing of the engine, the models or the worker but the protocol;
// - the engine imports nothing of ours outside it, and reads process.env only in engine/settings.ts; the catalog
//   nothing but the python-round leaf;
// - common/ imports nothing of ours and no web framework; http/ (the Nest and Express glue) only common/ and auth/token;
// - models import nothing of the service: no jobs/, scheduler/, worker/, HTTP or weights state.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { projectRoot } from '../../src/paths';

/** This build's compiled src/ (build/run-N/src, beside this file's test/). */
const builtSrc = resolve(__dirname, '..', '..', 'src');
const sourceSrc = join(projectRoot(), 'src');
const rel = (root: string, file: string) => relative(root, file).split(sep).join('/');

/** Every module main.js loads: the relative require()s of the compiled JS, followed (type-only imports are gone). */
function runtimeGraph(entry: string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(/require\("(\.{1,2}\/[^"]+)"\)/g)) {
      const base = resolve(dirname(file), spec);
      const target = [`${base}.js`, join(base, 'index.js'), base].find((p) => existsSync(p) && statSync(p).isFile());
      assert.ok(target, `${rel(builtSrc, file)} requires ${spec}, which is not in the build`);
      visit(target);
    }
  };
  visit(entry);
  return new Set([...seen].map((f) => rel(builtSrc, f)));
}

/** Every import specifier of every .ts file under a source folder, type-only ones included. */
function sourceImports(folder: string): { file: string; spec: string }[] {
  const out: { file: string; spec: string }[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.ts')) {
        for (const [, spec] of readFileSync(p, 'utf8').matchAll(/(?:from|import|require)\s*\(?\s*'([^']+)'/g)) out.push({ file: rel(sourceSrc, p), spec });
      }
    }
  };
  walk(join(sourceSrc, folder));
  return out;
}

/** The src/ folder an import of `file` lands in (undefined for packages and node: modules). */
function landsIn(file: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  return rel(sourceSrc, resolve(join(sourceSrc, dirname(file)), spec));
}

test('the API process never loads the engine, the models or the worker (the protocol aside)', () => {
  const api = runtimeGraph(join(builtSrc, 'main.js'));
  assert.ok(api.has('app.module.js') && api.has('scheduler/local-worker.js'), 'the walk follows the API');
  const gpuSide = [...api].filter((f) => /^(engine|models|worker)\//.test(f) && f !== 'worker/protocol.js');
  assert.deepEqual(gpuSide, [], 'modules of the GPU side in the API process');
  const worker = runtimeGraph(join(builtSrc, 'worker.js'));
  for (const f of ['engine/engine.js', 'models/minimax_h3/pipeline.js', 'models/qwen_image21/pipeline.js', 'models/qwen3_tts/pipeline.js']) assert.ok(worker.has(f), `the worker loads ${f}`);
  assert.ok(!worker.has('app.module.js') && !worker.has('jobs/jobs.service.js'), 'the worker loads no HTTP or job store code');
});

test('the engine imports nothing of ours outside it (paths.ts, a leaf, finds its shaders); the catalog nothing but the python-round leaf', () => {
  const outside = sourceImports('engine').filter(({ file, spec }) => {
    const to = landsIn(file, spec);
    return to !== undefined && !/^engine(\/|$)/.test(to) && to !== 'paths';
  });
  assert.deepEqual(outside, []);
  const leaf = (to: string) => /^catalog(\/|$)/.test(to) || to === 'common/python-round';
  assert.deepEqual(sourceImports('catalog').filter(({ file, spec }) => spec.startsWith('.') && !leaf(landsIn(file, spec)!)), []);
});

test('the engine reads its environment in one place: process.env only in engine/settings.ts', () => {
  const reads: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.ts') && rel(sourceSrc, p) !== 'engine/settings.ts') {
        readFileSync(p, 'utf8').split('\n').forEach((line, i) => {
          if (/^\s*(\/\/|\*|\/\*)/.test(line)) return; // comments may name it
          if (/\bprocess\s*(\.|\[\s*['"`])\s*env\b|\benv\b[^=]*=\s*process\b/.test(line)) reads.push(`${rel(sourceSrc, p)}:${i + 1}: ${line.trim()}`);
        });
      }
    }
  };
  walk(join(sourceSrc, 'engine'));
  assert.deepEqual(reads, [], 'environment reads in the engine outside engine/settings.ts (engineSettings())');
});

test('common/ imports nothing of ours and no web framework; the Nest and Express glue in http/ imports only common/ and the token check, and only the API\'s routes import it', () => {
  const framework = /^(@nestjs\/|express$|class-validator$|class-transformer$)/;
  assert.deepEqual(sourceImports('common').filter(({ spec }) => spec.startsWith('.') || framework.test(spec)), [], 'imports of our folders or of Nest/Express from src/common');
  const allowed = (to: string) => /^(http|common)(\/|$)/.test(to) || to === 'auth/token';
  assert.deepEqual(sourceImports('http').filter(({ file, spec }) => spec.startsWith('.') && !allowed(landsIn(file, spec)!)), [], 'imports of feature folders from src/http');
  const belowHttp = ['catalog', 'common', 'engine', 'media', 'models', 'plan', 'scheduler', 'weights', 'worker'];
  const intoHttp = belowHttp.flatMap((f) => sourceImports(f)).filter(({ file, spec }) => /^http(\/|$)/.test(landsIn(file, spec) ?? ''));
  assert.deepEqual(intoHttp, [], 'the Nest glue imported from outside the API\'s routes');
});

test('models import the engine, shared model code, the catalog, media and common helpers: nothing of the service', () => {
  const allowed = /^(engine|models|catalog|media|common)(\/|$)/;
  const wrong = sourceImports('models').filter(({ file, spec }) => {
    const to = landsIn(file, spec);
    return to !== undefined && !allowed.test(to);
  });
  assert.deepEqual(wrong, [], 'imports of jobs/, scheduler/, worker/, weights/, config/ or HTTP code from src/models');
});

test('the planner (npm run plan) takes the API\'s request rules and the worker\'s mappings, never HTTP or the job store', () => {
  const allowed = (to: string) => /^(engine|models|catalog|media|common|plan|worker\/profiles)(\/|$)/.test(to) || ['jobs/job-requests', 'image/image.draft', 'video/video.draft'].includes(to) || to === 'worker/protocol' || to === 'paths';
  const wrong = sourceImports('plan').filter(({ file, spec }) => {
    const to = landsIn(file, spec);
    return (to !== undefined && !allowed(to)) || spec.startsWith('@nestjs/');
  });
  assert.deepEqual(wrong, []);
});
