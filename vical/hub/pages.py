"""The hub's server-rendered pages: plain HTML and a little inline script, no build step.

The leaderboard and each entry's report are the pages ``vical leaderboard build``
writes (:mod:`vical.submit.leaderboard`), served live from the database; the
submission page shows a job's state and progress, and updates itself in place
(``aria-live``) by reading the status API every two seconds; without script it is
complete as loaded and says how to refresh.
"""

from __future__ import annotations

import html
from typing import Any

from vical.submit.leaderboard import PAGE_CSS, render_html, report_page

_NAV = '<nav aria-label="Hub"><a href="/">Leaderboard</a> · <a href="/docs">API</a></nav>'


def _accessible(page: str, title: str | None = None) -> str:
    """The static site's page with a language, a landmark and the hub's navigation."""
    page = page.replace("<html>", '<html lang="en">', 1)
    page = page.replace("<body>", f"<body>{_NAV}<main>", 1).replace("</body>", "</main></body>", 1)
    if title is not None:
        page = page.replace("<title>", f"<title>{html.escape(title)} – ", 1)
    return page


def leaderboard_page(entries: list[dict[str, Any]]) -> str:
    return _accessible(render_html(entries))


def entry_page(entry: dict[str, Any], viewer: str | None = None) -> str:
    """One entry's report; ``viewer`` links its trajectory viewer when there is one."""
    page = report_page(entry, viewer).replace("href='../index.html'", "href='/'")
    return _accessible(page)


STATUS_JS = """
(function(){
  var root=document.getElementById('status'), id=root.dataset.id;
  var final=['accepted','rejected','failed','withdrawn'];
  function show(s){
    document.getElementById('state').textContent=s.state;
    var p=document.getElementById('progress'), t=document.getElementById('progress-text');
    if(s.progress && s.progress.total){
      p.max=s.progress.total; p.value=s.progress.done;
      t.textContent=s.progress.done+' of '+s.progress.total+' episodes replayed';
    }
    if(s.verdict){document.getElementById('verdict').textContent=s.verdict;}
    if(s.entry_id){
      var a=document.getElementById('entry'); a.href='/reports/'+encodeURIComponent(s.entry_id)+'.html';
      a.hidden=false;
    }
    root.dataset.state=s.state;
    return final.indexOf(s.state)<0;
  }
  function poll(){
    fetch('/api/submissions/'+encodeURIComponent(id)).then(function(r){return r.json();})
      .then(function(s){ if(show(s)){ setTimeout(poll,2000); } })
      .catch(function(){ setTimeout(poll,5000); });
  }
  if(final.indexOf(root.dataset.state)<0){ setTimeout(poll,1000); }
})();
"""


def status_page(s: dict[str, Any]) -> str:
    esc = html.escape
    prog = s.get("progress") or {}
    done, total = prog.get("done"), prog.get("total")
    bar = (
        f'<progress id="progress" aria-labelledby="progress-label" max="{total}" value="{done}">'
        f"</progress>"
        if total
        else '<progress id="progress" aria-labelledby="progress-label"></progress>'
    )
    ptext = f"{done} of {total} episodes replayed" if total else "not started"
    entry = s.get("entry_id")
    link = (
        f'<a id="entry" href="/reports/{esc(entry)}.html">The leaderboard entry</a>'
        if entry
        else '<a id="entry" href="#" hidden>The leaderboard entry</a>'
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Submission {esc(s['id'])} – V-ICAL hub</title><style>{PAGE_CSS}"
        "dl{display:grid;grid-template-columns:max-content auto;gap:.3em 1em}"
        "dt{font-weight:bold}progress{width:20em}</style></head><body>"
        f"{_NAV}<main><h1>Submission {esc(s['id'])}</h1>"
        f"<section id='status' data-id='{esc(s['id'])}' data-state='{esc(s['state'])}' "
        "aria-live='polite'><dl>"
        f"<dt>Team</dt><dd>{esc(s['team'])}</dd>"
        f"<dt>Bundle sha256</dt><dd><code>{esc(s['bundle_sha256'])}</code></dd>"
        f"<dt>State</dt><dd id='state'>{esc(s['state'])}</dd>"
        f"<dt id='progress-label'>Progress</dt><dd>{bar} "
        f"<span id='progress-text'>{esc(ptext)}</span></dd>"
        f"<dt>Verdict</dt><dd id='verdict'>{esc(s.get('verdict') or 'not yet')}</dd>"
        f"</dl><p>{link}</p></section>"
        "<noscript><p>This page does not update itself without script: reload it to see "
        "the latest state.</p></noscript>"
        f"</main><script>{STATUS_JS}</script></body></html>\n"
    )
