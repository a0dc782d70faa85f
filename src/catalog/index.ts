// The catalog: the spec's tables and limits as data, and the pure rules derived from them. The bottom layer: it
// imports nothing of ours, and every other layer (API, worker, models, media) reads its facts from here.
export * from './limits';
export * from './capabilities';
export * from './profiles';
export * from './sizes';
export * from './stages';
export * from './video';
export * from './reference-prompt';
export * from './tasks';
export * from './dialogue';
export * from './loras';
