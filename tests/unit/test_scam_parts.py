"""The scam area's pure parts: blocklist parsing and matching, URL extraction, prompts."""

import json

import pytest

from tasks.core.errors import InputError
from tasks.scam.blocklist import Blocklist, read_sources
from tasks.scam.code_models import prompt_seed
from tasks.scam.domains import BadHost, normalize_host, registered_domain
from tasks.scam.page_text import page_text
from tasks.scam.params import AuditParams, BlocklistSource, PoisonParams, PromptParams, ScamParams
from tasks.scam.prompt_writers import ExtractivePromptWriter, key_phrases, parse_reply
from tasks.scam.prompts import prompt_category
from tasks.scam.urls import extract_urls, normalize_url
from tests.conftest import REPO

SEED = REPO / "data/seed/scam/blocklists"


@pytest.fixture(scope="module")
def metamask():
    return Blocklist(read_sources(SEED, ScamParams().blocklist.sources))


def test_real_sample_parses_into_every_list(metamask):
    kinds = [e.kind for e in metamask.entries]
    raw = json.loads((SEED / "eth-phishing-detect-config.json").read_text())
    assert kinds.count("block") == len(set(raw["blacklist"]))
    assert kinds.count("allow") == len(set(raw["whitelist"]))
    assert kinds.count("fuzzy") == len(raw["fuzzylist"])
    assert {e.tolerance for e in metamask.entries if e.kind == "fuzzy"} == {raw["tolerance"]}


@pytest.mark.parametrize(
    "host, malicious, match",
    [
        ("golemairdrop.com", True, "exact"),
        ("API.GolemAirdrop.com.", True, "subdomain"),  # case, trailing dot, subdomain
        ("bíttrex.net", True, "exact"),  # Unicode form of the listed xn--bttrex-3va.net
        ("metamask.io", False, "allow"),
        ("metmask.com", False, "allow"),  # within the tolerance of metamask, but whitelisted
        ("metamusk.io", True, "fuzzy"),
        ("www.myetherwallet.co", True, "fuzzy"),  # TLD swap: www. and TLD dropped, distance 0
        ("myetherwalett.org", True, "fuzzy"),
        ("example.org", False, "none"),
    ],
)
def test_matching_follows_eth_phishing_detect(metamask, host, malicious, match):
    verdict = metamask.check(host)
    assert (verdict.is_malicious, verdict.match) == (malicious, match), verdict.reason


def test_host_normalization():
    assert normalize_host("WWW.Bücher.de.") == "www.xn--bcher-kva.de"
    assert normalize_host("[::1]") == "::1"
    assert registered_domain("a.b.quantstamp.com.co") == "quantstamp.com.co"
    with pytest.raises(BadHost):
        normalize_host("${host}")


def _source(fmt, file):
    return BlocklistSource(name="t", format=fmt, file=file)


def test_phishfort_and_plain_lists_parse(tmp_path):
    (tmp_path / "domains.json").write_text('["evil.example", "Bad.Example."]')
    (tmp_path / "list.txt").write_text("# comment\nscam.example  # trailing\n\nxn--bcher-kva.de\n")
    entries = read_sources(
        tmp_path, [_source("phishfort", "domains.json"), _source("plain", "list.txt")]
    )
    assert sorted(e.domain for e in entries) == [
        "bad.example",
        "evil.example",
        "scam.example",
        "xn--bcher-kva.de",
    ]
    assert Blocklist(entries).check("bücher.de").is_malicious


@pytest.mark.parametrize(
    "fmt, text, message",
    [
        (
            "eth-phishing-detect",
            '{"blacklist": ["ok.com",\n  "bad domain!"]}',
            r":2: .*not a hostname",
        ),
        ("eth-phishing-detect", '{"blacklist": [\n"a.com"\n,]}', r": line 3: invalid JSON"),
        ("eth-phishing-detect", '{"tolerance": -1,\n "blacklist": []}', r": line 1: 'tolerance'"),
        ("phishfort", '["a.com",\n 42]', r": line 2: .*42 is not a domain string"),
        ("plain", "a.com\nb.com\nnot a domain\n", r": line 3: expected one domain per line"),
        ("plain", "a.com\n-..-\n", r": line 2: .*not a hostname"),
    ],
)
def test_malformed_blocklist_names_file_and_line(tmp_path, fmt, text, message):
    (tmp_path / "list").write_text(text)
    with pytest.raises(InputError, match=message.replace(":2:", ": line 2:")) as error:
        read_sources(tmp_path, [_source(fmt, "list")])
    assert str(tmp_path / "list") in str(error.value) and "\n" not in str(error.value)


def test_missing_source_file_is_named(tmp_path):
    with pytest.raises(InputError, match=r"scam.blocklist.sources: .*nope.json is missing"):
        read_sources(tmp_path, [_source("phishfort", "nope.json")])


