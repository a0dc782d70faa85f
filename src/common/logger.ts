import pino, { Logger } from 'pino';

/** Structured JSON logs. Query strings are never logged whole: `token=` values are redacted before a URL is logged. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'kiln' },
    redact: { paths: ['req.headers.authorization', 'req.headers["x-token"]', 'headers.authorization', 'headers["x-token"]', 'token'], censor: '[redacted]' },
  });
}

export function redactUrl(url: string): string {
  return url.replace(/([?&]token=)[^&#]*/gi, '$1[redacted]');
}
