import { CanActivate, ExecutionContext, HttpException, HttpStatus, Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { guardedPath, presentedToken, tokenMatches } from './token';

export const API_TOKEN = Symbol('API_TOKEN');

/** Every /api/* and /v1/* route needs the token; /out, /docs, /openapi.json and / do not. CORS preflights never reach
 * guards (the CORS middleware answers them). Registered once, globally, in the app module. */
@Injectable()
export class TokenGuard implements CanActivate {
  constructor(@Inject(API_TOKEN) private readonly token: string) {}

  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<Request>();
    if (!guardedPath(req.path)) return true;
    const given = presentedToken(req.headers, req.query as Record<string, unknown>);
    if (given === undefined || !tokenMatches(given, this.token)) throw new HttpException({ detail: 'bad token' }, HttpStatus.UNAUTHORIZED);
    return true;
  }
}
