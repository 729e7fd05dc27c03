"""Partial-order planning: order runbook steps under house ordering rules (engines/planning.py).

The non-obvious knowledge a skill holds: the order of actions within one component, and for some
actions the order of the layers across components. The verifier checks every rule, so any valid
order passes. Steps carry shuffled ids, so sorting by id or keeping the file order fails.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from skillgate_core.benchgen.engines import planning as planning_engine
from skillgate_core.benchgen.engines.common import format_csv
from skillgate_core.benchgen.engines.planning import edges, topo_order
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

TOOL_FILE = "order_steps.py"
"""The skill's script under scripts/ (the SKILL.md procedure calls it)."""


# Alike by design below: the layout base.py gives every family (Theme, THEMES, six functions, NAIVE).
@dataclass(frozen=True)
class Theme:
    """Domain words, files and columns of the planning family."""

    runbook: str
    """What the ordered steps are (e.g. "production deploy runbook")."""
    component: str
    """One component, singular (e.g. "service")."""
    cols: Mapping[str, str]
    """Role (id, component, action, layer, after) -> column."""
    steps_file: str
    """Steps CSV."""
    output_dir: str
    """Folder of the output file."""
    stems: tuple[str, ...]
    """Output file stems."""
    components: tuple[str, ...]
    """Component names."""
    actions: tuple[str, ...]
    """The six actions."""
    layers: tuple[str, ...]
    """The three layers."""
    id_prefix: str
    """Step id prefix."""
    consumers: tuple[str, ...]
    """Who runs the plan."""


# Data, not logic: one Theme per domain.
THEMES: dict[str, Theme] = {
    "deploy-runbooks": Theme(
        runbook="production deploy runbook", component="service",
        cols={"id": "step", "component": "service", "action": "action", "layer": "tier", "after": "after"},
        steps_file="runbook/steps.csv", output_dir="runbook", stems=("order", "plan", "sequence"),
        components=("billing", "search", "auth", "gateway", "notify", "profile", "catalog", "cart", "media",
                    "ledger", "report", "queue", "cache", "sync", "admin", "pricing", "fraud", "orders",
                    "users", "audit", "chat", "geo", "stock", "inbox", "feeds", "tags", "ads", "maps"),
        actions=("backup", "drain", "migrate", "deploy", "verify", "undrain"),
        layers=("storage", "core", "edge"), id_prefix="S",
        consumers=("Tuesday release", "emergency patch window", "datacenter move", "quarterly upgrade"),
    ),
    "service-config": Theme(
        runbook="config rollout plan", component="component",
        cols={"id": "task", "component": "component", "action": "operation", "layer": "plane", "after": "needs"},
        steps_file="rollout/tasks.csv", output_dir="rollout", stems=("order", "sequence", "apply-order"),
        components=("envoy", "ingress", "authz", "ratelimit", "dns", "tls", "mesh", "cache", "quota", "waf",
                    "router", "registry", "secrets", "flags", "tracing", "metrics", "logging", "cdn", "lb",
                    "proxy", "broker", "scheduler", "vault", "policy", "sidecar", "resolver", "gateway", "api"),
        actions=("render", "lint", "stage", "reload", "probe", "commit"),
        layers=("backend", "mesh", "edge"), id_prefix="T",
        consumers=("TLS renewal rollout", "mesh upgrade", "rate-limit change", "region bring-up"),
    ),
    "data-formats": Theme(
        runbook="format migration plan", component="dataset",
        cols={"id": "op", "component": "dataset", "action": "stage", "layer": "zone", "after": "waits_for"},
        steps_file="migration/ops.csv", output_dir="migration", stems=("order", "schedule", "run-order"),
        components=("orders", "users", "clicks", "payments", "events", "ledger", "sessions", "invoices",
                    "shipments", "reviews", "search", "ads", "inventory", "returns", "tickets", "calls",
                    "leads", "quotes", "refunds", "devices", "sensors", "trips", "bookings", "claims",
                    "loans", "trades", "prices", "alerts"),
        actions=("snapshot", "convert", "validate", "index", "publish", "purge"),
        layers=("raw", "curated", "serving"), id_prefix="OP",
        consumers=("parquet cut-over", "schema v3 migration", "warehouse move", "compliance re-encode"),
    ),
    "scheduling": Theme(
        runbook="calendar change plan", component="pipeline",
        cols={"id": "step", "component": "pipeline", "action": "action", "layer": "stage", "after": "after"},
        steps_file="calendar/change-steps.csv", output_dir="calendar", stems=("order", "plan", "sequence"),
        components=("payroll", "billing", "etl", "backup", "reports", "exports", "reconcile", "invoices",
                    "alerts", "rollups", "digest", "cleanup", "indexer", "crawler", "scoring", "settlement",
                    "forecast", "inventory", "pricing", "ledger", "audit", "archive", "sync", "mailer",
                    "metrics", "snapshots", "refresh", "dedupe"),
        actions=("pause", "drain", "rebase", "resume", "audit", "notify"),
        layers=("upstream", "midstream", "downstream"), id_prefix="C",
        consumers=("daylight-saving switch", "holiday calendar", "fiscal year rollover", "timezone move"),
    ),
}


