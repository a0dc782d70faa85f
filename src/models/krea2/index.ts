export * from './blocks';
export * from './config';
export * from './patchify';
export * from './rope';
export * from './sigmas';
export * from './text-fusion';
export * from './transformer';
export * from './conditioner';
