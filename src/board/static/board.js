// Switchboard board: live updates. Every page works without this file; with it, regions marked
// data-live are re-read in place when the signed-in human's event stream (/events) says something
// changed. Same origin only, no inline script, nothing evaluated.
(function () {
  'use strict';
  // Copy buttons for the one-time credential page (progressive: the text is selectable anyway).
  var copies = document.querySelectorAll('pre.copy, code.secret');
  for (var j = 0; j < copies.length; j++) {
    (function (el) {
      if (!navigator.clipboard) return;
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

  var url = document.body && document.body.getAttribute('data-live-url');
  if (!url || url.charAt(0) !== '/' || url.charAt(1) === '/' || typeof EventSource === 'undefined' || !window.fetch || !window.DOMParser) return;

  var pending = null;
  var busy = false;

  function refresh() {
    pending = null;
    if (busy) {
      schedule();
      return;
    }
    busy = true;
    fetch(url, { credentials: 'same-origin', headers: { accept: 'text/html' }, redirect: 'error' })
      .then(function (res) {
        if (!res.ok) throw new Error('status ' + res.status);
        return res.text();
      })
      .then(function (text) {
        var next = new DOMParser().parseFromString(text, 'text/html');
        var regions = document.querySelectorAll('[data-live][id]');
        for (var i = 0; i < regions.length; i++) {
          var here = regions[i];
          // Never pull a field out from under someone typing in it.
          if (here.contains(document.activeElement) && document.activeElement !== document.body) continue;
          var there = next.getElementById(here.id);
          if (there && there.outerHTML !== here.outerHTML) here.replaceWith(document.importNode(there, true));
        }
        document.documentElement.setAttribute('data-live-refreshed', String(Date.now()));
      })
      .catch(function () {
        /* best effort: a reload always shows the truth */
      })
      .then(function () {
        busy = false;
      });
  }

  function schedule() {
    if (pending === null) pending = setTimeout(refresh, 200);
  }

  var source = new EventSource('/events');
  // `ready` comes once the stream is watching: re-read then, to catch what changed since this page was rendered.
  ['ready', 'todo', 'presence', 'endpoint'].forEach(function (type) {
    source.addEventListener(type, schedule);
  });
  document.documentElement.setAttribute('data-live-state', 'connecting');
  source.addEventListener('open', function () {
    document.documentElement.setAttribute('data-live-state', 'open');
  });

})();
