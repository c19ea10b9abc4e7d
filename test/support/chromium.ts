import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

// Debian's Chromium, headless, for the board's browser tests (playwright-core drives it; nothing is
// downloaded). The flags keep it off the network: this machine's closed network refuses Chromium's
// background connections.

export const CHROMIUM = process.env.SWITCHBOARD_CHROMIUM ?? '/usr/bin/chromium';
/** Where every browser test saves its screenshots. */
export const SHOTS = fileURLToPath(new URL('../../test-results/board/', import.meta.url));

export interface BoardBrowser {
  context: BrowserContext;
  page: Page;
  /** Content-Security-Policy violations the page reported on its console. */
  cspViolations: string[];
  /** Saves the page, full length, as test-results/board/<name>.png. */
  shot(name: string): Promise<Buffer>;
  close(): Promise<void>;
}

/** Launches Chromium with a throwaway profile; throws, saying how to install it, when it is missing. */
export async function launchBoardBrowser(): Promise<BoardBrowser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM}: the board's browser tests need it. Install it with ` +
        '`apt-get install -y --no-install-recommends chromium` (.ci/run does), or point SWITCHBOARD_CHROMIUM at a Chromium binary.',
    );
  }
  mkdirSync(SHOTS, { recursive: true });
  const userDataDir = mkdtempSync(join(tmpdir(), 'sb-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1200, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? (await context.newPage());
  const cspViolations: string[] = [];
  page.on('console', (m) => {
    if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text());
  });
  return {
    context,
    page,
    cspViolations,
    shot: (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true }),
    close: async () => {
      await context.close().catch(() => {});
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
