#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx, so the installed command and the source
// tree can never disagree.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv);