def sample(rng: random.Random, domain: str) -> SkillDraft:
    t = THEMES[domain]
    ranking = list(t.actions)
    rng.shuffle(ranking)
    chain = [[a, b] for a, b in zip(ranking, ranking[1:], strict=False)]
    # One link left out: two actions stay unordered, so the rules form a partial order.
    chain.pop(rng.randrange(len(chain)))
    layer_rules = {}
    for action in pick(rng, t.actions, 2):
        layers = list(t.layers)
        rng.shuffle(layers)
        layer_rules[action] = layers
    output = f"{t.output_dir}/{pick(rng, t.stems)}.txt"
    params = {
        "steps_file": t.steps_file,
        "cols": dict(t.cols),
        "precedence": chain,
        "layer_rules": layer_rules,
        "use_after": True,
        "mode": "topo",
        "output": output,
        "id_style": "id",
    }
    return oracle_draft(rng, "planning", domain, params, t.consumers,
                        f"the steps in {t.steps_file} with their `{t.cols['after']}` dependencies")


def mutate(draft: SkillDraft, strategy: str, rng: random.Random) -> SkillDraft:
    t, p, scope = THEMES[draft.domain], {**draft.params}, ""
    if strategy == "wrong-command":
        p["mode"] = "by_component"
    elif strategy == "wrong-output":
        p["output"] = other_file(rng, p["output"], (f"{s}.txt" for s in t.stems))
    elif strategy == "wrong-order":
        chain = [list(pair) for pair in p["precedence"]]
        i = rng.randrange(len(chain))
        chain[i] = chain[i][::-1]
        p["precedence"] = chain
    elif strategy == "wrong-parameter":
        rules = {a: list(layers) for a, layers in p["layer_rules"].items()}
        action = pick(rng, rules)
        rules[action] = rules[action][::-1]
        p["layer_rules"] = rules
    elif strategy == "wrong-scope":
        p["use_after"] = False
        scope = f"the steps in {t.steps_file} (rule-derived order only)"
    return lookalike(draft, strategy, p, scope)


