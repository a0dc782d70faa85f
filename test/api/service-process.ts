// The service as its own process (test/api/fixtures/slow-server.ts), for the tests that kill it with SIGKILL: its
// URL, its JSON log lines as they come, and its exit.
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { PipelineModule } from '../../src/worker/protocol';
import { TOKEN } from './harness';

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  /** Log lines parsed so far (LOG_LEVEL info unless told); `onLog` sees each as it comes. */
  logs: Record<string, any>[];
  onLog(fn: (line: Record<string, any>) => void): void;
  exited: Promise<NodeJS.Signals | number | null>;
  /** SIGKILL, and the exit. */
  kill(): Promise<NodeJS.Signals | number | null>;
}

export async function startServiceProcess(dataDir: string, o: { pipelines?: PipelineModule[]; env?: Record<string, string> } = {}): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [join(__dirname, 'fixtures', 'slow-server.js')], {
    env: {
      ...process.env, DATA_DIR: dataDir, API_TOKEN: TOKEN, LOG_LEVEL: 'info',
      ...(o.pipelines ? { KILN_TEST_PIPELINES: JSON.stringify(o.pipelines) } : {}), ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<NodeJS.Signals | number | null>((r) => child.on('exit', (code, sig) => r(sig ?? code)));
  const logs: Record<string, any>[] = [];
  const listeners: ((line: Record<string, any>) => void)[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`slow-server did not start: ${stderr}`)), 60_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('KILN_URL ')) return (clearTimeout(timer), resolve(line.slice(9)));
      if (!line.startsWith('{')) return;
      const parsed = JSON.parse(line) as Record<string, any>;
      logs.push(parsed);
      for (const fn of listeners) fn(parsed);
    });
    void exited.then((how) => reject(new Error(`slow-server exited (${how}): ${stderr}`)));
  });
  return {
    child, url, logs, exited,
    onLog: (fn) => listeners.push(fn),
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    },
  };
}
