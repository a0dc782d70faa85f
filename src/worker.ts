// The GPU worker process: node dist/worker.js (npm run worker). The API starts it itself (WORKERS=local).
import { runWorker } from './worker/main';

void runWorker();
