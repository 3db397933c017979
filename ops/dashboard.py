#!/usr/bin/env python3
"""The Grafana dashboard's queries against a live Prometheus: checked, or drawn as an SVG.

Owns: reading the panels and their PromQL out of ops/grafana/bps-broker.json, putting in
what Grafana would for the dashboard's variables ($instance, $__rate_interval, $__range),
asking Prometheus's HTTP API (/api/v1/query, /api/v1/query_range) and either
  check   printing a table query -> number of series, failing when any query returns none
          or an error (every panel must show something for a broker under load), or
  render  drawing one small chart per panel, laid out as the dashboard's grid, as SVG
          (Grafana itself is not in Debian; this is what ops/test can draw without it).
Python's standard library only, so it runs wherever ops/test does.
"""

import argparse
import html
import json
import math
import sys
import urllib.error
import urllib.parse
import urllib.request

# Seconds one HTTP request to Prometheus may take; a loopback query answers in milliseconds.
HTTP_TIMEOUT_S = 30
# Dashboard grid: Grafana's 24 columns and its row unit, in SVG pixels.
GRID_COLUMN_PX = 60
GRID_ROW_PX = 34
# Series drawn per panel and legend entries shown; more would be unreadable at this size.
SERIES_DRAWN_MAX = 12
LEGEND_ENTRIES_MAX = 4
# Colours of the series, in order (Grafana's classic palette).
PALETTE = ["#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1",
           "#ba43a9", "#705da0", "#508642", "#cca300", "#447ebc", "#c15c17"]


def load_panels(path):
    """The dashboard's panels in order, rows included, each with its targets' exprs."""
    with open(path, encoding="utf-8") as handle:
        dashboard = json.load(handle)
    panels = []
    for panel in dashboard.get("panels", []):
        panels.append(panel)
        # A collapsed row carries its panels inside it.
        panels.extend(panel.get("panels", []))
    return panels


def substitute(expr, variables):
    """The expr as Grafana sends it: every $name (longest first) replaced by its value."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("$" + name, variables[name])
    if "$" in expr:
        raise ValueError(f"unresolved variable in {expr!r}")
    return expr


def api(base, path, params):
    """One GET of Prometheus's HTTP API; its `data`, or an exception naming the error."""
    url = f"{base.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            body = json.load(response)
    except urllib.error.HTTPError as error:
        body = json.load(error)
    if body.get("status") != "success":
        raise RuntimeError(f"{body.get('errorType')}: {body.get('error')}")
    return body["data"]


def series_values(data):
    """The values of a query answer: one per series of a vector, the value of a scalar."""
    if data["resultType"] == "vector":
        return [float(series["value"][1]) for series in data["result"]]
    if data["resultType"] == "scalar":
        return [float(data["result"][1])]
    raise ValueError(f"unexpected result type {data['resultType']}")


def variables_of(args):
    return {
        "instance": args.instance,
        "__rate_interval": args.rate_interval,
        "__range": args.range,
    }


def check(args):
    variables = variables_of(args)
    rows = []
    for panel in load_panels(args.dashboard):
        for target in panel.get("targets", []):
            params = {"query": substitute(target["expr"], variables)}
            if args.time:
                params["time"] = args.time
            try:
                values = series_values(api(args.prometheus, "/api/v1/query", params))
                finite = [value for value in values if math.isfinite(value)]
                note = "" if values else "NO DATA"
                top = format_value(max(finite), "short") if finite else "NaN"
            except (RuntimeError, urllib.error.URLError, ValueError) as error:
                values, note, top = [], f"ERROR {error}", ""
            rows.append((f"{panel['title']} [{target.get('refId', '?')}]", len(values), top,
                         note, target["expr"]))
    failures = sum(1 for row in rows if row[1] == 0)
    width = max(len(row[0]) for row in rows)
    print(f"{'panel [query]':<{width}}  series  max     expr")
    for label, count, top, note, expr in rows:
        print(f"{label:<{width}}  {count:>6}  {top:<6}  {note + ' ' if note else ''}{expr}")
    print(f"{len(rows) - failures} queries returned data, {failures} returned none")
    return 1 if failures else 0


