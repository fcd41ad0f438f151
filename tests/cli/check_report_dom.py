#!/usr/bin/env python3
"""The DOM of an HTML report as Chromium parsed it (--dump-dom), checked for what a user must see (cli.report_html).

usage: check_report_dom.py DOM_FILE KIND     KIND: leak, plateau or torch
Every chart has drawn lines (each SVG path has a non-empty d that moves and draws: M, then L), the verdict comes
before the first chart, and the page says what its run is: a leak with its site and the projection to the limit, a
plateau with its warmup and no projection. Prints what failed and exits 1; prints nothing on success.
"""
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs = []          # per <svg>: [aria-label, drawn paths, empty paths]
        self.order = []         # the first position of: 'head', 'svg'
        self.titles = []
        self.classes = set()
        self.text = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for c in (a.get('class') or '').split():
            self.classes.add(c)
        if tag == 'section' and 'head' in (a.get('class') or '').split():
            self.order.append('head')
        if tag == 'svg':
            self.order.append('svg')
            self.svgs.append([a.get('aria-label'), 0, 0])
        if tag == 'path' and self.svgs:
            d = (a.get('d') or '').strip()
            drawn = d.startswith('M') and ('L' in d or 'Z' in d)
            self.svgs[-1][1 if drawn else 2] += 1
        self._in_title = tag == 'title'

    def handle_endtag(self, tag):
        if tag == 'title':
            self._in_title = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_title:
            self.titles.append(data)


def main():
    path, kind = sys.argv[1], sys.argv[2]
    page = Page()
    with open(path, encoding='utf-8') as f:
        page.feed(f.read())
    text = ''.join(page.text)
    errors = []
    if not page.svgs:
        errors.append('no chart')
    for label, drawn, empty in page.svgs:
        if empty or drawn < 2:  # the baseline and the peaks at least
            errors.append(f'chart {label}: {drawn} drawn paths, {empty} empty ones')
    if not page.order or page.order[0] != 'head':
        errors.append('the verdict does not come before the charts')
    projected = 'fitted tail, projected' in page.titles
    if kind in ('leak', 'torch'):
        if 'head-leak' not in page.classes:
            errors.append('no leak verdict at the top')
        if not projected:
            errors.append('no projection to the limit')
        site = 'leak_function' if kind == 'leak' else 'py_torch_append.py:19'
        if site not in text:
            errors.append(f'the leaking site {site} is not named')
    elif kind == 'plateau':
        if 'head-ok' not in page.classes:
            errors.append('no "no leak" verdict at the top')
        if projected:
            errors.append('a projection on a plateau')
        if 'warmup' not in page.titles:
            errors.append('no warmup shaded')
    for e in errors:
        print(f'{kind}: {e}')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
