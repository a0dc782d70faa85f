// Real services for the many-hosts tests: Debian's redis-server on a free port (append-only file on, so a restart
// keeps the queue, as a production Redis would), s3rver (the S3 API on the file system), and GPU worker processes
// (node src/worker.js of this build, taking work from Redis).
import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PipelineModule } from '../../src/worker/protocol';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => c.write('PING\r\n'));
    c.once('data', (d) => (c.destroy(), resolve(d.toString().startsWith('+PONG'))));
    c.once('error', () => resolve(false));
  });
}

export interface RedisServer {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'kiln-redis-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''], { stdio: 'ignore' });
    const end = Date.now() + 10_000;
    while (!(await ping(port))) {
      if (Date.now() > end) throw new Error(`redis-server did not start on ${port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    async stop() {
      const c = child;
      if (!c || c.exitCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    },
  };
}

export interface S3Server {
  env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startS3(bucket = 'kiln'): Promise<S3Server> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const S3rver = require('s3rver') as new (o: object) => { run(): Promise<{ port: number }>; close(): Promise<void> };
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: mkdtempSync(join(tmpdir(), 'kiln-s3-')), configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  return {
    env: { STORAGE: 's3', S3_ENDPOINT: `http://127.0.0.1:${port}`, S3_BUCKET: bucket, S3_ACCESS_KEY_ID: 'S3RVER', S3_SECRET_ACCESS_KEY: 'S3RVER', S3_REGION: 'us-east-1' },
    stop: () => server.close(),
  };
}

export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** A GPU worker process of this build, as a GPU host runs it: REDIS_URL, the S3 settings, its name, its profiles. */
export function startWorker(name: string, env: Record<string, string>, o: { pipelines?: PipelineModule[]; builtins?: boolean; demoWeightsDir?: string } = {}): WorkerProcess {
  const dataDir = mkdtempSync(join(tmpdir(), `kiln-worker-${name}-`));
  const child = spawn(process.execPath, [join(__dirname, '..', '..', 'src', 'worker.js')], {
    env: {
      ...process.env, DEMO_VIDEO: 'random', ...env, WORKER_NAME: name, DATA_DIR: dataDir, LOG_LEVEL: process.env.KILN_TEST_LOG ?? 'silent',
      WEIGHTS_DIR: join(dataDir, 'no-weights'), DEMO_WEIGHTS_DIR: o.demoWeightsDir ?? join(dataDir, 'demo'), KILN_CACHE_DIR: join(dataDir, 'kiln-cache'),
      KILN_WORKER_PIPELINES: JSON.stringify(o.pipelines ?? []), KILN_WORKER_BUILTINS: o.builtins === false ? '0' : '1',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return {
    name,
    child,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill(signal);
      await exited;
    },
  };
}