def format_value(value, unit):
    """A short label for an axis or a stat, in the panel's unit."""
    if value is None or math.isnan(value):
        return "n/a"
    if unit == "percentunit":
        return f"{value * 100:.3g}%"
    suffix = {"ops": "/s", "Bps": "B/s", "bytes": "B", "µs": "µs", "ms": "ms"}.get(unit, "")
    magnitude = abs(value)
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= scale:
            if unit == "µs" and scale >= 1e3:
                return f"{value / 1e6:.3g}s" if scale >= 1e6 else f"{value / 1e3:.3g}ms"
            return f"{value / scale:.3g}{prefix}{suffix}"
    return f"{value:.3g}{suffix}"


def legend(template, labels):
    """Grafana's legendFormat with {{label}} filled in; the instance is left out, since a
    picture shows one broker."""
    text = (template or json.dumps(labels)).replace("{{instance}}", "")
    for name, value in labels.items():
        text = text.replace("{{" + name + "}}", value)
    return text.strip()


def fetch_range(args, panel, variables):
    """[(legend, [(t, v), ...]), ...] for every target of the panel, at most SERIES_DRAWN_MAX."""
    lines = []
    for target in panel.get("targets", []):
        expr = substitute(target["expr"], variables)
        data = api(args.prometheus, "/api/v1/query_range",
                   {"query": expr, "start": args.start, "end": args.end, "step": args.step})
        for series in data["result"]:
            points = [(float(t), float(v)) for t, v in series["values"]]
            lines.append((legend(target.get("legendFormat", ""), series["metric"]), points))
    return lines[:SERIES_DRAWN_MAX]


def draw_panel(out, panel, lines, box, start, end):
    """One panel's frame, title and content into `out` (a list of SVG fragments)."""
    x, y, w, h = box
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    out.append(f'<rect x="{x + 2}" y="{y + 2}" width="{w - 4}" height="{h - 4}" rx="3" '
               f'fill="#181b1f" stroke="#2c3235"/>')
    out.append(f'<text x="{x + 10}" y="{y + 18}" class="title">{html.escape(panel["title"])}</text>')
    if panel["type"] == "stat":
        last = [points[-1][1] for _, points in lines if points]
        value = last[0] if len(last) == 1 else (sum(last) if last else None)
        good = value is not None and not (panel["title"] in ("Ready", "Scrape up") and value < 1)
        colour = "#73bf69" if good else "#f2495c"
        out.append(f'<text x="{x + w / 2}" y="{y + h / 2 + 16}" class="stat" fill="{colour}">'
                   f'{html.escape(format_value(value, unit))}</text>')
        return
    legend_h = 14 * min(LEGEND_ENTRIES_MAX, len(lines))
    left, right, top, bottom = x + 52, x + w - 10, y + 28, y + h - 18 - legend_h
    values = [v for _, points in lines for _, v in points if not math.isnan(v) and not math.isinf(v)]
    if not values:
        out.append(f'<text x="{x + w / 2}" y="{y + h / 2}" class="nodata">No data</text>')
        return
    low = min(0.0, min(values))
    high = max(values)
    if high <= low:
        high = low + 1
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>')
    for fraction in (0.0, 0.5, 1.0):
        gy = bottom - fraction * (bottom - top)
        out.append(f'<line x1="{left}" y1="{gy:.1f}" x2="{right}" y2="{gy:.1f}" class="grid"/>')
        label = html.escape(format_value(low + fraction * (high - low), unit))
        out.append(f'<text x="{left - 4}" y="{gy + 3:.1f}" class="tick" text-anchor="end">{label}</text>')
    span = max(end - start, 1e-9)
    out.append(f'<text x="{left}" y="{bottom + 11}" class="tick">-{end - start:.0f}s</text>')
    out.append(f'<text x="{right}" y="{bottom + 11}" class="tick" text-anchor="end">now</text>')
    for index, (name, points) in enumerate(lines):
        colour = PALETTE[index % len(PALETTE)]
        path = []
        for t, v in points:
            if math.isnan(v) or math.isinf(v):
                continue
            px = left + (t - start) / span * (right - left)
            py = bottom - (v - low) / (high - low) * (bottom - top)
            path.append(f"{px:.1f},{py:.1f}")
        if len(path) == 1:
            cx, cy = path[0].split(",")
            out.append(f'<circle cx="{cx}" cy="{cy}" r="1.5" fill="{colour}"/>')
        elif path:
            out.append(f'<polyline points="{" ".join(path)}" fill="none" stroke="{colour}" '
                       f'stroke-width="1.3"/>')
        if index < LEGEND_ENTRIES_MAX:
            ly = bottom + 24 + 14 * index
            text = name if len(name) <= 60 else name[:57] + "..."
            out.append(f'<rect x="{left}" y="{ly - 7}" width="10" height="3" fill="{colour}"/>')
            out.append(f'<text x="{left + 14}" y="{ly}" class="legend">{html.escape(text)}</text>')
    if len(lines) > LEGEND_ENTRIES_MAX:
        out.append(f'<text x="{right}" y="{bottom + 24}" class="legend" text-anchor="end">'
                   f'+{len(lines) - LEGEND_ENTRIES_MAX} more</text>')


