import type { Response } from 'express';

/** A server-sent events stream on an Express response: `id:` (when given), `event:`, one `data:` line of JSON, and
 * a comment line every `heartbeatS` so proxies and clients see the connection alive. */
export interface SseStream {
  send(ev: { id?: number; event: string; data: string }): void;
  end(): void;
  /** Resolves when the client goes away or end() was called. */
  readonly closed: Promise<void>;
}

export function openSse(res: Response, heartbeatS: number): SseStream {
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no'); // nginx: do not buffer the stream
  res.flushHeaders();
  res.write('retry: 3000\n\n');
  let open = true;
  let done!: () => void;
  const closed = new Promise<void>((r) => (done = r));
  const beat = setInterval(() => open && res.write(': ping\n\n'), heartbeatS * 1000);
  const close = () => {
    if (!open) return;
    open = false;
    clearInterval(beat);
    done();
  };
  res.on('close', close);
  return {
    send(ev) {
      if (!open) return;
      // JSON.stringify never leaves a newline in its output, so one data line carries it whole
      res.write(`${ev.id !== undefined ? `id: ${ev.id}\n` : ''}event: ${ev.event}\ndata: ${ev.data}\n\n`);
    },
    end() {
      if (!open) return;
      close();
      res.end();
    },
    closed,
  };
}
