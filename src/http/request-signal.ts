import type { Response } from 'express';

/** Fires when the client goes away before the response is sent (a waiting client that hangs up frees its waiter). */
export function clientGone(res: Response): AbortSignal {
  const ac = new AbortController();
  res.on('close', () => {
    if (!res.writableEnded) ac.abort('client closed the connection');
  });
  return ac.signal;
}
