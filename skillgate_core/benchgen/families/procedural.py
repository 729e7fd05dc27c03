"""Procedural execution: deliver records in a house interchange format (engines/procedural.py).

The non-obvious knowledge a skill holds: separator, field order, key and date styles, amount units
and rounding, the amendment/status rule, the sort order and the checksum trailer. Without it the
output cannot match; following it step by step (one script call) does.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Mapping
from dataclasses import dataclass

from skillgate_core.benchgen.engines import procedural as procedural_engine
from skillgate_core.benchgen.engines.common import format_csv
from skillgate_core.benchgen.engines.procedural import CHECKSUMS, KEY_STYLES
from skillgate_core.benchgen.families.base import (  # names, not logic: the parts every family shares
    SkillDraft,
    declare_family,
    lookalike,
    oracle_draft,
    other_file,
    pick,
    procedure_section,
)

__all__ = ["FAMILY"]

TOOL_FILE = "export_records.py"
"""The skill's script under scripts/ (the SKILL.md procedure calls it)."""


# Alike by design below: the layout base.py gives every family (Theme, THEMES, six functions, NAIVE).
@dataclass(frozen=True)
class Theme:
    """Domain words and columns of the procedural family."""

    record: str
    """Records, plural (e.g. "invoice records")."""
    columns: Mapping[str, str]
    """Role -> CSV column."""
    id_prefix: str
    """Record id prefix."""
    key_words: tuple[str, ...]
    """Words keys are made of."""
    groups: tuple[str, ...]
    """Values of the group column."""
    amount_range: tuple[int, int]
    """Amounts are drawn in [lo, hi)."""
    keep_status: str
    """The ordinary status."""
    drop_candidates: tuple[str, ...]
    """Statuses a format may drop (two of them are)."""
    base_dir: str
    """Folder holding incoming/ and archive/."""
    output_dir: str
    """Folder of the output file."""
    stems: tuple[str, ...]
    """Output file stems."""
    format_name: str
    """What the format is called."""
    magic_prefixes: tuple[str, ...]
    """Header tags."""
    consumers: tuple[str, ...]
    """Who consumes such files."""


# Data, not logic: one Theme per domain.
THEMES: dict[str, Theme] = {
    "data-formats": Theme(
        record="invoice records",
        columns={"id": "invoice_id", "key": "customer", "group": "region", "amount": "amount",
                 "date": "issued", "status": "status"},
        id_prefix="INV",
        key_words=("acme", "nordwind", "blue", "harbor", "delta", "orion", "summit", "pioneer", "atlas",
                   "cedar", "trading", "logistics", "foods", "gmbh", "ltd", "systems", "partners", "retail"),
        groups=("EMEA", "APAC", "AMER", "LATAM", "NORDICS"),
        amount_range=(5, 9000),
        keep_status="posted",
        drop_candidates=("void", "draft", "hold"),
        base_dir="data",
        output_dir="export",
        stems=("ledger", "gl-feed", "close"),
        format_name="ledger interchange file",
        magic_prefixes=("HLF", "LIF", "GLX"),
        consumers=("month-end close", "tax reporting", "intraday cash preview", "audit sampling"),
    ),
    "service-config": Theme(
        record="service registrations",
        columns={"id": "svc_id", "key": "service", "group": "tier", "amount": "cpu_cores",
                 "date": "registered", "status": "state"},
        id_prefix="SVC",
        key_words=("billing", "search", "auth", "gateway", "ledger", "notify", "profile", "catalog", "cart",
                   "media", "api", "worker", "cache", "sync", "edge", "report", "admin", "queue"),
        groups=("gold", "silver", "bronze", "internal"),
        amount_range=(0, 64),
        keep_status="active",
        drop_candidates=("retired", "pending", "suspended"),
        base_dir="inventory",
        output_dir="registry",
        stems=("services", "catalog", "mesh-registry"),
        format_name="service registry bundle",
        magic_prefixes=("SRB", "REG", "MSH"),
        consumers=("mesh control plane", "capacity review", "cost dashboard", "on-call directory"),
    ),
    "scheduling": Theme(
        record="timesheet entries",
        columns={"id": "entry_id", "key": "employee", "group": "team", "amount": "hours",
                 "date": "shift_date", "status": "approval"},
        id_prefix="TS",
        key_words=("ana", "li", "noor", "jonas", "mei", "omar", "sara", "tomas", "ivy", "kofi", "lena",
                   "marek", "priya", "ravi", "yuki", "zoe", "de", "van"),
        groups=("ops", "support", "field", "night", "dispatch"),
        amount_range=(1, 13),
        keep_status="approved",
        drop_candidates=("rejected", "pending", "disputed"),
        base_dir="timesheets",
        output_dir="payroll",
        stems=("timesheet", "hours-feed", "payrun"),
        format_name="payroll timesheet feed",
        magic_prefixes=("PTF", "HRS", "PAY"),
        consumers=("fortnightly payroll run", "overtime audit", "staffing forecast", "union report"),
    ),
    "deploy-runbooks": Theme(
        record="build artifacts",
        columns={"id": "artifact_id", "key": "artifact", "group": "channel", "amount": "size_mb",
                 "date": "built", "status": "state"},
        id_prefix="ART",
        key_words=("billing", "search", "auth", "api", "worker", "web", "cli", "agent", "proxy", "ui",
                   "sdk", "core", "plugin", "bundle", "image", "chart", "lambda", "job"),
        groups=("stable", "beta", "nightly", "lts"),
        amount_range=(1, 900),
        keep_status="published",
        drop_candidates=("yanked", "staged", "quarantined"),
        base_dir="builds",
        output_dir="release",
        stems=("manifest", "release-index", "bom"),
        format_name="release manifest",
        magic_prefixes=("RMF", "BOM", "RIX"),
        consumers=("production promotion", "security scan", "mirror sync", "license review"),
    ),
}

