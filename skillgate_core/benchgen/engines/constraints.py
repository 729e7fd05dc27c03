"""Constraint satisfaction: place every item into a bin under capacity and a house policy.

Items (replicas, jobs, files, ...) have an id, a size, a group and a kind; bins (hosts, windows,
volumes, ...) have an id, a capacity, a flag and a state. The policy:
    usable_state     only bins in this state take items (the others must stay empty)
    headroom_pct     a bin's load may reach at most this percent of its capacity
    max_per_group    at most this many items of one group in one bin (spread)
    restricted       items of kind `kind` only in bins whose flag is in `flags`
    max_items        at most this many items per bin (0: no limit)
Any assignment meeting every rule is correct; the verifier checks the rules, not one answer.

Solver parameters (a misleading skill changes exactly one of these or of the policy):
    items_file, bins_file, item_cols, bin_cols   where the data is and what its columns are called
    bin_scope        "usable": only bins in usable_state are candidates; "all": every bin is
    strategy         "spread": honour max_per_group; "pack": leave spreading to the runtime
    check_after_add  True: a bin takes an item if load + size stays within the headroom;
                     False: if the load before adding is still under it
    output           output path (CSV: ITEM_COL,BIN_COL header, one row per item)
The solver is first-fit: items with the restricted kind first, then by size (largest first) and
id; each goes to the first bin (by id) that takes it. First-fit keeps whole bins free, which is
the point of the policy (spare capacity stays in whole bins). When items are left over, the pass
restarts with them at the front of the order.
"""

from __future__ import annotations

from collections import Counter

from skillgate_core.benchgen.engines.common import csv_rows, format_csv, parse_csv  # embed-drop


def load_data(params: dict, files: dict[str, str]) -> tuple[list[dict], list[dict]]:
    ic, bc = params["item_cols"], params["bin_cols"]
    items = [{"id": r[ic["id"]], "size": int(r[ic["size"]]), "group": r[ic["group"]], "kind": r[ic["kind"]]}
             for r in parse_csv(files[params["items_file"]])]
    bins = [{"id": r[bc["id"]], "capacity": int(r[bc["capacity"]]), "flag": r[bc["flag"]], "state": r[bc["state"]]}
            for r in parse_csv(files[params["bins_file"]])]
    return items, sorted(bins, key=lambda b: b["id"])


def takes(params: dict, item: dict, b: dict, load: int, count: int, groups: Counter) -> bool:
    """Whether bin `b` (current load/count/groups) may take `item` under the parameters."""
    if params["bin_scope"] == "usable" and b["state"] != params["usable_state"]:
        return False
    restricted = params["restricted"]
    if item["kind"] == restricted["kind"] and b["flag"] not in restricted["flags"]:
        return False
    if params["max_items"] and count >= params["max_items"]:
        return False
    if params["strategy"] == "spread" and groups[item["group"]] >= params["max_per_group"]:
        return False
    limit = b["capacity"] * params["headroom_pct"]
    if params["check_after_add"]:
        return (load + item["size"]) * 100 <= limit
    return load * 100 < limit


def first_fit(params: dict, order: list[dict], bins: list[dict]) -> tuple[dict[str, str], list[dict]]:
    """One first-fit pass: (item id -> bin id, the items no bin took)."""
    load = {b["id"]: 0 for b in bins}
    count = {b["id"]: 0 for b in bins}
    groups = {b["id"]: Counter() for b in bins}
    result: dict[str, str] = {}
    left: list[dict] = []
    for item in order:
        chosen = next((b["id"] for b in bins
                       if takes(params, item, b, load[b["id"]], count[b["id"]], groups[b["id"]])), None)
        if chosen is None:
            left.append(item)
            continue
        result[item["id"]] = chosen
        load[chosen] += item["size"]
        count[chosen] += 1
        groups[chosen][item["group"]] += 1
    return result, left