def render(args):
    start, end = float(args.start), float(args.end)
    variables = variables_of(args)
    panels = load_panels(args.dashboard)
    width = 24 * GRID_COLUMN_PX
    header = 44
    height = header + max(
        (p["gridPos"]["y"] + p["gridPos"]["h"]) * GRID_ROW_PX for p in panels)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif">',
        "<style>.title{font-size:13px;fill:#d8d9da;font-weight:bold}"
        ".row{font-size:15px;fill:#ccccdc;font-weight:bold}.tick{font-size:9px;fill:#8e8e8e}"
        ".legend{font-size:10px;fill:#ccccdc}.stat{font-size:30px;text-anchor:middle;font-weight:bold}"
        ".nodata{font-size:12px;fill:#8e8e8e;text-anchor:middle}"
        ".axis{stroke:#555}.grid{stroke:#2c3235}</style>",
        f'<rect width="{width}" height="{height}" fill="#111217"/>',
        f'<text x="12" y="28" font-size="18" fill="#d8d9da" font-weight="bold">'
        f'{html.escape(args.title)}</text>',
    ]
    for panel in panels:
        grid = panel["gridPos"]
        box = (grid["x"] * GRID_COLUMN_PX, header + grid["y"] * GRID_ROW_PX,
               grid["w"] * GRID_COLUMN_PX, grid["h"] * GRID_ROW_PX)
        if panel["type"] == "row":
            out.append(f'<text x="{box[0] + 10}" y="{box[1] + 22}" class="row">'
                       f'{html.escape(panel["title"])}</text>')
            continue
        draw_panel(out, panel, fetch_range(args, panel, variables), box, start, end)
    out.append("</svg>")
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write("\n".join(out) + "\n")
    drawn = sum(1 for panel in panels if panel["type"] != "row")
    print(f"render: {drawn} panels drawn into {args.out}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("check", "render"):
        command = sub.add_parser(name)
        command.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
        command.add_argument("--instance", required=True, help="the value of $instance")
        command.add_argument("--dashboard", required=True, help="the dashboard JSON")
        command.add_argument("--rate-interval", default="10s", help="the value of $__rate_interval")
        command.add_argument("--range", default="1m", help="the value of $__range")
    sub.choices["check"].add_argument("--time", help="evaluate at these Unix seconds (default: now)")
    draw = sub.choices["render"]
    draw.add_argument("--start", required=True, help="Unix seconds")
    draw.add_argument("--end", required=True, help="Unix seconds")
    draw.add_argument("--step", default="1", help="seconds between points")
    draw.add_argument("--out", required=True, help="the SVG to write")
    draw.add_argument("--title", default="bps-broker", help="the heading")
    args = parser.parse_args()
    try:
        return check(args) if args.command == "check" else render(args)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        print(f"dashboard.py {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
