"""The documented commands run as written (issue 26 item 5, issue 25 item 3).

Covered: README.md's "Try the control plane" section, every block of
docs/operations/provisioning.md and of docs/operations/deployment.md. In a covered part
every fenced block carries a marker in its info string, so nothing is skipped silently:

* ``{test}`` - run; the blocks of one document run top to bottom in ONE bash shell
  (``set -euo pipefail``: a failing command, or a variable nobody set, fails the test);
* ``{slow}`` - run only by the ``-m slow`` variant, after the wait it needs;
* ``{file=NAME}`` - written to NAME in the shell's directory at that point;
* ``{setup}`` - the reader's own values; the test supplies exactly the variables the
  block exports (a mismatch fails);
* ``{synopsis}`` - a command summary with placeholders: each ``scheduling CMD`` line's
  subcommand and every ``--flag`` it shows must exist in ``scheduling CMD --help``;
* ``{skip: why}`` - not run; the reason is required.

provisioning.md runs against a fresh, empty database of the test server (migrate, role
logins, settings, batch provisioning, release-check, the four roles, a first schedule).
The README part starts ``python -m simulation.devstack --port 0`` (the README block's
first line, checked) and pastes the lines it prints, then runs the README's follow-up
block. Two literal values are replaced before running: port ``8080`` by a free port and
``/etc/scheduling`` by a temporary directory. ``-m slow`` adds the wait for the pasted
schedule's firing (a minute) and then runs the ``{slow}`` blocks (the transcript).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.cli import main

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
README = REPO / "README.md"
PROVISIONING = REPO / "docs" / "operations" / "provisioning.md"
DEPLOYMENT = REPO / "docs" / "operations" / "deployment.md"
README_SECTION = "## Try the control plane"
DEVSTACK_LINE = ".venv/bin/python -m simulation.devstack"
# Logins provisioning.md creates (cluster-wide objects: dropped after the run).
DOC_LOGINS = ("scheduling_api_1", "scheduling_scheduler_1", "scheduling_run_worker_1")

_FENCE = re.compile(r"^\s*```(.*)$")
_MARKER = re.compile(r"^(?P<lang>[\w-]*)\s*(?:\{(?P<marker>[^}]*)\})?\s*$")
_EXPORT = re.compile(r"^export\s+(.*)$")


class DocError(AssertionError):
    """A document that breaks the marking rules."""


@dataclass(frozen=True)
class Block:
    where: str  # "path:line" of the opening fence
    lang: str
    kind: str  # test | file | setup | synopsis | skip
    arg: str  # the file name, or the skip reason
    text: str


def parse_blocks(document: str, where: str, section: str | None = None) -> list[Block]:
    """The fenced blocks of ``document`` (of its ``section`` heading only, when given);
    an unmarked or malformed marker raises ``DocError``."""
    blocks: list[Block] = []
    lines = document.splitlines()
    inside = section is None
    level = section.split(" ", 1)[0] if section else ""
    n = 0
    while n < len(lines):
        line = lines[n]
        if section is not None and line.startswith("#"):
            heading = line.split(" ", 1)[0]
            if line.strip() == section:
                inside = True
            elif inside and heading == level:
                inside = False
        opened = _FENCE.match(line)
        if not opened:
            n += 1
            continue
        start = n
        n += 1
        body: list[str] = []
        while n < len(lines) and not _FENCE.match(lines[n]):
            body.append(lines[n])
            n += 1
        if n == len(lines):
            raise DocError(f"{where}:{start + 1}: a fence that never closes")
        n += 1
        if not inside:
            continue
        info = _MARKER.match(opened.group(1).strip())
        location = f"{where}:{start + 1}"
        if info is None or info.group("marker") is None:
            raise DocError(f"{location}: unmarked block (give {{test}}, {{skip: why}}, ...)")
        blocks.append(_block(location, info.group("lang"), info.group("marker"), body))
    return blocks


def _block(location: str, lang: str, marker: str, body: list[str]) -> Block:
    marker = marker.strip()
    content = "\n".join(body) + "\n"
    if marker in ("test", "slow", "setup", "synopsis"):
        return Block(location, lang, marker, "", content)
    if marker.startswith("file="):
        name = marker[len("file=") :].strip()
        if not re.fullmatch(r"[\w.-]+", name):
            raise DocError(f"{location}: file name {name!r} is not a plain file name")
        return Block(location, lang, "file", name, content)
    if marker.startswith("skip:") and marker[len("skip:") :].strip():
        return Block(location, lang, "skip", marker[len("skip:") :].strip(), content)
    raise DocError(f"{location}: unknown marker {{{marker}}} (skip needs a reason)")


def exported_names(block: Block) -> set[str]:
    names: set[str] = set()
    for line in block.text.splitlines():
        found = _EXPORT.match(line.strip())
        if found:
            for word in shlex.split(found.group(1)):
                names.add(word.split("=", 1)[0])
    return names


def shell_script(blocks: list[Block], replace: dict[str, str]) -> str:
    """One bash script running the ``test`` blocks and writing the ``file`` blocks in
    order; each block announces itself on stderr so a failure names it."""
    out = [
        "set -euo pipefail",
        # Background roles a document starts end with the shell, even on failure.
        "trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT",
    ]
    for block in blocks:
        body = block.text
        for old, new in replace.items():
            body = body.replace(old, new)
        if block.kind == "test":
            out += [f'echo "=== running {block.where} (at ${{SECONDS}} s)" >&2', body]
        elif block.kind == "file":
            out += [
                f"echo '=== writing {block.arg} from {block.where}' >&2",
                f"cat > {shlex.quote(block.arg)} <<'__DOC_BLOCK__'",
                body.rstrip("\n"),
                "__DOC_BLOCK__",
            ]
    out.append('echo "=== every block ran (${SECONDS} s)" >&2')
    return "\n".join(out) + "\n"


def run_script(
    script: str, cwd: Path, env: dict[str, str], timeout: float = 150
) -> subprocess.CompletedProcess[str]:
    path = cwd / "doc-commands.sh"
    path.write_text(script)
    proc = subprocess.Popen(
        ["bash", str(path)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n(timed out after {timeout} s)"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything the script left behind
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def base_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SCHEDULE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(values)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def explain(result: subprocess.CompletedProcess[str]) -> str:
    ran = [line for line in result.stderr.splitlines() if line.startswith("=== ")]
    return (
        f"exit {result.returncode}; last block: {ran[-1] if ran else '(none)'}\n"
        f"--- stdout (tail)\n{result.stdout[-3000:]}\n--- stderr (tail)\n{result.stderr[-5000:]}"
    )


def count(blocks: list[Block], kind: str) -> int:
    return sum(1 for b in blocks if b.kind == kind)


# ------------------------------------------------------------------ the rules themselves


def test_marking_rules_refuse_what_would_be_skipped_silently(tmp_path: Path) -> None:
    """Test of the test: an unmarked block, a reasonless skip, an unknown marker and an
    unclosed fence are refused; a failing {test} block fails the run and is named; a
    variable nobody set fails it too."""
    for bad in (
        "```sh\nls\n```\n",
        "```sh {skip:}\nls\n```\n",
        "```sh {tset}\nls\n```\n",
        "```sh {test}\nls\n",
    ):
        with pytest.raises(DocError):
            parse_blocks(bad, "doc.md")
    # outside the covered section an unmarked block is not this test's business
    assert parse_blocks("## Other\n```sh\nls\n```\n## Mine\n", "d", "## Mine") == []
    blocks = parse_blocks(
        "```sh {test}\ntrue\n```\n```text {file=a.txt}\nhello\n```\n"
        "```sh {test}\ngrep -q hello a.txt\nfalse\n```\n```sh {test}\ntrue\n```\n",
        "doc.md",
    )
    result = run_script(shell_script(blocks, {}), tmp_path, base_env())
    assert result.returncode != 0
    assert "=== running doc.md:7" in result.stderr
    assert "every block ran" not in result.stderr
    unset = parse_blocks('```sh {test}\necho "$NOBODY_SET_THIS"\n```\n', "doc.md")
    assert run_script(shell_script(unset, {}), tmp_path, base_env()).returncode != 0


def test_every_block_of_the_covered_documents_is_marked() -> None:
    parse_blocks(README.read_text(), "README.md", README_SECTION)
    parse_blocks(PROVISIONING.read_text(), "provisioning.md")
    parse_blocks(DEPLOYMENT.read_text(), "deployment.md")


# ------------------------------------------------------------------ deployment.md


def _help(argv: list[str]) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        main(argv)
    return buffer.getvalue()


def check_synopsis(block: Block) -> int:
    """Each ``scheduling CMD [ACTION] ...`` line names a real subcommand and only flags its
    ``--help`` shows; returns how many lines were checked."""
    checked = 0
    for line in block.text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "scheduling":
            continue
        usage = _help([words[1], "--help"])
        assert f"usage: scheduling {words[1]}" in usage, f"{block.where}: {line}"
        if len(words) > 2 and words[2].isalpha() and words[2].islower():  # an action
            usage += _help([words[1], words[2], "--help"])
        for word in words[2:]:
            flag = word.strip("[]").split("=", 1)[0]
            if flag.startswith("--"):
                assert flag in usage, f"{block.where}: {flag} is not a flag of {words[1]}"
        checked += 1
    return checked


def test_deployment_synopsis_names_real_commands_and_flags() -> None:
    blocks = parse_blocks(DEPLOYMENT.read_text(), "deployment.md")
    synopses = [b for b in blocks if b.kind == "synopsis"]
    assert synopses, "deployment.md lists its commands in a {synopsis} block"
    assert sum(check_synopsis(b) for b in synopses) >= 5
    for wrong in ("scheduling migrate --no-such-flag", "scheduling no-such-command"):
        with pytest.raises(AssertionError):
            check_synopsis(Block("test", "sh", "synopsis", "", wrong + "\n"))


# ------------------------------------------------------------------ provisioning.md


async def _sql(url: str, *statements: str) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await admin.dispose()


def _drop_logins(url: str) -> None:
    asyncio.run(
        _sql(
            url,
            *(
                f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{login}')"
                f" THEN EXECUTE 'DROP OWNED BY {login} CASCADE'; EXECUTE 'DROP ROLE {login}';"
                " END IF; END $$"
                for login in DOC_LOGINS
            ),
        )
    )


@pytest.fixture
def fresh_database(pg_empty_url: str) -> Iterator[str]:
    _drop_logins(pg_empty_url)
    try:
        yield pg_empty_url
    finally:
        _drop_logins(pg_empty_url)


@pytest.mark.postgres
def test_provisioning_page_runs_top_to_bottom_on_a_fresh_database(
    fresh_database: str, tmp_path: Path
) -> None:
    blocks = parse_blocks(PROVISIONING.read_text(), "provisioning.md")
    url = make_url(fresh_database)
    supplied = {
        "DB_HOST": f"{url.host}:{url.port}",
        "DB_NAME": str(url.database),
        "AGENT_SCHEDULE_DATABASE_URL": fresh_database,
    }
    setups = [b for b in blocks if b.kind == "setup"]
    assert setups, "the page says which values are the reader's own"
    assert set().union(*(exported_names(b) for b in setups)) == set(supplied)
    replace = {"8080": str(free_port()), "/etc/scheduling": str(tmp_path / "etc")}
    result = run_script(shell_script(blocks, replace), tmp_path, base_env(**supplied))
    assert result.returncode == 0, explain(result)
    print("\n".join(line for line in result.stderr.splitlines() if line.startswith("===")))
    assert "no changes" in result.stdout  # the second apply
    assert count(blocks, "test") >= 8
    print(f"provisioning.md: {count(blocks, 'test')} blocks run, {count(blocks, 'file')} files")


# ------------------------------------------------------------------ README quick start


class DevStack:
    """``python -m simulation.devstack --port 0`` on the test server, its printed paste
    lines collected."""

    def __init__(self, cwd: Path) -> None:
        self.log = (cwd / "devstack.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "simulation.devstack", "--port", "0"],
            cwd=REPO,
            env=base_env(),
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def paste_lines(self, timeout: float = 90) -> list[str]:
        deadline = time.monotonic() + timeout
        pasted: list[str] | None = None
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith("paste into a shell"):
                pasted = []
            elif pasted is not None and line.startswith("  "):
                pasted.append(line[2:])
            elif pasted is not None:
                return pasted
        raise AssertionError(f"devstack printed no paste block; log: {self.log.name}")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


def _readme_run(tmp_path: Path, wait_for_firing: bool) -> tuple[list[Block], str]:
    blocks = parse_blocks(README.read_text(), "README.md", README_SECTION)
    assert blocks[0].kind == "skip"
    assert blocks[0].text.splitlines()[0].split("#")[0].strip() == DEVSTACK_LINE
    stack = DevStack(tmp_path)
    try:
        pasted = stack.paste_lines()
        (tmp_path / "pasted.sh").write_text("\n".join(pasted) + "\n")
        paste = Block("devstack output", "sh", "test", "", "\n".join(pasted) + "\n")
        steps = [paste, *blocks]
        if wait_for_firing:
            steps.append(Block("(wait for the firing)", "sh", "test", "", _WAIT_FOR_RUN))
            steps += [
                Block(b.where, b.lang, "test", "", b.text) for b in blocks if b.kind == "slow"
            ]
        result = run_script(shell_script(steps, {}), tmp_path, base_env(), timeout=240)
    finally:
        stack.stop()
    assert result.returncode == 0, explain(result)
    return blocks, result.stdout


_WAIT_FOR_RUN = """\
for _ in $(seq 150); do
  curl -sS -H "Authorization: Bearer $TOKEN" "$URL/v1/schedules/$ID/occurrences" \
    | grep -q '"status": *"COMPLETED"' && break
  sleep 1
