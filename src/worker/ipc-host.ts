// The worker of one API (WORKERS=local, QUEUE=local): tasks and events over the IPC channel of the API process that
// started it. A heartbeat every second from the event loop; the served profiles whenever they change.
import { PROTOCOL_VERSION, type FromWorker, type ToWorker } from './protocol';
import type { WorkerFacts, WorkerHost } from './host';
import type { Runner } from './runner';

const HEARTBEAT_MS = 1000;
/** How often the served profiles are checked for a change (a finished pull, a generated demo checkpoint). */
const PROFILES_MS = 2000;

export class IpcHost implements WorkerHost {
  constructor(
    private readonly send: (m: FromWorker, done?: () => void) => void,
    private readonly onShutdown: (runner: Runner) => Promise<void>,
  ) {}

  report(event: FromWorker): void {
    if (process.connected) this.send(event);
  }

  async start(runner: Runner, facts: WorkerFacts): Promise<void> {
    process.on('message', (m: ToWorker) => {
      if (m.type === 'run') runner.enqueue(m.task);
      else if (m.type === 'cancel') runner.cancel(m.id, m.reason);
      else if (m.type === 'shutdown') void this.onShutdown(runner);
    });
    let served = JSON.stringify(facts.profiles());
    this.report({ type: 'hello', version: PROTOCOL_VERSION, pid: facts.pid, name: facts.name, profiles: JSON.parse(served), gpu: facts.gpu });
    setInterval(() => this.report({ type: 'heartbeat', ...facts.now() }), HEARTBEAT_MS);
    setInterval(() => {
      const now = JSON.stringify(facts.profiles());
      if (now !== served) this.report({ type: 'profiles', profiles: JSON.parse((served = now)) });
    }, PROFILES_MS);
  }

  fatal(message: string): Promise<void> {
    if (!process.connected) return Promise.resolve();
    return new Promise((resolve) => {
      this.send({ type: 'fatal', message }, () => resolve());
      setTimeout(resolve, 1000).unref();
    });
  }
}
