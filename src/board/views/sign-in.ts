import { html, path } from '../html.ts';
import { page } from './layout.ts';

// ---------------------------------------------------------------------------------------------
// Sign-in

/** The sign-in page: the provider's button when OIDC is configured, and the one-time link either way. */
export function loginHelpPage(provider?: { host: string }): string {
  return page(
    { title: 'Sign in' },
    html`<section class="message">
<h1>Sign in</h1>
${
  provider
    ? html`<p><a class="button primary" id="oidc-login" href="/auth/login" hx-boost="false">Sign in with ${provider.host}</a></p>
<p class="muted">Or, on the server host, mint a one-time link:</p>`
    : html`<p>The board signs you in with a one-time link minted on the server host. There, run:</p>`
}
<pre><code>switchboard admin login-link YOUR_HANDLE</code></pre>
<p>It prints a link that works once, within 15 minutes. Open it in this browser and confirm.</p>
<p class="muted">No handle yet? <code>switchboard admin human add YOUR_HANDLE</code> creates one.</p>
</section>`,
  );
}

/** A provider sign-in that did not finish: what went wrong and the way back. */
export function oidcFailedPage(message: string, configured: boolean): string {
  return page(
    { title: 'Sign-in failed' },
    html`<section class="message">
<h1>Not signed in</h1>
<p role="alert">${message}</p>
<p>${configured ? html`<a href="/auth/login">Start again</a> · ` : ''}<a href="/login">Other ways to sign in</a></p>
</section>`,
  );
}

export function loginConfirmPage(token: string): string {
  return page(
    { title: 'Sign in' },
    html`<section class="message">
<h1>Sign in to Switchboard</h1>
<p>This one-time link signs this browser in for 12 hours. It cannot be used again.</p>
<form method="post" action="${path('/login', token)}"><button type="submit" class="primary" id="confirm-login">Sign in</button></form>
</section>`,
  );
}

export function loginDeadPage(): string {
  return page(
    { title: 'Sign-in link not valid' },
    html`<section class="message">
<h1>This sign-in link is not valid</h1>
<p>It expired (links last 15 minutes), was already used, or never existed. Ask for a new one: <code>switchboard admin login-link YOUR_HANDLE</code> on the server host.</p>
<p><a href="/login">How to sign in</a></p>
</section>`,
  );
}
