"""Vendor token shapes: a distinctive prefix, an alphabet and a length, nothing else.

A vendor's token is a credential whatever its body looks like: ``ghp_`` followed by
thirty-six ``A`` is as refusable as a random one (a test key, a half-redacted paste, a
patterned fake used to probe the scanner). The entropy fallbacks cannot see such
bodies, so each shape here is matched by its structure alone, with no randomness test
(ADR 2131). The shapes are the formats public rule sets describe (gitleaks' default
rules, trufflehog's detectors, detect-secrets' plugins), written here as prefix,
alphabet and exact or bounded length; a prefix that is an ordinary word (``live_``,
``key-``) is only matched after its vendor's name, as those rule sets do.

Every repetition is bounded and none nests in another (the scanner's bounds test
reads these patterns like the rest of the table). One alternation, so the engine
tries the table at each position in one pass.
"""

from __future__ import annotations

_B64URL = "A-Za-z0-9_-"
_ALNUM = "A-Za-z0-9"
_HEX = "a-f0-9"
# A vendor's name, a short name suffix and an assignment: ``mailgun_key = `` ...
_NAMED = r"(?i:{name})[A-Za-z0-9_. -]{{0,24}}?[\"']?\s{{0,3}}(?::=|=>|[:=])\s{{0,3}}[\"'`]?"

