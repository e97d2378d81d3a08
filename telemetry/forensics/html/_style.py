"""The page's one stylesheet: light and dark (``prefers-color-scheme``), a phone's width, print.

Inline, like everything on the page. Colours come from custom properties so the dark palette and
the print palette (always light, on paper) change them in one place. Long values (hashes, ids)
wrap anywhere instead of widening the page; pictures scale down whole (``max-width: 100%``).
The SVG labels' font is a monospace one whose advance :mod:`._layout` estimates.
"""

__all__ = ["CSS"]

CSS = """
:root{color-scheme:light dark;--fg:#1b1f23;--muted:#57606a;--bg:#fff;--card:#f6f8fa;--line:#d0d7de;
--crit:#b3261e;--warn:#8a5300;--rec:#3d5f8f;--ok:#1a6b2e;--note:#fff5d6;--note-line:#b36b00;--link:#0550ae;
--task:#eef3fb;--task-line:#4a6fa5;--lost:#fdecea;--lane:#c8ced6}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9ba4ae;--bg:#0d1117;--card:#161b22;--line:#30363d;
--crit:#ff8078;--warn:#e3b341;--rec:#8cb4ea;--ok:#5bd46b;--note:#2e2812;--note-line:#e3b341;--link:#79c0ff;
--task:#16233a;--task-line:#6f97cf;--lost:#3d1a1a;--lane:#3b434d}}
@media print{:root{--fg:#000;--muted:#333;--bg:#fff;--card:#fff;--line:#999;--crit:#a00;--warn:#7a4a00;
--rec:#234;--ok:#060;--note:#fff;--note-line:#7a4a00;--link:#000;--task:#fff;--task-line:#333;--lost:#fff;--lane:#bbb}
nav{display:none}body{max-width:none;padding:0;font-size:11pt}a{text-decoration:none}
.card,section.chain,section.key,.tile{break-inside:avoid}h2,h3{break-after:avoid}}
*{box-sizing:border-box}
html{background:var(--bg)}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;
padding:1em 1.5em 3em;color:var(--fg);background:var(--bg);overflow-wrap:anywhere}
a{color:var(--link)}
h1{font-size:1.45em;margin:.2em 0 .1em}
h2{font-size:1.2em;border-bottom:2px solid var(--line);padding-bottom:.2em;margin:1.8em 0 .6em}
h3{font-size:1.05em;margin:1.2em 0 .3em}
code{font:13px "DejaVu Sans Mono","Liberation Mono",Menlo,Consolas,monospace;white-space:pre-wrap;overflow-wrap:anywhere}
.sub{color:var(--muted);margin:0}
.headline{font-size:1.15em;font-weight:650;margin:.6em 0 .2em}
.tiles{display:flex;flex-wrap:wrap;gap:.6em;margin:.5em 0}
.tile{flex:1 1 6em;border:1px solid var(--line);border-left:6px solid var(--line);border-radius:6px;
padding:.35em .8em;background:var(--card)}
.tile b{display:block;font-size:1.7em;line-height:1.15}
.tile.happened{border-left-color:var(--crit)}.tile.prevented{border-left-color:var(--ok)}
.tile.unknown{border-left-color:var(--warn)}
nav{margin:.8em 0;color:var(--muted)}nav a{margin-right:.2em}
ol.first{padding-left:1.4em}ol.first li{margin:.35em 0}
.verdict,.sev{display:inline-block;padding:0 .4em;border-radius:3px;font-size:.75em;font-weight:700;
text-transform:uppercase;letter-spacing:.03em;margin-right:.4em;border:1px solid;vertical-align:.1em}
.verdict.happened{color:var(--crit)}.verdict.prevented{color:var(--ok)}.verdict.unknown{color:var(--warn)}
.sev{color:var(--bg)}.sev.critical{background:var(--crit);border-color:var(--crit)}
.sev.warning{background:var(--warn);border-color:var(--warn)}.sev.record{background:var(--rec);border-color:var(--rec)}
.facts-line{font-size:1.05em}
ul.caveats{padding:0;margin:.4em 0}
ul.caveats li{list-style:none;background:var(--note);border-left:4px solid var(--note-line);padding:.3em .6em;margin:.3em 0}
.clean{color:var(--ok)}
details{margin:.4em 0}summary{cursor:pointer;color:var(--link)}
dl.raw{display:grid;grid-template-columns:minmax(6em,max-content) minmax(0,1fr);gap:.05em .8em;margin:.2em 0;font-size:.92em}
dl.raw dt{color:var(--muted)}dl.raw dd,dl.facts dd,dl.row dd{margin:0;min-width:0}
dl.raw ul{margin:.1em 0;padding-left:1.2em}
table.formats{border-collapse:collapse;font-size:.88em;margin:.3em 0}
table.formats th,table.formats td{border:1px solid var(--line);padding:.1em .45em;text-align:left;vertical-align:top}
.question{margin:1em 0 1.6em}
.question > h3 code{font-size:.85em;color:var(--muted);font-weight:normal}
.desc{color:var(--muted);margin:.1em 0 .4em}
.card{border:1px solid var(--line);border-left:6px solid var(--line);border-radius:6px;padding:.55em .9em;
margin:.7em 0;background:var(--card)}
.card.happened{border-left-color:var(--crit)}.card.prevented{border-left-color:var(--ok)}
.card.unknown{border-left-color:var(--warn)}
.card h5{margin:0 0 .3em;font-size:1.02em;line-height:1.6}
.card .subject{font-family:"DejaVu Sans Mono","Liberation Mono",Menlo,Consolas,monospace;font-weight:normal;font-size:.92em}
.what{margin:.2em 0 .4em}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.05em .9em;margin:.3em 0;font-size:.93em}
dl.facts dt{font-weight:600;color:var(--muted)}
.next{margin:.4em 0;padding:.25em .6em;border-left:4px solid var(--note-line);background:var(--note)}
.cmd{margin:.3em 0;font-size:.93em}
dl.row{display:grid;grid-template-columns:minmax(7em,max-content) minmax(0,1fr);gap:0 .9em;font-size:.88em}
dl.row dt{color:var(--muted)}.none{color:var(--muted);font-style:italic}
ul.losses li{color:var(--crit);font-weight:600}
.notes{color:var(--muted)}
svg.pic{display:block;max-width:100%;height:auto;margin:.4em 0}
svg text{font-family:"DejaVu Sans Mono","Liberation Mono",Menlo,Consolas,monospace;fill:var(--fg)}
svg .name{font-weight:700}svg .hop,svg .agent{fill:var(--muted);font-weight:700}
svg .small{fill:var(--muted)}svg .waived{fill:var(--rec)}svg .lostlabel{fill:var(--crit);font-weight:700}
svg .divlabel{fill:var(--warn);font-weight:700}svg .refusal{fill:var(--muted);font-style:italic}
svg rect.task{fill:var(--task);stroke:var(--task-line)}svg rect.task.lost{fill:var(--lost);stroke:var(--crit);stroke-width:2}
svg .edge{stroke:var(--muted);stroke-width:1.5}svg .edge.cut{stroke-dasharray:3 3}
svg .lane{stroke:var(--lane)}svg .guide{stroke:var(--lane);stroke-dasharray:2 3}
svg .read{fill:var(--rec)}svg .write{fill:var(--ok)}svg .write.refused{fill:var(--muted)}
svg .write.lostupdate{fill:var(--crit)}svg .write.divergent{fill:var(--warn)}
svg .bars-good,svg.bars .good{fill:var(--ok)}svg.bars .bad{fill:var(--crit)}svg.bars .skip{fill:var(--lane)}
svg.bars .inbar{fill:var(--bg)}
@media (min-width:900px){dl.facts{grid-template-columns:max-content minmax(0,1fr) max-content minmax(0,1fr)}}
@media (max-width:640px){body{padding:.6em .75em 2em}dl.facts,dl.row,dl.raw{grid-template-columns:minmax(0,1fr)}
dl.facts dt,dl.row dt,dl.raw dt{margin-top:.25em}h1{font-size:1.3em}}
"""
