"""The shared library's general-purpose skills: real procedures that solve none of the bundled tasks.

They give slates genuine distractors from other domains (the irrelevant draw comes from outside a
task's BM25 top-50) and neighbours of the same vocabulary (the relevant top-5 may include them).
Each is a short, correct procedure written as a SKILL.md with one ```bash block.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FILLER_SKILLS", "FillerSkill", "filler_body"]


@dataclass(frozen=True)
class FillerSkill:
    """One general-purpose skill."""

    name: str
    """Skill name."""
    description: str
    """What it does and when to use it."""
    steps: tuple[str, ...]
    """The procedure in words."""
    bash: str
    """The procedure as commands."""


# Data, not logic: each skill is one FillerSkill declaration.
FILLER_SKILLS: tuple[FillerSkill, ...] = (
    FillerSkill("csv-column-stats", "Summarise the numeric columns of a CSV file (count, min, max, mean) with "
                "python's csv module. Use when asked for quick statistics of a CSV.",
                ("Read the header.", "Parse numeric cells; skip blanks.", "Print one line per column."),
                "python3 -c \"import csv,sys,statistics as s; r=list(csv.DictReader(open(sys.argv[1])))\" data.csv"),
    FillerSkill("csv-dedupe-rows", "Remove exact duplicate rows from a CSV file while keeping the first "
                "occurrence and the header. Use for cleaning exported spreadsheets.",
                ("Keep the header.", "Track seen rows.", "Write the unique rows in order."),
                "awk '!seen[$0]++' input.csv > deduped.csv"),
    FillerSkill("json-pretty-print", "Reformat JSON files with sorted keys and two-space indentation so "
                "diffs stay readable. Use before committing generated JSON.",
                ("Load the JSON.", "Dump with indent=2 and sort_keys.", "Replace the file atomically."),
                "python3 -m json.tool --sort-keys --indent 2 in.json > out.json"),
    FillerSkill("json-lines-split", "Split a large JSON Lines file into chunks of N records for parallel "
                "processing. Use when a .jsonl file is too big for one worker.",
                ("Count lines.", "Write chunks of N lines.", "Name chunks part-0000.jsonl ..."),
                "split -l 10000 -d -a 4 --additional-suffix=.jsonl big.jsonl part-"),
    FillerSkill("yaml-lint-basics", "Check YAML files for tabs, trailing spaces and duplicate keys before a "
                "deploy. Use when a YAML config fails to parse.",
                ("Search for tab characters.", "Search for trailing blanks.", "Parse with a YAML loader."),
                "grep -nP '\\t| +$' config.yaml || echo clean"),
    FillerSkill("git-branch-cleanup", "Delete local git branches that are already merged into main, keeping "
                "main and the current branch. Use to tidy a clone.",
                ("Fetch and prune.", "List merged branches.", "Delete all but main and the current one."),
                "git branch --merged main | grep -vE '^\\*|main$' | xargs -r git branch -d"),
    FillerSkill("git-bisect-run", "Find the commit that broke a test with git bisect run and a test script. "
                "Use when a regression appeared between two known commits.",
                ("Mark good and bad commits.", "Run the test script per step.", "Reset when done."),
                "git bisect start HEAD v1.0 && git bisect run ./test.sh; git bisect reset"),
    FillerSkill("log-rotate-setup", "Configure logrotate for an application log: daily rotation, 14 copies, "
                "compression. Use when a log file grows without bound.",
                ("Write the logrotate stanza.", "Dry-run it.", "Check the state file."),
                "logrotate -d /etc/logrotate.d/app"),
    FillerSkill("log-grep-errors", "Count ERROR lines per hour in a plain-text log to spot incident windows. "
                "Use for a first look at a noisy log.",
                ("Filter ERROR lines.", "Cut the hour from the timestamp.", "Count per hour."),
                "grep ERROR app.log | cut -c1-13 | sort | uniq -c"),
    FillerSkill("cron-expression-check", "Explain and validate five-field cron expressions, including step "
                "and range syntax. Use when a cron job runs at unexpected times.",
                ("Split the five fields.", "Expand ranges and steps.", "List the next five run times."),
                "python3 -c \"print('minute hour day-of-month month day-of-week')\""),
    FillerSkill("systemd-unit-write", "Write a minimal systemd service unit with restart policy and "
                "environment file. Use when turning a script into a service.",
                ("Create the unit file.", "Reload the daemon.", "Enable and start."),
                "systemctl daemon-reload && systemctl enable --now app.service"),
    FillerSkill("docker-image-slim", "Shrink a Docker image: multi-stage build, no package caches, a "
                ".dockerignore. Use when images are too large to ship.",
                ("Add a builder stage.", "Copy only artifacts.", "Clean apt lists."),
                "docker build -t app:slim . && docker image ls app"),
    FillerSkill("nginx-reverse-proxy", "Put nginx in front of an HTTP app with proxy headers and timeouts. "
                "Use when exposing a local service on port 80.",
                ("Write a server block.", "Set proxy_pass and headers.", "Test and reload."),
                "nginx -t && nginx -s reload"),
    FillerSkill("tls-cert-inspect", "Show the subject, issuer and expiry of a PEM certificate with openssl. "
                "Use to check when a certificate expires.",
                ("Read the PEM file.", "Print subject/issuer/dates.", "Compare with today."),
                "openssl x509 -in cert.pem -noout -subject -issuer -enddate"),
    FillerSkill("ssh-key-rotate", "Generate a new ed25519 SSH key and replace the old one in "
                "authorized_keys. Use during periodic credential rotation.",
                ("Generate the key.", "Append the public key.", "Remove the old key line."),
                "ssh-keygen -t ed25519 -f ~/.ssh/id_new -N ''"),
    FillerSkill("disk-usage-report", "Find the largest directories under a path with du and sort. Use when a "
                "disk is filling up.",
                ("Run du with depth 2.", "Sort by size.", "Show the top 20."),
                "du -h --max-depth=2 /var | sort -rh | head -20"),
    FillerSkill("process-top-memory", "List the processes using the most memory with ps. Use when a host is "
                "swapping.", ("Run ps sorted by RSS.", "Show the top 10.", "Note owners."),
                "ps aux --sort=-rss | head -11"),
    FillerSkill("sql-explain-plan", "Read a PostgreSQL EXPLAIN ANALYZE plan: find sequential scans and row "
                "estimate errors. Use when a query is slow.",
                ("Run EXPLAIN ANALYZE.", "Find the costliest node.", "Compare estimated and actual rows."),
                "psql -c 'EXPLAIN ANALYZE SELECT 1'"),
    FillerSkill("sql-index-advice", "Suggest B-tree indexes for frequent WHERE and JOIN columns from a query "
                "log. Use when tuning a read-heavy database.",
                ("Collect slow queries.", "Extract predicate columns.", "Propose composite indexes."),
                "grep -o 'WHERE [a-z_]*' slow.log | sort | uniq -c | sort -rn"),
    FillerSkill("sqlite-backup", "Take a consistent SQLite backup with the .backup command while the app "
                "runs. Use before schema changes.",
                ("Open the database.", "Run .backup to a file.", "Verify with integrity_check."),
                "sqlite3 app.db \".backup backup.db\" && sqlite3 backup.db 'PRAGMA integrity_check'"),
    FillerSkill("markdown-toc", "Generate a table of contents for a Markdown file from its headings. Use for "
                "long READMEs.", ("Collect # headings.", "Make anchors.", "Insert the list at the top."),
                "grep -E '^#{1,3} ' README.md"),
    FillerSkill("pdf-merge", "Merge several PDF files into one in a given order with qpdf. Use to assemble "
                "reports.", ("List inputs in order.", "Run qpdf --empty --pages.", "Check page count."),
                "qpdf --empty --pages a.pdf b.pdf -- merged.pdf"),
    FillerSkill("image-batch-resize", "Resize all images in a folder to a maximum width with ImageMagick. Use "
                "for web thumbnails.", ("Loop over files.", "mogrify -resize.", "Keep originals."),
                "mogrify -path thumbs -resize 800x *.jpg"),
    FillerSkill("regex-email-extract", "Extract e-mail addresses from text files with a conservative regular "
                "expression. Use for contact list clean-up.",
                ("Scan files.", "Apply the regex.", "Sort and dedupe."),
                "grep -Eoh '[[:alnum:]._%+-]+@[[:alnum:].-]+\\.[a-z]{2,}' *.txt | sort -u"),
    FillerSkill("http-health-probe", "Probe an HTTP endpoint repeatedly and report status codes and latency. "
                "Use to check a service after a restart.",
                ("Loop N times.", "curl with -w timing.", "Summarise codes."),
                "for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} %{time_total}\\n' localhost:8080; done"),
    FillerSkill("python-venv-setup", "Create a Python virtual environment and install pinned requirements. "
                "Use when starting work on a Python project.",
                ("python3 -m venv.", "Upgrade pip.", "Install -r requirements.txt."),
                "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"),
    FillerSkill("pytest-flaky-rerun", "Find flaky tests by rerunning the suite several times and diffing the "
                "failures. Use when CI fails intermittently.",
                ("Run the suite 5 times.", "Collect failing ids.", "Report ids that differ."),
                "for i in 1 2 3 4 5; do pytest -q -p no:cacheprovider | tail -1; done"),
    FillerSkill("makefile-phony-audit", "List Makefile targets that are not files and should be .PHONY. Use "
                "when make skips targets unexpectedly.",
                ("Parse targets.", "Check for files of that name.", "Print missing .PHONY."),
                "grep -E '^[a-z-]+:' Makefile"),
    FillerSkill("env-file-audit", "Compare a .env file with .env.example and list missing or extra keys. Use "
                "before deploying a new environment.",
                ("Read both files.", "Compare keys.", "Print the differences."),
                "diff <(cut -d= -f1 .env | sort) <(cut -d= -f1 .env.example | sort)"),
    FillerSkill("unicode-normalize", "Normalise text files to Unicode NFC and strip byte-order marks. Use when "
                "identical-looking strings do not compare equal.",
                ("Read as UTF-8.", "Apply NFC.", "Write back without BOM."),
                "python3 -c \"import unicodedata,sys; print(unicodedata.normalize('NFC', sys.argv[1]))\" text"),
    FillerSkill("timezone-convert", "Convert timestamps between time zones with zoneinfo, handling daylight "
                "saving. Use for cross-region reports.",
                ("Parse ISO timestamps.", "Attach the source zone.", "Convert to the target zone."),
                "python3 -c \"from zoneinfo import ZoneInfo; print(ZoneInfo('Europe/Berlin'))\""),
    FillerSkill("semver-bump", "Bump a semantic version (major, minor, patch) in a version file and tag the "
                "release. Use when cutting a release.",
                ("Read VERSION.", "Increment the part.", "Commit and tag."),
                "python3 -c \"v='1.2.3'.split('.'); v[2]=str(int(v[2])+1); print('.'.join(v))\""),
    FillerSkill("changelog-from-commits", "Draft a changelog section from conventional commit messages since "
                "the last tag. Use when preparing release notes.",
                ("Find the last tag.", "List commits since.", "Group by type."),
                "git log $(git describe --tags --abbrev=0)..HEAD --oneline"),
    FillerSkill("k8s-pod-debug", "Inspect a crashing Kubernetes pod: describe, previous logs, events. Use when "
                "a pod is in CrashLoopBackOff.",
                ("kubectl describe.", "kubectl logs --previous.", "Check events."),
                "kubectl describe pod app-0 && kubectl logs app-0 --previous"),
    FillerSkill("terraform-plan-review", "Summarise a terraform plan: resources to add, change and destroy. Use "
                "before applying infrastructure changes.",
                ("Run plan -out.", "Show as JSON.", "Count actions."),
                "terraform plan -out tf.plan && terraform show -json tf.plan"),
    FillerSkill("prometheus-query-basics", "Write PromQL for request rate, error ratio and p95 latency. Use when "
                "building a service dashboard.",
                ("rate() over counters.", "Divide error by total.", "histogram_quantile for p95."),
                "echo 'histogram_quantile(0.95, sum(rate(http_bucket[5m])) by (le))'"),
    FillerSkill("spreadsheet-formula-audit", "Find broken references and hard-coded numbers in spreadsheet "
                "formulas exported as CSV. Use before sharing a financial model.",
                ("Export formulas.", "Search for #REF!.", "List constants in formulas."),
                "grep -n '#REF!' formulas.csv"),
    FillerSkill("invoice-pdf-extract", "Pull invoice number, date and total out of text-based PDF invoices "
                "with pdftotext and regular expressions. Use for accounts-payable intake.",
                ("Convert to text.", "Match the fields.", "Write a CSV."),
                "pdftotext invoice.pdf - | grep -E 'Invoice|Total'"),
    FillerSkill("meeting-notes-summary", "Turn raw meeting notes into decisions, action items and owners. Use "
                "after a planning meeting.", ("Find decisions.", "Find actions.", "Assign owners."),
                "grep -iE 'decid|action|todo' notes.md"),
    FillerSkill("email-template-fill", "Fill a plain-text e-mail template from a CSV of recipients with "
                "string.Template. Use for bulk notifications.",
                ("Load the template.", "Read recipients.", "Write one file per recipient."),
                "python3 -c \"from string import Template; print(Template('Hi $name').substitute(name='A'))\""),
    FillerSkill("backup-restore-drill", "Restore last night's tar backup into a scratch folder and compare "
                "checksums with the source. Use to prove backups work.",
                ("Extract to scratch.", "sha256sum both trees.", "Diff the lists."),
                "mkdir -p /tmp/restore && tar -xzf backup.tgz -C /tmp/restore"),
    FillerSkill("firewall-rule-review", "List iptables/nftables rules and flag overly broad accepts. Use during "
                "a security review.", ("Dump rules.", "Find 0.0.0.0/0 accepts.", "Report."),
                "nft list ruleset | grep -n accept"),
    FillerSkill("dns-record-check", "Query A, AAAA, CNAME and TXT records for a domain and compare with the "
                "expected zone file. Use after DNS changes.",
                ("dig each type.", "Compare with the zone.", "List mismatches."),
                "dig +short example.com A"),
    FillerSkill("api-pagination-fetch", "Fetch every page of a paginated REST API following next links, with "
                "retries. Use when an API returns partial lists.",
                ("Request page 1.", "Follow next.", "Retry on 429/5xx."),
                "curl -s 'https://api.example.com/items?page=1'"),
    FillerSkill("text-word-frequency", "Count word frequencies in text files, ignoring case and punctuation. "
                "Use for a quick vocabulary overview.",
                ("Lower-case.", "Split on non-letters.", "Count and sort."),
                "tr -cs '[:alpha:]' '\\n' < text.txt | tr A-Z a-z | sort | uniq -c | sort -rn | head"),
    FillerSkill("archive-integrity-check", "Verify zip and tar.gz archives are readable and list their "
                "contents. Use before deleting originals.",
                ("Test each archive.", "List contents.", "Report failures."),
                "for f in *.tar.gz; do tar -tzf \"$f\" > /dev/null || echo \"bad $f\"; done"),
    FillerSkill("gpg-file-encrypt", "Encrypt a file for a recipient with gpg and verify it decrypts. Use when "
                "sending sensitive exports.", ("Import the key.", "gpg --encrypt.", "Test decrypt."),
                "gpg --encrypt --recipient ops@example.com report.csv"),
    FillerSkill("locale-number-format", "Format numbers and currencies for a locale (thousands separators, "
                "decimal comma). Use for localised reports.",
                ("Pick the locale.", "Format with babel-style rules.", "Check negatives."),
                "python3 -c \"print(f'{1234567.891:,.2f}')\""),
)
"""General-purpose skills shared by every slate library."""


def filler_body(skill: FillerSkill) -> str:
    """The SKILL.md body of a general-purpose skill."""
    steps = "\n".join(f"{i + 1}. {step}" for i, step in enumerate(skill.steps))
    title = skill.name.replace("-", " ").capitalize()
    return f"# {title}\n\n{skill.description}\n\n## Steps\n\n{steps}\n\n## Procedure\n\n```bash\n{skill.bash}\n```\n"