SHAPES: tuple[tuple[str, str], ...] = (
    # vendor, shape (a Python regex: bounded repetitions, no nesting)
    ("contentful", rf"CFPAT-[{_B64URL}]{{43}}"),
    ("1password", r"ops_eyJ[A-Za-z0-9+/]{250,1500}={0,3}"),
    ("adobe", rf"p8e-[{_ALNUM}]{{32}}"),
    ("age", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("airtable", rf"pat[{_ALNUM}]{{14}}\.[{_HEX}]{{64}}"),
    ("alibaba", rf"LTAI[{_ALNUM}]{{20}}"),
    ("artifactory", rf"AKCp[{_ALNUM}]{{69}}"),
    ("artifactory", rf"cmVmd[{_ALNUM}]{{59}}"),
    ("aws_bedrock", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}"),
    ("clickhouse", rf"4b1d[{_ALNUM}]{{38}}"),
    ("clojars", rf"(?i:CLOJARS_)[{_ALNUM}]{{60}}"),
    ("cloudflare", rf"v1\.0-[{_HEX}]{{24}}-[{_HEX}]{{146}}"),
    ("databricks", rf"dapi[{_HEX}]{{32}}(?:-[0-9])?"),
    ("defined_networking", r"dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}"),
    ("doppler", rf"dp\.pt\.[{_ALNUM}]{{43}}"),
    ("dropbox", r"sl\.[A-Za-z0-9=_-]{135}"),
    ("duffel", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
    ("dynatrace", rf"dt0c01\.[{_ALNUM}]{{24}}\.[{_ALNUM}]{{64}}"),
    ("easypost", rf"EZ[AT]K[{_ALNUM}]{{54}}"),
    ("facebook", rf"EAA[MC][{_ALNUM}]{{100,600}}"),
    ("frameio", r"fio-u-[A-Za-z0-9_=-]{64}"),
    ("github", rf"gh[pousr]_[{_ALNUM}]{{36}}"),
    ("github", r"github_pat_[A-Za-z0-9_]{82}"),
    ("gitlab", r"glpat-[A-Za-z0-9_-]{20,300}(?:\.[0-9a-z]{9})?"),
    ("gitlab", r"GR1348941[A-Za-z0-9_-]{20,50}"),
    ("gitlab", r"_gitlab_session=[0-9a-z]{32}"),
    ("gocardless", _NAMED.format(name="gocardless") + r"live_[A-Za-z0-9_=-]{40}"),
    ("grafana", rf"eyJrIjoi[{_ALNUM}]{{70,400}}={{0,3}}"),
    ("grafana", r"glc_[A-Za-z0-9+/]{32,400}={0,3}"),
    ("grafana", rf"glsa_[{_ALNUM}]{{32}}_[A-Fa-f0-9]{{8}}"),
    ("heroku", r"HRKU-AA[A-Za-z0-9_-]{58}"),
    ("huggingface", r"hf_[A-Za-z]{34}"),
    ("huggingface", r"api_org_[A-Za-z]{34}"),
    ("infracost", rf"ico-[{_ALNUM}]{{32}}"),
    ("intra42", r"s-s4t2(?:ud|af)-[A-Fa-f0-9]{64}"),
    ("linear", rf"lin_api_[{_ALNUM}]{{40}}"),
    ("mailgun", _NAMED.format(name="mailgun") + rf"(?:pub)?key-[{_HEX}]{{32}}"),
    ("mapbox", r"pk\.[A-Za-z0-9]{60}\.[A-Za-z0-9]{22}"),
    ("new_relic", r"NRJS-[a-f0-9]{19}"),
    ("new_relic", r"NRII-[A-Za-z0-9-]{32}"),
    ("new_relic", rf"NRAK-[{_ALNUM}]{{27}}"),
    ("notion", rf"ntn_[0-9]{{11}}[{_ALNUM}]{{35}}"),
    ("npm", rf"npm_[{_ALNUM}]{{36}}"),
    ("octopus_deploy", r"API-[A-Z0-9]{26}"),
    ("openshift", r"sha256~[A-Za-z0-9_-]{43}"),
    ("perplexity", rf"pplx-[{_ALNUM}]{{48}}"),
    (
        "plaid",
        r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}"
        r"-[0-9a-f]{4}-[0-9a-f]{12}",
    ),
    ("planetscale", r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}"),
    ("postman", r"PMAK-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}"),
    ("prefect", rf"pnu_[{_ALNUM}]{{36}}"),
    ("pulumi", rf"pul-[{_HEX}]{{40}}"),
    ("pypi", r"pypi-AgE[A-Za-z0-9_-]{50,1000}"),
    ("readme", r"rdme_[a-z0-9]{70}"),
    ("rubygems", rf"rubygems_[{_HEX}]{{48}}"),
    ("scalingo", r"tk-us-[A-Za-z0-9_-]{48}"),
    ("sendinblue", rf"xkeysib-[{_HEX}]{{64}}-[{_ALNUM}]{{16}}"),
    ("sentry", r"sntrys_eyJpYXQiO[A-Za-z0-9+/=_]{40,600}"),
    ("sentry", rf"sntryu_[{_HEX}]{{64}}"),
    ("settlemint", rf"sm_[aps]at_[{_ALNUM}]{{16}}"),
    ("shippo", r"shippo_(?:live|test)_[A-Fa-f0-9]{40}"),
    ("slack", r"xapp-[0-9]-[A-Za-z0-9]{1,64}-[0-9]{1,64}-[A-Za-z0-9]{1,256}"),
    ("slack", r"xoxe.xox[bp]-[0-9]-[A-Za-z0-9]{163,166}"),
    ("slack", r"xox[abposre]-(?:[0-9]-)?[A-Za-z0-9-]{8,250}"),
    (
        "slack",
        r"hooks\.slack\.com/services/T[A-Za-z0-9_]{1,64}/B[A-Za-z0-9_]{1,64}/[A-Za-z0-9_]{1,64}",
    ),
    ("square", r"sq0(?:csp|atp)-[A-Za-z0-9_-]{22,43}"),
    ("typeform", r"tfp_[A-Za-z0-9_.=-]{59}"),
    ("vault", r"hv[sb]\.[A-Za-z0-9_-]{90,300}"),
    ("yandex", r"t1\.[A-Za-z0-9_-]{1,256}={0,2}\.[A-Za-z0-9_-]{86}={0,2}"),
    ("yandex", r"AQVN[A-Za-z0-9_-]{35,38}"),
    ("azure_storage", r"AccountKey=[A-Za-z0-9+/=]{88}"),
    ("private_key", r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"),
    ("putty", r"PuTTY-User-Key-File-[0-9]{1,2}"),
)

PATTERN = (
    r"(?<![A-Za-z0-9_])(?:"
    + "|".join(f"(?:{shape})" for _, shape in SHAPES)
    + r")(?:(?<=-----)|(?![A-Za-z0-9_]))"
)
"""Any one vendor shape, as a whole token (nothing alphanumeric glued to either end; a
key block's ``-----`` header may run straight into its body)."""
