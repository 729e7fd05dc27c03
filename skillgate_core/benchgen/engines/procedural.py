"""Procedural execution: turn record CSVs into a house interchange file, step by step.

Parameters (one skill = one set of them; a misleading skill changes exactly one):
    input_dirs       folders whose *.csv files are read, in path order (scope)
    columns          role -> CSV column: id, key, group, amount, date, status
    dedupe_first     True: merge amendments (the last line of an id wins) before dropping statuses;
                     False: drop statuses first, then merge (order of validation)
    drop_status      statuses whose records are left out
    key_style        upper_underscore | lower_dash | title_nospace (how the key is written)
    amount_scale     amounts are written as integers in 1/amount_scale units
    rounding         decimal rounding mode to those units (ROUND_HALF_EVEN, ROUND_HALF_UP, ...)
    date_style       strftime pattern of the date
    fields           output field roles, in order
    sort             [[role, "asc"|"desc"], ...]
    sep              field separator
    magic            header tag; the header is MAGIC<sep>COUNT
    checksum         crc32 | adler32 | sha1 | md5: over the body lines joined by '\\n' (8 hex, upper)
    output           output path
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import re
import zlib

from skillgate_core.benchgen.engines.common import files_under, parse_csv  # embed-drop

KEY_STYLES = ("upper_underscore", "lower_dash", "title_nospace")
_WORD = re.compile(r"[^\W_]+")
CHECKSUMS = ("crc32", "adler32", "sha1", "md5")


def read_records(params: dict, files: dict[str, str]) -> list[dict[str, str]]:
    """Every record of every CSV under the input folders, in path then line order."""
    records: list[dict[str, str]] = []
    for folder in params["input_dirs"]:
        for path in files_under(files, folder):
            if path.endswith(".csv"):
                records.extend(parse_csv(files[path]))
    return records


def merge_amendments(records: list[dict[str, str]], id_col: str) -> list[dict[str, str]]:
    """One record per id: the last line for an id replaces earlier ones (first position kept)."""
    latest: dict[str, dict[str, str]] = {}
    for rec in records:
        latest[rec[id_col]] = rec
    return list(latest.values())


def format_key(text: str, style: str) -> str:
    words = _WORD.findall(text)
    if style == "upper_underscore":
        return "_".join(w.upper() for w in words)
    if style == "lower_dash":
        return "-".join(w.lower() for w in words)
    if style == "title_nospace":
        return "".join(w.capitalize() for w in words)
    raise ValueError(f"key_style: expected one of {KEY_STYLES}, got {style!r}")


def format_amount(text: str, scale: int, rounding: str) -> str:
    value = decimal.Decimal(text) * scale
    return str(int(value.quantize(decimal.Decimal(1), rounding=getattr(decimal, rounding))))


def format_date(text: str, style: str) -> str:
    return datetime.date.fromisoformat(text).strftime(style)


def checksum(body: str, kind: str) -> str:
    data = body.encode("utf-8")
    if kind == "crc32":
        return format(zlib.crc32(data) & 0xFFFFFFFF, "08X")
    if kind == "adler32":
        return format(zlib.adler32(data) & 0xFFFFFFFF, "08X")
    if kind in ("sha1", "md5"):
        return hashlib.new(kind, data).hexdigest()[:8].upper()
    raise ValueError(f"checksum: expected one of {CHECKSUMS}, got {kind!r}")


def solve(params: dict, files: dict[str, str]) -> dict[str, str]:
    """The interchange file for the workspace `files`: {output path: text}."""
    cols = params["columns"]
    records = read_records(params, files)
    dropped = set(params["drop_status"])
    if params["dedupe_first"]:
        kept = [r for r in merge_amendments(records, cols["id"]) if r[cols["status"]] not in dropped]
    else:
        kept = merge_amendments([r for r in records if r[cols["status"]] not in dropped], cols["id"])
    rows = []
    for rec in kept:
        rows.append({
            "id": rec[cols["id"]],
            "key": format_key(rec[cols["key"]], params["key_style"]),
            "group": rec[cols["group"]],
            "amount": format_amount(rec[cols["amount"]], params["amount_scale"], params["rounding"]),
            "date": format_date(rec[cols["date"]], params["date_style"]),
            "_amount": decimal.Decimal(rec[cols["amount"]]),
            "_date": rec[cols["date"]],
        })
    # Stable sorts applied from the last key to the first give a multi-key order with mixed directions.
    for role, direction in reversed(params["sort"]):
        sort_key = {"amount": "_amount", "date": "_date"}.get(role, role)
        rows.sort(key=lambda r, k=sort_key: r[k], reverse=direction == "desc")
    sep = params["sep"]
    body = [sep.join(r[f] for f in params["fields"]) for r in rows]
    lines = [f"{params['magic']}{sep}{len(body)}", *body,
             f"END{sep}{checksum(chr(10).join(body), params['checksum'])}"]
    return {params["output"]: "\n".join(lines) + "\n"}


def normalise(text: str) -> list[str]:
    """Lines with CRLF and trailing blanks forgiven: the format is exact, the line ending is not."""
    return [line.rstrip() for line in text.replace("\r\n", "\n").rstrip("\n").split("\n")]


def checker(params: dict, inputs: dict[str, str]):
    """files -> problems, with the expected file recomputed from `inputs` once."""
    expected = solve(params, inputs)
    return lambda files: compare(expected, files)


def check(params: dict, inputs: dict[str, str], files: dict[str, str]) -> list[str]:
    """Problems with the interchange file in `files`, recomputed from `inputs` (empty: exactly right)."""
    return checker(params, inputs)(files)


def compare(expected_outputs: dict[str, str], files: dict[str, str]) -> list[str]:
    """Problems of `files` against the expected {path: text} (line endings and trailing blanks forgiven)."""
    (path, expected), = expected_outputs.items()
    if path not in files:
        return [f"{path}: missing"]
    got, want = normalise(files[path]), normalise(expected)
    if got == want:
        return []
    problems = [f"{path}: expected {len(want)} lines, got {len(got)}"] if len(got) != len(want) else []
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            problems.append(f"{path}: line {i + 1}: expected {w!r}, got {g!r}")
            break
    return problems or [f"{path}: content differs"]
