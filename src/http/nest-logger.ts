import type { LoggerService } from '@nestjs/common';
import type { Logger } from 'pino';

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
