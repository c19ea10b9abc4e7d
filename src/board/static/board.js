// Switchboard board: the little glue htmx does not do. Every page works without this file (and
// without htmx); with them, links and forms swap pages in place, and the regions marked data-live
// are re-read when the signed-in human's event stream (/events) says something changed: this
// file turns stream events into one `sb-changed` event on <body>, which the page's hidden
// #live-updates element (hx-trigger="sb-changed from:body") answers with one GET.
// Same origin only, no inline script, nothing evaluated.
(function () {
  'use strict';

  // Copy buttons for the one-time credential page (progressive: the text is selectable anyway).
  function addCopyButtons(root) {
    if (!navigator.clipboard || !root.querySelectorAll) return;
    var copies = root.querySelectorAll('pre.copy, code.secret');
    for (var j = 0; j < copies.length; j++) {
      (function (el) {
        var b = document.createElement('button');
        b.type = 'button';
        b.className = 'copy-button';
        b.textContent = 'Copy';
        b.addEventListener('click', function () {
          navigator.clipboard.writeText(el.textContent || '').then(function () {
            b.textContent = 'Copied';
          });
        });
        el.insertAdjacentElement('afterend', b);
      })(copies[j]);
    }
  }

  if (!window.htmx) {
    addCopyButtons(document);
    return;
  }
  // Runs for the first page and for every piece of content htmx swaps in.
  window.htmx.onLoad(addCopyButtons);

  // Never pull a field out from under someone typing in it.
  document.body.addEventListener('htmx:oobBeforeSwap', function (evt) {
    var target = evt.detail && evt.detail.target;
    var active = document.activeElement;
    if (target && active && active !== document.body && target.contains(active)) evt.detail.shouldSwap = false;
  });
  document.body.addEventListener('htmx:afterRequest', function (evt) {
    if (evt.detail && evt.detail.elt && evt.detail.elt.id === 'live-updates') {
      document.documentElement.setAttribute('data-live-refreshed', String(Date.now()));
    }
  });

  if (typeof EventSource === 'undefined') return;
  var pending = null;
  function changed() {
    if (pending !== null) return;
    // Several events in a burst make one re-read.
    pending = setTimeout(function () {
      pending = null;
      window.htmx.trigger(document.body, 'sb-changed');
    }, 200);
  }

  var source = new EventSource('/events');
  // `ready` comes once the stream is watching: re-read then, to catch what changed since this page was rendered.
  // It comes again after the server dropped frames this tab did not take in time; a stream the server
  // closes is reopened by EventSource and starts with a `ready` (after sign-out it gets 401 and stops).
  ['ready', 'todo', 'presence', 'endpoint'].forEach(function (type) {
    source.addEventListener(type, changed);
  });
  document.documentElement.setAttribute('data-live-state', 'connecting');
  source.addEventListener('open', function () {
    document.documentElement.setAttribute('data-live-state', 'open');
  });
})();
