// Temporary shim while the refactor is in flight: `node scripts/check-architecture.mjs`.
import { register } from 'tsx/esm/api';
register();
const { runCli } = await import('./check-architecture.ts');
runCli(process.argv[2]);
