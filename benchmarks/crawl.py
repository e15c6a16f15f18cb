"""Scam crawl: the project's Scrapy settings vs Scrapy's defaults, on the local site farm.

Run: `.venv/bin/python benchmarks/crawl.py --copies 20`.

Both crawls go through the same farm proxy on 127.0.0.1, in one reactor run:
- (a) project: `SiteSpider` with `crawl_settings` (HEAD first, text/html only, 2 MB cap,
  timeouts, 2 requests per domain at once), same-site link following off;
- (b) defaults: a plain `scrapy.Spider` that GETs the same URLs with Scrapy's defaults.
Part 1 crawls every farm page that serves HTML (`--copies` distinct URLs each, by query
string): pages/s. Part 2 crawls the hostile hosts once: wall time and the largest body each
side accepted into memory (the 20 MB page, the gzip bomb).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import scrapy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class PlainSpider(scrapy.Spider):
    name = "plain"

    def __init__(self, urls, proxy, sizes, **kwargs):
        super().__init__(**kwargs)
        self.urls, self.proxy, self.sizes = urls, proxy, sizes

    async def start(self):
        for url in self.urls:
            yield scrapy.Request(
                url, meta={"proxy": self.proxy}, dont_filter=True, errback=lambda failure: None
            )

    def parse(self, response):
        self.sizes.append(len(response.body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20, help="URLs per farm page")
    args = parser.parse_args()

    from scrapy.crawler import CrawlerRunner
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import defer, reactor

    from tasks.core.params import load_params
    from tasks.scam.crawl import Route, schedule_crawl
    from tasks.scam.farm import FarmProxy, SiteFarm

    crawl = load_params(ROOT / "params.yaml").scam.crawl.model_copy(
        update={"max_pages_per_site": 1, "http_cache": False}
    )
    farm = SiteFarm.load(ROOT / "data/seed/scam/farm", crawl.farm)
    pages = [f"http://{host}{path}" for host, site in farm.sites.items() for path in site.pages]
    urls = [f"{page}?copy={n}" for page in pages for n in range(args.copies)]
    hostile = [f"http://{h}/" for h, s in farm.sites.items() if s.behaviour != "pages"]
    results = {}

    @defer.inlineCallbacks
    def run_all():
        with FarmProxy(farm) as proxy:
            route = Route(proxy.url, tuple(farm.hosts()))
            for part, seeds in (("pages", urls), ("hostile", hostile)):
                started = time.perf_counter()
                _, done, log = schedule_crawl(CrawlerRunner, crawl, seeds, route)
                yield done
                ours = time.perf_counter() - started
                sizes = []
                runner = CrawlerRunner({"LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False})
                started = time.perf_counter()
                yield runner.crawl(PlainSpider, urls=seeds, proxy=proxy.url, sizes=sizes)
                plain = time.perf_counter() - started
                results[part] = (log, ours, sizes, plain)

    run_all().addBoth(lambda _: reactor.stop())
    reactor.run()

    log, ours, sizes, plain = results["pages"]
    ok = log.outcomes()["ok"]
    print(f"part 1: {len(urls)} URLs ({len(pages)} farm pages x {args.copies})")
    print(f"{'crawler':<10}{'pages ok':>10}{'seconds':>10}{'pages/s':>10}")
    print(f"{'project':<10}{ok:>10}{ours:>10.2f}{ok / ours:>10.1f}")
    print(f"{'defaults':<10}{len(sizes):>10}{plain:>10.2f}{len(sizes) / plain:>10.1f}")
    print(f"ratio project/defaults pages/s: {(ok / ours) / (len(sizes) / plain):.2f}x")
    log, ours, sizes, plain = results["hostile"]
    biggest = max((len(b) for b in log.html.values()), default=0)
    print(f"part 2: {len(hostile)} hostile hosts")
    print(f"project : {ours:.2f} s, largest body kept {biggest:,} B; {dict(log.outcomes())}")
    print(
        f"defaults: {plain:.2f} s, largest body accepted {max(sizes, default=0):,} B; "
        f"{len(sizes)} responses"
    )


if __name__ == "__main__":
    main()