DATE_STYLES = {"%Y%m%d": "YYYYMMDD", "%d.%m.%Y": "DD.MM.YYYY", "%Y-%j": "YYYY-DDD (day of year)",
               "%m/%d/%Y": "MM/DD/YYYY"}
ROUNDINGS = {"ROUND_HALF_EVEN": "half to even (banker's rounding)", "ROUND_HALF_UP": "half up",
             "ROUND_DOWN": "toward zero (truncate)", "ROUND_CEILING": "up (ceiling)"}
KEY_STYLE_WORDS = {"upper_underscore": "upper case, words joined by underscores (ACME_TRADING)",
                   "lower_dash": "lower case, words joined by dashes (acme-trading)",
                   "title_nospace": "capitalised words run together (AcmeTrading)"}
SEPARATORS = {"|": "a pipe `|`", ";": "a semicolon `;`", "~": "a tilde `~`", "\t": "a TAB character"}
CHECKSUM_WORDS = {"crc32": "CRC-32 (zlib.crc32)", "adler32": "Adler-32 (zlib.adler32)",
                  "sha1": "the first 8 hex digits of SHA-1", "md5": "the first 8 hex digits of MD5"}
ROLES = ("id", "key", "group", "amount", "date")


def sample(rng: random.Random, domain: str) -> SkillDraft:
    t = THEMES[domain]
    fields = ["id", "amount", *pick(rng, ("key", "group", "date"), rng.choice((2, 3)))]
    rng.shuffle(fields)
    first = pick(rng, ("group", "date", "key", "amount"))
    incoming, archive = f"{t.base_dir}/incoming", f"{t.base_dir}/archive"
    output = f"{t.output_dir}/{pick(rng, t.stems)}.{pick(rng, ('dat', 'txt', 'feed', 'out'))}"
    params = {
        "input_dirs": [incoming],
        "columns": dict(t.columns),
        "dedupe_first": rng.random() < 0.5,
        "drop_status": pick(rng, t.drop_candidates, 2),
        "key_style": pick(rng, KEY_STYLES),
        "amount_scale": pick(rng, (10, 100)),
        "rounding": pick(rng, ROUNDINGS),
        "date_style": pick(rng, DATE_STYLES),
        "fields": fields,
        "sort": [[first, pick(rng, ("asc", "desc"))], ["id", "asc"]],
        "sep": pick(rng, SEPARATORS),
        "magic": pick(rng, t.magic_prefixes) + str(rng.randint(1, 9)),
        "checksum": pick(rng, CHECKSUMS),
        "output": output,
    }
    return oracle_draft(rng, "procedural", domain, params, t.consumers, f"the batches in {incoming}/",
                        extra={"archive": archive, "incoming": incoming})


def mutate(draft: SkillDraft, strategy: str, rng: random.Random) -> SkillDraft:
    p, scope = {**draft.params}, ""
    if strategy == "wrong-command":
        p["checksum"] = pick(rng, set(CHECKSUMS) - {p["checksum"]})
    elif strategy == "wrong-output":
        stem = p["output"].rpartition("/")[2].rpartition(".")[0]
        p["output"] = other_file(rng, p["output"], (f"{stem}.{ext}" for ext in ("dat", "txt", "feed", "out", "csv")))
    elif strategy == "wrong-order":
        p["dedupe_first"] = not p["dedupe_first"]
    elif strategy == "wrong-parameter":
        # Half-way modes differ from each other only on ties: a lookalike flips to the other kind.
        halves = {"ROUND_HALF_EVEN", "ROUND_HALF_UP"}
        p["rounding"] = pick(rng, set(ROUNDINGS) - halves if p["rounding"] in halves else halves)
    elif strategy == "wrong-scope":
        p["input_dirs"] = [THEMES[draft.domain].base_dir]
        scope = f"every batch under {THEMES[draft.domain].base_dir}/ (incoming and archived)"
    return lookalike(draft, strategy, p, scope)


