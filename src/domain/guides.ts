/** The guide the server serves as a page (docs/connect.md); self-test hints name it by this path. */
export const CONNECT_GUIDE_PATH = '/docs/connect';

/** A guide named by path in a hint, with an optional #section: each surface makes it a link of its server. */
export const GUIDE_LINK = /\/docs\/[a-z-]+(?:#[a-z0-9-]+)?/g;
