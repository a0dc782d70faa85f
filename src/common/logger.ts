import pino, { Logger } from 'pino';
import type { LoggerService } from '@nestjs/common';

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

/** Routes Nest's own messages into pino. */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly pino: Logger) {}
  private write(level: 'info' | 'warn' | 'debug' | 'trace', message: unknown, context?: unknown): void {
    this.pino[level]({ context }, String(message));
  }
  log(message: unknown, context?: unknown): void {
    this.write('info', message, context);
  }
  error(message: unknown, trace?: unknown, context?: unknown): void {
    this.pino.error({ context, trace }, String(message));
  }
  warn(message: unknown, context?: unknown): void {
    this.write('warn', message, context);
  }
  debug(message: unknown, context?: unknown): void {
    this.write('debug', message, context);
  }
  verbose(message: unknown, context?: unknown): void {
    this.write('trace', message, context);
  }
}
