// Gates and logs that a test holds in its own process while the test pipelines that use them run inside the GPU
// worker process: a small HTTP server on loopback in the test process (started on first use, never keeping it
// alive), and a client for the worker side. A gate's wait is a request the server answers when the test opens the
// gate; a log event is a POST the pipeline waits for, so events arrive in the order they happen, before the job ends.
// The server listens on a Linux abstract socket: its name is known before it is bound, and it leaves no file behind.
import { randomBytes } from 'node:crypto';
import http from 'node:http';

/** What a pipeline in the worker is given (plain data: it travels in the worker's environment). */
export interface ControlRef {
  socket: string;
  id: number;
}

interface GateState {
  all: boolean;
  held: Set<http.ServerResponse>;
}

let server: { socket: string; gates: Map<number, GateState>; logs: Map<number, string[]> } | undefined;
let nextId = 1;

function control() {
  if (server) return server;
  const gates = new Map<number, GateState>();
  const logs = new Map<number, string[]>();
  const srv = http.createServer((req, res) => {
    const [, kind, id, action] = (req.url ?? '').split('/');
    if (kind === 'gate' && action === 'wait') {
      const g = gates.get(Number(id));
      if (!g || g.all) return void res.end('open');
      g.held.add(res);
      req.on('close', () => g.held.delete(res)); // the worker went away (killed) or gave up (its task was cancelled)
      return;
    }
    if (kind === 'log' && req.method === 'POST') {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        logs.get(Number(id))?.push(body);
        res.end('ok');
      });
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  const socket = `\0kiln-test-control-${process.pid}-${randomBytes(4).toString('hex')}`;
  srv.listen(socket);
  srv.unref();
  server = { socket, gates, logs };
  return server;
}

export interface Gate {
  readonly ref: ControlRef;
  /** Lets every step that waits now go on. */
  open(): void;
  /** Opens the gate for good (until close()). */
  openAll(): void;
  /** Steps wait again. */
  close(): void;
  /** Steps waiting now. */
  readonly waiting: number;
}

/** A gate test pipelines wait at before each step: closed until open() / openAll(). */
export function makeGate(open = false): Gate {
  const c = control();
  const id = nextId++;
  const g: GateState = { all: open, held: new Set() };
  c.gates.set(id, g);
  const release = () => {
    const held = [...g.held];
    g.held.clear();
    for (const res of held) res.end('open');
  };
  return {
    ref: { socket: c.socket, id },
    open: release,
    openAll() {
      g.all = true;
      release();
    },
    close() {
      g.all = false;
    },
    get waiting() {
      return g.held.size;
    },
  };
}

export interface EventLog {
  readonly ref: ControlRef;
  /** Events in the order the pipelines reported them (load <profile>, run <id>, unload <profile>). */
  readonly events: string[];
}

export function makeLog(): EventLog {
  const c = control();
  const id = nextId++;
  const events: string[] = [];
  c.logs.set(id, events);
  return { ref: { socket: c.socket, id }, events };
}

// ---- the worker side ----

/** Waits at the gate; resolves early when `signal` fires (a cancelled task must not hang on a closed gate). */
export function waitAtGate(ref: ControlRef, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const req = http.get({ socketPath: ref.socket, path: `/gate/${ref.id}/wait`, agent: false }, (res) => {
      res.resume();
      res.on('end', done);
    });
    const onAbort = () => (req.destroy(), done());
    function done() {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }
    req.on('error', done);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Appends an event to the test's log (resolves once the test process has it). */
export function logEvent(ref: ControlRef, event: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: ref.socket, path: `/log/${ref.id}`, method: 'POST', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve());
    });
    req.on('error', reject);
    req.end(event);
  });
}
