import 'reflect-metadata';
import { createApp } from './app.factory';
import { resolveToken } from './auth/token';
import { createLogger } from './common/logger';
import { loadSettings, SettingsError } from './config/settings';

async function main(): Promise<void> {
  let settings;
  try {
    settings = loadSettings();
  } catch (err) {
    if (err instanceof SettingsError) {
      process.stderr.write(`kiln: bad setting: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(settings.logLevel);
  const { token, generated, file } = resolveToken(settings.apiToken, settings.dataDir);
  if (generated) {
    // Printed once, on the start that created it; never through the logger.
    process.stdout.write(`\nkiln: generated an API token (kept in ${file}):\n\n    ${token}\n\nSend it as "Authorization: Bearer <token>".\n\n`);
  } else if (file) {
    log.info({ file }, 'API token read from the data dir');
  }
  const app = await createApp({ settings, token, log });
  await app.listen(settings.port, settings.host);
  log.info({ url: `http://${settings.host}:${settings.port}`, dataDir: settings.dataDir, weightsDir: settings.weightsDir }, 'kiln listening');
}

void main();