def _key(rng: random.Random, t: Theme) -> str:
    words = pick(rng, t.key_words, rng.randint(2, 3))
    style = rng.random()
    text = " ".join(w.capitalize() for w in words)
    return text + (" & Co." if style < 0.15 else ", Inc." if style < 0.3 else "")


def _amount(rng: random.Random, t: Theme) -> str:
    lo, hi = t.amount_range
    units = rng.randint(lo * 1000, hi * 1000)
    if rng.random() < 0.3:  # exact half-way cases (for 1/10 and 1/100 units) make rounding matter
        units = units - units % 100 + rng.choice((5, 25, 50, 75, 50))
    return f"{units // 1000}.{units % 1000:03d}"


def inputs(rng: random.Random, draft: SkillDraft) -> dict[str, str]:
    t = THEMES[draft.domain]
    cols = t.columns
    header = [cols[r] for r in ("id", "key", "group", "amount", "date", "status")]
    statuses = [t.keep_status] * 6 + list(t.drop_candidates)
    start = datetime.date(2024, 1, 1) + datetime.timedelta(days=rng.randint(0, 300))
    next_id = rng.randint(1000, 5000)

    def record(day: datetime.date, status: str | None = None) -> list[str]:
        nonlocal next_id
        next_id += rng.randint(1, 7)
        return [f"{t.id_prefix}-{next_id:06d}", _key(rng, t), pick(rng, t.groups), _amount(rng, t),
                day.isoformat(), status or rng.choice(statuses)]

    files: dict[str, str] = {}
    archive_ids: list[list[str]] = []
    for n in range(rng.randint(2, 3)):
        day = start - datetime.timedelta(days=30 * (n + 1))
        rows = [record(day + datetime.timedelta(days=rng.randint(0, 27))) for _ in range(rng.randint(40, 90))]
        archive_ids.extend(rows)
        files[f"{draft.extra['archive']}/batch-{day:%Y%m%d}.csv"] = format_csv(header, rows)
    seen: list[list[str]] = []
    for n in range(rng.randint(3, 4)):
        day = start + datetime.timedelta(days=7 * n)
        rows = [record(day + datetime.timedelta(days=rng.randint(0, 6))) for _ in range(rng.randint(70, 120))]
        # Amendments: a later line repeats an earlier id with a new amount or status. Some turn a
        # record void, some revive a dropped one: the merge/filter order decides both kinds.
        for _ in range(rng.randint(4, 9) if seen else 0):
            old = rng.choice(seen)
            status = rng.choice([*t.drop_candidates, t.keep_status, t.keep_status])
            rows.insert(rng.randint(0, len(rows)), [old[0], old[1], old[2], _amount(rng, t), old[4], status])
        known = {s[0] for s in seen}
        seen.extend(r for r in rows if r[0] not in known)
        files[f"{draft.extra['incoming']}/batch-{day:%Y%m%d}.csv"] = format_csv(header, rows)
    return files


def instruction(rng: random.Random, draft: SkillDraft, files: Mapping[str, str]) -> str:
    t = THEMES[draft.domain]
    p, cue = draft.params, draft.cue
    incoming = [f for f in files if f.startswith(draft.extra["incoming"] + "/")]
    lines = sum(files[f].count("\n") - 1 for f in incoming)
    opening = rng.choice((
        f"The {cue.consumer} needs this period's {t.record} as a {t.format_name}.",
        f"Prepare the {t.format_name} for the {cue.consumer} from the {t.record} received this period.",
        f"We owe the {cue.consumer} a {t.format_name} built from the latest {t.record}.",
    ))
    return (
        f"{opening} It must follow the house {p['magic']} layout, revision {cue.revision}, exactly as "
        f"the {cue.consumer} importer expects it.\n\n"
        f"Use every record in the incoming batches under `{draft.extra['incoming']}/` ({len(incoming)} CSV files, "
        f"{lines} lines). The batches under `{draft.extra['archive']}/` were delivered earlier and must not "
        f"be included. Do not modify the input files.\n\n"
        f"Inputs: `{draft.extra['incoming']}/`\nOutput: `{cue.output}`\n"
    )


