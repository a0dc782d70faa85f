// Public surface of src/media: everything between user files and tensors. No Nest, no engine imports.
//   in:  probeImage / loadImage (png, jpeg, webp, gif -> [3, H, W] in [-1, 1]); probeAudio / decodeAudio (-> float PCM)
//   out: openVideoWriter (mp4), writePng (+ readPngText / readPngParameters), writeWav
// Bad user data throws BadInputError (HTTP 400) naming the input; an AbortSignal gives CancelledError.
export * from './types';
export { floatToRgb8, rgb8ToTensor, tensorToRgb8, type FloatRange, type PixelLayout, type RgbImage } from './pixels';
export * from './image-input';
export * from './audio-input';
export { openVideoWriter, VIDEO_AUDIO_RATE, DEFAULT_CRF, DEFAULT_PRESET, type VideoWriter, type VideoWriterOptions, type VideoResult } from './video-writer';
export { writePng, encodePng, readPngText, readPngParameters, type PngParameters, type WritePngOptions } from './png';
export { writeWav, encodeWav, SPEECH_SAMPLE_RATE } from './wav';
export { removeStaleTemps, isTempName } from './files';
export { FFMPEG_PATH } from './ffmpeg';
