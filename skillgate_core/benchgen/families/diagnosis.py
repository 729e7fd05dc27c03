"""Abductive diagnosis: name each incident's root cause from log symptoms (engines/diagnosis.py).

The non-obvious knowledge a skill holds: the house cause labels, which symptom codes (and how many
of each) point to which cause, and the priority order of the table. Without it no cause label can
be guessed; following it (one script call) gets every incident right.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Mapping
from dataclasses import dataclass

from skillgate_core.benchgen.engines import diagnosis as diagnosis_engine
from skillgate_core.benchgen.families.base import (  # names, not logic: the parts every family shares
    SkillDraft,
    declare_family,
    lookalike,
    oracle_draft,
    pick,
    procedure_section,
)

__all__ = ["FAMILY"]

TOOL_FILE = "triage_incidents.py"
"""The skill's script under scripts/ (the SKILL.md procedure calls it)."""

CODE_PATTERN = r"\b[EW]-\d{3}\b"
ERRORS_ONLY = r"\bE-\d{3}\b"


# Alike by design below: the layout base.py gives every family (Theme, THEMES, six functions, NAIVE).
@dataclass(frozen=True)
class Theme:
    """Domain words of the diagnosis family."""

    system: str
    """What produces the logs (e.g. "ingest pipeline")."""
    log_name: str
    """The live log's file name."""
    hosts: str
    """Host name prefix."""
    causes: tuple[str, ...]
    """House cause labels (a table uses six to eight of them)."""
    fallback: str
    """Label when no rule matches."""
    messages: tuple[str, ...]
    """Symptom messages (a code gets one)."""
    consumers: tuple[str, ...]
    """Who asks for the classification."""


# Data, not logic: one Theme per domain.
THEMES: dict[str, Theme] = {
    "data-formats": Theme(
        system="ingest pipeline", log_name="ingest.log", hosts="etl",
        causes=("SCHEMA-DRIFT", "LATE-FEED", "ENCODING-MISMATCH", "DUPLICATE-BATCH", "TRUNCATED-UPLOAD",
                "CLOCK-SKEW", "QUOTA-EXHAUSTED", "STALE-LOOKUP", "BAD-DELIMITER"),
        fallback="NEEDS-REVIEW",
        messages=("column count differs from contract", "row count below watermark", "decoder replaced bytes",
                  "batch checksum seen before", "upload ended before footer", "timestamp ahead of wall clock",
                  "bucket write refused", "lookup table older than batch", "quote not closed at EOF",
                  "null in required field", "retrying partition load", "late arrival beyond cutoff",
                  "manifest missing entry", "parser fell back to latin-1", "watermark not advanced",
                  "partition rewritten"),
        consumers=("data-quality review", "weekly pipeline retro", "vendor escalation desk", "SLA report"),
    ),
    "service-config": Theme(
        system="API gateway", log_name="gateway.log", hosts="gw",
        causes=("CERT-EXPIRED", "DNS-STALE", "POOL-EXHAUSTED", "CONFIG-DRIFT", "RATE-LIMITED",
                "MEMORY-LEAK", "DISK-FULL", "UPSTREAM-TIMEOUT", "ROUTE-SHADOWED"),
        fallback="UNCLASSIFIED",
        messages=("handshake failed", "resolver returned old address", "no free connections",
                  "rendered config differs from repo", "429 from upstream", "rss above soft limit",
                  "write failed: no space", "upstream read timeout", "route matched earlier prefix",
                  "health check slow", "retry budget low", "circuit half-open", "reload took long",
                  "queue depth rising", "gc pause long", "listener restarted"),
        consumers=("incident review board", "SRE weekly", "capacity council", "vendor support case"),
    ),
    "scheduling": Theme(
        system="batch scheduler", log_name="scheduler.log", hosts="sched",
        causes=("QUEUE-STARVATION", "CALENDAR-GAP", "LOCK-CONTENTION", "RETRY-STORM", "PRIORITY-INVERSION",
                "MISSED-TRIGGER", "QUOTA-EXCEEDED", "ORPHANED-JOB", "CLOCK-DRIFT"),
        fallback="TRIAGE-MANUALLY",
        messages=("job waited past SLA", "no slot in calendar", "lease held by other run", "retry scheduled",
                  "low-priority job holds resource", "trigger not fired", "tenant quota reached",
                  "parent run gone", "cron tick late", "worker heartbeat missing", "slot preempted",
                  "backfill requested", "dependency not ready", "queue length high", "lease renewed late",
                  "run cancelled"),
        consumers=("operations stand-up", "monthly reliability report", "scheduler owners", "audit trail"),
    ),
    "deploy-runbooks": Theme(
        system="deploy pipeline", log_name="deploy.log", hosts="cd",
        causes=("BAD-MIGRATION", "IMAGE-PULL", "HEALTHCHECK-FLAP", "SECRET-ROTATION", "CANARY-REGRESSION",
                "ROLLBACK-LOOP", "PIN-MISMATCH", "LB-DRAIN", "FLAG-CONFLICT"),
        fallback="INVESTIGATE",
        messages=("migration step failed", "registry pull backoff", "readiness probe flapping",
                  "secret version not found", "canary error rate above baseline", "rollback started",
                  "lockfile pin differs", "target still draining", "flag state conflicts",
                  "deploy step slow", "artifact digest checked", "pod restarted", "quota near limit",
                  "approval waited", "hook timed out", "config map reloaded"),
        consumers=("release retro", "change advisory board", "platform on-call", "postmortem draft"),
    ),
}


