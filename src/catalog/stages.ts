// The stages a running job reports, in order of progression.

/** Stages in order of progression: the spec's exact strings. */
export const STAGE = {
  loadModel: '加载模型',
  loadTextEncoder: '加载文本编码器',
  encode: '编码提示词/图片',
  sample: '采样',
  videoDecode: '视频解码',
  audioDecode: '音频解码',
  package: '封装',
  save: '保存',
} as const;
export type Stage = (typeof STAGE)[keyof typeof STAGE];

/** What each stage is doing, in English, for messages (e.g. "... crashed while sampling"). */
export const STAGE_WORDS: Record<Stage, string> = {
  [STAGE.loadModel]: 'loading the model',
  [STAGE.loadTextEncoder]: 'loading the text encoder',
  [STAGE.encode]: 'encoding the prompt',
  [STAGE.sample]: 'sampling',
  [STAGE.videoDecode]: 'decoding the video',
  [STAGE.audioDecode]: 'decoding the audio',
  [STAGE.package]: 'packaging the file',
  [STAGE.save]: 'saving the file',
};