# Data, not logic: the six description templates (describe's template index 0..5).
_TEMPLATES = (
    "Exports {record} to the {magic} {fmt} (revision {rev}) used by the {consumer}. Reads {scope} and "
    "writes {output}. Use when {record} must be delivered as {magic} files.",
    "Convert {record} into {magic} {fmt}s, revision {rev}, for the {consumer}: covers {scope}, output "
    "{output}. Use for {magic} exports and re-exports.",
    "{magic} export procedure (rev. {rev}) for the {consumer}. Takes {scope}, merges amendments, "
    "filters statuses and writes the checksummed {fmt} to {output}.",
    "Use this to produce the {consumer}'s {fmt} from {record}: revision {rev} of the {magic} rules for "
    "{scope}; the result goes to {output}.",
    "How to build a {fmt} ({magic} rev {rev}) out of {record} for the {consumer}, reading {scope} and "
    "writing {output}. Includes the field layout and trailer rules.",
    "{magic} writer for {record}: the revision {rev} layout required by the {consumer}; input: {scope}; "
    "output file: {output}. Use when asked for a {magic} delivery.",
)


def describe(draft: SkillDraft, template: int) -> str:
    t, cue = THEMES[draft.domain], draft.cue
    return _TEMPLATES[template].format(record=t.record, fmt=t.format_name, magic=draft.params["magic"],
                                       rev=cue.revision, consumer=cue.consumer, scope=cue.scope,
                                       output=cue.output)


def body(draft: SkillDraft, name: str) -> str:
    t, p, cue = THEMES[draft.domain], draft.params, draft.cue
    cols = p["columns"]
    drop = " or ".join(f"`{s}`" for s in p["drop_status"])
    if p["dedupe_first"]:
        merge = (f"First merge amendments: when an `{cols['id']}` appears more than once, the last line "
                 f"(in file-name order, then line order) replaces the earlier ones. Then drop every record "
                 f"whose `{cols['status']}` is {drop}: an amendment to {drop} removes the record.")
    else:
        merge = (f"First drop every line whose `{cols['status']}` is {drop}. Then merge amendments among the "
                 f"remaining lines: when an `{cols['id']}` appears more than once, the last line (in file-name "
                 f"order, then line order) replaces the earlier ones.")
    sort = ", then ".join(f"`{cols.get(r, r)}` {'descending' if d == 'desc' else 'ascending'}"
                          + (" (numeric value)" if r == "amount" else "") for r, d in p["sort"])
    dirs = " and ".join(f"`{d}/`" for d in p["input_dirs"])
    fields = ", ".join(f"`{cols[f]}`" for f in p["fields"])
    procedure = procedure_section(name, TOOL_FILE, f"wc -l {cue.output}", "the script applies rules 1-8; ")
    return f"""# {p['magic']} {t.format_name} (revision {cue.revision})

Delivers {t.record} to the {cue.consumer} as a {p['magic']} {t.format_name}. Reads {cue.scope}; writes
`{cue.output}`. The importer rejects a file that differs in any byte of a line, so every rule below
matters.

## Rules

1. Input: every `*.csv` file under {dirs} (sub-folders included), in path order; lines in file order.
2. {merge}
3. Key: `{cols['key']}` is written {KEY_STYLE_WORDS[p['key_style']]}; punctuation is dropped.
4. Amount: `{cols['amount']}` times {p['amount_scale']}, as an integer, rounded {ROUNDINGS[p['rounding']]}.
5. Date: `{cols['date']}` (ISO in the input) written as {DATE_STYLES[p['date_style']]}
   (strftime `{p['date_style']}`).
6. Body lines: the fields {fields} in this order, separated by {SEPARATORS[p['sep']]}; lines sorted by {sort}.
7. Header line: `{p['magic']}<SEP><number of body lines>`. Trailer line: `END<SEP><checksum>`, where the
   checksum is {CHECKSUM_WORDS[p['checksum']]} of the body lines joined with `\\n` (no trailing
   newline), as 8 upper-case hex digits.
8. Write the file to `{cue.output}` with `\\n` line endings.

{procedure}"""


# Copied alone into the sandbox (base.Family.naive): it cannot import a shared helper.
NAIVE = r'''
import csv, glob, os, re, sys
text = open(sys.argv[1]).read()
source = re.search(r"Inputs: `([^`]+)`", text).group(1)
target = re.search(r"Output: `([^`]+)`", text).group(1)
rows = []
for path in sorted(glob.glob(os.path.join(source, "**", "*.csv"), recursive=True)):
    with open(path) as fh:
        rows.extend(list(csv.reader(fh))[1:])
os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
with open(target, "w") as out:
    out.write(f"HEADER|{len(rows)}\n")
    for row in rows:
        out.write("|".join(row) + "\n")
'''

FAMILY = declare_family(
    globals(),
    engine=procedural_engine,
    structure="procedural execution",
    noun={"data-formats": "ledger", "service-config": "registry", "scheduling": "timesheet",
          "deploy-runbooks": "manifest"},
    suffixes=("export", "exporter", "writer", "convert", "feed", "bundle"),
)
