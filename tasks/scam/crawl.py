"""scam.crawl: the seed sites' static pages, fetched safely with Scrapy.

Seeds are the blocklisted domains plus `scam.crawl.extra_urls`. Offline (the default) the
spider talks only to the site farm's proxy on 127.0.0.1. Scrapy's HTTP cache (under
.paperline/, keyed by the crawl's inputs) lets a re-run replay without any network.

The tracked metrics hold only what the inputs decide (outcomes, reasons, pages), so a DVC
run and a Prefect run agree byte for byte; what depends on the run (seconds, requests that
reached the network, how many went through the farm's proxy) is logged and written to
.paperline/telemetry/scam.crawl.json.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from scrapy import signals
from scrapy.crawler import CrawlerProcess, CrawlerRunner
from twisted.internet.defer import Deferred

from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.scratch import fingerprint
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.telemetry import record_telemetry
from tasks.scam.blocklist import Blocklist
from tasks.scam.farm import FarmProxy, SiteFarm
from tasks.scam.params import CrawlParams, ScamParams
from tasks.scam.spider import CrawlLog, ProxyEverything, SiteSpider, SsrfGuard

log = get_logger("paperline.scam.crawl")

PAGES_SCHEMA = pa.schema(
    [
        ("url", pa.string()),
        ("final_url", pa.string()),
        ("site", pa.string()),
        ("depth", pa.int8()),
        ("outcome", pa.string()),
        ("reason", pa.string()),
        ("status", pa.int16()),
        ("content_type", pa.string()),
        ("sha256", pa.string()),
        ("bytes", pa.int64()),
        ("title", pa.string()),
        ("description", pa.string()),
        ("text", pa.string()),
        ("blocklisted", pa.bool_()),
    ]
)


@dataclass(frozen=True)
class Route:
    """Where requests go: `proxy` (the farm's URL) or direct; hosts the farm serves."""

    proxy: str = ""
    farm_hosts: tuple[str, ...] = ()


def crawl_settings(params: CrawlParams, route: Route, cache_dir: Path | None) -> dict[str, Any]:
    return {
        "USER_AGENT": params.user_agent,
        "ROBOTSTXT_OBEY": False,  # landing pages of reported scam sites, fetched once
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "DOWNLOAD_TIMEOUT": params.timeout_seconds,
        "DNS_TIMEOUT": params.timeout_seconds,
        "DOWNLOAD_MAXSIZE": params.max_page_bytes,  # HttpCompressionMiddleware applies it too
        "DOWNLOAD_WARNSIZE": 0,
        "RETRY_TIMES": params.retries,
        "RETRY_GIVE_UP_LOG_LEVEL": "INFO",  # every give-up is a recorded row, not an alarm
        "REDIRECT_MAX_TIMES": params.max_redirects,
        "CONCURRENT_REQUESTS": params.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": params.concurrency_per_domain,
        "HTTPCACHE_ENABLED": cache_dir is not None,
        "HTTPCACHE_DIR": str(cache_dir or "httpcache"),
        "DOWNLOADER_MIDDLEWARES": {SsrfGuard: 50, ProxyEverything: 100},
        "PAPERLINE_ALLOW_PRIVATE_NETWORKS": params.allow_private_networks,
        "PAPERLINE_FARM_HOSTS": list(route.farm_hosts),
        "PAPERLINE_PROXY": route.proxy,
        "LOG_LEVEL": "WARNING",
        "LOG_INSTALL_ROOT_HANDLER": False,  # paperline's logging is already configured
    }


def schedule_crawl(
    runner_class: type[CrawlerRunner],
    params: CrawlParams,
    seeds: list[str],
    route: Route,
    cache_dir: Path | None = None,
) -> tuple[CrawlerRunner, Deferred, CrawlLog]:
    """Set up one crawl: CrawlerProcess in the stage, CrawlerRunner in tests (one reactor
    run, several crawls). The caller starts the reactor."""
    crawl_log = CrawlLog()
    runner = runner_class(crawl_settings(params, route, cache_dir))
    crawler = runner.create_crawler(SiteSpider)

    def reached(request: Any, **_: Any) -> None:
        crawl_log.requests.append(request.url)
        crawl_log.proxied += bool(route.proxy) and request.meta.get("proxy") == route.proxy

    crawler.signals.connect(reached, signal=signals.request_reached_downloader, weak=False)
    done = runner.crawl(
        crawler,
        seeds=seeds,
        log=crawl_log,
        head_first=params.head_first,
        max_page_bytes=params.max_page_bytes,
        max_pages_per_site=params.max_pages_per_site,
        timeout=params.timeout_seconds,
    )
    return runner, done, crawl_log


def seed_urls(params: CrawlParams, blocklist: Blocklist) -> list[str]:
    domains = blocklist.blocked_domains() if params.seeds_from_blocklist else []
    domains = domains[: params.max_blocklist_seeds]
    return [f"{params.scheme}://{domain}/" for domain in domains] + list(params.extra_urls)


def crawl(params: CrawlParams, seeds: list[str], route: Route, cache_dir: Path | None) -> CrawlLog:
    """One blocking crawl in this process (Twisted's reactor runs once per process)."""
    process, _, crawl_log = schedule_crawl(CrawlerProcess, params, seeds, route, cache_dir)
    process.start()
    return crawl_log


def pages_table(crawl_log: CrawlLog, blocklist: Blocklist) -> pa.Table:
    rows = sorted(crawl_log.rows, key=lambda r: (r["site"], r["depth"], r["url"]))
    for row in rows:
        row["blocklisted"] = bool(row["site"]) and blocklist.check(row["site"]).is_malicious
    return pa.Table.from_pylist(rows, schema=PAGES_SCHEMA)


def crawl_metrics(crawl_log: CrawlLog) -> dict[str, Any]:
    reasons = Counter(
        row["reason"].split(":")[0].split(" (")[0] for row in crawl_log.rows if row["reason"]
    )
    ok = crawl_log.outcomes()["ok"]
    return {
        "urls": len(crawl_log.rows),
        "pages_ok": ok,
        "outcomes": dict(sorted(crawl_log.outcomes().items())),
        "reasons": dict(sorted(reasons.items())),
        "html_files": len(crawl_log.html),
    }


def crawl_telemetry(crawl_log: CrawlLog, seconds: float) -> dict[str, Any]:
    """Run-dependent figures: a warm HTTP cache answers before the downloader is reached."""
    return {
        "seconds": round(seconds, 2),
        "requests": len(crawl_log.requests),
        "requests_via_farm_proxy": crawl_log.proxied,
    }


def run(params: ScamParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    crawl_params = params.crawl
    blocklist = Blocklist.from_table(inputs["blocklist"])
    seeds = seed_urls(crawl_params, blocklist)
    digest = fingerprint(
        crawl_params.model_dump(mode="json"), [inputs["blocklist"], inputs["farm"]]
    )
    cache_dir = ctx.scratch("scam", "httpcache") / digest[:16]
    cache = cache_dir if crawl_params.http_cache else None
    started = time.perf_counter()
    if crawl_params.farm.enabled:
        farm = SiteFarm.load(inputs["farm"], crawl_params.farm)
        seeds += [url for kind in crawl_params.farm.seed_kinds for url in farm.seed_urls(kind)]
        with FarmProxy(farm) as proxy:
            crawl_log = crawl(crawl_params, seeds, Route(proxy.url, tuple(farm.hosts())), cache)
    else:
        crawl_log = crawl(crawl_params, seeds, Route(), cache)
    seconds = time.perf_counter() - started
    metrics, telemetry = crawl_metrics(crawl_log), crawl_telemetry(crawl_log, seconds)
    record_telemetry(STAGE.name, telemetry, ctx.root)
    log.info(
        "crawl: %d URLs, %d pages ok in %.1f s; %d requests reached the network, %d via "
        "the farm's proxy; %s",
        metrics["urls"],
        metrics["pages_ok"],
        seconds,
        telemetry["requests"],
        telemetry["requests_via_farm_proxy"],
        metrics["outcomes"],
    )
    html = Folder({f"{digest}.html": body for digest, body in crawl_log.html.items()})
    return {"pages": pages_table(crawl_log, blocklist), "html": html, "metrics": metrics}


STAGE = Stage(
    name="scam.crawl",
    run=run,
    params_key="scam",
    params=("scam.crawl",),
    inputs={
        "blocklist": "data/processed/scam/blocklist.parquet",
        "farm": "data/seed/scam/farm",
    },
    outputs={
        "pages": "data/interim/scam/pages.parquet",
        "html": "data/interim/scam/html",
        "metrics": Output.metrics("data/interim/scam/crawl_metrics.json"),
    },
    headline="data/interim/scam/crawl_metrics.json:pages_ok",
)