done
curl -sS -H "Authorization: Bearer $TOKEN" "$URL/v1/schedules/$ID/occurrences" \
  | grep '"status": *"COMPLETED"'
"""


@pytest.mark.postgres
def test_readme_quick_start_pasted_as_printed(pg_server: object, tmp_path: Path) -> None:
    blocks, out = _readme_run(tmp_path, wait_for_firing=False)
    assert "schedule " in out
    assert " fires at " in out
    assert '"items"' in out
    # Its log names the role it runs (not an argument's value: it once said "0@...").
    access = [line for line in _devstack_log(tmp_path) if "scheduling.http.access" in line]
    assert access, "the devstack logged no request"
    assert all(" dev@" in line for line in access), access[:3]
    print(f"README: devstack paste + {count(blocks, 'test')} blocks run")


def _devstack_log(tmp_path: Path) -> list[str]:
    return (tmp_path / "devstack.log").read_text().splitlines()


@pytest.mark.postgres
@pytest.mark.slow
def test_readme_quick_start_schedule_fires_and_completes(pg_server: object, tmp_path: Path) -> None:
    blocks, out = _readme_run(tmp_path, wait_for_firing=True)
    assert count(blocks, "slow") >= 1
    assert '"session_id"' in out
    # The instruction "is never logged" (spec, Public API): not by the API that stored
    # it, the scheduler that fired it nor the run worker that ran it.
    pasted = re.search(r'"instruction": "([^"]+)"', (tmp_path / "pasted.sh").read_text())
    assert pasted is not None
    assert not [line for line in _devstack_log(tmp_path) if pasted.group(1) in line]