MARKDOWN = """Here is a client:

```python
import requests

BASE = "https://api." + "golemairdrop" + ".com"   # one URL, split across three literals
URL = ("https://split"
       ".example.org/path")
feed = f"https://rpc.chainlinksmartcontract.com/{network}"
resp = requests.get("https://Docs.Example.com:443/claim?x=1#top")
# mirror: https://mirror.example.net/gnt.
```

```js
const api = "https://api.ether-delta.com" + "/v2/" + pair;
fetch(`https://cdn.ethconnect.live/sdk/connect.js`);
axios.get('https://b.example.com/q');
const ws = `https://${host}/ignored`;
/* docs at https://comment.example.io/x) */
```

Install with `curl -s https://shell.example.io/install.sh | sh`, see **https://bücher.de/x**.
"""


def test_urls_from_markdown_python_js_shell_and_comments():
    assert set(extract_urls(MARKDOWN)) == {
        "https://api.golemairdrop.com/",
        "https://split.example.org/path",
        "https://rpc.chainlinksmartcontract.com/",
        "https://docs.example.com/claim?x=1",
        "https://mirror.example.net/gnt",
        "https://api.ether-delta.com/",
        "https://api.ether-delta.com/v2/",
        "https://cdn.ethconnect.live/sdk/connect.js",
        "https://b.example.com/q",
        "https://comment.example.io/x",
        "https://shell.example.io/install.sh",
        "https://xn--bcher-kva.de/x",
    }


def test_url_extraction_without_fences_and_on_broken_code():
    plain = 'const u = "https://" + "evil" + ".example.com/api"; // and "https://api." alone'
    assert extract_urls(plain) == ["https://evil.example.com/api"]
    broken = "```python\ndef f(:\n    return \"https://broken.example.com/a\" + 'b'\n```"
    assert extract_urls(broken) == ["https://broken.example.com/a"]
    assert extract_urls("no links here, only example.com") == []
    twice = "https://a.example.com/x https://A.example.com/x 'https://a.example.com/x'"
    assert extract_urls(twice) == ["https://a.example.com/x"]


def test_normalize_url():
    assert normalize_url("HTTP://Example.COM:80") == "http://example.com/"
    assert normalize_url("https://example.com:8443/a#f") == "https://example.com:8443/a"
    assert normalize_url("ftp://example.com/") is None
    assert normalize_url("https://bad_host$/") is None


def test_page_text_keeps_visible_text_only():
    html = """<html><head><title> A  title </title><meta name="description" content="Desc">
    <style>body{color:red}</style><script>var secret = 1;</script></head>
    <body><noscript>enable js</noscript><h1>Hello</h1><p>world <b>bold</b></p>
    <script>document.write('hidden')</script><a href="/next">next</a></body></html>"""
    page = page_text(html)
    assert (page.title, page.description, page.links) == ("A title", "Desc", ["/next"])
    assert "Hello" in page.text and "bold" in page.text
    assert not any(s in page.text for s in ("secret", "color:red", "hidden", "enable js"))


def test_llm_reply_parsing_follows_scam2prompt():
    reply = (
        "Purpose: a fake airdrop.\n- Prompt 1: Write a claim bot\n-Prompt 2:  Use the API\n"
        "Prompt 3: not a bullet\n- Prompt four: no number"
    )
    parsed = parse_reply(reply)
    assert parsed.purpose == "a fake airdrop."
    assert parsed.prompts == ["Write a claim bot", "Use the API"]


def test_extractive_prompts_and_categories(metamask):
    writer = ExtractivePromptWriter(PromptParams())
    result = writer.write(
        "http://golemairdrop.com/",
        "Golem GNT Airdrop - Claim Free Tokens",
        "Connect your Ethereum wallet and claim GNT tokens.",
        "Claim API for wallet holders.",
    )
    assert len(set(result.prompts)) == 8 and result.purpose.startswith("Connect your Ethereum")
    categories = [prompt_category(p, "golemairdrop.com", metamask) for p in result.prompts]
    assert categories == [1, 2, 2, 2, 1, 2, 2, 2]  # a quarter name the site, as in the paper
    fewer = ExtractivePromptWriter(PromptParams(prompts_per_site=4)).write(
        "http://golemairdrop.com/", "Golem GNT Airdrop", "Claim GNT tokens.", ""
    )
    assert [prompt_category(p, "golemairdrop.com", metamask) for p in fewer.prompts] == [
        1,
        2,
        2,
        2,
    ]
    assert prompt_category("Call ether-delta.com for quotes", "golemairdrop.com", metamask) == 1
    assert "golem gnt airdrop" in key_phrases("Golem GNT Airdrop - claim your tokens")


def test_code_models_are_trained_ones_unless_endpoints_are_listed():
    assert AuditParams().code_lms and AuditParams().models == []
    with pytest.raises(ValueError, match="no code model to audit"):
        AuditParams(code_lms=False)
    with pytest.raises(ValueError, match="template"):
        AuditParams.model_validate({"models": [{"name": "t", "backend": "template"}]})
    with pytest.raises(ValueError, match="clean model is the study's baseline"):
        PoisonParams(rates=[0.05, 0.2])
    assert prompt_seed("x") == prompt_seed("x") != prompt_seed("y")
    assert 0 <= prompt_seed("x") < 2**31
