"""Constraint satisfaction: place items into bins under a house policy (engines/constraints.py).

The non-obvious knowledge a skill holds: the headroom percentage, the spread limit per group, which
kind is pinned to which bins, the per-bin item cap, and the first-fit method that keeps spare bins
empty. The verifier checks the rules, so any valid assignment passes. Instances are planted: a
valid assignment with slack exists by construction.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from skillgate_core.benchgen.engines import constraints as constraints_engine
from skillgate_core.benchgen.engines.common import format_csv
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

TOOL_FILE = "place_items.py"
"""The skill's script under scripts/ (the SKILL.md procedure calls it)."""


# Alike by design below: the layout base.py gives every family (Theme, THEMES, six functions, NAIVE).
@dataclass(frozen=True)
class Theme:
    """Domain words, files and columns of the constraints family."""

    item: str
    """One item, singular (e.g. "service replica")."""
    bin: str
    """One bin, singular (e.g. "host")."""
    policy: str
    """What the policy is called."""
    item_cols: Mapping[str, str]
    """Role (id, size, group, kind) -> column of the items file."""
    bin_cols: Mapping[str, str]
    """Role (id, capacity, flag, state) -> column of the bins file."""
    items_file: str
    """Items CSV."""
    bins_file: str
    """Bins CSV."""
    output_dir: str
    """Folder of the output file."""
    stems: tuple[str, ...]
    """Output file stems."""
    groups: tuple[str, ...]
    """Group names."""
    kinds: tuple[str, ...]
    """Item kinds (three)."""
    flags: tuple[str, ...]
    """Bin flags (three)."""
    states: tuple[str, str]
    """(usable state, blocked state) of bins."""
    bin_prefix: str
    """Bin id prefix."""
    sizes: tuple[int, ...]
    """Item sizes."""
    capacities: tuple[int, ...]
    """Bin capacities."""
    consumers: tuple[str, ...]
    """Who asks for the assignment."""


# Data, not logic: one Theme per domain.
THEMES: dict[str, Theme] = {
    "service-config": Theme(
        item="service replica", bin="host", policy="placement policy",
        item_cols={"id": "replica", "size": "mem_mb", "group": "service", "kind": "class"},
        bin_cols={"id": "host", "capacity": "mem_mb", "flag": "zone", "state": "state"},
        items_file="requests/replicas.csv", bins_file="inventory/hosts.csv", output_dir="plans",
        stems=("placement", "replica-hosts", "schedule"),
        groups=("billing", "search", "auth", "gateway", "notify", "profile", "catalog", "cart", "media",
                "ledger", "report", "queue", "cache", "sync", "admin", "export", "import", "pricing", "fraud",
                "ads", "inbox", "geo", "maps", "feeds", "tags", "stock", "orders", "users", "audit", "chat"),
        kinds=("stateful", "stateless", "batch"), flags=("zone-a", "zone-b", "zone-c"),
        states=("ready", "draining"), bin_prefix="host",
        sizes=(512, 1024, 1536, 2048, 3072, 4096), capacities=(16384, 24576, 32768),
        consumers=("fleet rebalance", "zone failover drill", "quarterly capacity plan", "cost review"),
    ),
    "scheduling": Theme(
        item="maintenance job", bin="maintenance window", policy="window booking policy",
        item_cols={"id": "job", "size": "minutes", "group": "pipeline", "kind": "class"},
        bin_cols={"id": "window", "capacity": "minutes", "flag": "site", "state": "status"},
        items_file="jobs/queue.csv", bins_file="calendar/windows.csv", output_dir="schedule",
        stems=("assignments", "bookings", "window-plan"),
        groups=("vacuum", "reindex", "backup", "rotate", "compact", "scrub", "resync", "patch", "audit",
                "purge", "rollup", "export", "warmup", "verify", "snapshot", "dedupe", "rekey", "trim",
                "archive", "refresh", "reseed", "balance", "prune", "repair", "restage", "crawl", "score",
                "sweep", "fsck", "migrate"),
        kinds=("exclusive", "shared", "io-heavy"), flags=("site-north", "site-south", "site-east"),
        states=("open", "frozen"), bin_prefix="win",
        sizes=(15, 20, 30, 45, 60, 90), capacities=(360, 480, 600),
        consumers=("weekend maintenance plan", "change freeze prep", "ops calendar review", "DR rehearsal"),
    ),
    "data-formats": Theme(
        item="dataset partition", bin="archive volume", policy="archive layout policy",
        item_cols={"id": "partition", "size": "size_mb", "group": "dataset", "kind": "sensitivity"},
        bin_cols={"id": "volume", "capacity": "size_mb", "flag": "encryption", "state": "status"},
        items_file="partitions/pending.csv", bins_file="volumes/catalog.csv", output_dir="archive",
        stems=("layout", "volume-map", "placement"),
        groups=("orders", "users", "clicks", "payments", "events", "ledger", "sessions", "invoices",
                "shipments", "reviews", "search", "ads", "inventory", "returns", "tickets", "calls", "leads",
                "quotes", "refunds", "devices", "sensors", "trips", "bookings", "claims", "loans", "trades",
                "prices", "rates", "alerts", "logins"),
        kinds=("pii", "internal", "public"), flags=("kms", "sse", "none"),
        states=("online", "sealed"), bin_prefix="vol",
        sizes=(200, 350, 500, 800, 1200, 2000), capacities=(8000, 12000, 16000),
        consumers=("cold-storage migration", "retention audit", "storage cost review", "legal hold sweep"),
    ),
    "deploy-runbooks": Theme(
        item="deploy job", bin="release train", policy="release train policy",
        item_cols={"id": "deploy", "size": "minutes", "group": "team", "kind": "risk"},
        bin_cols={"id": "train", "capacity": "minutes", "flag": "track", "state": "status"},
        items_file="deploys/requests.csv", bins_file="trains/calendar.csv", output_dir="release",
        stems=("trains", "boarding", "train-plan"),
        groups=("payments", "identity", "growth", "search", "mobile", "web", "infra", "data", "ml", "ads",
                "checkout", "catalog", "support", "billing", "security", "platform", "edge", "storage",
                "messaging", "maps", "media", "risk", "ledger", "partner", "tax", "pricing", "loyalty",
                "fleet", "ops", "core"),
        kinds=("schema", "app", "infra"), flags=("maintenance", "standard", "express"),
        states=("open", "closed"), bin_prefix="train",
        sizes=(10, 15, 20, 30, 45, 60), capacities=(240, 300, 360),
        consumers=("weekly release planning", "holiday freeze prep", "platform migration", "incident backlog"),
    ),
}


