/** The board's own policy: its pages load only same-origin CSS and JS, and no inline script or style. */
export const BOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