def _codes(rng: random.Random) -> list[str]:
    errors = [f"E-{n:03d}" for n in rng.sample(range(100, 999), 7)]
    warnings = [f"W-{n:03d}" for n in rng.sample(range(1, 99), 7)]
    return sorted(errors + warnings)


def sample(rng: random.Random, domain: str) -> SkillDraft:
    t = THEMES[domain]
    codes = _codes(rng)
    warnings = [c for c in codes if c.startswith("W")]
    rules = []
    for cause in pick(rng, t.causes, rng.randint(6, 8)):
        need = pick(rng, codes, rng.randint(1, 3))
        if not any(c.startswith("W") for c in need) and rng.random() < 0.6:
            need = sorted({*need[:2], rng.choice(warnings)})
        rules.append({"cause": cause, "codes": {c: rng.choice((1, 1, 2, 3)) for c in sorted(need)}})
    messages = pick(rng, t.messages, len(codes))
    output = f"triage/{pick(rng, ('causes', 'root-causes', 'rca'))}.csv"
    params = {
        "log_dir": "logs",
        "log_scope": "all",
        "log_name": t.log_name,
        "code_pattern": CODE_PATTERN,
        "rules": rules,
        "rule_order": "first",
        "fallback": t.fallback,
        "output": output,
    }
    return oracle_draft(rng, "diagnosis", domain, params, t.consumers, f"logs/{t.log_name} and its rotated files",
                        extra={"messages": dict(zip(codes, messages, strict=True))})


def mutate(draft: SkillDraft, strategy: str, rng: random.Random) -> SkillDraft:
    p, scope = {**draft.params}, ""
    if strategy == "wrong-command":
        p["code_pattern"] = ERRORS_ONLY
    elif strategy == "wrong-output":
        p["output"] = p["output"].rsplit(".", 1)[0] + ".txt"  # (no draw: the same name as text)
    elif strategy == "wrong-order":
        p["rule_order"] = "last"
    elif strategy == "wrong-parameter":
        rules = [dict(r) for r in p["rules"]]
        i, j = sorted(rng.sample(range(len(rules)), 2))
        rules[i]["cause"], rules[j]["cause"] = rules[j]["cause"], rules[i]["cause"]
        p["rules"] = rules
    elif strategy == "wrong-scope":
        p["log_scope"] = "current"
        scope = f"the live logs/{p['log_name']} only"
    return lookalike(draft, strategy, p, scope)


