"""Partial-order planning: order runbook steps so that every house ordering rule holds.

Each step has an id, a component, an action and a layer (CSV), and an `after` column listing ids
it explicitly waits for (space-separated, may be empty). The ordering rules:
    precedence   [[A, B], ...]: within one component, action A comes before action B (and the
                 rule is transitive: A<B and B<C give A<C even when B is absent)
    layer_rules  {ACTION: [L1, L2, ...]}: every ACTION step in layer L1 comes before every ACTION
                 step in L2, and so on
    use_after    whether the explicit `after` dependencies are honoured
Any order meeting every rule is correct; the verifier checks the rules, not one answer.

Solver parameters (a misleading skill changes exactly one of these or of the rules):
    steps_file, cols   where the steps are and what the columns are called
    mode         "topo": one topological sort of every constraint (ties by step id);
                 "by_component": each component's steps in a row, components by name
    output       output path: one entry per line
    id_style     "id": each line is a step id; "pair": each line is COMPONENT/ACTION
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from skillgate_core.benchgen.engines.common import parse_csv  # embed-drop


def load_steps(params: dict, files: dict[str, str]) -> list[dict]:
    c = params["cols"]
    return [{"id": r[c["id"]], "component": r[c["component"]], "action": r[c["action"]],
             "layer": r[c["layer"]], "after": r.get(c["after"], "").split()}
            for r in parse_csv(files[params["steps_file"]])]


def action_closure(precedence: list[list[str]]) -> set[tuple[str, str]]:
    """Transitive closure of the action precedence pairs."""
    succ: dict[str, set[str]] = defaultdict(set)
    for a, b in precedence:
        succ[a].add(b)
    closure: set[tuple[str, str]] = set()
    for start in list(succ):
        stack, seen = list(succ[start]), set()
        while stack:
            nxt = stack.pop()
            if nxt not in seen:
                seen.add(nxt)
                stack.extend(succ.get(nxt, ()))
        closure.update((start, b) for b in seen)
    return closure


def edges(params: dict, steps: list[dict], with_cross: bool = True) -> set[tuple[str, str]]:
    """Every (before, after) pair of step ids the rules demand."""
    order = action_closure(params["precedence"])
    out: set[tuple[str, str]] = set()
    by_component: dict[str, list[dict]] = defaultdict(list)
    for s in steps:
        by_component[s["component"]].append(s)
    for group in by_component.values():
        for s in group:
            for t in group:
                if (s["action"], t["action"]) in order:
                    out.add((s["id"], t["id"]))
    if not with_cross:
        return out
    for action, layers in params["layer_rules"].items():
        rank = {layer: i for i, layer in enumerate(layers)}
        acting = [s for s in steps if s["action"] == action and s["layer"] in rank]
        for s in acting:
            for t in acting:
                if rank[s["layer"]] < rank[t["layer"]]:
                    out.add((s["id"], t["id"]))
    if params["use_after"]:
        known = {s["id"] for s in steps}
        for s in steps:
            out.update((dep, s["id"]) for dep in s["after"] if dep in known)
    return out


def topo_order(ids: list[str], pairs: set[tuple[str, str]]) -> list[str]:
    """Kahn's algorithm, smallest id first among ready steps; a cycle leaves its steps at the end."""
    succ: dict[str, list[str]] = defaultdict(list)
    indegree = {i: 0 for i in ids}
    for a, b in pairs:
        succ[a].append(b)
        indegree[b] += 1
    ready = [i for i in ids if indegree[i] == 0]
    heapq.heapify(ready)
    result: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        result.append(node)
        for nxt in succ[node]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    placed = set(result)
    return result + sorted(i for i in ids if i not in placed)


def plan(params: dict, files: dict[str, str]) -> list[dict]:
    steps = load_steps(params, files)
    by_id = {s["id"]: s for s in steps}
    if params["mode"] == "by_component":
        within = edges(params, steps, with_cross=False)
        result: list[str] = []
        for component in sorted({s["component"] for s in steps}):
            ids = sorted(s["id"] for s in steps if s["component"] == component)
            result += topo_order(ids, {(a, b) for a, b in within if a in ids and b in ids})
    else:
        result = topo_order(sorted(by_id), edges(params, steps))
    return [by_id[i] for i in result]


def solve(params: dict, files: dict[str, str]) -> dict[str, str]:
    steps = plan(params, files)
    if params["id_style"] == "pair":
        lines = [f"{s['component']}/{s['action']}" for s in steps]
    else:
        lines = [s["id"] for s in steps]
    return {params["output"]: "\n".join(lines) + "\n"}


def checker(params: dict, inputs: dict[str, str]):
    """files -> problems: every step once, in an order that breaks no rule."""
    steps = load_steps(params, inputs)
    return lambda files: check_order(params, steps, edges(params, steps), files)


def check(params: dict, inputs: dict[str, str], files: dict[str, str]) -> list[str]:
    """The output must list every step id once, in an order that breaks no rule."""
    return checker(params, inputs)(files)


def check_order(params: dict, steps: list[dict], required: set, files: dict[str, str]) -> list[str]:
    """Problems of the output in `files` (empty: valid)."""
    path = params["output"]
    if path not in files:
        return [f"{path}: missing"]
    lines = [ln.strip() for ln in files[path].replace("\r\n", "\n").split("\n") if ln.strip()]
    known = {s["id"] for s in steps}
    unknown = [ln for ln in lines if ln not in known]
    if unknown:
        return [f"{path}: {len(unknown)} line(s) are not step ids, e.g. {unknown[0]!r}"]
    if len(lines) != len(set(lines)):
        return [f"{path}: some step ids appear more than once"]
    missing = sorted(known - set(lines))
    if missing:
        return [f"{path}: {len(missing)} step(s) missing, e.g. {missing[0]}"]
    position = {step: i for i, step in enumerate(lines)}
    broken = sorted((a, b) for a, b in required if position[a] > position[b])
    if not broken:
        return []
    first, then = broken[0]
    return [f"{path}: {len(broken)} ordering rule(s) broken, e.g. {then} comes before {first}"]
