/** Nest injection token for the pino logger. */
export const LOGGER = Symbol('LOGGER');