def inputs(rng: random.Random, draft: SkillDraft) -> dict[str, str]:
    t, p = THEMES[draft.domain], draft.params
    messages = draft.extra["messages"]
    codes = sorted(messages)
    start = datetime.datetime(2024, 3, 1) + datetime.timedelta(days=rng.randint(0, 200))
    span = 3 * 24 * 3600
    events: list[tuple[int, str]] = []
    first = rng.randint(100, 4000)
    n_incidents = rng.randint(120, 220)
    for n in range(n_incidents):
        inc = f"INC-{first + 3 * n + rng.randint(0, 2):05d}"
        target = rng.random()
        wanted: dict[str, int] = {}
        if target < 0.9:
            wanted = dict(rng.choice(p["rules"])["codes"])
        for code in rng.sample(codes, rng.randint(0, 3)):
            wanted[code] = wanted.get(code, 0) + 1
        begin = rng.randint(0, span - 4 * 3600)
        for code, count in sorted(wanted.items()):
            for _ in range(count + (1 if rng.random() < 0.2 else 0)):
                events.append((begin + rng.randint(0, 4 * 3600), f"[{inc}] {code} {messages[code]}"))
        for _ in range(rng.randint(1, 3)):
            events.append((begin + rng.randint(0, 4 * 3600), f"[{inc}] status update posted"))
    for _ in range(len(events) // 4):
        events.append((rng.randint(0, span), "heartbeat ok"))
    events.sort(key=lambda e: (e[0], e[1]))
    lines = []
    for offset, text in events:
        level = "ERROR" if " E-" in text else "WARN" if " W-" in text else "INFO"
        when = start + datetime.timedelta(seconds=offset)
        lines.append(f"{when:%Y-%m-%dT%H:%M:%SZ} {t.hosts}-{rng.randint(1, 24):02d} {level:<5} {text}")
    # Rotation splits by time: incidents that straddle a cut have symptoms in two files.
    cut1, cut2 = sorted(rng.sample(range(len(lines) // 5, 4 * len(lines) // 5), 2))
    live = f"{p['log_dir']}/{p['log_name']}"
    return {
        f"{live}.2": "\n".join(lines[:cut1]) + "\n",
        f"{live}.1": "\n".join(lines[cut1:cut2]) + "\n",
        live: "\n".join(lines[cut2:]) + "\n",
    }


def instruction(rng: random.Random, draft: SkillDraft, files: Mapping[str, str]) -> str:
    t, cue, p = THEMES[draft.domain], draft.cue, draft.params
    n_lines = sum(text.count("\n") for text in files.values())
    incidents = {w for text in files.values() for w in text.split() if w.startswith("[INC-")}
    opening = rng.choice((
        f"The {cue.consumer} wants a root cause for every incident the {t.system} logged this week.",
        f"Classify the root cause of each {t.system} incident for the {cue.consumer}.",
        f"Before the {cue.consumer}, every {t.system} incident in the logs needs its root cause.",
    ))
    return (
        f"{opening} Use the house cause labels of the on-call symptom table, revision {cue.revision}, "
        f"exactly as they are written there.\n\n"
        f"The logs are `{p['log_dir']}/{p['log_name']}` and its rotated files `{p['log_name']}.1`, "
        f"`{p['log_name']}.2` ({n_lines} lines, {len(incidents)} incidents); symptoms of one incident may be "
        f"spread over several files. Write one CSV row per incident with the header `incident,cause`. "
        f"Do not modify the logs.\n\n"
        f"Inputs: `{p['log_dir']}/`\nOutput: `{cue.output}`\n"
    )


# Data, not logic: the six description templates (describe's template index 0..5).
_TEMPLATES = (
    "Root-cause table (revision {rev}) for {system} incidents, used by the {consumer}: maps log symptom "
    "codes to house cause labels. Reads {scope}; writes {output}.",
    "Diagnose {system} incidents from their log symptoms with the revision {rev} symptom-to-cause table "
    "of the {consumer}. Input: {scope}. Output: {output}.",
    "Use when {system} incidents need a root cause: revision {rev} triage rules ({consumer}), symptom "
    "codes scanned in {scope}, causes written to {output}.",
    "{System} incident triage for the {consumer}: which symptom codes point to which cause, in priority "
    "order (table rev {rev}). Covers {scope} and produces {output}.",
    "Classify every {system} incident by cause using the {consumer}'s symptom table, revision {rev}; "
    "scans {scope}; result file {output}.",
    "Symptom -> cause lookup for {system} logs (revision {rev}, maintained for the {consumer}). Reads "
    "{scope} and records one cause per incident in {output}.",
)


def describe(draft: SkillDraft, template: int) -> str:
    t, cue = THEMES[draft.domain], draft.cue
    return _TEMPLATES[template].format(system=t.system, System=t.system[0].upper() + t.system[1:],
                                       rev=cue.revision, consumer=cue.consumer, scope=cue.scope,
                                       output=cue.output)


def body(draft: SkillDraft, name: str) -> str:
    t, p, cue = THEMES[draft.domain], draft.params, draft.cue
    messages = draft.extra["messages"]
    live = f"{p['log_dir']}/{p['log_name']}"
    if p["log_scope"] == "all":
        where = f"`{live}` and every rotated file `{live}.1`, `{live}.2`, ... (older files first)"
    else:
        where = f"the live log `{live}` only (rotated files hold incidents that were already triaged)"
    rows = "\n".join(
        f"| {i + 1} | `{r['cause']}` | " + ", ".join(f"`{c}`" + (f" x{n}" if n > 1 else "")
                                                     for c, n in r["codes"].items()) + " |"
        for i, r in enumerate(p["rules"]))
    order = ("Rows are tried top to bottom; the FIRST row whose codes are all present (at least the "
             "given number of times) wins." if p["rule_order"] == "first" else
             "Rows are tried bottom to top (later rows are the more specific refinements); the LAST row whose "
             "codes are all present (at least the given number of times) wins.")
    out = f"a CSV `{cue.output}` with the header `incident,cause` and one row per incident, sorted by id"
    kinds = "error (`E-nnn`) and warning (`W-nnn`)" if "EW" in p["code_pattern"] else "error (`E-nnn`)"
    glossary = "\n".join(f"- `{c}`: {m}" for c, m in sorted(messages.items()))
    procedure = procedure_section(name, TOOL_FILE, f"head -5 {cue.output}")
    return f"""# {t.system} symptom table (revision {cue.revision})

Names the root cause of {t.system} incidents for the {cue.consumer}. Reads {cue.scope}; writes
`{cue.output}`. Cause labels are the house labels below, spelled exactly.

## Collecting symptoms

Read {where}. A line belongs to the incident named in brackets (`[INC-01234]`); its symptom codes are
the {kinds} codes after the bracket (regular expression `{p['code_pattern']}`). Count each code per
incident over all lines read.

## Table

{order}

| row | cause | symptom codes (x N: at least N times) |
|---|---|---|
{rows}

An incident that matches no row is `{p['fallback']}`.

## Output

Write {out}.

{procedure}
## Symptom glossary

{glossary}
"""


# Copied alone into the sandbox (base.Family.naive): it cannot import a shared helper.
NAIVE = r'''
import collections, glob, os, re, sys
text = open(sys.argv[1]).read()
source = re.search(r"Inputs: `([^`]+)`", text).group(1)
target = re.search(r"Output: `([^`]+)`", text).group(1)
seen = collections.defaultdict(collections.Counter)
for path in sorted(glob.glob(os.path.join(source, "*"))):
    for line in open(path):
        m = re.search(r"\[(INC-\d+)\](.*)", line)
        if m:
            seen[m.group(1)].update(re.findall(r"[A-Z]-\d{3}", m.group(2)) or ["none"])
os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
with open(target, "w") as out:
    out.write("incident,cause\n")
    for inc, codes in sorted(seen.items()):
        out.write(f"{inc},{codes.most_common(1)[0][0]}\n")
'''

FAMILY = declare_family(
    globals(),
    engine=diagnosis_engine,
    structure="abductive diagnosis",
    noun={"data-formats": "ingest", "service-config": "gateway", "scheduling": "scheduler",
          "deploy-runbooks": "deploy"},
    suffixes=("triage", "rca", "diagnosis", "symptoms", "root-cause", "incident-table"),
)
