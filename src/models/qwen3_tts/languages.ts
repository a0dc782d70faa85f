// The service's speech languages (shared spec service-api.md: tts_language / language) mapped onto the checkpoint's
// codec language ids. Upstream (Qwen3TTSForConditionalGeneration.generate) lower-cases the name; "auto" means no
// language id at all (the codec prefix then starts with codec_nothink instead of codec_think ... language ...), and
// there is no language detection anywhere upstream: with Auto the model itself decides. We do the same.
import { TTS_LANGUAGES } from '../../catalog';
import type { Qwen3TtsConfig } from './config';

export type TtsLanguage = (typeof TTS_LANGUAGES)[number];

/** A language the service offers but the checkpoint has no id for, or a name the service does not offer. */
export class TtsLanguageError extends Error {
  override readonly name = 'TtsLanguageError';
}

/**
 * The codec language id for a service language name (case-insensitive, as upstream), or null for Auto.
 * Throws for a name outside the service's list, and for one the checkpoint's codec_language_id lacks.
 */
export function codecLanguageId(config: Pick<Qwen3TtsConfig, 'talker'>, language: string): number | null {
  const name = TTS_LANGUAGES.find((l) => l.toLowerCase() === language.trim().toLowerCase());
  if (!name) throw new TtsLanguageError(`language ${JSON.stringify(language)} is not one of ${TTS_LANGUAGES.join(', ')}`);
  if (name === 'Auto') return null;
  const id = config.talker.languageIds[name.toLowerCase()];
  if (id === undefined) throw new TtsLanguageError(`the checkpoint has no codec language id for ${name}`);
  return id;
}

/** Every service language except Auto must have an id in the checkpoint; returns the ones that do not. */
export function missingLanguages(config: Pick<Qwen3TtsConfig, 'talker'>): TtsLanguage[] {
  return TTS_LANGUAGES.filter((l) => l !== 'Auto' && config.talker.languageIds[l.toLowerCase()] === undefined);
}
