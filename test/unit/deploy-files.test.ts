// The container files say what docs/deploy.md says (the image is not built on this machine: no registry access): the
// image runs as a non-root user with a health check, ships NVIDIA's Vulkan ICD file and asks for the graphics driver
// capability; the compose files bind Redis and MinIO to the loopback unless KILN_BIND says otherwise, mount a Hugging
// Face cache the built weights CLI can pull into, and check a worker by its adapter.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { load } from 'js-yaml';
import { projectRoot } from '../../src/paths';

const root = projectRoot();
const read = (p: string) => readFileSync(join(root, p), 'utf8');

test('Dockerfile: the runtime stage runs as node with a health check, the NVIDIA ICD file and capabilities', () => {
  const runtime = read('deploy/Dockerfile').split(/^FROM /m).pop()!;
  const lines = runtime.split('\n').filter((l) => !l.startsWith('#'));
  const user = lines.findIndex((l) => /^USER /.test(l));
  assert.ok(user > 0, 'a USER line');
  assert.equal(lines[user], 'USER node');
  assert.ok(lines.findIndex((l) => /^CMD /.test(l)) > user, 'CMD after USER');
  assert.match(runtime, /^HEALTHCHECK .*CMD \["node", "dist\/healthcheck\.js", "api"\]$/m);
  assert.match(runtime, /^COPY deploy\/nvidia_icd\.json \/etc\/vulkan\/icd\.d\/nvidia_icd\.json$/m);
  assert.match(runtime, /NVIDIA_DRIVER_CAPABILITIES=compute,graphics,utility/);
  assert.match(runtime, /HF_HUB_CACHE=\/hf-cache/);
  assert.match(runtime, /chown node:node \/data \/weights \/hf-cache/);
  const icd = JSON.parse(read('deploy/nvidia_icd.json')) as { file_format_version: string; ICD: { library_path: string; api_version: string } };
  assert.equal(icd.ICD.library_path, 'libGLX_nvidia.so.0');
  assert.match(icd.ICD.api_version, /^1\.\d+\.\d+$/);
  assert.ok(existsSync(join(root, 'src/healthcheck.ts')));
});

test('compose files: Redis and MinIO on the loopback by default, a Hugging Face cache, the worker checked by its adapter', () => {
  type Service = { ports?: string[]; volumes?: string[]; healthcheck?: { test: string[] }; environment?: Record<string, string> };
  const main = load(read('deploy/compose.yaml')) as { services: Record<string, Service>; volumes: Record<string, unknown> };
  for (const name of ['redis', 'minio']) {
    for (const p of main.services[name]!.ports!) assert.match(p, /^\$\{KILN_BIND:-127\.0\.0\.1\}:\d+:\d+$/, `${name}: ${p}`);
  }
  for (const [file, doc] of [['compose.yaml', main], ['compose.worker.yaml', load(read('deploy/compose.worker.yaml')) as typeof main]] as const) {
    const w = doc.services.worker!;
    assert.deepEqual(w.healthcheck!.test, ['CMD', 'node', 'dist/healthcheck.js', 'gpu'], file);
    assert.ok(w.volumes!.some((v) => /:\/hf-cache"?$/.test(v)), `${file}: the Hugging Face cache mounted`);
    assert.ok('hf-cache' in doc.volumes, `${file}: its named volume`);
    assert.equal(w.environment!.NVIDIA_DRIVER_CAPABILITIES, 'compute,graphics,utility', file);
  }
});
