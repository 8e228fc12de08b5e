"""The one git wrapper (``catalog.provenance.git_lines``) both provenance readers use:
the lines git prints, and None (never an empty list, which would read as "clean")
when git is missing, the folder is no repository, or git fails."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from catalog.provenance import git_lines, head_commit, untracked_files
from reports.origin import tracked_changes
from testsupport.git import git

Reader = Callable[[Path], list[str] | None]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "checks" / "__pycache__").mkdir(parents=True)
    (root / "checks" / "test_tracked.py").write_text("x = 1\n")
    (root / "notes.txt").write_text("a\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "scratch")
    return root


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # GIT_CEILING_DIRECTORIES: git must not find a repository above the temporary folder.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    folder = tmp_path / "plain"
    (folder / "checks").mkdir(parents=True)
    return folder


def test_the_lines_git_prints_without_empty_ones(repo: Path) -> None:
    (repo / "notes.txt").write_text("b\n")
    (repo / "checks" / "test_new.py").write_text("y = 2\n")
    (repo / "checks" / "__pycache__" / "test_new.cpython-311.pyc").write_bytes(b"\0")
    assert tracked_changes(repo) == [" M notes.txt"]
    assert untracked_files(repo / "checks", repo) == ["checks/test_new.py"]
    assert git_lines(repo, "status", "--porcelain", "--untracked-files=no") == [" M notes.txt"]


def test_a_clean_repository_is_an_empty_list_not_none(repo: Path) -> None:
    assert tracked_changes(repo) == []
    assert untracked_files(repo / "checks", repo) == []


@pytest.mark.parametrize(
    "read",
    [tracked_changes, lambda root: untracked_files(root / "checks", root)],
    ids=["tracked_changes", "untracked_files"],
)
def test_outside_a_repository_is_none(outside: Path, read: Reader) -> None:
    assert read(outside) is None


def test_a_failing_git_command_is_none(repo: Path) -> None:
    assert git_lines(repo, "no-such-subcommand") is None


def test_without_git_on_the_path_is_none(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(repo / "no-bin"))
    assert git_lines(repo, "status") is None
    assert tracked_changes(repo) is None


def _empty_on_failure(root: Path, *args: str) -> list[str] | None:
    # A plausible wrong wrapper: a failure reads as "no lines", i.e. a clean tree.
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    return proc.stdout.splitlines()


def test_the_checks_above_tell_a_wrapper_that_hides_failure(outside: Path, repo: Path) -> None:
    assert _empty_on_failure(outside, "status", "--porcelain") == []  # looks clean
    assert git_lines(outside, "status", "--porcelain") is None
    assert _empty_on_failure(repo, "no-such-subcommand") == []
    assert git_lines(repo, "no-such-subcommand") is None


def test_the_head_commit_or_none(repo: Path, outside: Path) -> None:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert head_commit(repo) == head
    assert head_commit(outside) is None