def sample(rng: random.Random, domain: str) -> SkillDraft:
    t = THEMES[domain]
    output = f"{t.output_dir}/{pick(rng, t.stems)}.csv"
    params = {
        "items_file": t.items_file,
        "bins_file": t.bins_file,
        "item_cols": dict(t.item_cols),
        "bin_cols": dict(t.bin_cols),
        "usable_state": t.states[0],
        "bin_scope": "usable",
        "headroom_pct": pick(rng, (70, 75, 80, 85)),
        "max_per_group": pick(rng, (1, 2)),
        "restricted": {"kind": pick(rng, t.kinds), "flags": pick(rng, t.flags, rng.choice((1, 2)))},
        "max_items": pick(rng, (0, 0, 6, 7, 8)),
        "strategy": "spread",
        "check_after_add": True,
        "output": output,
    }
    return oracle_draft(rng, "constraints", domain, params, t.consumers, f"the {t.states[0]} {t.bin}s in {t.bins_file}")


def mutate(draft: SkillDraft, strategy: str, rng: random.Random) -> SkillDraft:
    t, p, scope = THEMES[draft.domain], {**draft.params}, ""
    if strategy == "wrong-command":
        p["strategy"] = "pack"
    elif strategy == "wrong-output":
        p["output"] = other_file(rng, p["output"], (f"{s}.csv" for s in t.stems))
    elif strategy == "wrong-order":
        p["check_after_add"] = False
    elif strategy == "wrong-parameter":
        p["headroom_pct"] = p["headroom_pct"] + 10
    elif strategy == "wrong-scope":
        p["bin_scope"] = "all"
        scope = f"every {t.bin} listed in {t.bins_file}"
    return lookalike(draft, strategy, p, scope)