def assign(params: dict, files: dict[str, str], restarts: int = 60) -> dict[str, str]:
    """item id -> bin id by first-fit, restarted with the items left over moved to the front.

    If even the last pass leaves items over, each goes to the least-loaded candidate bin, so an
    answer is always written (the verifier then says what is wrong with it).
    """
    items, bins = load_data(params, files)
    kind = params["restricted"]["kind"]
    order = sorted(items, key=lambda it: (it["kind"] != kind, -it["size"], it["id"]))
    for _ in range(restarts):
        result, left = first_fit(params, order, bins)
        if not left:
            return result
        stuck = {it["id"] for it in left}
        order = left + [it for it in order if it["id"] not in stuck]
    pool = [b for b in bins if params["bin_scope"] == "all" or b["state"] == params["usable_state"]] or bins
    load = {b["id"]: 0 for b in bins}
    for item_id, b in result.items():
        load[b] += next(it["size"] for it in items if it["id"] == item_id)
    for item in left:
        chosen = min(pool, key=lambda b: (load[b["id"]] / b["capacity"], b["id"]))["id"]
        result[item["id"]] = chosen
        load[chosen] += item["size"]
    return result


def solve(params: dict, files: dict[str, str]) -> dict[str, str]:
    result = assign(params, files)
    header = [params["item_cols"]["id"], params["bin_cols"]["id"]]
    return {params["output"]: format_csv(header, [[i, b] for i, b in sorted(result.items())])}


def violations(params: dict, items: list[dict], bins: list[dict], placed: dict[str, str]) -> list[str]:
    """Every broken policy rule of a complete assignment."""
    by_id = {b["id"]: b for b in bins}
    load, count, groups = Counter(), Counter(), {b: Counter() for b in by_id}
    problems = []
    restricted = params["restricted"]
    for item in items:
        b = by_id[placed[item["id"]]]
        load[b["id"]] += item["size"]
        count[b["id"]] += 1
        groups[b["id"]][item["group"]] += 1
        if item["kind"] == restricted["kind"] and b["flag"] not in restricted["flags"]:
            problems.append(f"{item['id']} ({item['kind']}) placed on {b['id']} ({b['flag']})")
        if b["state"] != params["usable_state"]:
            problems.append(f"{item['id']} placed on {b['id']}, which is {b['state']}")
    for b in bins:
        if load[b["id"]] * 100 > b["capacity"] * params["headroom_pct"]:
            problems.append(f"{b['id']}: load {load[b['id']]} over {params['headroom_pct']}% of {b['capacity']}")
        if params["max_items"] and count[b["id"]] > params["max_items"]:
            problems.append(f"{b['id']}: {count[b['id']]} items, more than {params['max_items']}")
        for group, n in sorted(groups[b["id"]].items()):
            if n > params["max_per_group"]:
                problems.append(f"{b['id']}: {n} items of {group}, more than {params['max_per_group']}")
    return problems


def checker(params: dict, inputs: dict[str, str]):
    """files -> problems: every item placed exactly once in a known bin, breaking no rule."""
    items, bins = load_data(params, inputs)
    return lambda files: check_assignment(params, items, bins, files)


def check(params: dict, inputs: dict[str, str], files: dict[str, str]) -> list[str]:
    """The output must place every item exactly once in a known bin, breaking no rule."""
    return checker(params, inputs)(files)


def check_assignment(params: dict, items: list[dict], bins: list[dict], files: dict[str, str]) -> list[str]:
    """Problems of the output in `files` (empty: valid)."""
    path = params["output"]
    if path not in files:
        return [f"{path}: missing"]
    item_col, bin_col = params["item_cols"]["id"], params["bin_cols"]["id"]
    rows = csv_rows(files[path])
    columns = (0, 1)
    if rows and {c.lower() for c in rows[0]} >= {item_col.lower(), bin_col.lower()}:
        names = [c.lower() for c in rows[0]]
        columns = (names.index(item_col.lower()), names.index(bin_col.lower()))
        rows = rows[1:]
    item_ids, bin_ids = {it["id"] for it in items}, {b["id"] for b in bins}
    placed: dict[str, str] = {}
    problems: list[str] = []
    for i, row in enumerate(rows):
        if len(row) <= max(columns):
            problems.append(f"{path}: row {i + 1}: expected {item_col},{bin_col}")
            continue
        item, b = row[columns[0]], row[columns[1]]
        if item not in item_ids:
            problems.append(f"{path}: row {i + 1}: unknown {item_col} {item!r}")
        elif item in placed:
            problems.append(f"{path}: {item} placed twice")
        elif b not in bin_ids:
            problems.append(f"{path}: row {i + 1}: unknown {bin_col} {b!r}")
        else:
            placed[item] = b
    missing = sorted(item_ids - set(placed))
    if missing:
        problems.append(f"{path}: {len(missing)} {item_col}(s) not placed, e.g. {missing[0]}")
    if problems:
        return problems
    return violations(params, items, bins, placed)