def inputs(rng: random.Random, draft: SkillDraft) -> dict[str, str]:
    t, p = THEMES[draft.domain], draft.params
    components = pick(rng, t.components, rng.randint(16, 26))
    numbers = rng.sample(range(100, 1000), len(components) * len(t.actions))
    steps: list[dict] = []
    for component in components:
        layer = pick(rng, t.layers)
        for action in pick(rng, t.actions, rng.randint(4, 6)):
            steps.append({"id": f"{t.id_prefix}-{numbers[len(steps)]}", "component": component,
                          "action": action, "layer": layer, "after": []})
    # Explicit dependencies follow a planted valid order (random ties), so rules + `after` stay acyclic.
    rule_edges = edges({**p, "use_after": False}, steps)
    # topo_order breaks ties by id; relabel with random keys so the planted order is a random one.
    shuffled = [s["id"] for s in steps]
    rng.shuffle(shuffled)
    key = {sid: f"{i:05d}" for i, sid in enumerate(shuffled)}
    back = {k: sid for sid, k in key.items()}
    planted = [back[k] for k in topo_order(sorted(key.values()), {(key[a], key[b]) for a, b in rule_edges})]
    position = {sid: i for i, sid in enumerate(planted)}
    by_id = {s["id"]: s for s in steps}
    for sid in rng.sample(planted[len(planted) // 4:], len(planted) // 6):
        earlier = [o for o in planted[:position[sid]] if by_id[o]["component"] != by_id[sid]["component"]]
        if earlier:
            by_id[sid]["after"] = sorted(rng.sample(earlier, min(len(earlier), rng.randint(1, 2))))
    rng.shuffle(steps)
    c = t.cols
    rows = [[s["id"], s["component"], s["action"], s["layer"], " ".join(s["after"])] for s in steps]
    return {t.steps_file: format_csv([c["id"], c["component"], c["action"], c["layer"], c["after"]], rows)}


def instruction(rng: random.Random, draft: SkillDraft, files: Mapping[str, str]) -> str:
    t, cue = THEMES[draft.domain], draft.cue
    n_steps = files[t.steps_file].count("\n") - 1
    opening = rng.choice((
        f"Put the steps of the {t.runbook} for the {cue.consumer} into an order we can execute.",
        f"The {cue.consumer} needs an execution order for its {t.runbook}.",
        f"Sequence every step of the {t.runbook} for the {cue.consumer}.",
    ))
    return (
        f"{opening} The order must respect the house ordering rules for {t.runbook}s, revision "
        f"{cue.revision}; any order that respects them is fine.\n\n"
        f"The {n_steps} steps are in `{t.steps_file}`; some name explicit prerequisites in the "
        f"`{t.cols['after']}` column, which must also hold. Write every step id exactly once, one per line, "
        f"first step first. Do not modify the input file.\n\n"
        f"Inputs: `{t.steps_file}`\nOutput: `{cue.output}`\n"
    )


# Data, not logic: the six description templates (describe's template index 0..5).
_TEMPLATES = (
    "Ordering rules (revision {rev}) for {runbook}s of the {consumer}: which actions come first within a "
    "{component} and across layers. Reads {scope}; writes {output}.",
    "Sequence {runbook} steps the way the {consumer} requires (rules rev {rev}). Input: {scope}. "
    "Output: {output}.",
    "Use when {runbook} steps need an executable order: revision {rev} precedence rules of the "
    "{consumer}, applied to {scope}, written to {output}.",
    "{Runbook} sequencing for the {consumer}: per-{component} action order plus layer order, "
    "revision {rev}. Covers {scope} and produces {output}.",
    "Plan the order of every {runbook} step under the {consumer}'s rules, revision {rev}; considers "
    "{scope}; result file {output}.",
    "Step ordering for {runbook}s (revision {rev}, maintained for the {consumer}). Orders {scope} and "
    "writes one step per line to {output}.",
)


def describe(draft: SkillDraft, template: int) -> str:
    t, cue = THEMES[draft.domain], draft.cue
    return _TEMPLATES[template].format(runbook=t.runbook, Runbook=t.runbook[0].upper() + t.runbook[1:],
                                       component=t.component, rev=cue.revision, consumer=cue.consumer,
                                       scope=cue.scope, output=cue.output)


def body(draft: SkillDraft, name: str) -> str:
    t, p, cue = THEMES[draft.domain], draft.params, draft.cue
    c = t.cols
    within = "\n".join(f"   - `{a}` before `{b}`" for a, b in p["precedence"])
    across = "\n".join(f"   - every `{action}` step: " + " before ".join(f"`{layer}`" for layer in layers)
                       + f" ({c['layer']})" for action, layers in p["layer_rules"].items())
    after = (f"3. A step runs after every step listed in its `{c['after']}` column." if p["use_after"] else
             f"3. The `{c['after']}` column is informational; the rules above already imply a safe order.")
    if p["mode"] == "topo":
        method = ("Build all the constraints of rules 1-3 and sort topologically; among steps that are ready, "
                  "take the smallest id first.")
    else:
        method = (f"Work {t.component} by {t.component} (by name): list each {t.component}'s steps in the "
                  f"order of rule 1; cross-{t.component} rules are satisfied by the {t.component} order.")
    procedure = procedure_section(name, TOOL_FILE, f"head -5 {cue.output}")
    return f"""# {t.runbook.capitalize()} ordering rules (revision {cue.revision})

Orders {t.runbook} steps for the {cue.consumer}. Reads {cue.scope}; writes `{cue.output}`.

## Rules

1. Within one {t.component} (`{c['component']}`), actions (`{c['action']}`) follow:
{within}
   The rule is transitive: when a middle action is absent for a {t.component}, its neighbours keep
   their order. Actions not linked by these rules may run in either order.
2. Across {t.component}s, for these actions the layers go in this order:
{across}
{after}

## Method

{method}

## Output

`{cue.output}`: every step id (`{c['id']}`) exactly once, one per line, first step first.

{procedure}"""


# Copied alone into the sandbox (base.Family.naive): it cannot import a shared helper.
NAIVE = r'''
import csv, os, re, sys
text = open(sys.argv[1]).read()
source = re.search(r"Inputs: `([^`]+)`", text).group(1)
target = re.search(r"Output: `([^`]+)`", text).group(1)
rows = list(csv.reader(open(source)))[1:]
done, order = set(), []
while len(order) < len(rows):  # honour the explicit prerequisites, otherwise keep the file order
    for row in rows:
        if row[0] not in done and all(d in done for d in row[4].split()):
            done.add(row[0]); order.append(row[0])
os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
with open(target, "w") as out:
    out.write("\n".join(order) + "\n")
'''

FAMILY = declare_family(
    globals(),
    engine=planning_engine,
    structure="partial-order planning",
    noun={"deploy-runbooks": "rollout", "service-config": "config", "data-formats": "migration",
          "scheduling": "calendar"},
    suffixes=("runbook", "sequencer", "ordering", "planner", "steps", "playbook"),
)