def inputs(rng: random.Random, draft: SkillDraft) -> dict[str, str]:
    """A planted instance: groups are placed on usable bins up to 55-80% of each bin's limit."""
    t, p = THEMES[draft.domain], draft.params
    n_bins = rng.randint(16, 28)
    numbers = sorted(rng.sample(range(1, 99), n_bins))
    bins = []
    for n in numbers:
        state = t.states[1] if rng.random() < 0.2 else t.states[0]
        bins.append({"id": f"{t.bin_prefix}-{n:02d}", "capacity": pick(rng, t.capacities),
                     "flag": pick(rng, t.flags), "state": state})
    usable = [b for b in bins if b["state"] == t.states[0]]
    budget = {b["id"]: b["capacity"] * p["headroom_pct"] // 100 * rng.randint(55, 80) // 100 for b in usable}
    count = {b["id"]: 0 for b in usable}
    restricted = p["restricted"]
    # Each group name is used once, so the planted assignment spreads groups by construction.
    items: list[list[str]] = []
    groups = [*t.groups, *(f"{g}-b" for g in t.groups)]
    rng.shuffle(groups)
    per_group = p["max_per_group"]
    for group in groups:
        kind = pick(rng, t.kinds)
        size = pick(rng, t.sizes)
        replicas = rng.randint(1, 4)
        allowed = [b for b in usable if kind != restricted["kind"] or b["flag"] in restricted["flags"]]
        fits = [b for b in allowed if budget[b["id"]] >= size
                and (not p["max_items"] or count[b["id"]] < p["max_items"])]
        if len(fits) * per_group < replicas:
            continue
        chosen = rng.sample(fits, min(len(fits), replicas))
        for b in chosen:
            budget[b["id"]] -= size
            count[b["id"]] += 1
            items.append([f"{group}-{len(items) + 1:03d}", str(size), group, kind])
        if sum(budget.values()) < min(t.sizes) * len(usable):
            break
    rng.shuffle(items)
    ic, bc = t.item_cols, t.bin_cols
    return {
        t.items_file: format_csv([ic["id"], ic["size"], ic["group"], ic["kind"]], items),
        t.bins_file: format_csv([bc["id"], bc["capacity"], bc["flag"], bc["state"]],
                                [[b["id"], str(b["capacity"]), b["flag"], b["state"]] for b in bins]),
    }


def instruction(rng: random.Random, draft: SkillDraft, files: Mapping[str, str]) -> str:
    t, cue = THEMES[draft.domain], draft.cue
    n_items = files[t.items_file].count("\n") - 1
    n_bins = files[t.bins_file].count("\n") - 1
    opening = rng.choice((
        f"The {cue.consumer} needs every {t.item} assigned to a {t.bin}.",
        f"Assign the queued {t.item}s to {t.bin}s for the {cue.consumer}.",
        f"For the {cue.consumer}, work out which {t.bin} each {t.item} goes to.",
    ))
    return (
        f"{opening} The assignment must satisfy the house {t.policy}, revision {cue.revision}; any "
        f"assignment that satisfies it is fine.\n\n"
        f"The {n_items} {t.item}s are in `{t.items_file}` and the {n_bins} {t.bin}s in `{t.bins_file}`. "
        f"{t.bin.capitalize()}s whose `{t.bin_cols['state']}` is `{t.states[1]}` must stay empty. Write a CSV "
        f"with the header `{t.item_cols['id']},{t.bin_cols['id']}` and one row per {t.item}. Do not modify "
        f"the input files.\n\n"
        f"Inputs: `{t.items_file}`, `{t.bins_file}`\nOutput: `{cue.output}`\n"
    )


# Data, not logic: the six description templates (describe's template index 0..5).
_TEMPLATES = (
    "Places {items} on {bins} under the {policy} (revision {rev}) of the {consumer}: headroom, spreading "
    "and pinning rules. Uses {scope}; writes {output}.",
    "Assign {items} to {bins} following revision {rev} of the {consumer}'s {policy}. Considers {scope} and "
    "writes the assignment to {output}.",
    "Use when {items} must be fitted onto {bins}: the {policy}, rev {rev}, as applied by the {consumer}; "
    "candidates are {scope}; output {output}.",
    "{Policy} solver for {items} ({consumer}, revision {rev}): first-fit over {scope}, result in {output}.",
    "How the {consumer} packs {items} into {bins}: {policy} revision {rev}, reading {scope} and writing "
    "{output}.",
    "Fit {items} onto {bins} without breaking the {consumer}'s {policy} (revision {rev}); works over "
    "{scope}; emits {output}.",
)


def describe(draft: SkillDraft, template: int) -> str:
    t, cue = THEMES[draft.domain], draft.cue
    return _TEMPLATES[template].format(items=t.item + "s", bins=t.bin + "s", policy=t.policy,
                                       Policy=t.policy[0].upper() + t.policy[1:], rev=cue.revision,
                                       consumer=cue.consumer, scope=cue.scope, output=cue.output)


def body(draft: SkillDraft, name: str) -> str:
    t, p, cue = THEMES[draft.domain], draft.params, draft.cue
    ic, bc = t.item_cols, t.bin_cols
    r = p["restricted"]
    if p["bin_scope"] == "usable":
        scope = (f"Only {t.bin}s whose `{bc['state']}` is `{p['usable_state']}` take {t.item}s; the others "
                 f"stay empty.")
    else:
        scope = f"Every {t.bin} in `{t.bins_file}` is a candidate, whatever its `{bc['state']}`."
    if p["check_after_add"]:
        headroom = (f"Headroom: the total `{ic['size']}` on a {t.bin} may reach at most {p['headroom_pct']}% "
                    f"of its `{bc['capacity']}` (check the load *with* the new {t.item} added).")
    else:
        headroom = (f"Headroom: a {t.bin} accepts another {t.item} while its current load is below "
                    f"{p['headroom_pct']}% of its `{bc['capacity']}` (check the load *before* adding).")
    if p["strategy"] == "spread":
        spread = (f"Spread: at most {p['max_per_group']} {t.item}(s) of the same `{ic['group']}` on one "
                  f"{t.bin}.")
    else:
        spread = (f"Spread is enforced later by the runtime, so placement packs tightly and does not look at "
                  f"`{ic['group']}`.")
    flags = " or ".join(f"`{f}`" for f in r["flags"])
    cap = (f"At most {p['max_items']} {t.item}s per {t.bin}." if p["max_items"] else
           f"There is no limit on the number of {t.item}s per {t.bin}.")
    procedure = procedure_section(name, TOOL_FILE, f"wc -l {cue.output}")
    return f"""# {t.policy.capitalize()} (revision {cue.revision})

Assigns {t.item}s to {t.bin}s for the {cue.consumer}. Considers {cue.scope}; writes `{cue.output}`.

## Policy

1. {scope}
2. {headroom}
3. {spread}
4. Pinning: {t.item}s whose `{ic['kind']}` is `{r['kind']}` go only to {t.bin}s whose `{bc['flag']}` is
   {flags}.
5. {cap}

## Method

First-fit keeps spare capacity in whole {t.bin}s: take the `{r['kind']}` {t.item}s first, then the others
by `{ic['size']}` (largest first) and id; put each on the first {t.bin} (by id) that takes it under rules
1-5. If some {t.item}s fit nowhere, start over with those {t.item}s at the front of the order (repeat
up to 60 times).

## Output

A CSV `{cue.output}` with the header `{ic['id']},{bc['id']}` and one row per {t.item}.

{procedure}"""


# Copied alone into the sandbox (base.Family.naive): it cannot import a shared helper.
NAIVE = r'''
import csv, os, re, sys
text = open(sys.argv[1]).read()
items_file, bins_file = re.findall(r"`([^`]+)`", re.search(r"Inputs: (.*)", text).group(1))
target = re.search(r"Output: `([^`]+)`", text).group(1)
header = re.search(r"header `([^`]+)`", text).group(1)
items = list(csv.reader(open(items_file)))[1:]
bins = list(csv.reader(open(bins_file)))[1:]
load = {b[0]: 0 for b in bins}
rows = []
for item in sorted(items, key=lambda r: -int(r[1])):
    for b in bins:
        if load[b[0]] + int(item[1]) <= int(b[1]):
            load[b[0]] += int(item[1])
            rows.append((item[0], b[0]))
            break
os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
with open(target, "w") as out:
    out.write(header + "\n")
    out.writelines(f"{i},{b}\n" for i, b in rows)
'''

FAMILY = declare_family(
    globals(),
    engine=constraints_engine,
    structure="constraint satisfaction",
    noun={"service-config": "placement", "scheduling": "windows", "data-formats": "archive",
          "deploy-runbooks": "trains"},
    suffixes=("policy", "planner", "solver", "assign", "fit", "allocator"),
)
