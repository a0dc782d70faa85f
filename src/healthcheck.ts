// The container's health check (deploy/Dockerfile HEALTHCHECK; the compose files pick the role):
//   node dist/healthcheck.js api   the API answers GET /api/status (200, with its own token) on HOST/PORT
//   node dist/healthcheck.js gpu   a GPU worker's WebGPU adapter and a device open the way its engine opens them
//                                  (GpuDevice.create: a software adapter on a machine with a GPU is refused, so a
//                                  worker that lost its NVIDIA driver or ICD file to lavapipe is unhealthy)
// Prints one line (the answer, or the adapter as JSON) and exits 0 when healthy, 1 when not, 2 on a bad argument.
import { existingToken } from './auth/token';
import { loadSettings } from './config/settings';
import { GpuDevice } from './engine/device';

async function api(): Promise<string> {
  const settings = loadSettings();
  // the API's token (API_TOKEN, else the one it wrote into DATA_DIR at its first start); none yet: it has not started
  const token = existingToken(settings.apiToken, settings.dataDir)?.token;
  if (!token) throw new Error(`no API token yet: the API writes ${settings.dataDir}/token at its first start when API_TOKEN is unset`);
  // a wildcard listen address is reached on the loopback
  const host = ['0.0.0.0', '::', ''].includes(settings.host) ? '127.0.0.1' : settings.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${settings.port}/api/status`;
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${(await res.text()).slice(0, 200)}`);
  return `api ok: ${await res.text()}`;
}

async function gpu(): Promise<string> {
  const device = await GpuDevice.create();
  try {
    return JSON.stringify(device.describe());
  } finally {
    device.destroy();
  }
}

async function main(): Promise<void> {
  const role = process.argv[2] ?? 'api';
  if (role !== 'api' && role !== 'gpu') {
    process.stderr.write(`usage: node dist/healthcheck.js [api|gpu] (got ${role})\n`);
    process.exit(2);
  }
  try {
    process.stdout.write(`${await (role === 'api' ? api() : gpu())}\n`);
    process.exit(0);
  } catch (e) {
    process.stdout.write(`unhealthy (${role}): ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  }
}

void main();
