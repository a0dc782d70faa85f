// The Qwen3-TTS 12 Hz speech tokenizer (speech_tokenizer/): decoder (codes -> 24 kHz) and Mimi encoder (24 kHz -> codes).
export { CodecDecoder, type CodecDecodeOptions, type CodecDecoderTrace } from './decoder';
export { CodecEncoder, type CodecEncoderTrace } from './encoder';
